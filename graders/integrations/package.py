"""``python -m graders package gradescope|prairielearn EXERCISE --out PATH``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PLATFORMS = ("gradescope", "prairielearn")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("platform", choices=PLATFORMS)
    p.add_argument("exercise")
    p.add_argument("--out", type=Path, required=True,
                   help="gradescope: the zip to write; prairielearn: the course folder to "
                        "write questions/ and serverFilesCourse/ into")


def run_package(args: argparse.Namespace) -> int:
    from ..registry import get_exercise

    try:
        get_exercise(args.exercise)
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.platform == "gradescope":
        from .gradescope import build_zip

        print(build_zip(args.exercise, args.out))
    else:
        from .prairielearn import build_course_snippet

        print(build_course_snippet(args.exercise, args.out))
    return 0
