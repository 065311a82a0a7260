"""``python -m graders``: grade a file, list the exercises, self-test the graders.

Exit codes: 0 passed (or selftest all as expected), 1 any other verdict about
the submission, 2 a usage error or a grader fault.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import GRADER_VERSION
from .checker import grade
from .registry import all_exercises, get_exercise
from .report import render
from .sandbox import SandboxUnavailable, default_launcher
from .spec import SpecError
from .vocabulary import Device, Verdict

EXIT_PASSED, EXIT_NOT_PASSED, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m graders", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=GRADER_VERSION)
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", help="grade one submission file")
    g.add_argument("exercise")
    g.add_argument("file", type=Path)
    g.add_argument("--device", choices=[d.value for d in Device], default="auto")
    g.add_argument("--json", action="store_true", help="print one JSON object")
    g.add_argument("--timeout", type=float, default=None, help="wall-clock limit in seconds")
    g.add_argument("--seed", type=int, default=None, help="fix the input seed (debugging only)")
    g.add_argument("--no-sandbox", action="store_true",
                   help="run without bubblewrap: only for your own code on your own machine")

    sub.add_parser("list", help="list the exercises")

    s = sub.add_parser("selftest", help="references must pass, mutants must fail on their check")
    s.add_argument("--device", choices=[d.value for d in Device], default="cpu")
    s.add_argument("--jobs", type=int, default=None, help="gradings run at once")
    s.add_argument("--exercise", action="append", help="only these exercises")
    s.add_argument("--no-sandbox", action="store_true", help="run without bubblewrap")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "list":
            return _list()
        if args.command == "grade":
            return _grade(args)
        if args.command == "selftest":
            from .selftest import run_selftest

            return run_selftest(Device(args.device), jobs=args.jobs, only=args.exercise,
                                sandbox=not args.no_sandbox)
    except (SpecError, SandboxUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_USAGE


def _list() -> int:
    for name, spec in all_exercises().items():
        print(f"{name:<16} {spec.title}: {spec.summary}")
        print(f"{'':<16} entry points: {', '.join(spec.entry_points)}; "
              f"checks: {', '.join(c.name for c in spec.checks)}")
    return EXIT_PASSED


def _grade(args: argparse.Namespace) -> int:
    try:
        exercise = get_exercise(args.exercise)
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    if not args.file.is_file():
        print(f"error: {args.file} is not a file", file=sys.stderr)
        return EXIT_USAGE
    if args.file.suffix != ".py":
        print(f"error: {args.file}: a Triton submission is one .py file", file=sys.stderr)
        return EXIT_USAGE
    launcher = default_launcher(sandbox=not args.no_sandbox)
    result = grade(exercise, args.file, Device(args.device), timeout_s=args.timeout, seed=args.seed,
                   launcher=launcher)
    if args.json:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print(render(result))
    if result.verdict is Verdict.PASSED:
        return EXIT_PASSED
    return EXIT_NOT_PASSED if result.verdict.about_submission else EXIT_USAGE
