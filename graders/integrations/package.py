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
    p.add_argument("--image", help="prairielearn (required): the grader image's name, where "
                                   "the course pushes it (USER/softmax-autograder-cpu:TAG)")
    p.add_argument("--secret-file", type=Path,
                   help="the key each student's parameters are derived with (the course "
                        "server's COURSE_SECRET, for the same numbers there); default: a new "
                        "random key")


def run_package(args: argparse.Namespace) -> int:
    from graders.engine.registry import get_exercise

    try:
        get_exercise(args.exercise)
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return 2
    secret = None
    if args.secret_file is not None:
        try:
            secret = args.secret_file.read_text().strip()
        except OSError as exc:
            print(f"error: cannot read --secret-file: {exc}", file=sys.stderr)
            return 2
        if len(secret) < 16:
            print("error: the --secret-file key needs 16 characters at least", file=sys.stderr)
            return 2
    if args.platform == "gradescope":
        from graders.integrations.gradescope import build_zip

        print(build_zip(args.exercise, args.out, secret))
        return 0
    if not args.image:
        print("error: prairielearn needs --image: the name the course pushes the grader's "
              "image under (for example yourname/softmax-autograder-cpu:2026); "
              "serverFilesCourse/softmax_autograder/build_image.sh builds and pushes it",
              file=sys.stderr)
        return 2
    from graders.integrations.prairielearn import build_course_snippet

    print(build_course_snippet(args.exercise, args.out, args.image, secret))
    return 0
