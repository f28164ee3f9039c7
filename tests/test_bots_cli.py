"""``hitkit bots serve``: argument syntax, a real process stopped by SIGTERM, and light imports."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
from click.testing import CliRunner

from hitkit.bots.cli import bots
from hitkit.bots.server import DegradedSpec, ModelSpec, parse_degraded_spec, parse_model_spec

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(
    "text, spec",
    [
        ("smol=/models/smol", ModelSpec("smol", Path("/models/smol"))),
        ("smol=/models:SmolLM2.Q4_1.gguf", ModelSpec("smol", Path("/models"), "SmolLM2.Q4_1.gguf")),
        ("smol=/models/SmolLM2.Q4_1.gguf", ModelSpec("smol", Path("/models"), "SmolLM2.Q4_1.gguf")),
        ("a.b-c_1=rel/dir", ModelSpec("a.b-c_1", Path("rel/dir"))),
    ],
)
def test_model_spec_syntax(text, spec):
    assert parse_model_spec(text) == spec


@pytest.mark.parametrize(
    "text, message",
    [
        ("/models/smol", "model name '/models/smol'"),
        ("smol=", "expected NAME=PATH"),
        ("bad name=/x", "model name 'bad name'"),
    ],
)
def test_bad_model_specs_explain_the_syntax(text, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        parse_model_spec(text)


def test_degraded_spec_syntax():
    assert parse_degraded_spec("qc") == DegradedSpec("qc", None)
    assert parse_degraded_spec("qc=data/c.jsonl") == DegradedSpec("qc", Path("data/c.jsonl"))


def test_serve_refuses_nothing_to_serve_and_duplicate_names(tmp_path):
    runner = CliRunner()
    result = runner.invoke(bots, ["serve"])
    assert result.exit_code != 0 and "nothing to serve" in result.output
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"id": "a", "turns": ["hi", "hello you"]}\n{"id": "b", "turns": ["yo", "hey there friend"]}\n')
    result = runner.invoke(bots, ["serve", "--degraded", f"qc={corpus}", "--degraded", "qc"])
    assert result.exit_code != 0 and "repeated: qc" in result.output
    result = runner.invoke(bots, ["serve", "--model", "m=/no/such/dir"])
    assert result.exit_code != 0 and "/no/such/dir does not exist" in result.output


def test_web_tier_imports_stay_light():
    # The web tier imports the client and the QC bot; torch, transformers and Flask must not follow.
    code = (
        "import sys, hitkit.bots, hitkit.bots.client, hitkit.bots.degraded, hitkit.bots.server, "
        "hitkit.bots.cli, hitkit.bots.batching, hitkit.bots.protocol; "
        "print(sorted(m for m in ('torch', 'transformers', 'flask') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"
    for module in (REPO / "hitkit" / "bots").glob("*.py"):
        assert not re.search(r"^\s*(from|import)\s+flask", module.read_text(), re.M), module


def test_serve_process_answers_and_stops_cleanly_on_sigterm(tmp_path):
    corpus = tmp_path / "c.jsonl"
    corpus.write_text(
        '{"id": "a", "turns": ["hi", "I like long walks in the rain"]}\n'
        '{"id": "b", "turns": ["yo", "my sister plays the violin very well"]}\n'
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "hitkit.bots", "serve", "--degraded", f"qc={corpus}", "--port", "0"],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        match = re.search(r"at (http://[\d.]+:\d+)/v1/chat/completions", line)
        assert match, line
        url = match.group(1)
        assert requests.get(f"{url}/health", timeout=5).json()["models"] == ["qc"]
        reply = requests.post(
            f"{url}/v1/chat/completions",
            timeout=5,
            data=json.dumps({"model": "qc", "messages": [{"role": "user", "content": "hello"}]}),
        ).json()
        assert len(reply["choices"][0]["message"]["content"].split()) == 7
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0
    assert "bot server stopped" in out
