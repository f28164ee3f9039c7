"""Regenerate the golden outputs that tests/test_golden_outputs.py compares against.

Each protocol's folder, ``tests/data/golden/<protocol>/`` (pairwise, live_chat, spot_the_bot), holds:

- ``study.yaml`` and its material (responses, conversations): the study that was launched;
- ``hitkit.db``: the FROZEN database of one real simulated run of that study (the simulated crowd
  driving the real server over HTTP; the live-chat bots are degraded bots, no model is loaded);
- ``export/``: what ``hitkit export study.yaml --out export`` writes from that database (CSV,
  Parquet, conversations.jsonl, study.json);
- ``analysis/``: what ``hitkit analyze <protocol> export --out analysis --study study.yaml`` writes
  (CSV tables and summary.json; the PNG figures are not kept).

The outputs are made through the command line only (``hitkit db upgrade``, ``hitkit export``,
``hitkit analyze``): the command names and options are the stable interface, while the modules
behind them may move. The test makes them the same way from a copy of the database and compares
every file byte for byte, except the few fields normalised by :func:`comparable`.

Usage (from the repository root, with this checkout's hitkit importable)::

    python tests/data/golden/make_golden.py                  # all three protocols
    python tests/data/golden/make_golden.py pairwise         # one or more protocols

Run it only after a deliberate change of the outputs, and review the diff of export/ and analysis/
before committing it. The databases stay as they are: a new simulated run differs in every time and
in who answered what. ``--relaunch`` replaces a protocol's hitkit.db by a new run (``hitkit launch
study.yaml --yes`` in a temporary folder, a few minutes), only for when the old database can no
longer be read or the study itself must change; the goldens are then rewritten from the new one.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
PROTOCOLS = ("pairwise", "live_chat", "spot_the_bot")
DATABASE = "hitkit.db"
STUDY_FILE = "study.yaml"
OUTPUTS = ("export", "analysis", "analysis_default")
"""The output folders, as named in the protocol's golden folder and in a fresh run."""
NOT_KEPT = (".png",)
"""Figures are drawn by matplotlib, whose bytes change with its version and fonts: not compared."""

_SOFTWARE = re.compile(r'("software": \{)(.*?)(\})', re.DOTALL)
_VERSION = re.compile(r'("[^"]+": )"[^"]*"')


def _cli(*args, env: dict | None = None) -> str:
    """Run ``hitkit ARGS`` in this process (click's CliRunner); RuntimeError with its output on failure."""
    from click.testing import CliRunner

    from hitkit.cli import main

    result = CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)
    if result.exit_code != 0:
        raise RuntimeError(f"`hitkit {' '.join(map(str, args))}` exited {result.exit_code}:\n{result.output}")
    return result.output


PAPER_OPTIONS = {"live_chat": ("--unit", "rating"), "pairwise": ("--unit", "vote")}
"""The options that ask a protocol's analysis for the published paper's test where the default differs."""


def write_outputs(protocol: str, database: Path, out: Path) -> None:
    """Export and analyse the study in ``database`` (a copy: it may be upgraded) into ``out/export``
    and ``out/analysis`` through the CLI, as a coordinator would; PNG figures are removed."""
    url = f"sqlite:///{database}"
    study = HERE / protocol / STUDY_FILE
    # The study file names no database: HITKIT_DATABASE_URL points the CLI at the copy. A secret is
    # needed to open the study; the export does not depend on it.
    env = {"HITKIT_DATABASE_URL": url, "HITKIT_SECRET": os.environ.get("HITKIT_SECRET") or secrets.token_urlsafe(48)}
    _cli("db", "upgrade", "--db", url)  # a database frozen at an older migration head is brought up to date
    _cli("export", study, "--out", out / "export", "--no-progress", env=env)
    # The Ji et al. reproduction's test (per-rating Mann-Whitney) is asked for by name, so these goldens stay the
    # paper's; the default (worker-clustered) matrix has its own goldens in analysis_default/.
    paper = PAPER_OPTIONS.get(protocol, ())
    _cli("analyze", protocol, out / "export", "--out", out / "analysis", "--study", study, "--no-progress", *paper)
    folders = [out / "analysis"]
    if paper:
        _cli("analyze", protocol, out / "export", "--out", out / "analysis_default", "--study", study, "--no-progress")
        folders.append(out / "analysis_default")
    for folder in folders:
        for path in folder.iterdir():
            if path.suffix in NOT_KEPT:
                path.unlink()


def output_files(out: Path) -> dict[str, Path]:
    """The compared files under ``out``'s output folders, by path relative to ``out``."""
    files = {}
    for folder in OUTPUTS:
        for path in sorted((out / folder).rglob("*")):
            if path.is_file() and path.suffix not in NOT_KEPT:
                files[path.relative_to(out).as_posix()] = path
    return files


