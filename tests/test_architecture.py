"""Import boundaries of ``src/tideline``, checked on an AST import graph (issue 11, "Shape").

The graph has an edge for every import a module names — at module level, inside a
function, and under ``if TYPE_CHECKING:`` — because each of them is a dependency
a reader has to follow, even when a deferred import hides it at run time. The
review (``structure-2026-12.md``) measured one strongly connected component of 14
modules through ``tideline.memory`` this way; these rules keep it at none.

An import names one module: ``from a.b import c`` is an edge to ``a.b.c`` when that
is a module, else to ``a.b``. The parent packages a submodule import runs are not
edges (every import would otherwise pass through the root package, which
re-exports the facade).

The rules are data: add a :class:`Forbidden` to :data:`FORBIDDEN` or a group to
:data:`CYCLE_FREE`, and the tests below check it.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import cache
from pathlib import Path

import pytest

import tideline

SRC = Path(tideline.__file__).parent


def package(name: str) -> tuple[str, str]:
    """The patterns of a package and everything in it."""
    return name, name + ".*"

#: The facade and what stands above it: the package root (which re-exports it), the
#: surfaces that call it (CLI, MCP, hooks, plugins) and the programs that drive one
#: (bench, demo). Everything else is below the facade.
ABOVE_FACADE = ("tideline", "tideline.__main__", "tideline._entry", "tideline.memory",
                *package("tideline.cli"), *package("tideline.mcp"), *package("tideline.hooks"),
                *package("tideline.plugins"), *package("tideline.ui"), *package("tideline.bench"),
                *package("tideline.demo"), "tideline.sleep.__main__")

#: The surfaces: they call the facade, never the modules its verbs delegate to.
SURFACES = (*package("tideline.cli"), *package("tideline.mcp"), *package("tideline.hooks"),
            *package("tideline.plugins"), *package("tideline.ui"))

#: Modules that hold the work of facade verbs which once did it inline in ``memory.py``
#: (issue 11, "Shape": the facade validates and delegates). Each takes the runtime.
VERB_MODULES = ("tideline.opening", "tideline.reading", "tideline.maintenance",
                "tideline.write.feedback", "tideline.write.forget", "tideline.sleep.views")


@dataclass(frozen=True)
class Forbidden:
    """Modules matching ``importers`` (minus ``allowed``) must not import ``imported``.

    Each entry is a module-name pattern (:func:`fnmatch.fnmatchcase`): ``tideline.store``
    is that package's ``__init__`` only, ``tideline.store.*`` everything in it.
    """

    name: str
    importers: tuple[str, ...]
    imported: tuple[str, ...]
    allowed: tuple[str, ...] = ()


FORBIDDEN = [
    Forbidden("nothing below the facade imports it", importers=("tideline.*",),
              imported=("tideline.memory",), allowed=ABOVE_FACADE),
    Forbidden("nothing below the facade imports a surface or the package root",
              importers=("tideline.*",), imported=ABOVE_FACADE, allowed=ABOVE_FACADE),
    Forbidden("surfaces reach the verbs' modules through the facade only",
              importers=SURFACES, imported=VERB_MODULES),
    Forbidden("sleep's store views build on their base, never on the assembled view",
              importers=("tideline.store.consolidation.*",),
              imported=("tideline.store.consolidation",)),
    # Issue 32: the SQLite backend's ANN index lived in recall/, and the store imported it.
    Forbidden("no store module imports recall", importers=package("tideline.store"),
              imported=package("tideline.recall")),
    Forbidden("inside the store, nothing imports the store package or a backend's package",
              importers=("tideline.store.*",),
              imported=("tideline.store", "tideline.store.sqlite", "tideline.store.postgres")),
    Forbidden("the store's shared code imports no backend",
              importers=package("tideline.store"),
              imported=(*package("tideline.store.sqlite"), *package("tideline.store.postgres")),
              allowed=("tideline.store", *package("tideline.store.sqlite"),
                       *package("tideline.store.postgres"))),
    Forbidden("neither backend imports the other: what both read lives in the shared store",
              importers=package("tideline.store.postgres"),
              imported=package("tideline.store.sqlite")),
    Forbidden("neither backend imports the other (the SQLite side)",
              importers=package("tideline.store.sqlite"),
              imported=package("tideline.store.postgres")),
    Forbidden("the vector index's stores and file format know nothing of the index or store",
              importers=("tideline.store.sqlite.vector_stores",
                         "tideline.store.sqlite.vector_file"),
              imported=("tideline.store", "tideline.store.[!s]*", "tideline.store.sqlite",
                        "tideline.store.sqlite.[!v]*", "tideline.store.sqlite.vector_index",
                        "tideline.store.sqlite.vector_spaces",
                        "tideline.store.sqlite.vector_source")),
]

#: Groups no import cycle may pass through: a strongly connected component of the
#: graph must not hold any module matching the group's patterns.
CYCLE_FREE = {
    "facade, sleep, dream and inject": ("tideline.memory", *package("tideline.sleep"),
                                        *package("tideline.dream"), *package("tideline.inject")),
    "the vector index and its parts": ("tideline.store.sqlite.vector_*",),
    # Issue 32: the stages share Candidate through recall.candidates, not the engine.
    "the recall path's stages": tuple(f"tideline.recall.{m}" for m in (
        "engine", "candidates", "gather", "scoring", "graph", "turn_rules", "packet",
        "sentences")),
    "the facade and the modules its verbs delegate to": (
        "tideline.memory", "tideline.runtime", *VERB_MODULES, *package("tideline.write"),
        *package("tideline.ingest"), *package("tideline.archive"), *package("tideline.report")),
    # Issue 32: the command modules share the app through cli.base, not the package.
    "the command line": package("tideline.cli"),
    # The pages share the UI through ui.core; ui.app imports both.
    "the web app": package("tideline.ui"),
}

#: The only import circles ``tideline`` may hold, each exactly (its strongly connected
#: component), each while an issue works on it; any other circle, anywhere, fails
#: :func:`test_no_import_cycle_but_the_allowed` — so does one of these that grows.
ALLOWED_CYCLES: list[frozenset[str]] = []
"""Import circles that may stay while they are being taken apart: none since issue 32."""


def matches(module: str, patterns: tuple[str, ...]) -> bool:
    """Whether ``module`` matches one of the module-name patterns."""
    return any(fnmatchcase(module, p) for p in patterns)


def module_names(root: Path) -> dict[str, Path]:
    """Every module below ``root`` (a package directory) by dotted name."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module → the modules of the same package it imports, wherever the import sits."""
    modules = module_names(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        named: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                named.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")[: len(package.split(".")) - node.level + 1]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    named.add(sub if sub in modules else source)
        graph[name] = {m for m in named if m in modules and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def violations(graph: dict[str, set[str]], rule: Forbidden) -> list[str]:
    """``importer -> imported`` for every edge the rule forbids."""
    return sorted(f"{src} -> {dst}" for src, dsts in graph.items() for dst in dsts
                  if matches(src, rule.importers) and not matches(src, rule.allowed)
                  and matches(dst, rule.imported))


def cycles_through(graph: dict[str, set[str]], group: tuple[str, ...]) -> list[list[str]]:
    """The import cycles that hold a module of ``group``."""
    return [sorted(c) for c in cycles(graph) if any(matches(m, group) for m in c)]


@cache
def tideline_graph() -> dict[str, set[str]]:
    return import_graph(SRC)


@pytest.mark.parametrize("rule", FORBIDDEN, ids=lambda r: r.name)
def test_forbidden_imports(rule: Forbidden) -> None:
    """Reproducer: before the facade composed a Runtime, 12 modules below it
    (sleep.{context,orchestrate}, dream.{mixin,apply,context,plan,prompts},
    inject.{mixin,prefetch}, report.build, write.revise, archive.exchange) imported
    ``tideline.memory``."""
    assert violations(tideline_graph(), rule) == []


@pytest.mark.parametrize("group", sorted(CYCLE_FREE), ids=str)
def test_no_import_cycle_through(group: str) -> None:
    """Reproducer: the 14-module component of the structure review — memory,
    sleep.{mixin,orchestrate,context,attention}, dream.{mixin,apply,context,plan,prompts},
    inject.{mixin,prefetch}, report.build, write.revise — which had grown to 16 with
    archive.exchange and the package root by the time it was removed."""
    assert cycles_through(tideline_graph(), CYCLE_FREE[group]) == []


def test_no_import_cycle_but_the_allowed() -> None:
    """Reproducer: issue 32 counted 38 modules in one circle through the store package
    (its ``__init__`` and both backends, ``base`` ↔ ``agent``, ``postgres.connection`` →
    the ``postgres`` package, ``postgres.schema`` ↔ ``postgres.store``, ``sqlite.store``
    ↔ its doctor, dump, pending and reembed, and ``recall.vectors``)."""
    found = [sorted(c) for c in cycles(tideline_graph()) if frozenset(c) not in ALLOWED_CYCLES]
    assert found == []


def test_the_graph_sees_every_kind_of_import(tmp_path: Path) -> None:
    """The checker finds a cycle and a forbidden edge that exist only under TYPE_CHECKING,
    in a function and through a relative import — the ways the old cycle was hidden."""
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "top.py").write_text("def f():\n    from pkg.sub import low\n")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..top import f\n")
    (pkg / "sub" / "leaf.py").write_text("from pkg import top\n")
    graph = import_graph(pkg)
    assert graph["pkg.top"] == {"pkg.sub.low"}
    assert graph["pkg.sub.low"] == {"pkg.top"}
    assert graph["pkg.sub.leaf"] == {"pkg.top"}
    assert cycles_through(graph, package("pkg.sub")) == [["pkg.sub.low", "pkg.top"]]
    assert cycles_through(graph, ("pkg.sub.leaf",)) == []
    rule = Forbidden("sub stays below top", importers=package("pkg.sub"), imported=("pkg.top",),
                     allowed=("pkg.sub.leaf",))
    assert violations(graph, rule) == ["pkg.sub.low -> pkg.top"]


def test_the_facade_is_in_the_graph() -> None:
    """The rules look at the real package: the facade and its layers are all there."""
    graph = tideline_graph()
    assert "tideline.runtime" in graph["tideline.memory"]
    assert {"tideline.sleep.orchestrate", "tideline.dream.run", "tideline.inject.prefetch",
            "tideline.ingest.importers"} <= set(graph)
    assert set(VERB_MODULES) <= graph["tideline.memory"]


def test_the_facade_opens_no_transaction() -> None:
    """Reproducer: ``Memory.reflect`` and ``Memory.forget`` each held a ``with
    self.store.transaction()`` block in ``memory.py`` (issue 11, "Shape": the verbs
    validate and delegate; the work lives where its concept is named). The facade has
    no ``with`` block at all: a transaction is the business of the module doing the work."""
    tree = ast.parse((SRC / "memory.py").read_text(encoding="utf-8"))
    blocks = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.With | ast.AsyncWith)]
    assert blocks == []
