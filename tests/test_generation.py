"""Bot–bot generation: every pair (and self-chat) gets its conversations, seeded, and an interrupted
generation resumes without duplicating a conversation."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest
import yaml

from hitkit.bots.corpus import Dialogue
from hitkit.bots.server import BotServer, DegradedSpec, build_backends
from hitkit.errors import HitkitError
from hitkit.material.generation import generate, plan
from hitkit.study.loading import load_study
from tests.studies import REPO

SYSTEMS = ["ava", "ben", "cai"]


@pytest.fixture(scope="module")
def degraded_server():
    server = BotServer(build_backends(degraded=[DegradedSpec(n) for n in SYSTEMS], seed=2), port=0).start()
    yield server.url
    server.shutdown()


def study(tmp_path, url, **generation) -> "object":
    data = {
        "study": "gen",
        "task": "pairwise",
        "budget": "1",
        "seed": 4,
        "out": str(tmp_path / "runs"),
        "systems": [{"name": n, "url": url, "model": n} for n in SYSTEMS],
        "pairwise": {"responses": "unused.jsonl"},
        "generation": {"conversations_per_pair": 4, "exchanges": 4, "parallel": 3, **generation},
    }
    path = tmp_path / "study.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def read(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_the_plan_covers_every_pair_and_self_chat_and_is_seeded():
    import random

    dialogues = [Dialogue(f"d{i}", (f"hello {i}", f"hi {i}", "bye")) for i in range(20)]
    jobs = plan(SYSTEMS, 5, True, dialogues, random.Random(1))
    pairs = Counter(j.systems for j in jobs)
    assert pairs == {
        ("ava", "ben"): 5,
        ("ava", "cai"): 5,
        ("ben", "cai"): 5,
        ("ava", "ava"): 5,
        ("ben", "ben"): 5,
        ("cai", "cai"): 5,
    }
    assert len({j.id for j in jobs}) == 30
    assert jobs == plan(SYSTEMS, 5, True, dialogues, random.Random(1))
    assert all(j.seed == (f"hello {j.seed_dialogue[1:]}", f"hi {j.seed_dialogue[1:]}") for j in jobs)
    assert len(plan(SYSTEMS, 5, False, dialogues, random.Random(1))) == 15


def test_conversations_alternate_between_the_two_bots_to_n_exchanges(tmp_path, degraded_server):
    config = load_study(study(tmp_path, degraded_server))
    report = generate(config, show_progress=False)
    assert (report.planned, report.generated) == (24, 24)
    for conv in read(config.bot_bot_path):
        assert len(conv["turns"]) == 8
        assert [t["speaker"] for t in conv["turns"]] == [0, 1] * 4
        assert [t["system"] for t in conv["turns"]] == conv["systems"] * 4
        assert all(t["text"] for t in conv["turns"])


def test_an_interrupted_generation_resumes_without_duplicates(tmp_path, degraded_server):
    config = load_study(study(tmp_path, degraded_server))
    calls, lock = Counter(), threading.Lock()

    def flaky(name):
        from hitkit.bots.client import BotClient

        client = BotClient(next(s for s in config.systems if s.name == name).bot_config())

        def reply(history):
            with lock:
                calls[name] += 1
                if name == "cai" and calls[name] > 5:
                    raise ConnectionError("bot went away")
            return client.reply(history)

        return reply

    with pytest.raises(HitkitError, match="failed .* run again to resume"):
        generate(config, {n: flaky(n) for n in SYSTEMS}, show_progress=False)
    first = read(config.bot_bot_path)
    assert 0 < len(first) < 24
    # A crash in the middle of writing leaves a torn line; it is cut off and generated again.
    with config.bot_bot_path.open("a") as fh:
        fh.write('{"id": "ava~ben#003", "systems": ["ava", "be')
    report = generate(config, show_progress=False)
    final = read(config.bot_bot_path)
    assert report.already_done == len(first) and report.generated == 24 - len(first)
    assert sorted(c["id"] for c in final) == sorted({c["id"] for c in final}) and len(final) == 24
    assert final[: len(first)] == first


def test_kill_minus_nine_mid_generation_then_resume(tmp_path, degraded_server):
    path = study(tmp_path, degraded_server, conversations_per_pair=30, exchanges=5, parallel=2)
    config = load_study(path)
    cmd = [sys.executable, "-m", "hitkit.cli", "generate", str(path), "--no-progress"]
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        if config.bot_bot_path.exists() and len(config.bot_bot_path.read_text().splitlines()) >= 15:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "generation finished before it could be interrupted"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    ids = [c["id"] for c in read(config.bot_bot_path)]
    assert len(ids) == 180 and len(set(ids)) == 180


def test_generate_with_nothing_left_to_do_starts_no_bot_server(tmp_path, degraded_server):
    path = study(tmp_path, degraded_server, conversations_per_pair=1, exchanges=2)
    generate(load_study(path), show_progress=False)
    written = load_study(path).bot_bot_path.read_text()
    # Now ask for a bot server that could never start: a model folder that does not exist.
    data = yaml.safe_load(path.read_text())
    data["bots"] = {"serve": {"models": {"ava": str(tmp_path / "no-such-model")}, "port": 1}}
    path.write_text(yaml.safe_dump(data))
    done = subprocess.run(
        [sys.executable, "-m", "hitkit.cli", "generate", str(path), "--no-progress"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert load_study(path).bot_bot_path.read_text() == written


def test_a_launch_needs_the_bot_server_only_to_chat_or_to_generate(tmp_path, degraded_server):
    from hitkit.running.bots import needs_bot_server

    assert needs_bot_server(load_study(REPO / "examples" / "live_chat.yaml"))
    path = study(tmp_path, degraded_server, conversations_per_pair=1, exchanges=2)
    assert needs_bot_server(load_study(path))  # conversations still to generate
    generate(load_study(path), show_progress=False)
    assert not needs_bot_server(load_study(path))  # all written: a resumed launch loads no model
    data = yaml.safe_load(path.read_text())
    del data["generation"]
    path.write_text(yaml.safe_dump(data))
    assert not needs_bot_server(load_study(path))


@pytest.mark.model
def test_smollm2_systems_generate_bot_bot_conversations_and_resume(tmp_path):
    pytest.importorskip("transformers")
    from hitkit.bots.process import packaged_smollm2
    from hitkit.bots.server import ModelSpec

    gguf = packaged_smollm2()
    server = BotServer(build_backends([ModelSpec("smol", gguf.parent, gguf.name)], seed=0), port=0).start()
    try:
        data = {
            "study": "gen-smol",
            "task": "pairwise",
            "budget": "1",
            "seed": 1,
            "out": str(tmp_path / "runs"),
            "systems": [
                {
                    "name": "warm",
                    "url": server.url,
                    "model": "smol",
                    "options": {"max_tokens": 8},
                    "system_prompt": "You are a friendly person. Reply in one short sentence.",
                },
                {"name": "plain", "url": server.url, "model": "smol", "options": {"max_tokens": 8}},
                {"name": "hot", "url": server.url, "model": "smol", "options": {"max_tokens": 8, "temperature": 1.5}},
            ],
            "pairwise": {"responses": "unused.jsonl"},
            "generation": {"conversations_per_pair": 1, "exchanges": 2, "parallel": 6},
        }
        path = tmp_path / "study.yaml"
        path.write_text(yaml.safe_dump(data))
        config = load_study(path)
        stop = threading.Event()
        from hitkit.material.generation import bots_for

        real = bots_for(config, ["warm", "plain", "hot"])
        count = Counter()

        def stopping(name):
            def reply(history):
                count["calls"] += 1
                if count["calls"] == 4:
                    stop.set()  # as Ctrl-C does: conversations in flight finish, no new ones start
                return real[name](history)

            return reply

        with pytest.raises(HitkitError):
            generate(config, {n: stopping(n) for n in real}, show_progress=False, stop=stop)
        partial = len(read(config.bot_bot_path))
        assert 0 < partial < 6
        report = generate(config, show_progress=False)
        convs = read(config.bot_bot_path)
        assert report.generated == 6 - partial and len({c["id"] for c in convs}) == len(convs) == 6
        assert all(len(c["turns"]) == 4 and all(t["text"] for t in c["turns"]) for c in convs)
    finally:
        server.shutdown()
