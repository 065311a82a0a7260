"""``python -m graders``: grade a file, list the exercises, self-test the graders, make mutants.

Exit codes: 0 passed (or selftest all as expected), 1 any other verdict about
the submission, 2 a usage error or a grader fault.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from graders import GRADER_VERSION
from graders.engine.params import ParamError, parse_cli
from graders.engine.plan import applicable_checks, grading_device
from graders.engine.registry import all_exercises, get_exercise
from graders.engine.report import progress_line
from graders.engine.spec import SpecError
from graders.formats import FORMATS, render_as
from graders.formats.github import append_step_summary
from graders.isolation.sandbox import SandboxUnavailable
from graders.service.slots import Slot
from graders.shared.vocabulary import Device, Language, Verdict

EXIT_PASSED, EXIT_NOT_PASSED, EXIT_USAGE = 0, 1, 2


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m graders", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=GRADER_VERSION)
    sub = p.add_subparsers(dest="command", required=True)

    g = sub.add_parser("grade", help="grade one submission file")
    g.add_argument("exercise")
    g.add_argument("file", type=Path)
    g.add_argument("--device", choices=[d.value for d in Device], default="auto")
    g.add_argument("--format", choices=FORMATS, default=None,
                   help="text (default), json (what the server stores), junit (JUnit XML "
                        "for CI), github (GitHub Actions annotations)")
    g.add_argument("--json", action="store_true", help="print one JSON object: --format json")
    g.add_argument("--timeout", type=float, default=None, help="wall-clock limit in seconds")
    g.add_argument("--seed", type=int, default=None, help="fix the input seed (debugging only)")
    g.add_argument("--no-sandbox", action="store_true",
                   help="run without bubblewrap: only for your own code on your own machine")
    g.add_argument("--gpu-index", type=int, default=0, help="the GPU this grading may use")
    g.add_argument("--no-timing", action="store_true",
                   help="on a GPU, check correctness only (no performance points)")
    g.add_argument("--call-budget", type=float, default=None,
                   help="seconds one call may take, compiles included (default: the "
                        "exercise's, 20 on a GPU and 60 on the CPU)")
    g.add_argument("--lanes", type=int, default=None,
                   help="runners sharing the checks (default: 4 on a GPU, 1 on the CPU)")
    g.add_argument("--params", default=None, metavar="VALUES",
                   help="the exercise's per-student parameters, as on your exercise page: "
                        "'{\"rows\": 3072, \"cols\": 5120}' or rows=3072,cols=5120 "
                        "(default: the exercise's defaults)")

    w = sub.add_parser("worker", help="a grading slot that lives between jobs: JSON lines in "
                                      "and out, warm runners kept ready (the server uses it)")
    w.add_argument("--device", choices=[d.value for d in Device], default="auto")
    w.add_argument("--gpu-index", type=int, default=0)
    w.add_argument("--warm", type=int, default=None,
                   help="runners kept ready (default: on a GPU two gradings' lanes and a "
                        "spare, on the CPU one grading's and a spare)")
    w.add_argument("--no-sandbox", action="store_true", help="run without bubblewrap")
    w.add_argument("--lanes", type=int, default=None,
                   help="runners sharing one grading's checks (also GRADERS_LANES; default: 4 "
                        "on a GPU, 1 on the CPU)")
    w.add_argument("--share-gpu", action="store_true",
                   help="other workers grade on this GPU too: checks run side by side, timings "
                        "alone (also GRADERS_SHARE_GPU=1); skips the GPU-wide health checks")
    w.add_argument("--gpu-slots", type=int, default=None,
                   help="slots grading on this GPU, this one included, for sizing each "
                        "runner's GPU memory cap (also GRADERS_GPU_SLOTS; default 2 with "
                        "--share-gpu, else 1)")
    w.add_argument("--gpu-memory-cap-mib", type=int, default=None,
                   help="each runner's GPU memory cap in MiB, 0 for none (also "
                        "GRADERS_GPU_MEMORY_CAP_MIB; default: sized from the GPU's memory "
                        "and its slots, docs/deploy.md)")

    from graders.integrations.package import add_arguments as add_package_arguments

    add_package_arguments(sub.add_parser(
        "package", help="build a Gradescope autograder zip or a PrairieLearn course snippet "
                        "that grades one exercise on the CPU (docs/integrations.md)"))

    ls = sub.add_parser("list", help="list the exercises")
    ls.add_argument("--json", action="store_true",
                    help="statements, skeletons, checks and deadlines as one JSON object")

    s = sub.add_parser("selftest", help="references must pass, mutants must fail on their check")
    s.add_argument("--device", choices=[d.value for d in Device], default="cpu")
    s.add_argument("--jobs", type=int, default=None, help="gradings run at once")
    s.add_argument("--exercise", action="append", help="only these exercises")
    s.add_argument("--no-sandbox", action="store_true", help="run without bubblewrap")

    md = sub.add_parser("mutant-diff", help="write a mutant's patch from an edited copy of the "
                                             "exercise's reference solution (docs/authoring.md)")
    md.add_argument("exercise")
    md.add_argument("file", type=Path, help="the edited copy: .py patches solution.py, .hip "
                                            "solution.hip")
    md.add_argument("--name", required=True, help="the mutant's name: mutants/NAME.patch "
                                                  "(NAME.hip.patch for .hip)")
    md.add_argument("--expect", default=None, metavar="'CHECK[, CHECK] — why'",
                    help="what selftest must see fail, and why (default: the header of the "
                         "patch already there, to regenerate it after the reference changed)")
    md.add_argument("--note", action="append", default=[],
                    help="a line for the header under the expectation (why a patch is long, say)")
    md.add_argument("--context", type=int, default=3, help="lines of context around a change")

    ma = sub.add_parser("mutant-apply", help="write out a mutant: its patch applied to the "
                                             "reference solution")
    ma.add_argument("exercise")
    ma.add_argument("name", help="NAME for mutants/NAME.patch, NAME.hip for NAME.hip.patch")
    ma.add_argument("--out", type=Path, default=None, help="write here (default: stdout)")
    ma.add_argument("--reference", type=Path, default=None,
                    help="apply the patch to this file instead of the reference solution (an "
                         "older reference from git, to regenerate the patch: docs/authoring.md)")

    b = sub.add_parser("bench", help="GPU: copy ceiling, torch and references on the graded "
                                     "shapes, the traffic table, repeatability, latency")
    b.add_argument("--out", type=Path, default=None, help="write the tables as markdown here")
    b.add_argument("--repeat", type=int, default=5, help="gradings of the first exercise's "
                                                         "reference, for repeatability")
    b.add_argument("--exercise", action="append", help="only these exercises")
    b.add_argument("--no-labs", action="store_true", help="skip the traffic table")
    b.add_argument("--gpu-index", type=int, default=0)
    b.add_argument("--no-sandbox", action="store_true", help="run without bubblewrap")
    b.add_argument("--load", action="store_true",
                   help="instead: grade the mix through the real queue on one GPU (or one "
                        "CPU slot) and report latency per class and gradings per hour")
    b.add_argument("--back-to-back", type=int, default=0, metavar="N",
                   help="instead: N passing references through the real server, one at a "
                        "time, each answered before the next is sent (p50, p95, the first "
                        "after start)")
    b.add_argument("--device", choices=[d.value for d in Device], default="auto",
                   help="with --load or --back-to-back: the slot's device")
    b.add_argument("--slots-per-gpu", type=int, default=1,
                   help="with --load on a GPU: slots sharing it (the server's SLOTS_PER_GPU)")
    b.add_argument("--rounds", type=int, default=1,
                   help="with --load: copies of the mix sent in one burst (a file graded more "
                        "than once gives the timing spread)")
    b.add_argument("--results", type=Path, default=None,
                   help="with --load or --back-to-back: each grading's result as JSON (its "
                        "phases and timeline: what each lane did when) to this file")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "grade":
        if args.json and args.format not in (None, "json"):
            parser.error(f"--json is --format json; it cannot go with --format {args.format}")
        args.format = "json" if args.json else (args.format or "text")
    try:
        if args.command == "package":
            from graders.integrations.package import run_package

            return run_package(args)
        if args.command == "list":
            return _list(args.json)
        if args.command == "grade":
            return _grade(args)
        if args.command == "selftest":
            from graders.proof.selftest import run_selftest

            return run_selftest(Device(args.device), jobs=args.jobs, only=args.exercise,
                                sandbox=not args.no_sandbox)
        if args.command in ("mutant-diff", "mutant-apply"):
            return _mutant_diff(args) if args.command == "mutant-diff" else _mutant_apply(args)
        if args.command == "worker":
            from graders.service.worker import run_worker

            given = {k: v for k, v in (("gpu_slots_given", args.gpu_slots),
                                       ("gpu_memory_cap_mib", args.gpu_memory_cap_mib),
                                       ("lanes", args.lanes))
                     if v is not None}
            return run_worker(Device(args.device), args.gpu_index, not args.no_sandbox, args.warm,
                              share_gpu=args.share_gpu, **given)
        if args.command == "bench" and args.back_to_back:
            from graders.bench.back_to_back import run_back_to_back

            return run_back_to_back(args.out, args.back_to_back, device=args.device,
                                    slots_per_gpu=args.slots_per_gpu, results=args.results)
        if args.command == "bench" and args.load:
            from graders.bench.load import run_load_bench

            return run_load_bench(args.out, device=args.device, rounds=args.rounds,
                                  slots_per_gpu=args.slots_per_gpu, results=args.results)
        if args.command == "bench":
            from graders.bench import run_bench

            return run_bench(args.out, args.repeat, args.gpu_index, not args.no_sandbox,
                             only=args.exercise, skip_labs=args.no_labs)
    except (SpecError, SandboxUnavailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_USAGE


def _list(as_json: bool) -> int:
    if as_json:
        print(json.dumps({"exercises": [_exercise_json(s) for s in all_exercises().values()]},
                         indent=2))
        return EXIT_PASSED
    for name, spec in all_exercises().items():
        print(f"{name:<16} {spec.title}: {spec.summary}")
        print(f"{'':<16} entry points: {', '.join(spec.entry_points)}; "
              f"checks: {', '.join(c.name for c in spec.checks)}")
    return EXIT_PASSED


def _mutant_diff(args: argparse.Namespace) -> int:
    from graders.engine.registry import references_root
    from graders.proof.mutants import (OTHER_SUFFIXES, PATCH_SUFFIX, PatchError, make_header,
                                       make_patch, read_expectation, split_patch)
    from graders.proof.selftest import validate_expectation

    try:
        exercise = get_exercise(args.exercise)
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    suffix = args.file.suffix
    reference = references_root() / exercise.name / f"solution{suffix}"
    if suffix not in (".py",) + OTHER_SUFFIXES or not reference.is_file():
        print(f"error: {args.file}: no reference solution {reference} to diff it against",
              file=sys.stderr)
        return EXIT_USAGE
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", args.name):
        print(f"error: --name {args.name!r}: lower case, digits and _ only", file=sys.stderr)
        return EXIT_USAGE
    patch = (reference.parent / "mutants" /
             f"{args.name}{'' if suffix == '.py' else suffix}{PATCH_SUFFIX}")
    try:
        if args.expect is not None:
            header = make_header(args.expect, args.note)
        elif patch.is_file():  # regenerating: the header stays as it was
            header = split_patch(patch.read_text(), str(patch))[0]
        else:
            print(f"error: {patch} does not exist yet: give --expect", file=sys.stderr)
            return EXIT_USAGE
        # the header must read back as selftest reads it, naming checks the exercise has
        expect, _ = read_expectation(header, str(patch))
        validate_expectation(patch, expect, {c.name for c in exercise.checks})
        text = make_patch(reference.read_text(), args.file.read_text(), header,
                          reference.name, f"{args.name}{suffix}", context=args.context)
        patch.parent.mkdir(exist_ok=True)
        patch.write_text(text)
    except (PatchError, ValueError, OSError) as exc:  # PatchError is a ValueError
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    changed = sum(1 for line in text.splitlines()[len(header.splitlines()) + 2:]
                  if line[:1] in "+-")
    print(f"wrote {patch} ({changed} lines added or removed; expect {', '.join(expect)})")
    return EXIT_PASSED


def _mutant_apply(args: argparse.Namespace) -> int:
    from graders.proof.mutants import PatchError, get_mutant, mutant_source

    try:
        source = mutant_source(get_mutant(args.exercise, args.name), args.reference)
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    except PatchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.out is None:
        sys.stdout.write(source)
    else:
        args.out.write_text(source)
    return EXIT_PASSED


def _exercise_json(spec) -> dict:
    """What the server shows of an exercise: never the checks' code or references."""
    skeletons = {}
    for language in spec.languages:
        path = spec.skeleton_path(language)
        if path is not None:
            skeletons[language] = {"filename": path.name, "source": path.read_text()}
    # which checks each language is graded on (HIP takes float32 only, say)
    graded = {lang: {c.name for c in applicable_checks(spec, Language(lang))}
              for lang in spec.languages}
    return {
        "name": spec.name, "title": spec.title, "summary": spec.summary,
        "languages": list(spec.languages), "entry_points": list(spec.entry_points),
        "deadline": spec.deadline,
        "statement": spec.statement_path.read_text() if spec.statement_path.exists() else "",
        "skeletons": skeletons,
        "params": [p.to_json() for p in spec.params],  # the server derives each student's
        "checks": [{"name": c.name, "points": c.points, "description": c.description,
                    "languages": [lang for lang in spec.languages if c.name in graded[lang]]}
                   for c in spec.checks],
    }


