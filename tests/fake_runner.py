"""A hostile stand-in for the runner: it speaks the protocol but lies.

Used by tests through a Launcher that swaps the real runner command for this
script, to show that the checker believes nothing the untrusted side says.
MODE (argv[1]) picks the lie.
"""

import os
import sys

sys.path.insert(0, os.environ["GRADERS_REPO"])

import numpy as np  # noqa: E402

from graders.shared import protocol  # noqa: E402
from graders.shared.arrays import HostArray  # noqa: E402


def main():
    mode = sys.argv[1]
    if mode == "dies_at_start":  # e.g. a broken Python environment: not the student's fault
        sys.exit("cannot start")
    fds = sys.argv[sys.argv.index("--fds") + 1]
    inbox, outbox = protocol.open_pair(*(int(x) for x in fds.split(",")))
    while True:
        try:
            msg = protocol.receive(inbox)
        except EOFError:
            return
        op = msg.header["op"]
        if op == "hello":
            protocol.send(outbox, {"ok": True, "device": "cpu", "device_name": "fake"})
        elif op == "warm":
            protocol.send(outbox, {"ok": True})
        elif op == "known_answer":
            wrong = mode == "wrong_known_answer"
            x = msg.arrays[0].to_f64()
            lse = x.max(axis=1) + np.log(np.exp(x - x.max(axis=1, keepdims=True)).sum(axis=1))
            out = np.zeros_like(lse) if wrong else lse
            protocol.send(outbox, {"ok": True}, [HostArray(out.astype(np.float32), "float32")])
        elif op == "load":
            protocol.send(outbox, {"ok": True, "attributes": {}})
        elif op == "call":
            x = msg.arrays[0]
            if mode == "garbage":
                outbox.write(b"\x05\x00\x00\x00\x00\x00\x00\x00hello")
                outbox.flush()
                continue
            if mode == "claims_passed":
                # no arrays at all, but a header that says all is well
                protocol.send(outbox, {"ok": True, "outputs": 1, "launches": 1, "passed": True,
                                       "verdict": "passed", "score": 100})
                continue
            # "uniform": a plausible-looking probability row that is not the softmax
            rows, cols = x.shape
            y = np.full((rows, cols), 1.0 / cols, dtype=np.float32)
            protocol.send(outbox, {"ok": True, "outputs": 1, "launches": 1},
                          [HostArray(y, "float32"), x])


main()
