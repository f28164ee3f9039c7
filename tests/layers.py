"""The import graph of hitkit/ and server/, read from the source, and the layer rules it must keep.

Every import counts, module-level or inside a function (a lazy import is still a dependency),
except those under ``if TYPE_CHECKING:``, which never run. The rules (ARCHITECTURE.md, "Inside
hitkit/"):

- the library never imports the web tier (``server``, Flask, werkzeug); ``hitkit.cli`` is the one
  composition root that hands the web tier to ``launch``;
- a protocol never imports the worker's path (``hitkit.worker.flow``), the scheduler, the ledger or a provider;
- the shared analysis never imports the database, a provider or the web tier;
- no import loop;
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
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("hitkit", WEB),
    ("hitkit.protocols", ("hitkit.worker.flow", "hitkit.running.scheduler", "hitkit.money.ledger", "hitkit.providers", "hitkit.worker.chat")),
    ("hitkit.analysis", ("hitkit.db", "sqlalchemy", "hitkit.providers", "hitkit.worker.flow", *WEB)),
)
"""(modules under this prefix, may not import anything under these prefixes)."""


@dataclass
class Graph:
    """Modules (dotted names) and, for each, the modules and outside packages it imports."""

    files: dict[str, Path] = field(default_factory=dict)
    imports: dict[str, set[str]] = field(default_factory=dict)


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
    return graph


class _Imports(ast.NodeVisitor):
    def __init__(self, module: str, is_package: bool, known: dict[str, Path]):
        self.module, self.is_package, self.known = module, is_package, known
        self.found: set[str] = set()

    def _resolve(self, name: str) -> str:
        """The hitkit/server module ``name`` lives in, or ``name`` itself for an outside package."""
        probe = name
        while probe not in self.known and "." in probe:
            probe = probe.rsplit(".", 1)[0]
        return probe if probe in self.known else name

    def visit_If(self, node: ast.If) -> None:
        test = node.test
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
                (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"):
            for statement in node.orelse:
                self.visit(statement)
            return
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found.update(self._resolve(alias.name) for alias in node.names)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            base = self.module.split(".") if self.is_package else self.module.split(".")[:-1]
            base = base[:len(base) - (node.level - 1)]
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
                    out.append(f"{importer} imports {target} (nothing under {prefix} may import "
                               f"{', '.join(forbidden)})")
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


def protocol_names_outside(root: Path, names: tuple[str, ...]) -> list[str]:
    """Every string constant equal to a protocol's name in hitkit/ and server/ outside hitkit/protocols/
    (docstrings and other longer text do not count), and every quoted protocol name in the shared
    templates (those not named after a protocol), as 'path:line: name'."""
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
                if isinstance(node, ast.Constant) and node.value in names:
                    out.append(f"{path.relative_to(root)}:{node.lineno}: {node.value}")
    return out
