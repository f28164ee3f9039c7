"""The strict, frozen base model of every study-file section."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """Base of every study-file section: strict and frozen."""

    # A typo in a study file must be an error, not a silently ignored key.
    model_config = ConfigDict(extra="forbid", frozen=True)
