"""One signing secret per deployment (docs/THREAT_MODEL.md): every process and every host reads the
same one, created once in the database when HITKIT_SECRET is unset; weak values stop the start."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from hitkit.errors import ConfigError
from hitkit.secret import resolve_secret, secret_problem
from hitkit.worker import tokens
from tests.studies import REPO

WEAK = [
    "",
    "   ",
    "short-secret",
    "changeme",
    "change-me-to-a-long-random-string",
    "a" * 64,
    "CHANGEME-please-to-something-long-and-random-0123456789",
]

CHILD = textwrap.dedent("""
    import sys
    from hitkit.worker import tokens
    from hitkit.secret import resolve_secret
    print("ready", flush=True)
    sys.stdin.readline()  # blocks until the test says go (no polling that would slow the others' start)
    secret = resolve_secret(sys.argv[1])
    print(secret, tokens.assignment_token(secret, int(sys.argv[2]), "nonce"), flush=True)
""")


def _env_without_secret(home) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HITKIT_SECRET"}
    return {**env, "HOME": str(home), "PYTHONPATH": str(REPO)}


@pytest.mark.parametrize("value", WEAK)
def test_an_empty_short_or_placeholder_secret_is_refused_with_the_fix(value):
    with pytest.raises(ConfigError, match=r"HITKIT_SECRET cannot sign tokens: .*secrets.token_urlsafe"):
        resolve_secret("sqlite:///unused.db", {"HITKIT_SECRET": value})


def test_the_shipped_env_example_cannot_start_a_server_as_it_is():
    values = dict(
        line.split("=", 1)
        for line in (REPO / "ops/systemd/env.example").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    assert secret_problem(values["HITKIT_SECRET"]) is not None


def test_hitkit_serve_refuses_a_weak_secret_and_says_what_to_set(tmp_path):
    env = {**_env_without_secret(tmp_path), "HITKIT_SECRET": "changeme"}
    result = subprocess.run(
        [sys.executable, "-m", "hitkit.cli", "serve", "--db", f"sqlite:///{tmp_path}/h.db", "--port", "0"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "HITKIT_SECRET cannot sign tokens: it is a placeholder" in result.stderr + result.stdout
    assert "Traceback" not in result.stderr


def test_an_unmigrated_database_without_a_secret_says_how_to_fix_it(tmp_path):
    with pytest.raises(ConfigError, match="hitkit db upgrade"):
        resolve_secret(f"sqlite:///{tmp_path / 'empty.db'}", {})


def test_processes_starting_together_on_different_hosts_share_one_secret(tmp_path, database_url):
    """8 processes, each with its own HOME (another "host"), start at the same instant against a
    database that holds no secret yet: all read one strong secret, and each one's tokens verify
    in a process started later on yet another host."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, database_url, str(i)],
            env=_env_without_secret(tmp_path / f"home{i}"),
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    try:
        for proc in procs:
            assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        for proc in procs:  # every process is imported and waiting: they all hit the empty table together
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = [proc.communicate(timeout=120) for proc in procs]
    finally:
        for proc in procs:
            proc.kill()
    assert [p.returncode for p in procs] == [0] * 8, [err for _, err in outputs if err][:1]
    lines = [out.split() for out, _ in outputs]
    secrets_read = {line[0] for line in lines}
    assert len(secrets_read) == 1
    secret = secrets_read.pop()
    assert secret_problem(secret) is None
    later = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from hitkit.secret import resolve_secret; print(resolve_secret(sys.argv[1]))",
            database_url,
        ],
        env=_env_without_secret(tmp_path / "another-host"),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert later.stdout.strip() == secret, later.stderr
    for i, (_, token) in enumerate(lines):
        assert tokens.read_assignment_token(later.stdout.strip(), token) == (i, "nonce")


def test_a_secret_file_from_an_earlier_release_is_adopted_once(tmp_path, sqlite_template):
    # SQLite only: earlier releases kept the file beside a SQLite database and nowhere else.
    db_path = str(tmp_path / "hitkit.db")
    shutil.copy(sqlite_template, db_path)
    database_url = f"sqlite:///{db_path}"
    old = "f" + "0123456789abcdef" * 4
    (tmp_path / "hitkit.secret").write_text(old + "\n")
    assert os.path.dirname(db_path) == str(tmp_path)
    assert resolve_secret(database_url, {}) == old
    (tmp_path / "hitkit.secret").write_text("something-else-entirely-0123456789abcdef\n")
    assert resolve_secret(database_url, {}) == old  # the database row, not the file, is the truth now


def test_a_strong_environment_secret_wins_over_the_database(database_url):
    strong = "Qk3J9x-pW7mZ2vB8nL4cT6yH1rD5sF0gA"
    stored = resolve_secret(database_url, {})
    assert resolve_secret(database_url, {"HITKIT_SECRET": strong}) == strong != stored
    start = time.monotonic()
    assert resolve_secret(database_url, {}) == stored
    assert time.monotonic() - start < 5
