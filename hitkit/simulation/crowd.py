"""The simulated crowd: synthetic workers who take HITs through the real pages over real HTTP.

Coordinators use it to dry-run a study and to check their quality-control settings before paying
anyone; the tests use it to drive the whole system. Each worker has a profile — ``diligent``,
``noisy``, ``spammer`` or ``always_tie`` — that the study's task type turns into answers; the typing
profiles ``llm_paster``, ``slow_typist`` and ``phone`` answer as diligent workers but enter their text
their own way (:mod:`hitkit.simulation.crowd_typing`). Every message and free-text answer carries the signals a
browser would send of how it was typed (:mod:`hitkit.worker.authenticity`). A worker
looks at the marketplace (the study's posted HITs), previews a HIT, accepts it, reads the
instructions, answers unit by unit (each answer is its own request, as a person's clicks are; a chat
is :mod:`hitkit.simulation.crowd_chat`), submits, and comes back for more until the cap, the budget or
the work runs out. How much each worker does follows ``simulated.activity`` (:func:`worker_quotas`): by
default a few workers take most of the HITs, as on real platforms, within the per-worker cap.

The crowd acts only over HTTP: what work there is comes from the marketplace's listing
(``GET /s/STUDY/market``, :mod:`hitkit.worker.market`), never from the server's own modules. The database is
read once, when the crowd is made, for what only a simulation may know: the truth its readers perceive
(:meth:`~hitkit.protocols.base.TaskType.simulation_context`) and how many places the study has.
"""

from __future__ import annotations

import json
import logging
import math
import os
import queue
import random
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import requests
from sqlalchemy import func, select

from hitkit.db.models import Hit, Study
from hitkit.db.session import session_scope
from hitkit.errors import HitkitError
from hitkit.providers.simulated import PREVIEW_ASSIGNMENT
from hitkit.simulation import crowd_typing
from hitkit.simulation.activity import capped_quotas
from hitkit.simulation.crowd_chat import chat, chat_sides
from hitkit.study.config import StudyConfig
from hitkit.study.stored import StudyContext

log = logging.getLogger(__name__)

WAIT_S = 0.2
"""How long a crowd thread waits after a turn that found no HIT for its worker; it doubles with each such
turn in a row, up to 8 times, so a crowd waiting for the next wave does not keep the server busy."""


@dataclass(frozen=True)
class SimWorker:
    """One synthetic worker: a stable id, the profile it answers as, and the one it types as."""

    worker_id: str
    profile: str
    typing: str = ""
    """The typing profile (:mod:`hitkit.simulation.crowd_typing`); empty: the same as ``profile``."""
    fails_screener: bool = False
    """Answers the study's screener so as to be screened out (``simulated.workers[].fails_screener``)."""

    @property
    def typist(self) -> crowd_typing.Typist:
        return crowd_typing.typist(self.typing or self.profile, self.worker_id)


def crowd_from_config(config: StudyConfig) -> list[SimWorker]:
    """The study's synthetic workers in the order of their groups, with ids that are the same on every run
    (``sim-noisy-003``), numbered per profile across groups: two groups of one profile get distinct ids."""
    from hitkit.protocols import task_for

    task = task_for(config)
    numbered: dict[str, int] = {}
    workers = []
    for g in config.simulated.workers:
        first = numbered.get(g.profile, 0)
        workers += [
            SimWorker(f"sim-{g.profile}-{i:03d}", task.answering_as(g.answers_as), g.profile, g.fails_screener)
            for i in range(first, first + g.count)
        ]
        numbered[g.profile] = first + g.count
    return workers


def worker_quotas(workers: list[SimWorker], config: StudyConfig, places: int) -> dict[str, int]:
    """How many of the study's ``places`` (assignments of all its HITs) each worker does first: the
    ``simulated.activity`` law's shares within ``schedule.per_worker_cap``
    (:func:`~hitkit.simulation.activity.capped_quotas`), given to the workers in an order shuffled with the
    study's seed (so the busiest are not always the first group's)."""
    if not workers:
        return {}
    quotas = capped_quotas(places, len(workers), config.simulated.activity, config.schedule.per_worker_cap)
    order = [w.worker_id for w in workers]
    random.Random(f"activity:{config.seed}").shuffle(order)
    return dict(zip(order, quotas))


