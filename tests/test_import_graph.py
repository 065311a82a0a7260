"""The lines that keep the house in order, held by the import graph (issue 28), read from
the source with `ast` (every `import`, at any depth of a module), not by grepping names:

- no import circle in graders/ or server/;
- the runner (untrusted, where the submission is imported) imports nothing of the trusted
  side but what both share: the wire formats, the statistics, the inputs both build from a
  seed, HIP's compiler glue;
- the trusted engine imports nothing of the runner;
- server/ reaches the graders through their JSON contract and plain names only, and never
  imports torch, triton or numpy, itself or through what it imports.

The checks are functions of a graph, so that the test can also show each of them catching
a forbidden edge added to the real graph.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO

PACKAGES = ("graders", "server")
# what the runner and the checker both use (graders/__init__ holds only the version)
SHARED = {"graders", "graders.arrays", "graders.protocol", "graders.stats",
          "graders.perfinputs", "graders.vocabulary"}
RUNNER_MAY_IMPORT = SHARED | {"graders.hip", "graders.hip.launch", "graders.hip.nvrtc",
                              "graders.hip.source"}
ENGINE = {"graders.spec", "graders.registry", "graders.casekit", "graders.judge",
          "graders.checker", "graders.results", "graders.report", "graders.params",
          "graders.perfinputs", "graders.performance", "graders.protocol", "graders.arrays",
          "graders.vocabulary", "graders.stats"}
# the graders' modules the server may import: plain names and the JSON contract (the task's
# fields, the worker's JSON lines and their reader, the exercises' parameter declarations)
SERVER_MAY_IMPORT = {"graders", "graders.vocabulary", "graders.task_contract",
                     "graders.worker_client", "graders.params"}
HEAVY = ("torch", "triton", "numpy")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (REPO / package).rglob("*.py"):
            if "migrations" not in path.parts and "__pycache__" not in path.parts:
                found[module_name(path)] = path
    return found


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """Every module ``name`` imports (the project's by full name; others by top name)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[:len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known)
    return {m if m in known else m.split(".")[0] for m in found if m}


def import_graph() -> dict[str, set[str]]:
    modules = project_modules()
    return {name: imports_of(name, path, set(modules)) for name, path in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in graph:
                continue
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            part = []
            while True:
                w = stack.pop()
                part.append(w)
                if w == v:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def reached(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for w in graph.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def forbidden(graph: dict[str, set[str]]) -> list[str]:
    """Each import that crosses a line, said in words."""
    wrong = []
    for name, imported in sorted(graph.items()):
        project = {m for m in imported if m in graph}
        if name.startswith("graders.runner"):
            for m in sorted(project - RUNNER_MAY_IMPORT):
                if not m.startswith("graders.runner"):
                    wrong.append(f"the runner's {name} imports the trusted side's {m}")
        if name in ENGINE:
            for m in sorted(m for m in project if m.startswith("graders.runner")):
                wrong.append(f"the engine's {name} imports the runner's {m}")
        if name.startswith("server"):
            for m in sorted(m for m in project if m.startswith("graders")):
                if m not in SERVER_MAY_IMPORT:
                    wrong.append(f"{name} imports {m} (the server reaches the graders through "
                                 "their JSON contract)")
            heavy = {m for m in reached(graph, name) | imported if m in HEAVY}
            wrong.extend(f"{name} imports {m}, itself or through what it imports"
                         for m in sorted(heavy))
    return wrong


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_no_import_crosses_a_line():
    assert forbidden(import_graph()) == []


@pytest.mark.parametrize("edge, words", [
    (("graders.runner.main", "graders.checker"), "the runner's graders.runner.main imports "
                                                 "the trusted side's graders.checker"),
    (("graders.performance", "graders.runner.timing"), "the engine's graders.performance "
                                                       "imports the runner's"),
    (("server.jobs", "graders.checker"), "server.jobs imports graders.checker"),
    (("graders.task_contract", "numpy"), "imports numpy, itself or through what it imports"),
])
def test_each_line_catches_a_forbidden_import_added(edge, words):
    graph = import_graph()
    graph[edge[0]] = graph[edge[0]] | {edge[1]}
    assert any(words in line for line in forbidden(graph)), forbidden(graph)


def test_a_circle_added_is_caught():
    """launch and sandbox imported each other (Limits one way, RunnerJob the other) until
    Limits moved below both (graders/limits.py): put that back, and it is a circle."""
    graph = import_graph()
    graph["graders.launch"] = graph["graders.launch"] | {"graders.sandbox"}
    assert any({"graders.launch", "graders.sandbox"} <= set(part) for part in circles(graph))
