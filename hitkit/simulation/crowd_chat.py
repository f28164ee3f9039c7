"""A simulated worker chatting through the real chat pages over HTTP, as a patient person would: one
conversation until the protocol's minimum of messages, or several side by side (the arena), each
message sent to every side at once. Messages go to the pages' streaming endpoint (``/stream``), as a
browser sends them, so the bots stream and each reply's time to first text is measured as a person's would be. Each message carries the typing signals of the worker's typist
(:mod:`hitkit.simulation.crowd_typing`); a bot that is slow or down is waited for and asked again.

:class:`hitkit.simulation.crowd.SimulatedCrowd` calls these for a unit with a chat; ``task`` is the
study's task type (its ``simulate_message`` and ``chat_sides``), ``stop`` the crowd's stop signal.
"""

from __future__ import annotations

import json
import random
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

import requests

from hitkit.simulation import crowd_typing

if TYPE_CHECKING:
    from hitkit.protocols.base import TaskType
    from hitkit.simulation.crowd import SimWorker


class Reply:
    """What one streamed exchange came to, as the rest of the crowd reads a response: the slot's state
    (status 200), a reply still owed (502: the bot is slow or down; 429: too many replies at once), or an error."""

    def __init__(self, status_code: int, payload: dict):
        self.status_code, self.payload = status_code, payload

    def json(self) -> dict:
        return self.payload

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise requests.HTTPError(f"{self.status_code}: {self.payload.get('error', '')}")


def exchange(http: requests.Session, chat_url: str, body: dict, timeout_s: float) -> Reply:
    """Send ``body`` (a message, or ``{}`` for the owed reply) to ``chat_url/stream`` and read its server-sent
    events to the end: the final ``state`` or ``error`` (:mod:`hitkit.worker.chat_stream`)."""
    with http.post(f"{chat_url}/stream", json=body, timeout=timeout_s * 4, stream=True) as response:
        if response.status_code != 200 or not response.headers.get("content-type", "").startswith("text/event-stream"):
            try:
                payload = response.json()
            except ValueError:
                payload = {"error": response.text[:200]}
            return Reply(response.status_code, payload if isinstance(payload, dict) else {"error": str(payload)})
        kind = ""
        for raw in response.iter_lines():
            line = raw.decode("utf-8")
            if line.startswith("event: "):
                kind = line[len("event: ") :]
            elif line.startswith("data: ") and kind in ("state", "error"):
                data = json.loads(line[len("data: ") :])
                if kind == "state":
                    return Reply(200, data)
                return Reply(502 if data.get("waiting") else int(data.get("status", 400)), data)
    return Reply(502, {"error": "the stream ended without the reply", "waiting": True})


def chat(
    http: requests.Session,
    base: str,
    worker: SimWorker,
    view: dict,
    rng: random.Random,
    typing_rng: random.Random,
    *,
    task: TaskType,
    stop: threading.Event,
    timeout_s: float,
) -> None:
    """Chat in one unit until the protocol's minimum of messages, as a patient person would."""
    typist = worker.typist
    chat_url = f"{base}/chat/{view['unit_id']}"
    state = http.get(chat_url, timeout=timeout_s).json()
    waits = 0
    while state["inputs"] < state["min_inputs"] or state["bot_owes_reply"]:
        if stop.is_set():
            return
        if state["bot_owes_reply"]:
            reply = exchange(http, chat_url, {}, timeout_s)
        else:
            if typist.pastes(typing_rng):
                text = crowd_typing.bot_written_message(typing_rng)
                signals = crowd_typing.pasted_signals(typist, text, typing_rng)
            else:
                text = task.simulate_message(worker.profile, view, rng, state["inputs"])
                signals = crowd_typing.typed_signals(typist, text, typing_rng)
            reply = exchange(http, chat_url, {"text": text, "signals": signals}, timeout_s)
            if rng.random() < 0.05:  # now and then the conversation drifts to a new topic
                http.post(f"{chat_url}/topic", json={"by": rng.choice(("worker", "bot"))}, timeout=timeout_s)
        if reply.status_code in (429, 502):  # the bot is slow or down, or too busy: wait, as the page asks, then retry
            waits += 1
            if waits > 20:
                raise RuntimeError(f"the bot of unit {view['unit_id']} did not reply after {waits} tries")
            stop.wait(min(0.2 * waits, 2.0))
            state = http.get(chat_url, timeout=timeout_s).json()
            continue
        reply.raise_for_status()
        state = reply.json()


def chat_sides(
    http: requests.Session,
    base: str,
    worker: SimWorker,
    view: dict,
    rng: random.Random,
    typing_rng: random.Random,
    *,
    task: TaskType,
    stop: threading.Event,
    timeout_s: float,
) -> dict[str, list[str]]:
    """Chat in a unit with several conversations (the arena's sides): each message goes to every side,
    the sides' replies come at once; until the protocol's minimum. The bot replies, by side."""
    sides = task.chat_sides
    urls = {side: f"{base}/chat/{view['unit_id']}-{side}" for side in sides}
    states = {side: http.get(url, timeout=timeout_s).json() for side, url in urls.items()}
    waits = 0

    def post(side: str, body: dict) -> tuple[str, Reply]:
        return side, exchange(http, urls[side], body, timeout_s)

    while True:
        if stop.is_set():
            return {}
        inputs = {side: st["inputs"] for side, st in states.items()}
        owed = [side for side, st in states.items() if st["bot_owes_reply"]]
        turn = min(inputs.values())
        if not owed and turn >= states[sides[0]]["min_inputs"] and turn == max(inputs.values()):
            break
        calls: list[tuple[str, dict]]
        if owed:
            calls = [(side, {}) for side in owed]
        else:
            ahead = next((st for st in states.values() if st["inputs"] > turn), None)
            if ahead is not None:  # back after a reload: the side behind gets the message the other got
                text = [t["text"] for t in ahead["turns"] if t["speaker"] == "worker"][turn]
            else:
                text = task.simulate_message(worker.profile, view, rng, turn)
            signals = crowd_typing.typed_signals(worker.typist, text, typing_rng)
            calls = [(side, {"text": text, "signals": signals}) for side in sides if inputs[side] == turn]
        with ThreadPoolExecutor(len(calls)) as pool:
            replies = list(pool.map(lambda call: post(*call), calls))
        for side, reply in replies:
            if reply.status_code in (429, 502):  # this side's bot is slow or down, or too busy: wait, then retry
                waits += 1
                if waits > 20:
                    raise RuntimeError(f"the bot of unit {view['unit_id']}-{side} did not reply after {waits} tries")
                stop.wait(min(0.2 * waits, 2.0))
                states[side] = http.get(urls[side], timeout=timeout_s).json()
                continue
            reply.raise_for_status()
            states[side] = reply.json()
    return {side: [t["text"] for t in st["turns"] if t["speaker"] == "bot"] for side, st in states.items()}
