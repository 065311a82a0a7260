"""Alembic migrations, applied on start (``upgrade head``)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

# beside the layers, not in core: its env.py reads the domain's models
MIGRATIONS = Path(__file__).resolve().parents[1] / "migrations"


def upgrade(engine: Engine) -> None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
