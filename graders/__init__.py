"""The grading engine: exercises as data, an untrusted runner, a trusted checker.

Importing this package imports nothing heavy: the checker needs numpy only, and
the runner (``graders.runner``) is the one place where torch, triton and the
submission are imported.
"""

GRADER_VERSION = "0.1.0"
