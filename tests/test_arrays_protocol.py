import io

import numpy as np
import pytest
import torch

from graders.shared import protocol
from graders.shared.arrays import HostArray, from_f64, to_f64


def test_bfloat16_rounding_matches_torch():
    rng = np.random.default_rng(0)
    values = np.concatenate([rng.standard_normal(10000) * 100, [0.0, -0.0, 1e-40, 3.4e38, -np.inf,
                                                                np.inf, 1.00390625, 1.01171875]])
    ours = from_f64(values, "bfloat16").to_f64()
    theirs = torch.tensor(values, dtype=torch.float32).to(torch.bfloat16).double().numpy()
    np.testing.assert_array_equal(ours, theirs)
    assert np.isnan(from_f64(np.array([np.nan]), "bfloat16").to_f64()[0])


@pytest.mark.filterwarnings("ignore:overflow")
def test_half_rounding_is_numpy_float16():
    values = np.array([0.1, 65504.0, 70000.0, 1e-8])
    np.testing.assert_array_equal(to_f64(from_f64(values, "float16").data, "float16"),
                                  values.astype(np.float16).astype(np.float64))


def test_round_trip_of_header_and_arrays():
    buf = io.BytesIO()
    arrays = [from_f64(np.arange(6.0).reshape(2, 3), "float32"), from_f64(np.ones(4), "bfloat16")]
    protocol.send(buf, {"op": "call", "fn": "softmax"}, arrays)
    buf.seek(0)
    msg = protocol.receive(buf)
    assert msg.header == {"op": "call", "fn": "softmax"}
    assert [a.dtype for a in msg.arrays] == ["float32", "bfloat16"]
    np.testing.assert_array_equal(msg.arrays[0].to_f64(), np.arange(6.0).reshape(2, 3))


def _frame(obj: bytes) -> bytes:
    return protocol._LEN.pack(len(obj)) + obj


@pytest.mark.parametrize("payload", [
    _frame(b"not json"),
    _frame(b"[1, 2]"),
    _frame(b'{"_arrays": [{"dtype": "float64", "shape": [2]}]}'),
    _frame(b'{"_arrays": [{"dtype": "float32", "shape": [2]}]}') + _frame(b"\x00" * 4),
    protocol._LEN.pack(protocol.MAX_HEADER_BYTES + 1),
])
def test_malformed_messages_are_refused(payload):
    with pytest.raises(protocol.ProtocolError):
        protocol.receive(io.BytesIO(payload))


def test_truncated_message_is_end_of_channel():
    with pytest.raises(EOFError):
        protocol.receive(io.BytesIO(_frame(b'{"op": "x"}')[:-3]))


def test_host_array_refuses_wrong_storage():
    with pytest.raises(ValueError):
        HostArray(np.zeros(3, dtype=np.float64), "float32")
