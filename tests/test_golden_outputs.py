"""Golden outputs: a frozen database of one real simulated run per protocol, exported and analysed
through the command line, gives exactly the files kept beside it (tests/data/golden/<protocol>/).

This guards refactors that move code without meaning to change results: every exported table and
every analysis number must come out the same: text byte for byte, and decimal fractions to nine
significant digits (an iterative fit such as the Cox model's moves in its last digits between builds
of numpy and BLAS; a refactor that changes a result moves far more). Only the software versions recorded in
summary.json / study.json and the library-written parts of Parquet files are normalised (see
``comparable`` in tests/data/golden/make_golden.py, which also regenerates the goldens after a
deliberate change). Only the CLI is used (``hitkit db upgrade``, ``export``, ``analyze``), never the
modules behind it, whose paths may change.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import pytest

from tests.data.golden.make_golden import DATABASE, HERE, PROTOCOLS, comparable, output_files, write_outputs

pytestmark = pytest.mark.slow


FRACTION = re.compile(rb"-?\d+\.\d+(?:[eE][-+]?\d+)?")


def same_line(a: bytes, b: bytes) -> bool:
    """Equal lines, or lines equal but for decimal fractions that agree to nine significant digits."""
    if a == b:
        return True
    if FRACTION.sub(b"#", a) != FRACTION.sub(b"#", b):
        return False
    return all(
        math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=1e-12)
        for x, y in zip(FRACTION.findall(a), FRACTION.findall(b))
    )


def first_difference(expected: bytes, actual: bytes, names: tuple[str, str] = ("golden", "now")) -> str | None:
    """Where ``actual`` first departs from ``expected``, line by line (:func:`same_line`); None when they agree."""
    if expected == actual:
        return None
    want, got = expected.splitlines(keepends=True), actual.splitlines(keepends=True)
    if len(want) == len(got) and all(map(same_line, want, got)):
        return None
    for number, (a, b) in enumerate(zip(want, got), start=1):
        if not same_line(a, b):
            width = max(map(len, names)) + 1
            return f"line {number}:\n  {names[0] + ':':{width}} {_text(a)}\n  {names[1] + ':':{width}} {_text(b)}"
    shorter = names[1] if len(got) < len(want) else names[0]
    line = min(len(want), len(got)) + 1
    extra = (want if len(got) < len(want) else got)[line - 1]
    return f"line {line}: the {shorter} file ends here; the other goes on with {_text(extra)}"


def _text(line: bytes) -> str:
    return repr(line.decode("utf-8", errors="backslashreplace"))


def outputs_now(protocol: str, tmp_path: Path) -> Path:
    """Export and analyse a copy of the protocol's frozen database into ``tmp_path/<protocol>``."""
    out = tmp_path / protocol
    out.mkdir(parents=True)
    database = out / DATABASE
    shutil.copyfile(HERE / protocol / DATABASE, database)
    write_outputs(protocol, database, out)
    return out


def assert_outputs_match_the_goldens(protocol: str, tmp_path: Path) -> None:
    golden, now = output_files(HERE / protocol), output_files(outputs_now(protocol, tmp_path))
    assert sorted(now) == sorted(golden), (
        f"{protocol}: the CLI wrote other files than the goldens; missing {sorted(set(golden) - set(now))}, "
        f"new {sorted(set(now) - set(golden))}"
    )
    for name, path in golden.items():
        where = first_difference(comparable(path), comparable(now[name]))
        assert where is None, (
            f"{protocol}/{name} differs from its golden at {where}\n(a deliberate change of the outputs? "
            f"regenerate with `python tests/data/golden/make_golden.py {protocol}` and review the diff)"
        )


def test_pairwise_exports_and_analysis_match_the_goldens(tmp_path):
    assert_outputs_match_the_goldens("pairwise", tmp_path)


def test_live_chat_exports_and_analysis_match_the_goldens(tmp_path):
    assert_outputs_match_the_goldens("live_chat", tmp_path)


def test_spot_the_bot_exports_and_analysis_match_the_goldens(tmp_path):
    assert_outputs_match_the_goldens("spot_the_bot", tmp_path)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_second_export_and_analysis_writes_the_same_bytes_as_the_first(protocol, tmp_path):
    # Raw bytes, nothing normalised: on one machine two runs agree exactly (the analysis is seeded).
    first, second = (output_files(outputs_now(protocol, tmp_path / run)) for run in ("first", "second"))
    assert sorted(first) == sorted(second)
    for name, path in first.items():
        same = path.read_bytes() == second[name].read_bytes()
        where = None if same else first_difference(path.read_bytes(), second[name].read_bytes(), ("first", "second"))
        assert same, f"{protocol}/{name}: a second run differs from the first at {where or 'digits past the ninth'}"


def test_the_frozen_databases_are_in_the_checkout_and_small():
    # The tests above work on copies, never on these files. Each stays well under 1 MB.
    for protocol in PROTOCOLS:
        database = HERE / protocol / DATABASE
        assert database.is_file(), f"{database} is missing (is *.db ignored by git? see .gitignore)"
        assert database.stat().st_size < 1_000_000
