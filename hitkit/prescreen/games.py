"""The pre-screen's tournament games (ChatMatch, Yang et al. 2022): the plan of bot–bot games, playing them
(resumable: a game already in the games file is not played again) and scoring each turn on the seven
dimensions."""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from hitkit.errors import HitkitError
from hitkit.material.generation import ConversationFile, Reply, history_for
from hitkit.prescreen.dimensions import fluency as fluency_scores
from hitkit.prescreen.dimensions import score_turns
from hitkit.prescreen.tournament import (
    DIMENSIONS,
    LOWER_IS_BETTER,
    GameResult,
    double_round_robin,
    game_points,
    game_totals,
)
from hitkit.study.config import StudyConfig
from hitkit.study.sections import PrescreenConfig

PerplexityFn = Callable[..., list[float]]
EmbedFn = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class Game:
    """One tournament game: ``starter`` answers the starting utterance, then the two alternate."""

    id: str
    starter: str
    opponent: str
    start: str


def settings(config: StudyConfig) -> PrescreenConfig:
    """The study's ``prescreen`` section, or its defaults when the file has none."""
    return config.prescreen or PrescreenConfig()


def game_plan(config: StudyConfig, systems: Sequence[str]) -> list[Game]:
    """The double round-robin's games; an id's digest changes with anything that changes the game."""
    pre = settings(config)
    by_name = {s.name: s for s in config.systems}
    games = []
    for starter, opponent in double_round_robin(systems):
        key = json.dumps(
            [
                pre.starting_utterance,
                pre.exchanges,
                by_name[starter].model_dump(mode="json"),
                by_name[opponent].model_dump(mode="json"),
            ],
            sort_keys=True,
        )
        digest = hashlib.sha1(key.encode()).hexdigest()[:8]
        games.append(Game(f"{starter}~{opponent}#{digest}", starter, opponent, pre.starting_utterance))
    return games


def play(game: Game, bots: Mapping[str, Reply], exchanges: int) -> list[dict]:
    """The game's turns: the starting utterance, then ``exchanges`` exchanges, starter first.

    The starting utterance is given to the opponent (speaker 1), so the starter reads it as the
    other side's opening line; each bot sees the conversation as :func:`hitkit.material.generation.history_for`
    shows it (its own turns as the assistant's).
    """
    systems = (game.starter, game.opponent)
    turns = [{"speaker": 1, "system": game.opponent, "text": game.start, "start": True}]
    while len(turns) < 1 + 2 * exchanges:
        speaker = (len(turns) - 1) % 2
        text = bots[systems[speaker]](history_for(speaker, turns)).strip()
        turns.append({"speaker": speaker, "system": systems[speaker], "text": text})
    return turns