def comparable(path: Path) -> bytes:
    """The bytes of an output file as compared, with only what legitimately differs between machines
    normalised:

    - ``summary.json`` and ``study.json`` record the versions of hitkit, numpy, pandas ... under
      ``"software"``: each version string becomes ``"*"`` (the list of names is still compared).
    - A Parquet file embeds the versions of pyarrow (``created_by``) and pandas (its ``pandas``
      metadata), and another pyarrow may encode the same table in other bytes; it is compared as
      text: every column's name and Arrow type, the pandas metadata without its versions, and
      every row.

    Everything else (CSV, JSONL) is compared exactly as written.
    """
    if path.suffix == ".parquet":
        return _parquet_text(path)
    data = path.read_bytes()
    if path.name in ("summary.json", "study.json"):
        text = _SOFTWARE.sub(lambda m: m[1] + _VERSION.sub(r'\1"*"', m[2]) + m[3], data.decode("utf-8"))
        data = text.encode("utf-8")
    return data


def _parquet_text(path: Path) -> bytes:
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    lines = [f"column {field.name}: {field.type}{'' if field.nullable else ' not null'}" for field in table.schema]
    for key, value in sorted((table.schema.metadata or {}).items()):
        if key == b"pandas":
            meta = json.loads(value)
            meta.pop("creator", None)  # {"library": "pyarrow", "version": ...}
            meta.pop("pandas_version", None)
            value = json.dumps(meta, sort_keys=True).encode()
        lines.append(f"metadata {key.decode()}: {value.decode()}")
    lines += [json.dumps(row, default=str) for row in table.to_pylist()]
    return ("\n".join(lines) + "\n").encode("utf-8")


def regenerate(protocol: str) -> None:
    """Rewrite ``<protocol>/export`` and ``<protocol>/analysis`` from the frozen ``<protocol>/hitkit.db``."""
    golden = HERE / protocol
    with tempfile.TemporaryDirectory() as tmp:
        database = Path(tmp) / DATABASE
        shutil.copyfile(golden / DATABASE, database)
        write_outputs(protocol, database, Path(tmp))
        for folder in OUTPUTS:
            shutil.rmtree(golden / folder, ignore_errors=True)
            shutil.copytree(Path(tmp) / folder, golden / folder)
    print(f"{protocol}: wrote {len(output_files(golden))} golden files in {golden}")


def relaunch(protocol: str) -> None:
    """Replace ``<protocol>/hitkit.db`` by a new simulated run of its study (``hitkit launch --yes``)."""
    golden = HERE / protocol
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / protocol
        shutil.copytree(golden, work, ignore=shutil.ignore_patterns(DATABASE, *OUTPUTS, "runs"))
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
            # Kept out of the database: with HITKIT_SECRET set, no secret is stored in it.
            "HITKIT_SECRET": secrets.token_urlsafe(48),
        }
        env.pop("HITKIT_DATABASE_URL", None)
        hitkit = [sys.executable, "-m", "hitkit.cli"]
        subprocess.run(
            [*hitkit, "launch", STUDY_FILE, "--yes", "--no-progress", "--timeout", "900"], cwd=work, env=env, check=True
        )
        status = json.loads(
            subprocess.run(
                [*hitkit, "status", STUDY_FILE, "--json"], cwd=work, env=env, check=True, capture_output=True, text=True
            ).stdout
        )
        if status["status"] != "completed":
            raise SystemExit(f"{protocol}: the simulated run ended '{status['status']}', not completed")
        (database,) = (work / "runs").glob(f"*/{DATABASE}")
        target = golden / DATABASE
        target.unlink(missing_ok=True)
        with sqlite3.connect(database) as conn:  # one compact file, the write-ahead log folded in
            conn.execute("VACUUM INTO ?", (str(target),))
        with sqlite3.connect(target) as conn:  # opening it for a look leaves no -wal/-shm files behind
            conn.execute("PRAGMA journal_mode=DELETE")
    print(f"{protocol}: new {target} ({target.stat().st_size} bytes)")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "protocols", nargs="*", metavar="PROTOCOL", help=f"one or more of {', '.join(PROTOCOLS)} (default: all)"
    )
    parser.add_argument(
        "--relaunch", action="store_true", help="first replace the frozen database by a new simulated run (minutes)"
    )
    args = parser.parse_args(argv)
    unknown = sorted(set(args.protocols) - set(PROTOCOLS))
    if unknown:
        parser.error(f"unknown protocol {', '.join(unknown)}; use {', '.join(PROTOCOLS)}")
    for protocol in args.protocols or PROTOCOLS:
        if args.relaunch:
            relaunch(protocol)
        regenerate(protocol)


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))  # this checkout's hitkit, whatever is installed
    main()
