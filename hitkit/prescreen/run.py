"""``hitkit prescreen``: a ChatMatch tournament and ChatEval metrics, before any human is paid.

1. **Play.** Every ordered pair of the tournament's systems (:func:`~.tournament.double_round_robin`)
   plays one game over the bot protocol, with :mod:`hitkit.material.generation`'s clients and history
   mapping: the starting utterance is turn 0, the starter answers it, and the two bots alternate
   for ``exchanges`` exchanges. Finished games are appended to ``OUT/STUDY/prescreen/games.jsonl``
   with :class:`hitkit.material.generation.ConversationFile`, so a rerun replays only what is missing; a
   game's id carries a digest of its settings, so changing them plays the games again.
2. **Score.** Each turn on the seven dimensions (:mod:`.dimensions`), each game per dimension and
   in game points (:mod:`.tournament`).
3. **Rank.** Win/tie/loss points and TrueSkill averaged over shuffled game orders.
4. **ChatEval** (with ``prescreen.prompts``): each system's responses to the prompts, taken from
   the file or asked of the system's bot, scored against the reference responses.
5. **Agree.** Kendall τ of the automatic rankings with a human one, when there is one.

Everything is written to ``OUT/STUDY/prescreen/``; :func:`prescreen_section` turns that folder
into a report section (Markdown and an HTML fragment with the plot inline).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.analysis.base import AnalysisResult
from hitkit.errors import ConfigError
from hitkit.material.generation import Reply, bots_for
from hitkit.prescreen import agreement
from hitkit.prescreen.models import NONE, SMOLLM2
from hitkit.prescreen.tournament import (
    standings,
)
from hitkit.study.config import StudyConfig
from hitkit.study.sections import GenerationConfig

PerplexityFn = Callable[..., list[float]]
EmbedFn = Callable[[list[str]], np.ndarray]


from hitkit.prescreen.games import dimension_table, game_plan, play_games, score_games, settings  # noqa: E402 - after the definitions it needs first
from hitkit.prescreen.prompts import chateval_responses, chateval_table, read_prompts  # noqa: E402 - after the definitions it needs first


def tournament_systems(config: StudyConfig) -> list[str]:
    """``prescreen.systems``, or every system with ``url`` and ``model`` but the live-chat control bot."""
    pre = settings(config)
    by_name = {s.name: s for s in config.systems}
    if pre.systems is not None:
        unknown = sorted(set(pre.systems) - set(by_name))
        if unknown:
            raise ConfigError(f"prescreen.systems names systems that are not in 'systems': {', '.join(unknown)}")
        names = list(pre.systems)
    else:
        from hitkit.protocols import task_for

        control = task_for(config).control_systems()
        names = [s.name for s in config.systems if s.url and s.model and s.name not in control]
    if len(names) < 2:
        raise ConfigError(
            f"a tournament needs at least two systems with 'url' and 'model'; found "
            f"{len(names)} ({', '.join(names) or 'none'}); list them under prescreen.systems"
        )
    return names


# ---------------------------------------------------------------- agreement and figure


def agreement_table(table: pd.DataFrame, human: Mapping[str, float] | None, source: str) -> pd.DataFrame:
    """Kendall τ of the TrueSkill and the points rankings with ``human`` (empty without one)."""
    columns = ["automatic", "human", "tau", "p_value", "systems"]
    if not human:
        return pd.DataFrame(columns=columns)
    rows = []
    for name, column in (("trueskill", "rank_trueskill"), ("points", "rank_points")):
        found = agreement.kendall_tau(dict(zip(table["system"], table[column])), human)
        rows.append(
            {"automatic": name, "human": source, "tau": found.tau, "p_value": found.p_value, "systems": found.n}
        )
    return pd.DataFrame(rows, columns=columns)


def ranking_figure(table: pd.DataFrame):
    """A figure drawer: TrueSkill mu ± sigma per system, and its wins, ties and losses."""

    def draw(path: Path) -> None:
        from matplotlib.figure import Figure  # no pyplot: no global state

        y = np.arange(len(table))[::-1]
        fig = Figure(figsize=(8, 1.4 + 0.45 * len(table)))
        left, right = fig.subplots(1, 2, sharey=True, gridspec_kw={"width_ratios": [3, 2]})
        left.errorbar(table["trueskill_mu"], y, xerr=table["trueskill_sigma"], fmt="o", capsize=3)
        left.set_yticks(y, [f"{s} ({r})" for s, r in zip(table["system"], table["rank_trueskill"])])
        left.set_xlabel("TrueSkill μ ± σ (mean over shuffled game orders)")
        start = np.zeros(len(table))
        for column, colour in (("wins", "#4c9a2a"), ("ties", "#bbbbbb"), ("losses", "#c0392b")):
            right.barh(y, table[column], left=start, color=colour, label=column)
            start = start + table[column].to_numpy()
        right.set_xlabel("games")
        right.legend(loc="lower right", fontsize="small")
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=110)

    return draw


# ---------------------------------------------------------------- the whole run


def default_fluency_model(config: StudyConfig) -> str:
    """``prescreen.fluency_model``, else the first model the study serves, else ``smollm2``."""
    pre = settings(config)
    if pre.fluency_model:
        return pre.fluency_model
    served = config.bots.serve.models if config.bots and config.bots.serve else {}
    if served:
        value = next(iter(served.values()))
        return value if value == SMOLLM2 else str(config.path(Path(value)))
    return SMOLLM2


def load_scorers(
    config: StudyConfig, *, need_embedder: bool, show_progress: bool = True
) -> tuple[PerplexityFn | None, EmbedFn | None]:
    """The fluency LM and the sentence embedder the study asks for (``none`` turns one off)."""
    from hitkit.prescreen.models import Perplexity, SentenceEmbedder

    if not show_progress:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()  # transformers' own loading bars, on stderr
    pre = settings(config)
    spec = default_fluency_model(config)
    lm = None if spec == NONE else Perplexity.load(spec if spec == SMOLLM2 else str(config.path(Path(spec))))
    embed = None
    if need_embedder and pre.embedding_model != NONE:
        model = pre.embedding_model
        embed = SentenceEmbedder.load(model if model == "minilm" else str(config.path(Path(model))))
    return lm, embed


def prescreen(
    config: StudyConfig,
    *,
    bots: Mapping[str, Reply] | None = None,
    perplexity: PerplexityFn | None = None,
    embed: EmbedFn | None = None,
    load_models: bool = True,
    human: Mapping[str, float] | None = None,
    human_source: str = "",
    show_progress: bool = True,
) -> AnalysisResult:
    """Run the whole pre-screen of ``config`` and write it to ``OUT/STUDY/prescreen/``.

    ``bots`` (system → reply function) default to clients of the systems' endpoints; ``perplexity``
    and ``embed`` default to the models the study names (``load_models=False`` leaves the missing
    ones out). ``human`` (system → rank) adds the Kendall τ table; without it, a study on the
    simulated crowd with ``simulated.quality`` is compared with that quality order.
    """
    started = time.monotonic()
    timings: dict[str, float] = {}

    def lap(name: str, since: float) -> float:
        now = time.monotonic()
        timings[name] = round(now - since, 1)
        return now

    pre = settings(config)
    systems = tournament_systems(config)
    games = game_plan(config, systems)
    items = read_prompts(config.path(pre.prompts)) if pre.prompts else []
    out_dir = config.out_dir / "prescreen"
    if bots is None:
        gen = config.generation or GenerationConfig()
        patient = config.model_copy(
            update={"generation": gen.model_copy(update={"parallel": pre.parallel, "timeout_s": pre.timeout_s})}
        )
        askable = [s.name for s in config.systems if s.url and s.model]
        bots = bots_for(patient, sorted(set(systems) | set(askable)))
    if load_models and (perplexity is None or (embed is None and items)):
        lm, embedder = load_scorers(config, need_embedder=bool(items) and embed is None, show_progress=show_progress)
        perplexity = perplexity or lm
        embed = embed or embedder
    mark = lap("load_models_s", started)
    records = play_games(
        games, bots, pre.exchanges, out_dir / "games.jsonl", parallel=pre.parallel, show_progress=show_progress
    )
    mark = lap("play_games_s", mark)
    turns, game_table, game_dims, results = score_games(records, perplexity, pre, show_progress=show_progress)
    mark = lap("score_games_s", mark)
    table = standings(
        results,
        systems,
        shuffles=pre.shuffles,
        seed=random.Random(f"{config.seed}:prescreen").randrange(2**32),
        win_points=pre.win_points,
        tie_points=pre.tie_points,
    )
    tables = {
        "standings": table,
        "games": game_table,
        "game_dimensions": game_dims,
        "dimensions": dimension_table(game_dims),
        "turns": turns,
    }
    if items:
        chat_systems = sorted({s for item in items for s in item["responses"]} | set(systems))
        responses = chateval_responses(items, chat_systems, bots, parallel=pre.parallel, show_progress=show_progress)
        tables["chateval"] = chateval_table(items, responses, embed=embed, perplexity=perplexity)
        lap("chateval_s", mark)
    if human is None and config.provider.kind == "simulated" and config.simulated.quality:
        human = agreement.simulated_ranking(config.simulated.quality, systems)
        human_source = "simulated crowd quality"
    tables["agreement"] = agreement_table(table, human, human_source or "human")
    summary = {
        "study": config.study,
        "systems": systems,
        "games": len(results),
        "starting_utterance": pre.starting_utterance,
        "exchanges": pre.exchanges,
        "shuffles": pre.shuffles,
        "fluency_model": default_fluency_model(config) if perplexity is not None else None,
        "embedding_model": pre.embedding_model if embed is not None else None,
        "ranking_trueskill": list(table["system"]),
        "ranking_points": list(table.sort_values(["rank_points", "system"])["system"]),
        "agreement": [
            {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
            for row in tables["agreement"].to_dict("records")
        ],
        "human_ranking": dict(human) if human else None,
        "seconds": round(time.monotonic() - started, 1),
        "timings": timings,
    }
    result = AnalysisResult(tables=tables, summary=summary, figures={"ranking": ranking_figure(table)})
    result.write(out_dir)
    from hitkit.prescreen.section import prescreen_section

    markdown, fragment = prescreen_section(out_dir)
    (out_dir / "report.md").write_text(markdown, encoding="utf-8")
    (out_dir / "report.html").write_text(fragment, encoding="utf-8")
    return result


def ranking_text(result: AnalysisResult) -> str:
    """The standings, the ChatEval table and the τ lines as plain text, for a terminal."""
    table = result.tables["standings"]
    shown = table[
        [
            "rank_trueskill",
            "system",
            "trueskill_mu",
            "trueskill_sigma",
            "wins",
            "ties",
            "losses",
            "points",
            "rank_points",
        ]
    ]
    lines = ["ChatMatch tournament standings:", shown.to_string(index=False, float_format=lambda v: f"{v:.2f}")]
    if "chateval" in result.tables:
        lines += [
            "ChatEval metrics:",
            result.tables["chateval"].to_string(index=False, float_format=lambda v: f"{v:.3f}"),
        ]
    for row in result.tables["agreement"].itertuples():
        found = agreement.Agreement(row.tau, row.p_value, int(row.systems))
        lines.append(f"Kendall {row.automatic} ranking vs {row.human}: {agreement.describe(found)}")
    if result.tables["agreement"].empty:
        lines.append("No human ranking to compare with (give --human-ranking or --study-analysis).")
    return "\n".join(lines)
