"""The import graph of hitkit/ and server/, read from the source, and the layer rules it must keep.

Every import counts, module-level or inside a function (a lazy import is still a dependency),
except those under ``if TYPE_CHECKING:``, which never run. The rules (ARCHITECTURE.md, "Inside
hitkit/"):

- rooms import downward only (:data:`ROOM_RANK`), except the arrows listed with their reasons in
  :data:`UPWARD`; the pure policy modules in :data:`SHARED` may be imported from any room;
- no module is longer than :data:`MAX_LINES` lines;
- the library never imports the web tier (``server``, Flask, werkzeug); ``hitkit.cli`` is the one
  composition root that hands the web tier to ``launch``;
- a protocol never imports the worker's path (``hitkit.worker.flow``), the scheduler, the ledger or a provider;
- the shared analysis never imports the database, a provider or the web tier;
- the tables never import the worker's path or a provider; the simulated crowd acts only over HTTP
  (:data:`CROWD_FORBIDDEN`);
- the simulation reaches a protocol only through the registry and its contract (``hitkit.protocols``,
  ``hitkit.protocols.base``), and a protocol's own modules never import the simulation: only its parts
  of ``hitkit plan`` (:data:`PROTOCOL_PARTS`) do (:func:`simulation_protocol_arrows`);
- no import loop, and no loop between rooms but through the arrows of :data:`LOOPS_LEFT` (imports for
  type checking count there);
- no protocol's name is written outside its folder (shared code asks the registry).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

PACKAGES = ("hitkit", "server")
WEB = ("server", "flask", "werkzeug")
COMPOSITION_ROOTS = ("hitkit.cli",)
"""The command line composes the library with the web tier; its modules alone may import both."""
CROWD_FORBIDDEN = ("hitkit.worker", "hitkit.running", "hitkit.money", "hitkit.dashboard", "hitkit.tables", *WEB)
"""The simulated crowd acts as a person does, over HTTP only: none of the server's side of the work (the
worker's path, the scheduler, money, the dashboard, the tables) — it asks the pages and the marketplace's
listing instead."""
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("hitkit", WEB),
    (
        "hitkit.protocols",
        (
            "hitkit.worker.flow",
            "hitkit.worker.admission",
            "hitkit.worker.chat",
            "hitkit.running",
            "hitkit.money.ledger",
            "hitkit.money.bonuses",
            "hitkit.providers",
        ),
    ),
    ("hitkit.analysis", ("hitkit.db", "sqlalchemy", "hitkit.providers", "hitkit.worker", "hitkit.running", *WEB)),
    ("hitkit.tables", ("hitkit.worker", "hitkit.providers", "hitkit.simulation")),
    (
        "hitkit.simulation",
        (
            "hitkit.worker.flow",
            "hitkit.worker.chat",
            "hitkit.worker.chat_turns",
            "hitkit.worker.chat_sql",
            "hitkit.worker.arrivals",
            *WEB,
        ),
    ),
    *(
        (crowd, CROWD_FORBIDDEN)
        for crowd in ("hitkit.simulation.crowd", "hitkit.simulation.crowd_chat", "hitkit.simulation.crowd_typing")
    ),
)
"""(modules under this prefix, may not import anything under these prefixes)."""


@dataclass
class Graph:
    """Modules (dotted names) and, for each, the modules and outside packages it imports."""

    files: dict[str, Path] = field(default_factory=dict)
    imports: dict[str, set[str]] = field(default_factory=dict)
    typing_imports: dict[str, set[str]] = field(default_factory=dict)
    """The imports under ``if TYPE_CHECKING:``: no loop at run time, but a reader's dependency all the same."""


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def read_graph(root: Path) -> Graph:
    """The import graph of the packages under ``root``."""
    graph = Graph()
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            graph.files[name] = path
    for name, path in graph.files.items():
        visitor = _Imports(name, path.name == "__init__.py", graph.files)
        visitor.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        graph.imports[name] = visitor.found - {name}
        graph.typing_imports[name] = visitor.typing_only - {name}
    return graph


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: dict[str, Path]):
        self.module, self.is_package, self.known = module, is_package, known
        self.found: set[str] = set()
        self.typing_only: set[str] = set()

    def _resolve(self, name: str) -> str:
        """The hitkit/server module ``name`` lives in, or ``name`` itself for an outside package."""
        probe = name
        while probe not in self.known and "." in probe:
            probe = probe.rsplit(".", 1)[0]
        return probe if probe in self.known else name

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            found, self.found = self.found, set()
            for statement in node.body:
                self.visit(statement)
            self.typing_only |= self.found
            self.found = found
            for statement in node.orelse:
                self.visit(statement)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.update(self._resolve(alias.name) for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.module.split(".") if self.is_package else self.module.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            source = ".".join(base + ([node.module] if node.module else []))
        else:
            source = node.module or ""
        for alias in node.names:
            submodule = f"{source}.{alias.name}"
            self.found.add(submodule if submodule in self.known else self._resolve(source))


def layer_violations(graph: Graph) -> list[str]:
    """Each forbidden import, as 'importer imports imported (rule)'."""
    out = []
    for importer, imported in sorted(graph.imports.items()):
        if any(_under(importer, root) for root in COMPOSITION_ROOTS):
            continue
        for prefix, forbidden in RULES:
            if not _under(importer, prefix):
                continue
            for target in sorted(imported):
                if any(_under(target, f) for f in forbidden) and not _under(target, prefix):
                    out.append(
                        f"{importer} imports {target} (nothing under {prefix} may import {', '.join(forbidden)})"
                    )
    return out


def import_loops(graph: Graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    loops: list[list[str]] = []
    counter = [0]

    def connect(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.imports.get(v, ()):
            if w not in graph.files:
                continue
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for module in graph.files:
        if module not in index:
            connect(module)
    return sorted(loops)


NAMED_OTHERWISE: dict[str, tuple[str, ...]] = {
    "ranking": (
        "hitkit/analysis/evidence.py",
        "hitkit/analysis/fragility.py",
        "hitkit/cli/results.py",
        "hitkit/prescreen/run.py",
        "hitkit/release/build.py",
        "hitkit/running/launch.py",
    ),
}
"""Modules where a protocol's name is also another thing's: ``ranking`` names an analysis's ranking table
and figure (``ranking.csv``, ``ranking.png``) and fragility's column saying which ranking a row is about,
as it did before the protocol of that name; these modules mean those, never the protocol."""


def protocol_names_outside(root: Path, names: tuple[str, ...]) -> list[str]:
    """Every string constant equal to a protocol's name in hitkit/ and server/ outside hitkit/protocols/
    (docstrings and other longer text do not count; nor a name in a module :data:`NAMED_OTHERWISE` lists
    for it), and every quoted protocol name in the shared templates (those not named after a protocol),
    as 'path:line: name'."""
    import re

    out = []
    quoted = re.compile(r"""['"](%s)['"]""" % "|".join(map(re.escape, names)))
    for path in sorted((root / "hit_templates").rglob("*.html")):
        if path.name.startswith(names):
            continue
        for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            out += [f"{path.relative_to(root)}:{lineno}: {m.group(1)}" for m in quoted.finditer(line)]
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if (root / "hitkit" / "protocols") in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
                where = str(path.relative_to(root))
                if isinstance(node, ast.Constant) and node.value in names:
                    if where in NAMED_OTHERWISE.get(node.value, ()):
                        continue
                    out.append(f"{path.relative_to(root)}:{node.lineno}: {node.value}")
    return out


ROOM_RANK: dict[str, int] = {
    "hitkit.cli": 12,
    "hitkit": 12,
    "server": 11,
    "hitkit.running": 10,
    "hitkit.dashboard": 10,
    "hitkit.simulation": 9,
    "hitkit.report": 8,
    "hitkit.prescreen": 8,
    "hitkit.judges": 7,
    "hitkit.material": 7,
    "hitkit.imports": 7,
    "hitkit.tables": 7,
    "hitkit.worker": 6,
    "hitkit.money": 6,
    "hitkit.providers": 5,
    "hitkit.study": 5,
    "hitkit.protocols": 4,
    "hitkit.protocols.kit": 4,
    "hitkit.study.sections": 3,
    "hitkit.study.config": 3,
    "hitkit.study.config_errors": 3,
    "hitkit.study.bot_sections": 3,
    "hitkit.study.screener": 3,
    "hitkit.study.provider_sections": 3,
    "hitkit.study.gold_section": 3,
    "hitkit.study.judge_config": 3,
    "hitkit.study.model": 3,
    "hitkit.dashboard.bots": 9,
    "hitkit.bots": 2,
    "hitkit.prescreen.models": 2,
    "hitkit.db": 1,
    "hitkit.analysis": 1,
    "hitkit.report.plots": 1,
    "hitkit.report.curves": 1,
    "hitkit.report.drawing": 1,
    "hitkit.report.matrices": 1,
    "hitkit.events": 1,
    "hitkit.secret": 1,
    "hitkit.errors": 0,
    "hitkit.i18n": 0,
    "hitkit.progress": 0,
    "hitkit.timing": 0,
}
"""Each room's place, highest first (the longest matching prefix counts): a module may import modules
of its own room or of rooms ranked lower. ``hitkit.study.sections`` and ``hitkit.study.config`` (the
study file's shared part, with the modules it is made of) sit below
the protocols, whose settings, starters and code typed on ``StudyConfig`` build on them; the rest of
``hitkit.study`` (``loading`` first) assembles the study file from the protocols' settings (the registry),
so it sits above them. The protocol kit (``hitkit.protocols.kit``: what every protocol's folder shares)
is a room of its own at the protocols' rank: the protocols import it and it imports none of them (a loop
between the two rooms fails :func:`room_loops`); its ``judge_plan`` and ``report`` rank with the simulation
and the report, as every protocol's do (:data:`PROTOCOL_PARTS`). The report's
figures (``hitkit.report.plots``, ``curves``, ``drawing`` and ``matrices``: tables in, PNG out) sit with the
statistics that draw them. The bots' health (``hitkit.dashboard.bots``) sits below the dashboard and the
status line of ``running``, which both show it; the sentence embedder's loader (``hitkit.prescreen.models``)
sits with the bots' models, below the protocols whose analyses embed text with it."""

SHARED = (
    "hitkit.tables.schema",
    "hitkit.tables.cells",
    "hitkit.tables.versions",
    "hitkit.money.amounts",
    "hitkit.worker.validation",
    "hitkit.worker.tokens",
    "hitkit.worker.security",
    "hitkit.worker.authenticity",
    "hitkit.material.jsonl",
    "hitkit.material.degrade",
    "hitkit.material.gold",
    "hitkit.imports.fields",
    "hitkit.worker.bounds",
    "hitkit.worker.pacing",
)
"""Pure policy and vocabulary (statuses and columns, money arithmetic, input bounds, signed tokens,
the security policy, authenticity scores, reading JSONL, degraded copies and gold items' places, archive field templates): functions over
plain values that every room may use, kept in the room whose subject they are."""

UPWARD: dict[tuple[str, str], str] = {
    (
        "hitkit.protocols",
        "hitkit.judges",
    ): "a protocol draws the crowd's share of judged units (judges.human_subset) when it builds its units and plans",
    ("hitkit.study", "hitkit.judges"): "the stored study records which units people label when a judge labels the rest",
    (
        "hitkit.tables",
        "hitkit.running",
    ): "the export's study.json and the dashboard record the stopping rule's state as the rule itself "
    "computes it (running.stopping.summary)",
    (
        "hitkit.simulation",
        "hitkit.running",
    ): "`hitkit plan --confirm` runs the recommended study once as `hitkit launch` runs it",
}
"""The arrows that go up, each with the reason it must: (importing room, imported room) -> why."""

MAX_LINES = 400
"""No module is longer than this: one concept per module, readable in one sitting."""


PROTOCOL_PARTS: dict[str, str] = {
    "plan": "hitkit.simulation",
    "mixed_crowds": "hitkit.simulation",
    "judge_plan": "hitkit.simulation",
    "judge_model": "hitkit.simulation",
    "report": "hitkit.report",
}
"""A protocol's folder holds its part of other rooms' work: its ``hitkit plan`` sizing (plan.py,
judge_plan.py, judge_model.py) ranks with ``simulation``, its report sections with ``report``. They live in the protocol's folder so that a protocol is one folder."""


def _room(module: str) -> tuple[str, int]:
    parts = module.split(".")
    if len(parts) == 4 and parts[1] == "protocols" and parts[3] in PROTOCOL_PARTS:
        room = PROTOCOL_PARTS[parts[3]]
        return module, ROOM_RANK[room]
    best = max((prefix for prefix in ROOM_RANK if _under(module, prefix)), key=len)
    return best, ROOM_RANK[best]


def _room_of_rule(module: str) -> str:
    """The room a module belongs to for the UPWARD table (``hitkit.study.sections`` is ``hitkit.study``)."""
    parts = module.split(".")
    if len(parts) == 4 and parts[1] == "protocols" and parts[3] in PROTOCOL_PARTS:
        return PROTOCOL_PARTS[parts[3]]
    return ".".join(parts[:2]) if parts[0] == "hitkit" and len(parts) > 1 else parts[0]


def upward_arrows(graph: Graph) -> list[str]:
    """Each import from a room to a higher-ranked one that :data:`UPWARD` does not give a reason for."""
    out = []
    for importer, imported in sorted(graph.imports.items()):
        room, rank = _room(importer)
        for target in sorted(imported):
            if target not in graph.files or any(_under(target, s) for s in SHARED):
                continue
            target_room, target_rank = _room(target)
            if target_room == room or target_rank <= rank:
                continue
            if (_room_of_rule(importer), _room_of_rule(target)) in UPWARD:
                continue
            out.append(f"{importer} imports {target} (rank {rank} may not import rank {target_rank})")
    return out


def reasoned_upward_arrows(graph: Graph) -> list[str]:
    """The upward imports that :data:`UPWARD` allows, for the record."""
    out = []
    for importer, imported in sorted(graph.imports.items()):
        room, rank = _room(importer)
        for target in sorted(imported):
            if target not in graph.files or any(_under(target, s) for s in SHARED):
                continue
            target_room, target_rank = _room(target)
            if target_room != room and target_rank > rank:
                out.append(f"{importer} -> {target}")
    return out


def oversized_modules(root: Path) -> list[str]:
    """Every module of hitkit/ and server/ longer than :data:`MAX_LINES` lines, as 'path: N lines'."""
    out = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            n = len(path.read_text(encoding="utf-8").splitlines())
            if n > MAX_LINES:
                out.append(f"{path.relative_to(root)}: {n} lines")
    return out


LOOPS_LEFT: dict[tuple[str, str], str] = {
    ("hitkit.protocols", "hitkit.judges"): UPWARD[("hitkit.protocols", "hitkit.judges")]
    + "; the judges ask the registry for each protocol's judge (next: the draw below the protocols)",
    ("hitkit.tables", "hitkit.running"): UPWARD[("hitkit.tables", "hitkit.running")]
    + " (next: the export handed the rule's state by its caller)",
    ("hitkit.simulation", "hitkit.running"): UPWARD[("hitkit.simulation", "hitkit.running")]
    + " (next: the command line runs the launch that `plan --confirm` prepares)",
    ("hitkit.prescreen", "hitkit.report"): "the pre-screening tournament writes its report section with the "
    "report's parts, and a study's report includes that section (next: the section handed to the report)",
}
"""The arrows between rooms that still close a loop, each with the reason it stays: (room, room) -> why.
Every other loop between rooms is refused (:func:`room_loops`)."""


def room_arrows(graph: Graph) -> dict[tuple[str, str], list[str]]:
    """Each arrow between two rooms (:func:`_room`; the shared policy modules of :data:`SHARED` are no room's),
    with the module imports behind it; imports for type checking count, as a reader follows them too."""
    arrows: dict[tuple[str, str], list[str]] = {}
    for importer in sorted(graph.files):
        room = _room_name(importer)
        for target in sorted(graph.imports.get(importer, set()) | graph.typing_imports.get(importer, set())):
            if target not in graph.files or any(_under(target, s) for s in SHARED):
                continue
            target_room = _room_name(target)
            if target_room != room:
                arrows.setdefault((room, target_room), []).append(f"{importer} -> {target}")
    return arrows


def _room_name(module: str) -> str:
    parts = module.split(".")
    if len(parts) == 4 and parts[1] == "protocols" and parts[3] in PROTOCOL_PARTS:
        return PROTOCOL_PARTS[parts[3]]
    return max((prefix for prefix in ROOM_RANK if _under(module, prefix)), key=len)


def room_loops(graph: Graph) -> list[list[str]]:
    """The loops between rooms (strongly connected sets of rooms, each sorted) once the arrows of
    :data:`LOOPS_LEFT` are taken out: none, when the rooms import one way."""
    rooms = Graph()
    for room, target in room_arrows(graph):
        if (room, target) in LOOPS_LEFT:
            continue
        for name in (room, target):
            rooms.files.setdefault(name, Path(name))
            rooms.imports.setdefault(name, set())
        rooms.imports[room].add(target)
    return import_loops(rooms)


def simulation_protocol_arrows(graph: Graph) -> list[str]:
    """Each import by which the simulation and the protocols run both ways: a module of ``hitkit.simulation``
    that reaches into a protocol's folder (past the registry and ``hitkit.protocols.base``), or a protocol's
    own module (not one of its :data:`PROTOCOL_PARTS`) that imports the simulation."""
    contract = ("hitkit.protocols", "hitkit.protocols.base")
    out = []
    for importer in sorted(graph.files):
        targets = sorted(graph.imports.get(importer, set()) | graph.typing_imports.get(importer, set()))
        if _under(importer, "hitkit.simulation"):
            out += [
                f"{importer} imports {t} (the simulation is handed a protocol through the registry)"
                for t in targets
                if _under(t, "hitkit.protocols") and t not in contract
            ]
        parts = importer.split(".")
        if _under(importer, "hitkit.protocols") and not (len(parts) == 4 and parts[3] in PROTOCOL_PARTS):
            out += [
                f"{importer} imports {t} (only a protocol's plan parts call the simulation)"
                for t in targets
                if _under(t, "hitkit.simulation")
            ]
    return out
