"""An LLM judge for a study (the study file's ``judge:``): every item labelled, before anything is
posted or, where the crowd makes the items, after the crowd's work.

The protocol's ``judge`` module says what the judge is asked about each unit of the material
(pairwise: each comparison in both display orders) and how a reply becomes a label. Its ``WHEN``
says when: ``"before"`` (the default) asks about the material (``requests(units)``) before anything
is posted; ``"after"`` (live chat) asks about what the crowd made, read from the database
(``requests_from(session, study, config)``), and one request may give several labels (``parts``
names them, ``split`` reads them from one reply). This module
asks, over the OpenAI-compatible bot protocol (:class:`hitkit.bots.client.BotClient`: bounded
concurrency, retries with backoff), and stores each label in ``judge_label`` as soon as it is in,
one transaction each. A rerun asks only for what is not stored as done, so judging that stopped
halfway (a crash, Ctrl-C, a judge that failed) resumes without asking for any label twice. A
failed label is a row with its error and attempt count; the launch posts nothing while any label
is missing and says how to retry.

Which units the crowd also labels is :mod:`hitkit.judges.human_subset`'s: a uniformly random share, the
design prediction-powered inference (:mod:`hitkit.analysis.ppi`) needs, or, with ``judge.select:
uncertainty``, a uniform pilot and a second wave where the judge is unsure (:mod:`hitkit.judges.second_wave`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field

import pandas as pd
from sqlalchemy import select, true
from sqlalchemy.orm import Session

from hitkit.db.models import JudgeLabel, Study, Unit, utcnow
from hitkit.db.session import session_scope
from hitkit.events import add_event
from hitkit.judges.confidence import TOP_LOGPROBS, label_confidence
from hitkit.judges.panel import Panelist, check_panel, first_judges, panel, requests_of
from hitkit.judges.section import judge_section
from hitkit.protocols import PROTOCOLS, task_for
from hitkit.protocols.base import JudgeRequest
from hitkit.study.config import StudyConfig

Ask = Callable[[str], str | tuple[str, list | None]]
"""Sends one rendered judge prompt and returns the judge's reply text, or (text, OpenAI ``logprobs.content``
entries or None) as :class:`hitkit.bots.client.BotReply` is."""


@dataclass
class JudgeReport:
    """What one judging run did: labels planned, already stored, asked now, given without asking,
    replies that named no label, and the labels that failed (``key/variant: error``)."""

    planned: int
    already_done: int
    judged: int = 0
    auto: int = 0
    unparsed: int = 0
    failed: list[str] = field(default_factory=list)
    what: str = "labels"
    """What one request is, in the coordinator's words (live chat: conversations)."""

    def plus(self, other: JudgeReport) -> JudgeReport:
        """This run's counts and another judge's, added."""
        return JudgeReport(
            self.planned + other.planned,
            self.already_done + other.already_done,
            self.judged + other.judged,
            self.auto + other.auto,
            self.unparsed + other.unparsed,
            self.failed + other.failed,
            self.what,
        )

    def line(self) -> str:
        """One line for the coordinator."""
        text = (
            f"Judge: {self.planned} {self.what} planned, {self.already_done} already stored, {self.judged} "
            f"judged now, {self.auto} given without asking"
        )
        if self.unparsed:
            text += f", {self.unparsed} replies named no label (counted as the neutral label)"
        if self.failed:
            text += f"; {len(self.failed)} failed (first: {self.failed[0]})"
        return text + "."


def judge_module(config: StudyConfig):
    """The protocol's ``judge`` module (its requests, parser, prompt and export)."""
    return PROTOCOLS[config.task].module("judge")


def judges_after(config: StudyConfig) -> bool:
    """Whether the study's judge labels what the crowd made (after its work) rather than the material."""
    return getattr(judge_module(config), "WHEN", "before") == "after"


