"""Each student's own values of an exercise's parameters: the one place they are derived.

An exercise may declare parameters (its spec's ``[params]``: a shape, a dtype; see
graders/params.py), so that a question's answer is not one number for the whole class.
A student's values are HMAC-SHA256(COURSE_SECRET, exercise and username) mapped onto the
declared choices: the same student always gets the same values (nothing is stored, so no
migration), another student almost always others, and without the secret nobody can
compute anyone's. The exercise page and the API show them; every grading of the
student's work is sent them (the local pool and the Celery task alike).

The declarations come from ``graders list --json`` (server/graders_client.py): the
server imports nothing of the checker.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import logging
from typing import Any, Mapping

from .graders_client import ExerciseInfo
from .settings import DEV_COURSE_SECRET, Settings

log = logging.getLogger("server.student_params")


def derive(secret: str, username: str, exercise: ExerciseInfo) -> dict[str, Any]:
    """The values of ``exercise``'s parameters for ``username``; {} when it declares none.

    One combination of all the choices is picked, never the all-defaults one: the defaults
    are the statement's example and what a grading without parameters uses, so their
    answers are public. The exercise's name is in the message, so one student's values
    for one exercise tell nothing of another's."""
    if not exercise.params:
        return {}
    names = [p["name"] for p in exercise.params]
    default = tuple(p["default"] for p in exercise.params)
    combos = [c for c in itertools.product(*(p["choices"] for p in exercise.params))
              if c != default] or [default]
    digest = hmac.new(secret.encode(), f"{exercise.name}\n{username}".encode(),
                      hashlib.sha256).digest()
    return dict(zip(names, combos[int.from_bytes(digest, "big") % len(combos)]))


def params_for(settings: Settings, exercises: Mapping[str, ExerciseInfo], exercise: str,
               username: str) -> dict[str, Any]:
    """What a grading of ``username``'s work on ``exercise`` is sent; {} for an exercise
    without parameters or no longer served (the grader then uses its defaults)."""
    info = exercises.get(exercise)
    return derive(settings.course_secret, username, info) if info is not None else {}


def warn_if_development_secret(settings: Settings) -> bool:
    """Logs, at start, that students' numbers are computable by anyone with this repo."""
    if settings.course_secret != DEV_COURSE_SECRET:
        return False
    log.warning("COURSE_SECRET is not set: students' exercise parameters are derived from "
                "the development secret in server/settings.py, which anyone can read; set "
                "COURSE_SECRET (16 characters at least) for a real course")
    return True
