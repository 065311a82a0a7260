"""The runner's side of the GPU gate (graders.isolation.pool.GpuGate): a call holds the GPU
while it may run GPU work, and gives it back while Triton compiles.

The checker used to hold the gate (shared) for a whole call. A call's first launch of each
specialisation compiles, seconds of CPU on a busy host, and another slot's timing (which
holds the gate alone) waited for every compile in flight; the gate prefers the timing that
waits, so every other check on the GPU waited behind it too. Now a request that says
``"gate": true`` makes this runner ask (``{"gate": "acquire"}`` on its channel, then wait
for ``{"gate": "held"}``) before its first GPU work and before each launch after a compile,
and give the gate back (``{"gate": "release"}``, after a synchronize: none of its work is
left running) when a compile starts. The checker holds the gate for it meanwhile, pauses
the call's budget while it waits, and lets it go when the call answers, whatever the
runner said.

Like the rest of the runner this is cooperation, not a wall: a submission shares this
process and could launch without asking, as it could before from a thread of its own
after a call returned. Honest code, the case the gate exists for, asks.
"""

from __future__ import annotations

import threading
from typing import BinaryIO

from graders.shared import protocol

_lock = threading.Lock()
_channel: dict[str, BinaryIO | None] = {"inbox": None, "outbox": None}
_state = {"asking": False, "held": False}


def attach(inbox: BinaryIO, outbox: BinaryIO) -> None:
    _channel.update(inbox=inbox, outbox=outbox)


def begin(asking: bool) -> None:
    """A request starts: ``asking``, whether it asks for the gate (the checker said so)."""
    with _lock:
        _state.update(asking=bool(asking) and _channel["outbox"] is not None, held=False)


def end() -> None:
    """The request is answered: the checker let the gate go with the reply."""
    with _lock:
        _state.update(asking=False, held=False)


def acquire() -> None:
    """Before GPU work: ask for the gate unless this request holds it or does not ask."""
    with _lock:  # one thread asks; another launching meanwhile waits here for the answer
        if not _state["asking"] or _state["held"]:
            return
        protocol.send(_channel["outbox"], {"gate": "acquire"})
        answer = protocol.receive(_channel["inbox"])
        if answer.header.get("gate") != "held":
            raise RuntimeError(f"the checker answered {answer.header!r} to a gate request")
        _state["held"] = True


def release() -> None:
    """A compile starts: the GPU idle of this runner's work, the gate given back."""
    with _lock:
        if not _state["asking"] or not _state["held"]:
            return
        import torch  # imported long before: the runner's toolchain

        if torch.cuda.is_available():
            torch.cuda.synchronize()
        protocol.send(_channel["outbox"], {"gate": "release"})
        _state["held"] = False
