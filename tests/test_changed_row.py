"""The row a call changed in its inputs, found word by word (graders.engine.calls)."""

import numpy as np
import pytest

from graders.engine.calls import changed_row
from graders.shared.arrays import HostArray


@pytest.mark.parametrize("shape", [(4, 300007), (256, 4096), (7, 3), (3, 1), (1, 1), (6,)])
@pytest.mark.parametrize("dtype", ["float32", "float16", "int64"])
def test_the_first_changed_row_is_named_whatever_the_rows_width(shape, dtype):
    rng = np.random.default_rng(1)
    before = (rng.standard_normal(shape) * 100).astype(dtype)
    assert changed_row(HostArray(before.copy(), dtype), HostArray(before.copy(), dtype)) is None
    rows = shape[0]
    for row in sorted({rows - 1, rows // 2, 0}, reverse=True):
        after = before.copy()
        if len(shape) == 2:
            after[row, -1] += 1  # the row's last element: its last word
            if row + 1 < rows:
                after[row + 1, 0] += 1  # a later row changed too: the first is named
        else:
            after[row] += 1
        assert changed_row(HostArray(before.copy(), dtype), HostArray(after, dtype)) == row


def test_a_changed_shape_or_dtype_is_row_zero():
    a = np.zeros((4, 8), np.float32)
    assert changed_row(HostArray(a, "float32"), HostArray(np.zeros((4, 4), np.float32),
                                                          "float32")) == 0
    assert changed_row(HostArray(a, "float32"), HostArray(a.astype(np.int32), "int32")) == 0
