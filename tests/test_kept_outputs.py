"""Issue 43: a timed run keeps its calls' outputs for the checker's row picks in a few large
blocks, not one new block a call (graders/runner/timing.py ``KeptOutputs``): the rows the
checker fetches are each call's own, whatever the blocks."""

from __future__ import annotations

import torch

from graders.runner.timing import KeptOutputs


def _outputs(n: int, shape=(3, 5), dtype=torch.float32):
    return [torch.full(shape, float(i), dtype=dtype) for i in range(n)]


def test_a_hundred_outputs_take_five_blocks_and_each_keeps_its_own_values():
    kept = KeptOutputs(torch, first=10, most=100, device="cpu")
    blocks = set()
    for out in _outputs(100):
        kept.keep(out)
        blocks.add(kept.block.data_ptr())
        out.fill_(-1.0)  # the submission reuses its buffer: what was kept stays
    assert len(blocks) == 5  # 10, 10, 20, 40, 20
    assert [float(o[2, 4]) for o in kept.outputs] == [float(i) for i in range(100)]
    assert all(o.shape == (3, 5) for o in kept.outputs)


def test_never_more_room_than_the_most_it_may_keep():
    kept = KeptOutputs(torch, first=10, most=25, device="cpu")
    for out in _outputs(25):
        kept.keep(out)
    assert kept.room == 5 and kept.used == 5  # 10, 10, then the 5 left


def test_an_output_unlike_the_first_is_cloned_as_before():
    kept = KeptOutputs(torch, first=4, most=50, device="cpu")
    first, *_ = _outputs(1)
    kept.keep(first)
    other = torch.arange(6, dtype=torch.float64).reshape(2, 3)  # another dtype and size
    kept.keep(other)
    other.zero_()
    assert kept.outputs[1].dtype == torch.float64 and float(kept.outputs[1][1, 2]) == 5.0
    kept.keep(first)  # the first kind still goes to its block
    assert kept.used == 2


def test_an_output_off_the_device_or_empty_is_cloned():
    kept = KeptOutputs(torch, first=4, most=50, device="cuda")
    kept.keep(torch.ones(2, 2))  # a CPU tensor where the block is on the GPU
    kept.keep(torch.ones(0))
    assert kept.block is None and len(kept.outputs) == 2


def test_rows_come_to_the_host_together_each_in_its_place():
    """``on_host_together``: what it is given, in its order, whatever it groups (the rows of
    another dtype or length stay apart)."""
    from graders.runner.timing import on_host_together

    class Device:  # a stand-in for the GPU: rows not on "cpu" are grouped and stacked
        type = "meta-gpu"

    class Row:
        def __init__(self, t):
            self.t, self.device, self.dtype, self.shape = t, Device, t.dtype, t.shape

    class Torch:
        stacked = []

        @classmethod
        def stack(cls, rows):
            cls.stacked.append(len(rows))
            return torch.stack([r.t for r in rows])

    rows = [torch.full((4,), float(i)) for i in range(5)] + [torch.arange(3)] + \
           [torch.full((2,), 9.0)]
    got = on_host_together(Torch, [Row(r) for r in rows[:5]] + [Row(rows[5]), rows[6]])
    assert Torch.stacked == [5]  # the five float rows in one copy; the lone int row alone
    assert [float(g[0]) for g in got[:5]] == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert got[5].t.tolist() == [0, 1, 2] and got[6] is rows[6]
