"""Per-submission parameters: values an exercise lets differ from one submission to the next.

A question whose answer is one number for the whole class is answered once and copied.
An exercise may therefore declare, in its ``spec.toml``, parameters such as a shape:

    [params]
    rows = { choices = [1024, 2048, 3072, 4096], default = 4096, description = "R" }

Each has its list of choices and a default among them. Whoever asks for a grading gives
the values (the server derives each student's; ``grade --params`` takes them from the
command line); they are validated here against the declaration, missing ones take their
default, and the checks read them as ``ctx.submission_params``. The result records them.

A student's own values are ``derive``d from a course secret and who they are, the same
way wherever they are graded: the course's server (their username), Gradescope (their
account's email) and PrairieLearn (their variant's seed).

The standard library alone: the server reads the declarations from ``graders list --json``
(``ParamSpec.to_json``) without importing the checker, and a PrairieLearn question's
``server.py`` imports this file as it is.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class ParamError(ValueError):
    """Parameters that do not fit the exercise's declaration: a usage error."""


@dataclass(frozen=True)
class ParamSpec:
    name: str
    choices: tuple[Any, ...]
    default: Any
    description: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "choices": list(self.choices), "default": self.default,
                "description": self.description}

    def accept(self, value: Any) -> Any:
        """The choice ``value`` stands for, or ParamError. A string matches a choice by its
        text (``rows=3072`` on a command line); otherwise type and value must both match,
        so that JSON's ``true`` or ``3072.0`` is not taken for the integer it equals."""
        for choice in self.choices:
            if type(value) is type(choice) and value == choice:
                return choice
        if isinstance(value, str):
            for choice in self.choices:
                if str(choice) == value.strip():
                    return choice
        raise ParamError(f"{self.name} = {value!r} is not allowed: choose one of "
                         f"{', '.join(map(str, self.choices))}")


def parse_declarations(table: Any) -> tuple[ParamSpec, ...]:
    """The ``[params]`` table of a spec; ParamError says what is malformed."""
    if not isinstance(table, dict):
        raise ParamError("[params] should be a table of parameters")
    specs = []
    for name, decl in table.items():
        if not isinstance(decl, dict):
            raise ParamError(f"params.{name} should be a table with `choices` and `default`")
        choices = decl.get("choices")
        if not isinstance(choices, list) or not choices:
            raise ParamError(f"params.{name}: `choices` should be a non-empty list")
        if any(not isinstance(c, (int, float, str)) or isinstance(c, bool) for c in choices):
            raise ParamError(f"params.{name}: choices are numbers or strings")
        if len({(type(c), c) for c in choices}) != len(choices):
            raise ParamError(f"params.{name}: a choice is listed twice")
        spec = ParamSpec(name, tuple(choices), decl.get("default"),
                         str(decl.get("description", "")))
        if not any(type(spec.default) is type(c) and spec.default == c for c in choices):
            raise ParamError(f"params.{name}: the default {spec.default!r} is not one of its "
                             "choices")
        specs.append(spec)
    return tuple(specs)


def resolve(specs: tuple[ParamSpec, ...], given: Any, exercise: str) -> dict[str, Any]:
    """Every declared parameter's value: ``given`` validated, the rest their defaults.
    Unknown names and values outside the choices are refused, never ignored: a grading
    with a parameter silently dropped would judge the student against the wrong numbers."""
    given = {} if given is None else given
    if not isinstance(given, dict):
        raise ParamError("parameters should be an object of name: value")
    by_name = {s.name: s for s in specs}
    unknown = sorted(str(k) for k in given if k not in by_name)
    if unknown:
        known = f"its parameters: {', '.join(by_name)}" if by_name else "it takes none"
        raise ParamError(f"{exercise} has no parameter {', '.join(map(repr, unknown))} "
                         f"({known})")
    return {s.name: s.accept(given[s.name]) if s.name in given else s.default for s in specs}


def parse_cli(text: str) -> dict[str, Any]:
    """``--params``: a JSON object (``'{"rows": 3072}'``) or ``name=value`` pairs joined by
    commas (``rows=3072,cols=5120``); values are matched to the choices by ``resolve``."""
    text = text.strip()
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except ValueError as exc:
            raise ParamError(f"not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise ParamError("a JSON object of name: value is needed")
        return value
    out: dict[str, Any] = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = pair.partition("=")
        if not sep or not name.strip():
            raise ParamError(f"{pair!r} is not name=value (write "
                             "rows=3072,cols=5120 or a JSON object)")
        if name.strip() in out:
            raise ParamError(f"{name.strip()} is given twice")
        out[name.strip()] = value.strip()
    return out


def derive(secret: str, identity: str, exercise: str, specs: Sequence[ParamSpec]
           ) -> dict[str, Any]:
    """One student's values of ``exercise``'s parameters; {} when it declares none.

    HMAC-SHA256(secret, exercise and identity) picks one combination of all the choices,
    never the all-defaults one: the defaults are the statement's example and what a grading
    without parameters uses, so their answers are public. The same identity always gets the
    same values (nothing is stored), another almost always others, and without the secret
    nobody can compute anyone's. The exercise's name is in the message, so one student's
    values for one exercise tell nothing of another's."""
    if not specs:
        return {}
    default = tuple(s.default for s in specs)
    combos = [c for c in itertools.product(*(s.choices for s in specs)) if c != default] \
        or [default]
    digest = hmac.new(secret.encode(), f"{exercise}\n{identity}".encode(),
                      hashlib.sha256).digest()
    return dict(zip((s.name for s in specs), combos[int.from_bytes(digest, "big") % len(combos)]))


def from_json(declarations: Sequence[dict[str, Any]]) -> tuple[ParamSpec, ...]:
    """Declarations as ``ParamSpec.to_json`` wrote them (``graders list --json``)."""
    return tuple(ParamSpec(d["name"], tuple(d["choices"]), d["default"],
                           str(d.get("description", ""))) for d in declarations)
