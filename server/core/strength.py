"""Tokens and secrets: strong enough to guard what they guard, and compared safely.

Length alone let through 16 spaces, one character repeated and `TASK_SECRET=x` (issue 26).
A value must be 16 characters at least, not a placeholder from docker/.env.example, and
carry 32 bits at least by its own character frequencies (Shannon's estimate, times its
length): repetition is caught, and a random 16-character hex token (about 50 bits) passes.
The estimate cannot see a dictionary word; what the server makes itself when a value is
unset (`secrets.token_urlsafe`) is always the better choice.
"""

from __future__ import annotations

import hmac
import math
from collections import Counter

MIN_LENGTH = 16
MIN_BITS = 32
PLACEHOLDER = "change-me"  # docker/.env.example's values start so


def estimated_bits(value: str) -> float:
    """Shannon entropy of the value's own characters, times its length."""
    counts = Counter(value)
    n = len(value)
    return max(0.0, -sum(c * math.log2(c / n) for c in counts.values()))


def weakness(value: str) -> str | None:
    """Why ``value`` is too weak to be a secret, or None."""
    if len(value) < MIN_LENGTH:
        return f"it has {len(value)} character{'s' if len(value) != 1 else ''}, " \
               f"fewer than {MIN_LENGTH}"
    if value != value.strip():
        return "it starts or ends with white space (a copy-and-paste slip?)"
    if value.lower().startswith(PLACEHOLDER):
        return "it is the example's placeholder"
    bits = estimated_bits(value)
    if bits < MIN_BITS:
        return (f"it repeats a few characters over and over: about {bits:.0f} bits by its "
                f"character counts, {MIN_BITS} at least")
    return None


def check(name: str, value: str | None, unset: str) -> str | None:
    """A settings validator's body: the value back, or ValueError naming ``name``."""
    if value is None:
        return value
    why = weakness(value)
    if why:
        raise ValueError(f"{name} is too weak: {why}. Make one with `python3 -c \"import "
                         f"secrets; print(secrets.token_urlsafe(32))\"`{unset}")
    return value


def same_secret(given: str, expected: str) -> bool:
    """A sent token against the one expected, in constant time, as UTF-8 bytes: on str
    compare_digest raises TypeError at any non-ASCII character, and a client sends
    anything (it was a 500 where a 401 or 403 belongs)."""
    return hmac.compare_digest(given.encode("utf-8", "replace"),
                               expected.encode("utf-8", "replace"))
