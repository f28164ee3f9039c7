"""The layer rules of ARCHITECTURE.md hold for the code as it is, and the checks catch a forbidden
import, a loop or a protocol's name written in shared code when one is added to a copy of the tree."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hitkit.protocols import PROTOCOLS
from tests.layers import (
    LOOPS_LEFT,
    UPWARD,
    _room_of_rule,
    import_loops,
    layer_violations,
    oversized_modules,
    protocol_names_outside,
    read_graph,
    reasoned_upward_arrows,
    room_arrows,
    room_loops,
    simulation_protocol_arrows,
    upward_arrows,
)

REPO = Path(__file__).resolve().parents[1]


def test_no_layer_is_crossed():
    assert layer_violations(read_graph(REPO)) == []


def test_rooms_import_downward_except_where_a_reason_is_given():
    assert upward_arrows(read_graph(REPO)) == []


def test_every_reason_for_an_upward_arrow_is_still_needed():
    used = {
        (_room_of_rule(a), _room_of_rule(b))
        for a, b in (arrow.split(" -> ") for arrow in reasoned_upward_arrows(read_graph(REPO)))
    }
    assert set(UPWARD) <= used, set(UPWARD) - used


def test_no_module_is_longer_than_a_sitting():
    assert oversized_modules(REPO) == []


def test_hitkit_keeps_at_most_six_modules_at_its_top():
    assert len(list((REPO / "hitkit").glob("*.py"))) <= 6


def test_no_module_imports_itself_back():
    assert import_loops(read_graph(REPO)) == []


def test_rooms_form_no_loop_but_through_the_arrows_left_with_a_reason():
    assert room_loops(read_graph(REPO)) == []


def test_every_arrow_left_in_a_loop_is_still_there_and_none_joins_study_simulation_and_protocols():
    graph = read_graph(REPO)
    assert set(LOOPS_LEFT) <= set(room_arrows(graph)), set(LOOPS_LEFT) - set(room_arrows(graph))
    named = {"hitkit.study", "hitkit.study.config", "hitkit.simulation", "hitkit.protocols"}
    assert not [arrow for arrow in LOOPS_LEFT if set(arrow) <= named]


def test_the_simulation_and_the_protocols_run_one_way():
    assert simulation_protocol_arrows(read_graph(REPO)) == []


def test_shared_code_never_names_a_protocol():
    assert protocol_names_outside(REPO, tuple(PROTOCOLS)) == []


def test_the_web_tier_loads_no_statistics():
    # A web worker imports every protocol's task type and dashboard views, but never scipy.
    modules = ["server", "server.dashboard", "server.worker", "server.chat", "hitkit.worker.chat", "hitkit.worker.flow"]
    modules += [f"{p.package}.{m}" for p in PROTOCOLS.values() for m in ("task", "views", "settings")]
    code = "import sys\n" + "".join(f"import {m}\n" for m in modules) + "print('scipy' in sys.modules)"
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False"


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of hitkit/, server/ and the templates to break on purpose."""
    for package in ("hitkit", "server", "hit_templates"):
        shutil.copytree(REPO / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def _append(path: Path, line: str) -> None:
    path.write_text(path.read_text(encoding="utf-8") + f"\n\ndef _added():\n    {line}\n", encoding="utf-8")


@pytest.mark.parametrize(
    "module, line, expected",
    [
        ("hitkit/tables/export.py", "import server.embedded", "hitkit.tables.export imports server.embedded"),
        ("hitkit/report/render.py", "from flask import escape", "hitkit.report.render imports flask"),
        (
            "hitkit/protocols/pairwise/task.py",
            "from hitkit.worker import flow",
            "hitkit.protocols.pairwise.task imports hitkit.worker.flow",
        ),
        (
            "hitkit/protocols/live_chat/analysis.py",
            "from hitkit.providers import make_provider",
            "hitkit.protocols.live_chat.analysis imports hitkit.providers",
        ),
        (
            "hitkit/analysis/ranking.py",
            "from hitkit.db.models import Study",
            "hitkit.analysis.ranking imports hitkit.db.models",
        ),
    ],
)
def test_a_forbidden_import_is_caught(tree, module, line, expected):
    _append(tree / module, line)
    assert any(v.startswith(expected) for v in layer_violations(read_graph(tree)))


@pytest.mark.parametrize(
    "module, line, expected",
    [
        (
            "hitkit/tables/loading.py",
            "from hitkit.simulation import crowd",
            "hitkit.tables.loading imports hitkit.simulation.crowd",
        ),
        (
            "hitkit/worker/flow.py",
            "from hitkit.running.scheduler import tick",
            "hitkit.worker.flow imports hitkit.running.scheduler",
        ),
        (
            "hitkit/study/stored.py",
            "from hitkit.simulation import crowd",
            "hitkit.study.stored imports hitkit.simulation.crowd",
        ),
    ],
)
def test_an_upward_import_without_a_reason_is_caught(tree, module, line, expected):
    _append(tree / module, line)
    assert any(v.startswith(expected) for v in upward_arrows(read_graph(tree)))


@pytest.mark.parametrize(
    "module, line, expected",
    [
        (
            "hitkit/tables/loading.py",
            "from hitkit.worker import flow",
            "hitkit.tables.loading imports hitkit.worker.flow",
        ),
        (
            "hitkit/analysis/ranking.py",
            "from hitkit.worker import flow",
            "hitkit.analysis.ranking imports hitkit.worker.flow",
        ),
        (
            "hitkit/simulation/crowd.py",
            "from hitkit.worker import chat",
            "hitkit.simulation.crowd imports hitkit.worker.chat",
        ),
        (
            "hitkit/simulation/crowd.py",
            "from hitkit.worker.admission import open_hits",
            "hitkit.simulation.crowd imports hitkit.worker.admission",
        ),
        (
            "hitkit/simulation/crowd_chat.py",
            "from hitkit.tables.schema import CAP_STATUSES",
            "hitkit.simulation.crowd_chat imports hitkit.tables.schema",
        ),
        (
            "hitkit/tables/authenticity.py",
            "from hitkit.worker.authenticity import clean_signals",
            "hitkit.tables.authenticity imports hitkit.worker.authenticity",
        ),
    ],
)
def test_tables_analysis_and_the_simulated_crowd_never_reach_into_the_server_side(tree, module, line, expected):
    _append(tree / module, line)
    assert any(v.startswith(expected) for v in layer_violations(read_graph(tree)))


def test_the_study_config_importing_the_registry_is_a_loop_between_rooms(tree):
    # Every protocol types its code on StudyConfig (hitkit.protocols.base): the registry in the config closes a loop.
    _append(tree / "hitkit" / "study" / "config.py", "from hitkit.protocols import PROTOCOLS")
    assert any({"hitkit.study.config", "hitkit.protocols"} <= set(loop) for loop in room_loops(read_graph(tree)))


def test_a_loop_between_rooms_through_an_import_for_type_checking_is_caught(tree):
    path = tree / "hitkit" / "judges" / "section.py"
    path.write_text(
        path.read_text(encoding="utf-8") + "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from hitkit.running.launch import launch\n",
        encoding="utf-8",
    )
    assert any({"hitkit.judges", "hitkit.running"} <= set(loop) for loop in room_loops(read_graph(tree)))


@pytest.mark.parametrize(
    "module, line, expected",
    [
        (
            "hitkit/simulation/planning.py",
            "from hitkit.protocols.pairwise import task",
            "hitkit.simulation.planning imports hitkit.protocols.pairwise.task",
        ),
        (
            "hitkit/protocols/rating/task.py",
            "from hitkit.simulation import staffing",
            "hitkit.protocols.rating.task imports hitkit.simulation.staffing",
        ),
    ],
)
def test_the_simulation_and_a_protocol_importing_each_other_is_caught(tree, module, line, expected):
    _append(tree / module, line)
    assert any(v.startswith(expected) for v in simulation_protocol_arrows(read_graph(tree)))


def test_a_module_grown_past_the_limit_is_caught(tree):
    path = tree / "hitkit" / "events.py"
    path.write_text(path.read_text(encoding="utf-8") + "\n" * 400, encoding="utf-8")
    assert any(v.startswith("hitkit/events.py") for v in oversized_modules(tree))


def test_a_loop_is_caught_even_through_a_lazy_import(tree):
    _append(tree / "hitkit" / "tables" / "versions.py", "from hitkit.tables.export import export_study")
    loops = import_loops(read_graph(tree))
    assert any({"hitkit.tables.export", "hitkit.tables.versions"} <= set(loop) for loop in loops)


def test_an_import_only_for_type_checking_is_no_loop(tree):
    path = tree / "hitkit" / "tables" / "versions.py"
    path.write_text(
        path.read_text(encoding="utf-8") + "\nfrom typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n"
        "    from hitkit.tables.export import export_study\n",
        encoding="utf-8",
    )
    assert import_loops(read_graph(tree)) == import_loops(read_graph(REPO))


def test_a_protocol_name_in_shared_code_is_caught(tree):
    _append(tree / "hitkit" / "tables" / "export.py", "return config.task == 'live_chat'")
    assert protocol_names_outside(tree, tuple(PROTOCOLS)) == [
        "hitkit/tables/export.py:"
        + str(len((tree / "hitkit" / "tables" / "export.py").read_text().splitlines()))
        + ": live_chat"
    ]


def test_a_protocol_name_in_a_shared_template_is_caught(tree):
    page = tree / "hit_templates" / "dashboard" / "compare.html"
    page.write_text(page.read_text(encoding="utf-8") + "\n{% if task == 'rating' %}x{% endif %}\n", encoding="utf-8")
    found = protocol_names_outside(tree, tuple(PROTOCOLS))
    assert found and found[-1].startswith("hit_templates/dashboard/compare.html:") and found[-1].endswith(": rating")
