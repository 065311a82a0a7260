"""Framed messages between the checker and the runner.

A message is a JSON header plus zero or more raw arrays, each frame prefixed by
its length. The channel is a pair of pipes that the checker creates and owns;
the submission's stdout and stderr are separate streams that nobody parses.
Everything read here is untrusted on the checker side: sizes are bounded and
shapes are validated before a byte is interpreted.
"""

from __future__ import annotations

import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from graders.shared.arrays import STORAGE, HostArray

# The environment variable that names a runner's read-only seed cache
# (graders/isolation/seed_cache.py): part of the contract between the checker's side, which sets
# it, and the runner, which reads it; here, so that the runner imports nothing of the side that
# starts it (issue 28)
SEED_CACHE_ENV = "GRADER_SEED_CACHE"
# ...and the one that gives a runner its GPU memory cap in bytes (graders/isolation/gpu_memory.py,
# graders/runner/memory_cap.py), which it sets before its first allocation
GPU_MEMORY_CAP_ENV = "GRADER_GPU_MEMORY_CAP"

# How a runner starts: ``python -I -c BOOT ROOT args...``. -I keeps the working directory
# and PYTHON* variables off sys.path, so a torch.py or triton.py next to the submission
# can't shadow the real packages. Here, beside the frames, so that the side that starts a
# runner (graders.isolation.launch) imports nothing of the runner itself
BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); del sys.argv[1]; "
    "from graders.runner.main import main; sys.exit(main())"
)

MAX_HEADER_BYTES = 1 << 20
MAX_MESSAGE_BYTES = 8 << 30  # the largest graded GPU tensors are a few hundred MB
_LEN = struct.Struct("<Q")


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message."""


@dataclass
class Message:
    header: dict[str, Any]
    arrays: list[HostArray] = field(default_factory=list)


def _write_all(stream: BinaryIO, data: bytes | memoryview) -> None:
    stream.write(data)


def send(stream: BinaryIO, header: dict[str, Any], arrays: list[HostArray] | None = None) -> None:
    arrays = arrays or []
    meta = [{"dtype": a.dtype, "shape": list(a.shape)} for a in arrays]
    head = json.dumps({**header, "_arrays": meta}).encode()
    _write_all(stream, _LEN.pack(len(head)))
    _write_all(stream, head)
    for a in arrays:
        buf = memoryview(np.ascontiguousarray(a.data)).cast("B")
        _write_all(stream, _LEN.pack(len(buf)))
        _write_all(stream, buf)
    stream.flush()


def _read_exact(stream: BinaryIO, n: int) -> bytes:
    chunks = []
    remaining = n
    while remaining:
        chunk = stream.read(remaining)
        if not chunk:
            raise EOFError("channel closed")
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


def receive(stream: BinaryIO) -> Message:
    (n,) = _LEN.unpack(_read_exact(stream, _LEN.size))
    if n > MAX_HEADER_BYTES:
        raise ProtocolError(f"header of {n} bytes")
    try:
        header = json.loads(_read_exact(stream, n))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"header is not JSON: {exc}") from None
    if not isinstance(header, dict) or not isinstance(header.get("_arrays", []), list):
        raise ProtocolError("header is not an object")
    arrays = []
    total = 0
    for meta in header.pop("_arrays", []):
        try:
            dtype, shape = meta["dtype"], tuple(int(s) for s in meta["shape"])
            storage = STORAGE[dtype]
        except (KeyError, TypeError, ValueError):
            raise ProtocolError(f"bad array description {meta!r}") from None
        if any(s < 0 for s in shape) or len(shape) > 4:
            raise ProtocolError(f"bad shape {shape}")
        expected = int(np.prod(shape, dtype=np.int64)) * storage.itemsize
        (n,) = _LEN.unpack(_read_exact(stream, _LEN.size))
        total += n
        if n != expected or total > MAX_MESSAGE_BYTES:
            raise ProtocolError(f"array of {n} bytes, expected {expected}")
        data = np.frombuffer(_read_exact(stream, n), dtype=storage).reshape(shape)
        arrays.append(HostArray(data, dtype))
    return Message(header, arrays)


def open_pair(read_fd: int, write_fd: int) -> tuple[BinaryIO, BinaryIO]:
    return os.fdopen(read_fd, "rb", buffering=1 << 20), os.fdopen(write_fd, "wb", buffering=1 << 20)
