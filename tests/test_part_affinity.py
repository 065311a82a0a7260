"""Which part a lane takes next (graders.engine.plan.pick_part): each lane's runner compiles
the submission's kernels for itself, so a lane prefers the parts whose kernels it compiled
and leaves those another lane compiled. The course's own specs are the test bed."""

from __future__ import annotations

import pytest

from graders.engine.plan import (applicable_checks, compile_guesses, pick_part, plan_parts,
                                 timed_guesses)
from graders.engine.spec import load_spec
from graders.shared.paths import REPO_ROOT
from graders.shared.vocabulary import Device, Language

EXERCISES = ["safe_softmax", "masked_softmax", "online_softmax", "log_softmax_xent",
             "causal_block_skip"]


def test_shapes_that_compile_alike_are_one_guess():
    # 4000 and 4096 columns: one block of 4096 and both divisible by 16; 1000 and 1023: one
    # block of 1024, neither divisible
    assert len(compile_guesses({"shapes": [[256, 4096], [512, 4000]],
                                "dtypes": ["float32"]})) == 1
    assert len(compile_guesses({"shapes": [[1000, 1000], [777, 1023]]})) == 1
    # a row count of 1 is specialised by Triton, and each dtype is a compile of its own
    assert len(compile_guesses({"shapes": [[256, 4096], [1, 4096]],
                                "dtypes": ["float32", "bfloat16"]})) == 4
    assert compile_guesses({"size": 1048576}) == frozenset()


def _parts(name: str, lanes: int):
    spec = load_spec(REPO_ROOT / "exercises" / name)
    return spec, plan_parts(applicable_checks(spec, Language.TRITON), Device.CUDA, lanes)


def test_a_lane_takes_first_what_reuses_its_own_compiles():
    _, parts = _parts("safe_softmax", 2)
    first = parts[0]  # random_rows 256×4096 in three dtypes
    i = pick_part(parts[1:], set(first.compiles), set())
    assert parts[1:][i].compiles <= first.compiles


def test_a_lane_leaves_what_another_lane_compiled():
    _, parts = _parts("safe_softmax", 2)
    theirs = set(parts[0].compiles)
    i = pick_part(parts[1:], set(), theirs)
    assert not parts[1:][i].compiles & theirs
    # when every part left repeats the other lane's compiles, it still takes one: the one
    # that repeats fewest, the first of those
    repeats = [p for p in parts if p.compiles and p.compiles <= theirs]
    assert len(repeats) >= 2
    fewest = min(len(p.compiles) for p in repeats)
    assert pick_part(repeats, set(), theirs) == next(
        i for i, p in enumerate(repeats) if len(p.compiles) == fewest)


def _compiles(name: str, lanes: int, affinity: bool) -> int:
    """The compiles lanes taking turns make (each part's guesses a lane had not made)."""
    spec, parts = _parts(name, lanes)
    todo = list(parts)
    compiled = [set() for _ in range(lanes)]
    compiled[0] |= timed_guesses(spec.performance)  # the first lane warms the timed shapes
    made = len(compiled[0])
    turn = 0
    while todo:
        mine = compiled[turn]
        others = set().union(*(c for k, c in enumerate(compiled) if k != turn))
        part = todo.pop(pick_part(todo, mine, others) if affinity else 0)
        made += len(part.compiles - mine)
        mine |= part.compiles
        turn = (turn + 1) % lanes
    return made


@pytest.mark.parametrize("name", EXERCISES)
def test_the_course_specs_repeat_fewer_compiles_across_lanes(name):
    for lanes in (2, 4):
        assert _compiles(name, lanes, affinity=True) <= _compiles(name, lanes, affinity=False)
    if name == "safe_softmax":  # three dtypes over shapes that share blocks: the most to gain
        assert _compiles(name, 4, True) < 0.9 * _compiles(name, 4, False)
