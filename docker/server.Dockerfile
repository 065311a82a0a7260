# The web tier: API, pages, database migrations, the Celery publisher. No torch, no triton:
# it reaches the graders through their JSON contract (`python -m graders list --json`
# needs numpy only) and grades nothing itself (DISPATCHER=celery).
FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /app
COPY pyproject.toml README.md ./
COPY graders ./graders
COPY server ./server
RUN pip install -e ".[server]"
COPY exercises ./exercises
COPY reference_solutions ./reference_solutions
COPY frontend ./frontend
# the student-CI workflow that each exercise page links to (/help/student-ci)
COPY docs/student-ci.md ./docs/student-ci.md
RUN useradd --system --home /app autograder && mkdir -p /app/var && chown autograder /app/var
USER autograder
EXPOSE 8000
CMD ["python", "-m", "server", "--host", "0.0.0.0", "--port", "8000"]