def _progress_printer(args: argparse.Namespace, exercise):
    """For a person watching: a line per check as it ends. None in a machine-read format
    or when the output is not a terminal."""
    if args.format != "text" or not sys.stdout.isatty():
        return None
    started = time.monotonic()
    print(f"grading {args.file.name} ({exercise.name}) …", flush=True)
    return lambda check: print(progress_line(check, started), flush=True)


def _grade(args: argparse.Namespace) -> int:
    try:
        exercise = get_exercise(args.exercise)
    except KeyError as exc:
        print(f"error: {exc.args[0]}", file=sys.stderr)
        return EXIT_USAGE
    if not args.file.is_file():
        print(f"error: {args.file} is not a file", file=sys.stderr)
        return EXIT_USAGE
    language = Language.from_filename(args.file.name)
    if language is None:
        print(f"error: {args.file}: a submission is one .py file (Triton) or one .hip/.cpp "
              "file (HIP)", file=sys.stderr)
        return EXIT_USAGE
    if language.value not in exercise.languages:
        print(f"error: {exercise.name} takes {', '.join(exercise.languages)}, not "
              f"{language.value}", file=sys.stderr)
        return EXIT_USAGE
    try:  # before the slot: its runners take seconds to start
        params = exercise.resolve_params(parse_cli(args.params) if args.params else None)
    except ParamError as exc:
        print(f"error: --params: {exc}", file=sys.stderr)
        return EXIT_USAGE
    slot = Slot("cli", grading_device(Device(args.device)), gpu_index=args.gpu_index,
                sandbox=not args.no_sandbox)
    on_check = _progress_printer(args, exercise)
    result = slot.grade(exercise, args.file, timeout_s=args.timeout, seed=args.seed,
                        performance=not args.no_timing, lanes=args.lanes,
                        call_budget_s=args.call_budget, on_check=on_check, params=params)
    if on_check is not None:
        print(flush=True)
    print(render_as(args.format, result, str(args.file),
                    slot={"healthy": slot.healthy, "problem": slot.problem}))
    if args.format == "github":  # a score table on the run's page, where GitHub gives one
        append_step_summary(result)
    if result.verdict is Verdict.PASSED:
        return EXIT_PASSED
    return EXIT_NOT_PASSED if result.verdict.about_submission else EXIT_USAGE
