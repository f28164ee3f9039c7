"""`ops/test.sh` says first, in one line, which tests this machine will skip and how to enable them
(ops/test_skips.sh): chromium, PostgreSQL and axe-core looked up as the tests look them up."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from tests.studies import REPO


def run_check(tmp_path, **env) -> str:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if not (bin_dir / "python3").exists():
        (bin_dir / "python3").symlink_to(sys.executable)  # a PATH with python3 and no chromium
    axe = tmp_path / "axe.min.js"  # present unless a test says otherwise: the npm-less machine is its own test
    axe.touch()
    # nginx present (any executable stands for it) unless a test says otherwise, as axe-core above.
    full = {"PATH": str(bin_dir), "HOME": str(tmp_path), "HITKIT_AXE_JS": str(axe), "HITKIT_NGINX": "/bin/bash", **env}
    out = subprocess.run(
        ["/bin/bash", str(REPO / "ops" / "test_skips.sh")],
        env=full,
        capture_output=True,
        text=True,
        timeout=30,
        cwd=REPO,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 1
    return lines[0]


def test_without_chromium_or_postgresql_it_names_both_skips_and_how_to_enable_them(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        free = s.getsockname()[1]  # closed again: nothing listens there
    line = run_check(tmp_path, HITKIT_TEST_PG=f"postgresql://postgres@127.0.0.1:{free}/test")
    assert line.startswith(
        "Will skip the browser tests (no chromium: apt-get install chromium) and the "
        f"PostgreSQL runs (none at postgresql://postgres@127.0.0.1:{free}/test: "
        "bash ops/postgres.sh ensure"
    )
    assert "CI=true bash ops/test.sh installs what they need" in line


def test_with_both_present_it_says_every_test_runs(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        line = run_check(
            tmp_path,
            HITKIT_TEST_PG=f"postgresql://postgres@127.0.0.1:{port}/test",
            HITKIT_CHROMIUM="/usr/bin/chromium",
        )
    assert line == "Running every test: chromium, nginx, PostgreSQL and axe-core are here."


def test_without_nginx_it_names_the_deployment_test_and_how_to_enable_it(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        line = run_check(
            tmp_path,
            HITKIT_TEST_PG=f"postgresql://postgres@127.0.0.1:{server.getsockname()[1]}/t",
            HITKIT_CHROMIUM="/usr/bin/chromium",
            HITKIT_NGINX=str(tmp_path / "no-nginx"),
        )
    assert line.startswith("Will skip the nginx deployment test (no nginx at HITKIT_NGINX=")
    assert "CI=true bash ops/test.sh installs what they need" in line


def test_only_the_missing_part_is_named(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        line = run_check(tmp_path, HITKIT_TEST_PG=f"postgresql://postgres@127.0.0.1:{server.getsockname()[1]}/t")
    assert line.startswith("Will skip the browser tests") and "PostgreSQL" not in line.split(";")[0]
    assert os.path.exists(REPO / "ops" / "test.sh") and "ops/test_skips.sh" in (REPO / "ops" / "test.sh").read_text()


def test_without_npm_or_axe_core_it_names_the_accessibility_audits(tmp_path):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        line = run_check(
            tmp_path,
            HITKIT_TEST_PG=f"postgresql://postgres@127.0.0.1:{server.getsockname()[1]}/t",
            HITKIT_AXE_JS=str(tmp_path / "absent.js"),
        )
    if (REPO / ".cache/npm/node_modules/axe-core/axe.min.js").is_file() or (REPO / "node_modules/axe-core").is_dir():
        assert "accessibility" not in line  # a checkout where ops/test.sh already installed it
    else:
        assert line.startswith(
            "Will skip the browser tests (no chromium: apt-get install chromium) and the "
            "accessibility audits (no npm to install axe-core: apt-get install npm);"
        )
