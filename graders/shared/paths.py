"""Where this repository is: the root every other folder is found from (the exercises and
references by default, the graders' own folder that a sandbox mounts, the worker's
working directory). The standard library only, so that anything may import it."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]  # graders/shared/paths.py -> the repository