def judge_client(config: StudyConfig, judge: Panelist | None = None) -> Ask:
    """Ask the study's judge (or ``judge``, one of several: :mod:`hitkit.judges.panel`) over the
    OpenAI-compatible protocol, with its options."""
    from hitkit.bots.client import BotClient, BotConfig

    j = judge.section if judge is not None else judge_section(config)
    o = j.options
    client = BotClient(
        BotConfig(
            name="judge",
            url=j.url,
            model=j.model,
            system_prompt=j.system_prompt,
            temperature=o.temperature,
            max_tokens=o.max_tokens if o.max_tokens is not None else judge_module(config).MAX_TOKENS,
            timeout_s=o.timeout_s,
            retries=o.retries,
            backoff_s=o.backoff_s,
            max_concurrency=o.concurrency,
            api_key_env=o.api_key_env,
            context_tokens=1_000_000,
            top_logprobs=None if j.confidence == "agreement" else TOP_LOGPROBS,
            logprobs_required=j.confidence == "logprobs",
        )
    )  # a judge prompt is sent whole, never trimmed
    return lambda prompt: client.reply_with_logprobs([{"role": "user", "content": prompt}])


def requests_for(
    config: StudyConfig, database_url: str | None = None, study_id: int | None = None
) -> list[JudgeRequest]:
    """Every request the study's judge is asked: over all of the material (not only the crowd's share),
    or, for a judge that labels after the crowd, over what the crowd has made so far (read from the
    study in ``database_url``)."""
    module = judge_module(config)
    if not judges_after(config):
        return module.requests(task_for(config).build().units)
    if database_url is None or study_id is None:
        raise ValueError("a judge that labels after the crowd reads the crowd's work: give database_url and study_id")
    with session_scope(database_url) as session:
        return module.requests_from(session, session.get_one(Study, study_id), config)


def _parts(module, request: JudgeRequest) -> list[JudgeRequest]:
    """The labels a request gives: itself, or those the module's ``parts`` names."""
    return module.parts(request) if hasattr(module, "parts") else [request]


def _labels(module, request: JudgeRequest, reply: str) -> list[tuple[JudgeRequest, str | None]]:
    """Each label a reply gives (None: the reply named none)."""
    return module.split(request, reply) if hasattr(module, "split") else [(request, module.parse(reply))]


def _store(
    database_url: str,
    study_id: int,
    model: str,
    requests: list[JudgeRequest],
    *,
    labels: list[str | None] | None = None,
    neutral: str | None = None,
    reply: str | None = None,
    error: str | None = None,
    source: str = "judge",
    confidence: dict | None = None,
) -> None:
    """Insert or update each request's row, in one transaction (the labels of one reply are stored
    together): done with its label (``neutral`` where the reply named none, ``parsed`` false), or
    failed with ``error``. ``confidence`` (:func:`hitkit.judges.confidence.label_confidence`) joins the
    meta of a single label."""
    with session_scope(database_url) as session:
        for i, request in enumerate(requests):
            row = session.scalar(
                select(JudgeLabel).where(
                    JudgeLabel.study_id == study_id,
                    JudgeLabel.unit_key == request.unit_key,
                    JudgeLabel.variant == request.variant,
                )
            )
            if row is None:
                row = JudgeLabel(study_id=study_id, unit_key=request.unit_key, variant=request.variant, attempts=0)
                session.add(row)
            label = labels[i] if labels is not None else None
            row.meta, row.model, row.source = {**request.meta, **(confidence or {})}, model, source
            row.status = "done" if error is None else "failed"
            row.label = label if label is not None or error is not None else neutral
            row.parsed, row.reply, row.error = label is not None or error is not None, reply, error
            row.attempts = (row.attempts or 0) + (source == "judge")
            row.updated_at = utcnow()


