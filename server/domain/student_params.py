"""Each student's own values of an exercise's parameters: the one place they are derived.

An exercise may declare parameters (its spec's ``[params]``: a shape, a dtype; see
graders/engine/params.py), so that a question's answer is not one number for the whole class.
A student's values are HMAC-SHA256(COURSE_SECRET, exercise and username) mapped onto the
declared choices: the same student always gets the same values (nothing is stored, so no
migration), another student almost always others, and without the secret nobody can
compute anyone's. The exercise page and the API show them; every grading of the
student's work is sent them (the local pool and the Celery task alike).

The declarations come from ``graders list --json`` (server/grading/graders_client.py); the rule
itself is graders/engine/params.py's ``derive`` (standard library only, no checker), which the
Gradescope and PrairieLearn autograders follow too.
"""

from __future__ import annotations

import logging
from typing import Any, Mapping

from graders.engine import params

from ..core.settings import DEV_COURSE_SECRET, Settings
from .exercises import ExerciseInfo

log = logging.getLogger("server.student_params")


def derive(secret: str, username: str, exercise: ExerciseInfo) -> dict[str, Any]:
    """The values of ``exercise``'s parameters for ``username``; {} when it declares none
    (graders.engine.params.derive: the rule the platforms' autograders follow too)."""
    return params.derive(secret, username, exercise.name, params.from_json(exercise.params))


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
                "the development secret in server/core/settings.py, which anyone can read; set "
                "COURSE_SECRET (16 characters at least) for a real course")
    return True
