"""The web tier: FastAPI, SQLAlchemy, a grading queue.

It never imports torch, triton or the graders' checking code: exercises and
results come through the graders' JSON command line (``server.graders_client``),
so no student code and no GPU library lives in this process.
"""
