"""The database: the data model (SQLAlchemy 2.0, migrated by Alembic), sessions, migration and settings."""

from hitkit.db import hook_models  # noqa: F401 - the webhook tables belong to the metadata
