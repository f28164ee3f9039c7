"""The ``arena:`` section of a study file (:class:`ArenaConfig`), and the rules it sets for the study's systems."""

from __future__ import annotations

from pathlib import Path
from typing import Literal, Optional

from pydantic import Field, ValidationError

from hitkit.protocols.arena.options import ArenaAnalysisOptions
from hitkit.protocols.arena.quality import DEFAULT_LEAK_WORDS
from hitkit.study.sections import Model


class ArenaCrowdConfig(Model):
    """How the simulated crowd votes in an arena: from ``simulated.quality`` (a strength per system), with
    the biases style control exists to remove. P(left wins) = logistic(``scale`` × (q_a − q_b) +
    ``length_bias`` × ln(tokens_a / tokens_b) + ``position_bias``), a tie with probability ``tie_share``
    × e^−|x|, both bad when both systems' quality is below ``both_bad_below``."""

    scale: float = Field(6.0, gt=0, le=100, description="how sharply a quality difference decides a vote")
    length_bias: float = Field(0.0, ge=-10, le=10, description="pull toward the longer reply (log token ratio)")
    position_bias: float = Field(0.0, ge=-5, le=5, description="pull toward the left reply (A), in logits")
    tie_share: float = Field(0.1, ge=0, le=1, description="share of ties between equal systems")
    both_bad_below: float = Field(0.15, ge=0, le=1, description="both bad when both qualities are below this")
    prompts: Optional[Path] = Field(
        None,
        description=(
            "JSONL prompts ({id, prompt, category}) simulated workers write from; default: the prompts of "
            "'arena.prompts', else examples/data/arena_prompts.jsonl"
        ),
    )


class ArenaConfig(ArenaAnalysisOptions):
    """Arena (Chiang et al. 2024, LMArena/FastChat): a worker's prompt, two anonymous systems answering
    side by side, a vote. ``hits`` HITs of ``battles_per_hit`` battles; a share ``control_share`` of the
    battles pits a real system against the QC bot named by ``control`` (listed in ``systems:``). The
    analysis step's settings (prompt cap, categories, costs, weights, covariates) come from
    :class:`~hitkit.protocols.arena.options.ArenaAnalysisOptions`."""

    hits: int = Field(gt=0, le=100_000, description="number of HITs")
    battles_per_hit: int = Field(5, ge=1, le=50, description="battles in one HIT")
    prompts: Optional[Path] = Field(
        None,
        description=(
            "JSONL prompt set ({id, prompt, category}): each battle starts from one drawn for the worker; "
            "without it the worker writes their own prompt"
        ),
    )
    min_turns: int = Field(1, ge=1, le=20, description="exchanges before the vote")
    max_turns: int = Field(5, ge=1, le=50, description="most exchanges in a battle")
    control: Optional[str] = Field(None, description="the QC bot's name in 'systems' (none: no QC battles)")
    control_share: float = Field(0.2, ge=0, lt=1, description="share of battles against the QC bot")
    reveal: bool = Field(False, description="show the two systems' names after the vote (never before)")
    display_names: dict[str, str] = Field(
        default_factory=dict,
        description="system → the public name 'reveal' shows (default: the system's name; a QC battle shows none)",
    )
    reason: bool = Field(True, description="offer an optional free-text reason with the vote")
    leak_words: list[str] = Field(
        default_factory=lambda: list(DEFAULT_LEAK_WORDS),
        description=("words that name a model or vendor: a battle whose reply says one is flagged 'leak'"),
    )
    preferences_ties: bool = Field(False, description="also write ties and both-bad votes to preferences.jsonl")
    unjudged: Literal["include", "exclude"] = Field(
        "exclude",
        description=(
            "whether the votes of workers QC has not judged yet (too few votes for either test) go into "
            "preferences.jsonl; a failed worker's never do"
        ),
    )
    voter_alpha: float = Field(
        0.01,
        gt=0,
        le=0.2,
        description="the voter test's false-flag rate: an honest voter is flagged with at most this probability",
    )
    crowd: ArenaCrowdConfig = Field(default_factory=ArenaCrowdConfig)

    def battle_count(self) -> int:
        """Battles in the study."""
        return self.hits * self.battles_per_hit

    def control_count(self) -> int:
        """QC battles in the study (none without a QC bot)."""
        return round(self.battle_count() * self.control_share) if self.control else 0


def control_battles(config) -> int:
    """QC battles in the study: ``gold.rate`` of the battles with a ``gold:`` section (they are its gold
    items), else :meth:`ArenaConfig.control_count`."""
    cfg = config.arena
    if config.gold is None:
        return cfg.control_count()
    return max(1, round(cfg.battle_count() * config.gold.rate)) if cfg.control else 0


def check_study(config) -> None:
    """Raise ValueError unless the study's systems can fill the arena's battles, each with an endpoint."""
    cfg = config.arena
    if config.gold is not None:
        if cfg.control is None:
            raise ValueError(
                "gold: in an arena study mixes in battles against the QC bot: name it in arena.control "
                "(and list it in 'systems')"
            )
        default = ArenaConfig.model_fields["control_share"].default
        if cfg.control_share != default:
            raise ValueError(
                f"arena.control_share = {cfg.control_share:g} and gold.rate = {config.gold.rate:g} both set the "
                f"share of QC battles; with gold: the rate does — remove arena.control_share"
            )
    names = [s.name for s in config.systems]
    if cfg.control is not None and cfg.control not in names:
        raise ValueError(
            f"arena.control is '{cfg.control}', which is not in 'systems'; add the QC bot there or remove arena.control"
        )
    real = [n for n in names if n != cfg.control]
    if len(real) < 2:
        raise ValueError(
            f"an arena needs at least two real systems besides the QC bot; 'systems' has "
            f"{len(real)} ({', '.join(real) or 'none'}) — list more"
        )
    if cfg.min_turns > cfg.max_turns:
        raise ValueError(
            f"arena.min_turns = {cfg.min_turns} exceeds arena.max_turns = {cfg.max_turns}; "
            f"lower min_turns or raise max_turns"
        )
    if cfg.control is not None and cfg.control_share > 0 and cfg.control_count() == 0:
        raise ValueError(
            f"arena.control_share = {cfg.control_share:g} of {cfg.battle_count()} battles rounds to "
            f"no QC battle; raise control_share or the study's size"
        )
    for field, given in (("costs", cfg.costs), ("display_names", cfg.display_names)):
        unknown = sorted(set(given) - set(names))
        if unknown:
            raise ValueError(f"arena.{field} names {', '.join(unknown)}, not in 'systems'; name the study's systems")
    for i, system in enumerate(config.systems):
        if not system.has_endpoint(served=config.bots is not None and config.bots.serve is not None):
            raise ValueError(
                f"systems.{i} ('{system.name}'): an arena system needs 'url' (an OpenAI-compatible "
                f"endpoint, or none with bots.serve) and 'model'; add them"
            )
        try:
            system.checked_bot_config()
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"systems.{i} ('{system.name}') options: {problems}") from None
