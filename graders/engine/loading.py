"""A lane's runner: taken from the pool, armed with the run's deadline, the submission
placed in it and loaded (imported, or for HIP compiled) under its own budget. What the
runner says on its first hello (device, versions) goes on the result once.
"""

from __future__ import annotations

import time

from graders.engine.context import CompiledOnly, Grading, Lane, LaneStopped
from graders.engine.results import GradeResult
from graders.isolation import CallOverrun, RunStopped, Session
from graders.shared.vocabulary import Language, Verdict

LOAD_BUDGET_S = 60.0  # importing (or, for HIP, compiling) the submission


def open_lane(g: Grading, result: GradeResult, extra: bool = False,
              wait_s: float = 0.0) -> Lane | None:
    """A ready runner, armed with the run's deadline, with the submission loaded.
    ``extra``: a lane beyond the first takes only a runner that is ready now or within
    ``wait_s`` (None if there is none); starting one cold would take longer than the
    checks."""
    asked = time.monotonic()
    ready = g.pool.take_ready(wait_s) if extra and g.pool.warm else g.pool.take()
    if ready is None:
        return None
    process = ready.process
    with g.state.lock:
        result.phases["runners"] = result.phases.get("runners", 0) + 1
        # the first lane's wait for its runner (0 when one was ready; a runner made on
        # the spot otherwise): the grading's start
        result.phases.setdefault("acquire_s", round(time.monotonic() - asked, 3))
    if not g.state.opened(process):
        raise LaneStopped()
    process.arm(g.deadline - time.monotonic())
    hello = ready.hello
    with g.state.lock:
        if not result.device_name:
            result.device = str(hello.get("device", result.device))
            result.device_name = str(hello.get("device_name", ""))
            result.versions = dict(hello.get("versions", {}))
            result.phases.update(ready.phases)
    session = Session(process, g.timeout_s, g.launcher.limits, g.launcher.sandboxed)
    load, during = _load_request(g, process.place_submission(g.submission))
    loading = time.monotonic()
    try:
        loaded = session.request(load, during=during, budget_s=LOAD_BUDGET_S)
    except CallOverrun:
        raise RunStopped(Verdict.TIMEOUT, f"your file was still loading after "
                                          f"{LOAD_BUDGET_S:g} s {during}") from None
    with g.state.lock:
        result.phases.setdefault("load_s", round(time.monotonic() - loading, 3))
    if loaded.header.get("compiled_only"):
        raise CompiledOnly(loaded.header.get("warnings") or [])
    return Lane(ready, session, loaded.header.get("attributes", {}))


def _load_request(g: Grading, path: str) -> tuple[dict, str]:
    """The runner's ``load`` for the submission placed at ``path``, and what to call it."""
    exercise = g.exercise
    if g.language is Language.HIP:
        hip = exercise.hip
        if hip is None or "hip" not in exercise.languages:
            raise RunStopped(Verdict.COMPILE_ERROR,
                             f"{exercise.name} takes {', '.join(exercise.languages)}, not HIP")
        return ({"op": "load", "path": path, "entry_points": list(hip.kernels),
                 "attributes": [], "hip": {"block": hip.block, "kernels": hip.kernels}},
                "while compiling your file")
    return ({"op": "load", "path": path, "entry_points": list(exercise.entry_points),
             "attributes": list(exercise.attributes)}, "while importing your file")
