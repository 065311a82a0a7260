"""The load bench's HTTP client: the server is driven with urllib, as a client would, and
nothing of it is imported."""

from __future__ import annotations

import json
import urllib.error
import urllib.request


class ServerError(RuntimeError):
    """The server answered with an HTTP error, or could not be started."""


def http_json(method: str, url: str, token: str | None = None, body: dict | None = None,
              timeout: float = 30) -> dict:
    """One JSON request; an HTTP error becomes a ServerError with the server's detail."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", "application/json")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode(errors="replace")[:500]
        raise ServerError(f"{method} {url}: HTTP {exc.code}: {detail}") from None