def _read_games(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def play_games(
    games: Sequence[Game],
    bots: Mapping[str, Reply],
    exchanges: int,
    path: Path,
    *,
    parallel: int = 4,
    show_progress: bool = True,
) -> list[dict]:
    """Play the games not yet in ``path`` (in parallel), append each when done; return all records."""
    from tqdm import tqdm

    path.parent.mkdir(parents=True, exist_ok=True)
    out = ConversationFile(path)
    done = out.done_ids()
    todo = [g for g in games if g.id not in done]
    stop = threading.Event()
    failed: list[str] = []

    def run(game: Game) -> None:
        if stop.is_set():
            raise InterruptedError("prescreen stopped")
        turns = play(game, bots, exchanges)
        out.append(
            {
                "id": game.id,
                "systems": [game.starter, game.opponent],
                "starter": game.starter,
                "opponent": game.opponent,
                "exchanges": exchanges,
                "turns": turns,
            }
        )

    if todo:
        with (
            tqdm(
                total=len(games),
                initial=len(games) - len(todo),
                desc="tournament games",
                unit="game",
                disable=not show_progress,
            ) as bar,
            ThreadPoolExecutor(parallel) as pool,
        ):
            futures = {pool.submit(run, g): g for g in todo}
            try:
                for future in as_completed(futures):
                    try:
                        future.result()
                    except Exception as exc:  # noqa: BLE001 - one failed game is reported; the rest go on
                        failed.append(f"{futures[future].id}: {exc}")
                    bar.update(1)
            except BaseException:
                stop.set()  # Ctrl-C: start nothing new, keep what is written
                raise
    if failed:
        raise HitkitError(
            f"{len(failed)} of {len(todo)} games failed (first: {failed[0]}); the finished "
            f"ones are kept in {path} — run again to resume"
        )
    records = _read_games(path)
    return [records[g.id] for g in games]


def score_games(
    records: Sequence[dict], perplexity: PerplexityFn | None, pre: PrescreenConfig, *, show_progress: bool = True
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, list[GameResult]]:
    """Score every game: the per-turn table, the per-game table, the per-game-dimension table, results.

    Without a ``perplexity`` scorer every turn's fluency is NaN and nobody wins fluency.
    """
    from tqdm import tqdm

    turn_rows, game_rows, dim_rows, results = [], [], [], []
    for record in tqdm(records, desc="scoring games", unit="game", disable=not show_progress):
        turns = record["turns"]
        texts = [t["text"] for t in turns]
        speakers = [t["speaker"] for t in turns]
        if perplexity is None:
            flu = [float("nan")] * len(texts)
        else:
            flu = fluency_scores(texts, perplexity, pre.fluency_cap)
        scores = score_turns(
            texts,
            speakers,
            flu,
            repetition_threshold=pre.repetition_threshold,
            consistency_threshold=pre.consistency_threshold,
            concept_share=pre.concept_share,
            concept_gap=pre.concept_gap,
        )
        for i, t in enumerate(turns):
            turn_rows.append(
                {
                    "game_id": record["id"],
                    "turn": i,
                    "speaker": t["speaker"],
                    "system": t["system"],
                    "start": bool(t.get("start", False)),
                    "text": t["text"],
                    "perplexity": scores.fluency[i],
                    "entities": scores.knowledge[i],
                    "question": scores.proactivity[i],
                    "specificity": scores.specificity[i],
                    "repetition": scores.repetition[i],
                    "contradiction": scores.contradiction[i],
                    "relevance_bonus": scores.relevance[i],
                }
            )
        totals = game_totals(scores, speakers)
        points = game_points(totals[0], totals[1])
        systems = (record["starter"], record["opponent"])
        for side in (0, 1):
            for dim in DIMENSIONS:
                dim_rows.append(
                    {
                        "game_id": record["id"],
                        "system": systems[side],
                        "opponent": systems[1 - side],
                        "role": ("starter", "opponent")[side],
                        "dimension": dim,
                        "value": totals[side][dim],
                        "point": points[side][dim],
                    }
                )
        result = GameResult(record["id"], systems[0], systems[1], sum(points[0].values()), sum(points[1].values()))
        results.append(result)
        winner = {"starter": systems[0], "opponent": systems[1], "draw": ""}[result.outcome]
        game_rows.append(
            {
                "game_id": record["id"],
                "starter": systems[0],
                "opponent": systems[1],
                "starter_points": result.starter_points,
                "opponent_points": result.opponent_points,
                "winner": winner,
                "turns": len(turns),
            }
        )
    return pd.DataFrame(turn_rows), pd.DataFrame(game_rows), pd.DataFrame(dim_rows), results


def dimension_table(game_dimensions: pd.DataFrame) -> pd.DataFrame:
    """Per system and dimension: the mean game value, game points won, and whether lower is better."""
    if game_dimensions.empty:
        return pd.DataFrame(columns=["system", "dimension", "mean_value", "points", "better"])
    table = (
        game_dimensions.groupby(["system", "dimension"], sort=False)
        .agg(mean_value=("value", "mean"), points=("point", "sum"))
        .reset_index()
    )
    table["better"] = ["lower" if d in LOWER_IS_BETTER else "higher" for d in table["dimension"]]
    return table
