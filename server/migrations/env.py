"""Alembic environment: the URL and the connection come from server.core.migrate."""

from alembic import context
from server.domain import lti_records  # noqa: F401 - its tables join Base's metadata
from server.domain.models import Base

config = context.config
target_metadata = Base.metadata

connection = config.attributes.get("connection")
if connection is None:  # `alembic` from the command line
    from server.core.db import make_engine
    from server.core.settings import get_settings

    engine = make_engine(get_settings().database_url)
    with engine.begin() as connection:
        context.configure(connection=connection, target_metadata=target_metadata,
                          render_as_batch=True)
        context.run_migrations()
else:
    context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
    with context.begin_transaction():
        context.run_migrations()