@dataclass
class CrowdStats:
    hits_done: int = 0
    answers: int = 0
    refused: int = 0
    errors: list[str] = field(default_factory=list)


class SimulatedCrowd:
    """Runs the study's synthetic workers on a thread pool until the work, or they, run out."""

    def __init__(
        self, database_url: str, ctx: StudyContext, base_url: str, ack_log: Path | None = None, timeout_s: float = 30.0
    ):
        self.database_url, self.ctx, self.base_url = database_url, ctx, base_url.rstrip("/")
        self.workers = crowd_from_config(ctx.config)
        self.ack_log = ack_log
        self.timeout_s = timeout_s
        self.stats = CrowdStats()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._queue: queue.Queue[SimWorker] = queue.Queue()
        self._retired = 0
        self._ordinal = {w.worker_id: i for i, w in enumerate(self.workers)}
        self._taken: dict[str, int] = {}  # HITs each worker had taken at their last turn
        self._idle: set[str] = set()  # workers whose last turn found no HIT for them, or who retired
        with session_scope(database_url) as session:
            self._learn_work(session)

    def _learn_work(self, session) -> None:
        """Read what the study's work is: the task's simulation context, the HITs and their places. Again
        when HITs are added while the crowd works (a second wave of ``judge.select: uncertainty``)."""
        study_id = self.ctx.study_id
        self._context = self.ctx.task.simulation_context(session, session.get_one(Study, study_id))
        self._hit_count = session.execute(
            select(func.count()).select_from(Hit).where(Hit.study_id == study_id)
        ).scalar_one()
        places = session.execute(
            select(func.coalesce(func.sum(Hit.max_assignments), 0)).where(Hit.study_id == study_id)
        ).scalar_one()
        self._places = int(places)
        self._quota = worker_quotas(self.workers, self.ctx.config, self._places)

    # Lifecycle ------------------------------------------------------------------------------
    def start(self) -> "SimulatedCrowd":
        for w in self.workers:
            self._queue.put(w)
        for i in range(min(self.ctx.config.simulated.concurrency, len(self.workers))):
            t = threading.Thread(target=self._loop, name=f"sim-crowd-{i}", daemon=True)
            t.start()
            self._threads.append(t)
        return self

    def stop(self, join_timeout: float = 10.0) -> None:
        self._stop.set()
        for t in self._threads:
            t.join(join_timeout)

    @property
    def finished(self) -> bool:
        """True when every worker has retired (capped or no work left in a completed study)."""
        return self._retired >= len(self.workers)

    def _loop(self) -> None:
        idle = 0  # this thread's turns in a row that found no work: it comes back less often (0.2 s to 1.6 s)
        while not self._stop.is_set():
            try:
                worker = self._queue.get(timeout=0.2)
            except queue.Empty:
                if self.finished:
                    return
                continue
            try:
                outcome = self._turn(worker)
            except Exception as exc:  # a worker's failure must not stop the crowd; it is counted
                if self._stop.is_set():  # the study ended and its server is going down mid-turn: not a failure
                    log.debug("simulated worker %s stopped mid-turn: %s", worker.worker_id, exc)
                    return
                log.warning("simulated worker %s failed: %s", worker.worker_id, exc)
                with self._lock:
                    self.stats.errors.append(f"{worker.worker_id}: {exc}")
                outcome = "wait"
            with self._lock:
                (self._idle.discard if outcome == "again" else self._idle.add)(worker.worker_id)
            if outcome == "retire":
                with self._lock:
                    self._retired += 1
                continue
            if outcome == "wait":
                self._stop.wait(WAIT_S * 2 ** min(idle, 3))
                idle += 1
            else:
                idle = 0
            self._queue.put(worker)

    # One worker's turn ----------------------------------------------------------------------
    def _quota_reached(self, worker_id: str) -> bool:
        """Whether the worker has done its share of the work so far and leaves the next HIT to others.

        A worker's share so far is its quota (:func:`worker_quotas`) times the share of the study's places
        taken, plus one: a busy worker keeps taking HITs all through the study, as on a real platform, not
        only once the others are done. It holds only while another worker below its own share is still
        finding work: once every such worker has met it, retired or found nothing it may take (a cap, a
        block it has seen), anyone takes what is left, so a study finishes whenever it did without it."""
        with self._lock:
            done = sum(self._taken.values()) / max(1, self._places)
            limit = {w: min(q, math.ceil(q * done) + 1) for w, q in self._quota.items()}
            if self._taken.get(worker_id, 0) < limit.get(worker_id, 0):
                return False
            return any(
                self._taken.get(w, 0) < most and w not in self._idle for w, most in limit.items() if w != worker_id
            )

    def _turn(self, worker: SimWorker) -> str:
        """Take one HIT if there is one for this worker; say whether to come back or retire."""
        # What the marketplace shows this worker, asked over HTTP as a person's browser would.
        market = self._market(worker)
        held = market["held"]
        if market["taken"] is not None:
            if held is None and market["taken"] >= self.ctx.config.schedule.per_worker_cap:
                return "retire"
            with self._lock:
                self._taken[worker.worker_id] = market["taken"]
        if market["status"] == "completed":
            return "retire"
        if held is None and self._quota_reached(worker.worker_id):
            return "wait"
        if held:  # a worker who was mid-HIT (say, the process died) goes back to it first
            hit = held
        else:
            # Each worker starts from its own place in the list, so who takes which HIT does not
            # depend on thread timing and a seeded dry run gives the same numbers every time.
            hits = market["hits"]
            if not hits:
                return "wait"
            if hits[-1]["index"] >= self._hit_count:  # work added mid-run (a judged study's second wave)
                with self._lock, session_scope(self.database_url) as session:
                    self._learn_work(session)
            start = self._ordinal[worker.worker_id] % max(1, self._hit_count)
            hit = next((h for h in hits if h["index"] >= start), hits[0])
        if hit["provider_hit_id"] is None:
            raise HitkitError(f"HIT {hit['id']} of study '{self.ctx.name}' is posted but has no provider HIT id")
        return self._do_hit(worker, hit["id"], hit["provider_hit_id"])

    def _market(self, worker: SimWorker, attempts: int = 3) -> dict[str, Any]:
        """The marketplace's listing for ``worker``. A dropped connection is asked again, as a person
        reloads a listing (a GET changes nothing): behind nginx and gunicorn a kept-alive connection the
        server had closed ended a simulated study's worker with RemoteDisconnected."""
        url = f"{self.base_url}/s/{self.ctx.name}/market"
        for attempt in range(attempts):
            try:
                reply = requests.get(url, params={"workerId": worker.worker_id}, timeout=self.timeout_s)
                reply.raise_for_status()
                return reply.json()
            except requests.ConnectionError:
                if attempt == attempts - 1 or self._stop.is_set():
                    raise
                time.sleep(0.5 * (attempt + 1))
        raise AssertionError("unreachable")

    def _do_hit(self, worker: SimWorker, hit_id: int, provider_hit_id: str) -> str:
        http = requests.Session()
        rng = random.Random(f"{self.ctx.config.seed}:{worker.worker_id}:{hit_id}")
        pace_rng = random.Random(f"pace:{self.ctx.config.seed}:{worker.worker_id}:{hit_id}")
        # Typing has its own stream, so the answers of a seeded run do not depend on it.
        typing_rng = random.Random(f"typing:{self.ctx.config.seed}:{worker.worker_id}:{hit_id}")
        typist = worker.typist
        entry = f"{self.base_url}/s/{self.ctx.name}/hit/{hit_id}"
        # Preview first, as a person browsing the marketplace does.
        http.get(
            f"{entry}?{urlencode({'hitId': provider_hit_id, 'assignmentId': PREVIEW_ASSIGNMENT})}",
            timeout=self.timeout_s,
        ).raise_for_status()
        params = {
            "hitId": provider_hit_id,
            "workerId": worker.worker_id,
            "assignmentId": f"{worker.worker_id}-{provider_hit_id}",
        }
        page = http.get(f"{entry}?{urlencode(params)}", timeout=self.timeout_s)
        if page.status_code in (403, 409, 410):
            with self._lock:
                self.stats.refused += 1
            return "retire" if page.status_code == 403 else "wait"
        page.raise_for_status()
        base = page.url.split("?")[0].rstrip("/")
        if self.ctx.config.screener is not None and not self._screened_in(http, base, worker):
            return "retire"
        http.post(f"{base}/consent", timeout=self.timeout_s).raise_for_status()
        state = http.get(f"{base}/state", timeout=self.timeout_s).json()
        answered = state["answers"]
        pace = self.ctx.config.simulated.seconds_per_answer
        task = self.ctx.task

        def give(view: dict, question: str, value: str, shown_at: float) -> None:
            if question in answered.get(str(view["unit_id"]), {}):
                return  # back after a reload: the saved answer stands
            if pace:
                time.sleep(pace * pace_rng.uniform(0.5, 1.5))
            # elapsed_s: seconds since the unit was shown, as the pages send it.
            body = {
                "unit_id": view["unit_id"],
                "question": question,
                "value": value,
                "elapsed_s": time.monotonic() - shown_at,
            }
            if question in task.free_text:
                body["signals"] = crowd_typing.typed_signals(typist, value, typing_rng)
            reply = http.post(f"{base}/answer", json=body, timeout=self.timeout_s)
            reply.raise_for_status()
            self._acknowledge(worker, state["assignment"], view["unit_id"], question, value)

        for view in sorted(state["units"], key=lambda v: v.get("position") or 0):
            shown_at = time.monotonic()
            if task.has_chat and len(task.chat_sides) > 1:
                # Several systems answer side by side (the arena): the vote comes after reading their replies.
                replies = chat_sides(
                    http, base, worker, view, rng, typing_rng, task=task, stop=self._stop, timeout_s=self.timeout_s
                )
                if self._stop.is_set():
                    return "wait"
                answers = task.simulate(
                    worker.profile, {**view, "replies": replies}, rng, self._context, worker.worker_id
                )
                for question, value in answers.items():
                    give(view, question, value, shown_at)
                continue
            answers = task.simulate(worker.profile, view, rng, self._context, worker.worker_id)
            if task.has_chat:
                for question in task.chat_opening:
                    if question in answers:
                        give(view, question, answers.pop(question), shown_at)
                chat(http, base, worker, view, rng, typing_rng, task=task, stop=self._stop, timeout_s=self.timeout_s)
            for question, value in answers.items():
                give(view, question, value, shown_at)
            if self._stop.is_set():
                return "wait"
        # The comment on the whole HIT has its own stream, so leaving one changes no answer of a seeded run.
        comment = crowd_typing.hit_comment(
            typist, random.Random(f"comment:{self.ctx.config.seed}:{worker.worker_id}:{hit_id}")
        )
        body: dict[str, Any] | None = {"feedback": comment[0], "feedback_signals": comment[1]} if comment else None
        done = http.post(f"{base}/submit", headers={"Accept": "application/json"}, json=body, timeout=self.timeout_s)
        done.raise_for_status()
        with self._lock:
            self.stats.hits_done += 1
        return "again"

    def _screened_in(self, http: requests.Session, base: str, worker: SimWorker) -> bool:
        """Answer the screener (accepted answers, or the first refused one for a worker who fails it)."""
        screener = self.ctx.config.screener
        if screener is None:
            raise HitkitError(f"study '{self.ctx.name}' has no 'screener:' section to answer")
        answers = {}
        for q in screener.questions:
            refused = [o for o in q.options if o not in q.accept]
            answers[q.name] = refused[0] if worker.fails_screener and refused else q.accept[0]
        reply = http.post(f"{base}/screener", json={"answers": answers}, timeout=self.timeout_s)
        if reply.status_code == 410:  # screened out before, on an earlier visit
            return False
        reply.raise_for_status()
        if not reply.json().get("passed"):
            with self._lock:
                self.stats.refused += 1
            return False
        return True

    def _acknowledge(self, worker: SimWorker, assignment: str, unit_id: int, question: str, value: str) -> None:
        with self._lock:
            self.stats.answers += 1
            if self.ack_log is None:
                return
            # fsync: the log is the crash test's record of what the server acknowledged.
            with self.ack_log.open("a", encoding="utf-8") as fh:
                fh.write(
                    json.dumps(
                        {
                            "worker": worker.worker_id,
                            "assignment": assignment,
                            "unit_id": unit_id,
                            "question": question,
                            "value": value,
                        }
                    )
                    + "\n"
                )
                fh.flush()
                os.fsync(fh.fileno())
