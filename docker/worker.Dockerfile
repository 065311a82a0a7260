# A GPU grading worker: the graders (torch, triton, cupy for HIP), bubblewrap for the
# sandbox, and the thin Celery task (graders/service/remote_worker.py). No database driver and no
# credentials: it reports each task with that task's own token. One worker per GPU.
FROM python:3.12-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# bubblewrap: the sandbox. gcc and libc6-dev: Triton compiles its driver and launcher
# stubs with a C compiler when a worker first launches a kernel, and without one every
# Triton grading fails ("Failed to find C compiler"; python:3.12-slim has none; the
# Python headers it needs are the image's own)
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY pyproject.toml README.md ./
COPY graders ./graders
COPY server ./server
# the versions of docs/benchmarks.md's H200 runs (FACTS.md): torch 2.11.0 for CUDA 13.0.
# TORCH_INDEX_URL (a build argument; compose passes docker/.env's) names the index torch
# comes from, e.g. PyTorch's own wheel index for CUDA 13.0, the build those runs used;
# unset, pip's configured index serves torch 2.11.0 with the CUDA of that index's build
ARG TORCH_INDEX_URL=
RUN if [ -n "$TORCH_INDEX_URL" ]; then pip install --index-url "$TORCH_INDEX_URL" torch==2.11.0; \
    else pip install torch==2.11.0; fi \
    && pip install -e ".[grader]" cupy-cuda13x==14.2.0
COPY exercises ./exercises
COPY reference_solutions ./reference_solutions
# root in the container, without a delegated cgroup: each runner then runs as a job uid of
# its own (graders/isolation/jobuids.py), which RLIMIT_NPROC holds; docs/deploy.md says why
# fresh while the worker's slot lives, grading or not (graders/service/worker_alive.py)
HEALTHCHECK --interval=30s --timeout=10s --start-period=300s --retries=3 \
    CMD ["python", "-m", "graders.service.worker_alive"]
CMD ["celery", "-A", "graders.service.remote_worker", "worker", "--pool", "solo", "-Q", "cuda", \
     "-n", "worker@%h", "--without-gossip", "--without-mingle", "-l", "INFO"]
