"""The study file's ``judge:`` section: an LLM judge (or several) over the study's items, and the share of
them that goes to the crowd (:mod:`hitkit.judges.judging`)."""

from __future__ import annotations

import re
from typing import Literal, Optional

from pydantic import Field, model_validator

from hitkit.study.model import Model

MAX_OTHER_JUDGES = 8
"""Judges ``judge.also`` may add beside the first."""


class JudgeOptions(Model):
    """How the judge is asked: decoding, patience and how many calls are in flight at once."""

    temperature: float = Field(0.0, ge=0.0, le=2.0, description="0: the same item gets the same label")
    max_tokens: Optional[int] = Field(
        None,
        ge=1,
        le=4096,
        description=(
            "longest reply; default: the protocol's (pairwise 16: the label is its first word; Spot The Bot 32: "
            "a label per speaker; live chat 256: "
            "a line per criterion)"
        ),
    )
    timeout_s: float = Field(60.0, gt=0, description="how long one attempt may take")
    retries: int = Field(
        2, ge=0, le=10, description="further attempts within one run (failures are also retried by the next run)"
    )
    backoff_s: float = Field(0.5, ge=0, description="first retry delay; doubles each retry")
    concurrency: int = Field(4, gt=0, le=256, description="labels asked for at once")
    api_key_env: Optional[str] = Field(None, description="environment variable holding a bearer API key")


class OtherJudge(Model):
    """Another judge of the same items (``judge.also``): another model, prompt or server, asked exactly as
    the first judge is; what it leaves out is the first judge's. Its labels are kept apart (each judge its own
    predictor; the analysis measures each one's calibration and combines them, :mod:`hitkit.analysis.judges_combined`)."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9_.-]{1,40}$",
        description="the judge's name in the tables and the report (letters, digits, _ . -; up to 40)",
    )
    model: Optional[str] = Field(None, min_length=1, description="model name; default: the first judge's")
    url: Optional[str] = Field(None, description="base URL of its OpenAI-compatible server; default: the first judge's")
    prompt: Optional[str] = Field(None, min_length=1, description="its instructions; default: the first judge's")
    system_prompt: Optional[str] = Field(None, description="its system message; default: the first judge's")


class JudgeConfig(Model):
    """An LLM judge over the bot protocol (any OpenAI-compatible endpoint) that labels every item of
    the study, and the share of the items that also goes to the crowd, drawn uniformly at random or
    (``select: uncertainty``) where the judge is unsure (:mod:`hitkit.judges.judging`; the analysis combines
    the two by prediction-powered inference, :mod:`hitkit.analysis.ppi`). Exactly one of ``human_share``
    and ``human_items``."""

    url: str = Field(description="base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8011")
    model: str = Field(min_length=1, description="model name the server knows the judge by")
    prompt: Optional[str] = Field(
        None,
        min_length=1,
        description=(
            "the judge's instructions with the protocol's placeholders (pairwise: {prompt}, {response_a}, "
            "{response_b}; live chat: {conversation}, {criteria}); default: the protocol's, asking for A, B or "
            "tie, or for a 0-100 rating per criterion"
        ),
    )
    system_prompt: str = Field("", description="system message sent before the prompt")
    options: JudgeOptions = Field(default_factory=JudgeOptions)
    human_share: Optional[float] = Field(
        None,
        gt=0,
        le=1,
        description=(
            "fraction of the items, drawn uniformly at random (seeded by the study's seed), that the crowd also labels"
        ),
    )
    human_items: Optional[int] = Field(
        None,
        ge=2,
        description=(
            "how many items the crowd also labels (not for live chat, whose conversations do not exist before the crowd)"
        ),
    )
    select: Literal["uniform", "uncertainty"] = Field(
        "uniform",
        description=(
            "which items the crowd labels: uniform, a random share; uncertainty, a uniform pilot share of the "
            "crowd's budget first, then the rest where the judge is least sure (each item's probability recorded "
            "and the estimates inverse-probability weighted; METHODS §3)"
        ),
    )
    confidence: Literal["auto", "logprobs", "agreement"] = Field(
        "auto",
        description=(
            "how sure the judge was of each label, which select: uncertainty draws the second wave from: logprobs, "
            "the probability the judge's server gave the chosen label's first token, normalised over the labels' "
            "first tokens among its top 10 alternatives (stored in each label's meta; the server must give "
            "logprobs); agreement, the agreement of the judge's labels across display orders; auto (default), "
            "logprobs where the server gives them, agreement otherwise (docs/howto/judges.md)"
        ),
    )
    pilot: float = Field(
        0.3, gt=0, lt=1, description="with select: uncertainty, the share of the crowd's budget drawn uniformly first"
    )
    pi_min: float = Field(
        0.02, gt=0, le=1, description="with select: uncertainty, the least probability of any item going to the crowd"
    )

    name: Optional[str] = Field(
        None,
        pattern=r"^[A-Za-z0-9_.-]{1,40}$",
        description="the first judge's name in the tables and the report, where judge.also adds others; default: its model",
    )
    also: list[OtherJudge] = Field(
        default_factory=list,
        max_length=MAX_OTHER_JUDGES,
        description=(
            "more judges of the same items (another model, prompt or server each; pairwise): each labels every "
            "item; the analysis reports each one's calibration against people and combines them, the best "
            "predictor chosen on held-out human labels; with select: uncertainty their disagreement counts"
        ),
    )

    @model_validator(mode="after")
    def _one_size(self) -> "JudgeConfig":
        if (self.human_share is None) == (self.human_items is None):
            raise ValueError(
                "judge: give exactly one of human_share (a fraction of the items, e.g. 0.2) and "
                "human_items (a count): the uniformly random subset the crowd also labels"
            )
        if not re.match(r"^https?://[^\s/]+", self.url):
            raise ValueError(
                f"judge.url {self.url!r} must be an http(s):// address of an OpenAI-compatible "
                "server, e.g. http://127.0.0.1:8011"
            )
        names = [self.first_name, *(j.name for j in self.also)]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(
                f"judge: the judges' names must differ; {repeated[0]!r} names more than one (set judge.name or "
                "each judge.also entry's name)"
            )
        for other in self.also:
            if other.url is not None and not re.match(r"^https?://[^\s/]+", other.url):
                raise ValueError(f"judge.also {other.name!r}: url {other.url!r} must be an http(s):// address")
        return self

    @property
    def first_name(self) -> str:
        """The first judge's name: ``name``, else its model."""
        return self.name or self.model