def judge_study(
    config: StudyConfig,
    database_url: str,
    study_id: int,
    *,
    ask: Ask | Mapping[str, Ask] | None = None,
    stop: threading.Event | None = None,
    show_progress: bool = False,
    lines_every_s: float | None = None,
) -> JudgeReport:
    """Label every request of the study not yet stored as done, by each of its judges (``judge.also``:
    :mod:`hitkit.judges.panel`) in turn; return what was done, summed over the judges.

    ``ask`` replaces the study's judge client (tests; a mapping gives each judge's by name); ``stop`` set
    ends the run after the labels in flight (each stored as it comes). Failures are stored and reported,
    never raised. Progress: one line redrawn on a terminal (``show_progress`` and stderr a TTY), else a
    plain line every ``lines_every_s`` seconds (None: silent).
    """
    check_panel(config)
    requests = requests_for(config, database_url, study_id)
    total: JudgeReport | None = None
    for judge in panel(config):
        own = ask.get(judge.name) if isinstance(ask, Mapping) else ask
        report = _judge_one(
            config, database_url, study_id, judge, requests_of(requests, judge), own, stop, show_progress, lines_every_s
        )
        total = report if total is None else total.plus(report)
    assert total is not None  # a study has at least its first judge
    return total


def _judge_one(
    config: StudyConfig,
    database_url: str,
    study_id: int,
    judge_of: Panelist,
    requests: list[JudgeRequest],
    ask: Ask | None,
    stop: threading.Event | None,
    show_progress: bool,
    lines_every_s: float | None,
) -> JudgeReport:
    """:func:`judge_study` for one judge, over its ``requests``."""
    import sys
    import time

    from hitkit.progress import StatusLine, eta_text

    module = judge_module(config)
    judge = judge_of.section
    template = judge.prompt or module.DEFAULT_PROMPT
    with session_scope(database_url) as session:
        done = set(
            session.execute(
                select(JudgeLabel.unit_key, JudgeLabel.variant).where(
                    JudgeLabel.study_id == study_id, JudgeLabel.status == "done"
                )
            ).all()
        )
    # A request is asked again unless every label it gives is stored as done.
    todo = [r for r in requests if any((p.unit_key, p.variant) not in done for p in _parts(module, r))]
    report = JudgeReport(
        planned=len(requests), already_done=len(requests) - len(todo), what=getattr(module, "ASKED", "labels")
    )
    model = judge.model
    for r in [r for r in todo if r.auto is not None]:
        _store(database_url, study_id, model, [r], labels=[r.auto], source="auto")
        report.auto += 1
    asked = [r for r in todo if r.auto is None]
    if not asked:
        return report
    ask = ask or judge_client(config, judge_of)
    stop = stop or threading.Event()

    def run(request: JudgeRequest) -> str | tuple[str, list | None]:
        if stop.is_set():
            raise InterruptedError("judging stopped")
        return ask(template.format(**request.fields))

    tty = show_progress and sys.stderr.isatty()
    status = StatusLine(tty, None if tty else lines_every_s)
    started = time.monotonic()
    # Not a `with` block: on Ctrl-C the queued requests are cancelled instead of waited for.
    pool = ThreadPoolExecutor(judge.options.concurrency)
    interrupted = False
    try:
        futures = {pool.submit(run, r): r for r in asked}
        pending = set(futures)
        while pending:
            fraction = 1 - len(pending) / len(asked)
            eta = eta_text(fraction, time.monotonic() - started)
            status.show(
                f"judge labels {report.already_done + report.auto + len(asked) - len(pending)}/"
                f"{report.planned} ({100 * fraction:.0f} % of {len(asked)} to ask)"
                + (f" · {len(report.failed)} failed" if report.failed else "")
                + (f" · {eta}" if eta else "")
            )
            finished, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
            for future in finished:  # stored here, in one thread: one writer, one row at a time
                request = futures[future]
                try:
                    reply, logprobs = _reply(future.result(), judge.confidence)
                except InterruptedError:
                    continue
                except Exception as exc:  # one failed label is recorded; the rest go on
                    error = f"{type(exc).__name__}: {exc}"
                    _store(database_url, study_id, model, _parts(module, request), error=error)
                    report.failed.append(f"{request.unit_key}/{request.variant}: {error}")
                    continue
                labels = _labels(module, request, reply)
                single = len(labels) == 1 and labels[0][1] is not None
                _store(
                    database_url,
                    study_id,
                    model,
                    [p for p, _ in labels],
                    labels=[lab for _, lab in labels],
                    neutral=module.NEUTRAL,
                    reply=reply,
                    confidence=label_confidence(logprobs, labels[0][1], getattr(module, "LABELS", None))
                    if single
                    else None,
                )
                report.judged += 1
                report.unparsed += any(label is None for _, label in labels)
    except BaseException:
        interrupted = True
        stop.set()
        raise
    finally:
        status.close()
        pool.shutdown(wait=not interrupted, cancel_futures=True)
    with session_scope(database_url) as session:
        add_event(
            session,
            study_id,
            "judge_run",
            "cli",
            {
                "planned": report.planned,
                "judged": report.judged,
                "auto": report.auto,
                "unparsed": report.unparsed,
                "failed": len(report.failed),
            },
        )
    return report


