"""Running the graders inside a course platform's own autograder container.

Gradescope and PrairieLearn each start a throwaway container per submission, with no GPU:
the graders run there on Triton's CPU interpreter. This package builds what course staff
upload (``python -m graders package gradescope|prairielearn EXERCISE``), and holds the
entry points that run in those containers: find the student's file, confine and grade it
with the engine, and write the platform's results.json. docs/integrations.md says how.
"""
