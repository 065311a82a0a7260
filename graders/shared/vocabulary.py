"""The small words the graders, the CLI and the server share."""

from __future__ import annotations

import enum


class Verdict(str, enum.Enum):
    """What a grading run concludes about a submission."""

    PASSED = "passed"  # every check passed
    FAILED = "failed"  # a check failed
    REJECTED = "rejected"  # policy: torch ops computing the result, no kernel launched, cheating
    COMPILE_ERROR = "compile_error"  # does not import or compile (syntax, missing function)
    COMPILED = "compiled"  # HIP without a GPU: it compiles; nothing was run
    RUNTIME_ERROR = "runtime_error"  # raised or crashed while running
    TIMEOUT = "timeout"
    MEMORY_LIMIT = "memory_limit"
    OUTPUT_LIMIT = "output_limit"
    GRADER_ERROR = "grader_error"  # not the student's fault: retry, don't count it

    @property
    def about_submission(self) -> bool:
        """True when the verdict judges the submission (CLI exit 0/1), not the grader."""
        return self is not Verdict.GRADER_ERROR


class Device(str, enum.Enum):
    AUTO = "auto"
    CPU = "cpu"  # Triton's CPU interpreter: correctness only
    CUDA = "cuda"


class Language(str, enum.Enum):
    TRITON = "triton"  # one .py file, Triton kernels
    HIP = "hip"  # one .hip or .cpp file, device code only

    @classmethod
    def from_filename(cls, filename: str) -> "Language | None":
        suffix = "." + filename.rsplit(".", 1)[-1].lower() if "." in filename else ""
        language = LANGUAGE_BY_SUFFIX.get(suffix)
        return cls(language) if language else None


# The one table of submission file suffixes (the server, the bench, selftest and the
# mutants read it too): a new language is a line here.
LANGUAGE_BY_SUFFIX = {".py": "triton", ".hip": "hip", ".cpp": "hip"}