def _reply(answer: str | tuple[str, list | None], confidence: str) -> tuple[str, list | None]:
    """(text, logprobs) of what ``ask`` returned; with ``judge.confidence: logprobs``, a reply without
    logprobs is an error (its label is stored as failed and asked again by the next run)."""
    text, logprobs = (answer, None) if isinstance(answer, str) else answer
    if confidence == "logprobs" and not logprobs:
        raise ValueError(
            "the judge's server returned no logprobs (judge.confidence: logprobs); use confidence: auto or agreement"
        )
    return text, logprobs


def confidence_source(session: Session, study: Study) -> str:
    """Which confidence the study's judge labels carry: ``logprobs`` when every label the judge was asked
    for has one from its logprobs (:mod:`hitkit.judges.confidence`), ``agreement`` when none has,
    else ``logprobs (k of n labels), agreement elsewhere``."""
    metas = session.scalars(
        select(JudgeLabel.meta).where(
            JudgeLabel.study_id == study.id, JudgeLabel.status == "done", JudgeLabel.source == "judge"
        )
    ).all()
    k = sum(1 for m in metas if isinstance(m, dict) and "confidence" in m)
    if k == 0 or k == len(metas):
        return "logprobs" if k else "agreement"
    return f"logprobs ({k} of {len(metas)} labels), agreement elsewhere"


def judge_table(
    session: Session, study: Study, config: StudyConfig, *, weights: bool = True, every_judge: bool = False
) -> pd.DataFrame:
    """The protocol's ``judge`` export table of the first judge's done labels (``every_judge``: every judge's
    of :mod:`hitkit.judges.panel`, as the second wave reads their agreement), in the material's order,
    each marked with whether its unit went to the crowd and, where the share follows the judge's
    uncertainty (``weights``), the unit's probability of going to it (``human_probability``:
    :func:`hitkit.judges.design.probabilities`)."""
    from hitkit.judges.design import probabilities

    subset = set(session.scalars(select(Unit.key).where(Unit.study_id == study.id)))
    pi = probabilities(session, study, config) if weights else None
    rows = session.scalars(
        select(JudgeLabel)
        .where(JudgeLabel.study_id == study.id, JudgeLabel.status == "done")
        .where(true() if every_judge else first_judges(JudgeLabel.variant))
        .order_by(JudgeLabel.unit_key, JudgeLabel.variant)
    ).all()
    labels = [
        {
            "meta": r.meta,
            "label": r.label,
            "parsed": r.parsed,
            "human_subset": r.unit_key in subset,
            "model": r.model,
            "reply": r.reply,
            **({"human_probability": pi[r.unit_key]} if pi is not None else {}),
        }
        for r in rows
    ]
    return judge_module(config).export(study.name, labels)
