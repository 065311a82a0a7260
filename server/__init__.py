"""The web tier: FastAPI, SQLAlchemy, a grading queue, in layers (docs/architecture.md):
core, then domain, then grading, auth and similarity, then the two HTTP faces, api (JSON)
and web (pages); app.py composes them. Each layer imports only the layers before it.

It never imports torch, triton or the graders' checking code: exercises and
results come through the graders' JSON command line (``server.grading.graders_client``),
so no student code and no GPU library lives in this process.
"""
