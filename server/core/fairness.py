"""Requests start in turns across client addresses, so one client's burst delays only itself
(issue 26, item 11).

The event loop runs what is ready first come, first served. 1,000 requests that arrive
together (slow bodies, one client) each cost about half a millisecond of the loop before
they first wait, so a request from anyone else that arrived just after them waited over a
second: /api/health took 1.26 s. ``FairStart`` lets at most ``per_turn`` requests into
the application per turn of the loop; the rest wait in a queue per client address, and
each turn takes one from each address in rotation. It limits nothing while the server
keeps up (fewer than ``per_turn`` new requests a turn start at once, as before), and a
single busy client still gets the whole server: a turn with nobody else waiting is all
its own. 64 a turn: the leaderboard benchmark's 64 connections still start together (at
32 its page p99 rose from 72 to 105-119 ms).

The address is the ASGI ``client``: the peer, or behind a trusted proxy the address it
forwarded (uvicorn's proxy headers). Behind a campus NAT a whole class is one address and
shares one queue: no worse than without this.
"""

from __future__ import annotations

import asyncio
from collections import deque

from starlette.types import ASGIApp, Receive, Scope, Send


class FairStart:
    """Pure ASGI middleware: start HTTP requests in turns, one address after another."""

    def __init__(self, app: ASGIApp, per_turn: int = 64):
        self.app, self.per_turn = app, per_turn
        self._waiting: dict[str, deque[asyncio.Future]] = {}  # in rotation order
        self._started_this_turn = 0
        self._turn_scheduled = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._may_start_now():
            await self._wait_for_turn(_address(scope))
        await self.app(scope, receive, send)

    def _may_start_now(self) -> bool:
        if self._waiting or self._started_this_turn >= self.per_turn:
            return False
        self._started_this_turn += 1
        self._schedule_turn()
        return True

    async def _wait_for_turn(self, address: str) -> None:
        turn = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(address, deque()).append(turn)
        self._schedule_turn()
        await turn  # cancelled (the client left): _next_turn skips it

    def _schedule_turn(self) -> None:
        if not self._turn_scheduled:
            self._turn_scheduled = True
            asyncio.get_running_loop().call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """The next turn of the loop: let up to ``per_turn`` waiting requests start, one
        address after another; an address with more waiting goes to the back."""
        self._turn_scheduled = False
        self._started_this_turn = 0
        while self._waiting and self._started_this_turn < self.per_turn:
            address, queue = next(iter(self._waiting.items()))
            del self._waiting[address]
            turn = queue.popleft()
            if queue:
                self._waiting[address] = queue  # re-inserted: the back of the rotation
            if not turn.done():
                turn.set_result(None)
                self._started_this_turn += 1
        if self._waiting or self._started_this_turn:
            self._schedule_turn()


def _address(scope: Scope) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "?"
