"""Finds the exercises: every folder under the exercises folder that holds a ``spec.toml``.

Adding an exercise is adding a folder (and its reference solutions); nothing here
changes (docs/authoring.md). Both folders are settings, so that a course can keep its
exercises in a repository of its own: ``GRADERS_EXERCISES`` (default: ``exercises/`` of
this repository) and ``GRADERS_REFERENCES`` (default: ``reference_solutions/``), read at
every call. The server passes them on to every graders process it starts.
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path

from graders.engine.spec import ExerciseSpec, load_spec
from graders.shared.paths import REPO_ROOT


def exercises_root() -> Path:
    return Path(os.environ.get("GRADERS_EXERCISES", REPO_ROOT / "exercises"))


def references_root() -> Path:
    return Path(os.environ.get("GRADERS_REFERENCES", REPO_ROOT / "reference_solutions"))


@lru_cache(maxsize=None)
def _load_all(root: Path) -> dict[str, ExerciseSpec]:
    specs = {}
    for folder in sorted(p for p in root.iterdir() if (p / "spec.toml").is_file()):
        specs[folder.name] = load_spec(folder)
    # the course's order (exercise 1 first), not the alphabet's
    return dict(sorted(specs.items(), key=lambda item: (item[1].order, item[0])))


def all_exercises() -> dict[str, ExerciseSpec]:
    return _load_all(exercises_root())


def get_exercise(name: str) -> ExerciseSpec:
    exercises = all_exercises()
    if name not in exercises:
        known = ", ".join(exercises) or "none"
        raise KeyError(f"no exercise named {name!r} (known: {known})")
    return exercises[name]
