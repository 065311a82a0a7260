"""The lines that keep the house in order, held by the import graph (issue 28), read from
the source with `ast` (every `import`, at any depth of a module), not by grepping names.

graders/ is cut into parts (graders/__init__.py lists them); each may import only the
parts below it (``MAY_IMPORT``), which makes the lines of DEVELOPERS.md and the issue
checkable:

- no import circle, between modules or between parts;
- the trusted side never imports the runner (where the submission is imported): only the
  runner and hip import each other, and bench times our own baselines by the runner's
  method; the runner imports nothing of the trusted side but shared/;
- the engine reaches runners through isolation's face (``graders.isolation`` itself, its
  ``__init__``) and never isolation's internals;
- server/ reaches the graders through their JSON contract and plain names only, and never
  imports torch, triton or numpy, itself or through what it imports.

server/ is cut into layers (issue 38), each importing only the layers below it
(``SERVER_MAY_IMPORT_LAYERS``): core, then domain, then grading, auth and similarity side by
side, then the two HTTP faces, api and web, side by side; app.py composes them all. So:

- no module sits directly in server/ but the package, its ``__main__`` and ``app``;
- the domain speaks no HTTP: it imports neither FastAPI nor Starlette (nor api/, nor web/);
- api/ and web/ do not import each other;
- no import runs from a lower layer up to a higher one, or across to a peer;
- nothing imports another file's underscore name (``from .web import _admin`` was how the
  extension pages reused the instructor page).

The checks are functions of a graph, so that the test can also show each of them catching
a forbidden edge added to the real graph.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import REPO

PACKAGES = ("graders", "server")
# what each part of the graders may import, besides itself and the package root (the
# version): the parts below it
MAY_IMPORT = {
    "shared": set(),
    "hip": {"shared"},
    "runner": {"shared", "hip"},
    "isolation": {"shared"},
    "engine": {"shared", "isolation"},  # isolation's face only: ISOLATION_FACE
    "service": {"shared", "engine", "isolation"},
    "proof": {"shared", "engine", "isolation"},
    "formats": {"shared", "engine"},
    "integrations": {"shared", "engine", "isolation", "formats"},
    "bench": {"shared", "engine", "isolation", "service", "proof", "runner", "hip"},
    "cli": {"shared", "engine", "isolation", "service", "proof", "formats", "integrations",
            "bench"},
}
ISOLATION_FACE = "graders.isolation"
# the files that may sit in graders/ outside a part
LOOSE = {"graders", "graders.__main__", "graders.cli"}
# the graders' modules the server may import: plain names and the JSON contract (the task's
# fields, the worker's JSON lines and their reader, the exercises' parameter declarations)
SERVER_MAY_IMPORT = {"graders", "graders.shared.vocabulary", "graders.shared.paths",
                     "graders.service.task_contract", "graders.service.worker_client",
                     "graders.engine.params"}
HEAVY = ("torch", "triton", "numpy")
# server modules that run as processes of their own, never imported by the server's: the
# similarity run (copydetect brings numpy and matplotlib)
RUN_APART = {"server.similarity.run": ("copydetect",)}
# server's layers, and what each may import besides itself: the layers below it
SERVER_MAY_IMPORT_LAYERS = {
    "core": set(),
    "domain": {"core"},
    "grading": {"core", "domain"},
    "auth": {"core", "domain"},
    "similarity": {"core", "domain"},
    # LTI 1.3 (issue 40): launches make users and sessions (auth); it follows grades through
    # the domain's submissions, not the grading engine
    "lti": {"core", "domain", "auth"},
    "api": {"core", "domain", "grading", "auth", "similarity", "lti"},
    "web": {"core", "domain", "grading", "auth", "similarity", "lti"},
}
# the files that may sit in server/ outside a layer: the composition root and its runner
SERVER_LOOSE = {"server", "server.__main__", "server.app"}
HTTP = ("fastapi", "starlette")  # what the domain never imports
MAX_SERVER_MODULE_LINES = 350


def part_of(module: str) -> str | None:
    """The part a graders module belongs to (None for the package root)."""
    parts = module.split(".")
    if parts[0] != "graders" or module == "graders":
        return None
    if module in ("graders.cli", "graders.__main__"):
        return "cli"
    return parts[1]


def layer_of(module: str) -> str | None:
    """The layer a server module belongs to (None for the loose files)."""
    parts = module.split(".")
    if parts[0] != "server" or len(parts) < 2 or parts[1] not in SERVER_MAY_IMPORT_LAYERS:
        return None
    return parts[1]


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
            submodules = {f"{base}.{a.name}" for a in node.names} & known
            found.update(submodules)
            if len(submodules) < len(node.names):  # a name defined in ``base`` itself
                found.add(base)
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
        if name.startswith("graders"):
            wrong.extend(_crossings(name, project))
        if name in RUN_APART:
            continue  # its own process: test_a_process_apart_is_never_imported holds it
        if name.startswith("server"):
            wrong.extend(_layer_crossings(name, imported, project))
            wrong.extend(f"{name} imports {m}, which only {apart} may (its own process)"
                         for apart, mods in RUN_APART.items() for m in sorted(imported)
                         if m in mods)
            for m in sorted(m for m in project if m.startswith("graders")):
                if m not in SERVER_MAY_IMPORT:
                    wrong.append(f"{name} imports {m} (the server reaches the graders through "
                                 "their JSON contract)")
            heavy = {m for m in reached(graph, name) | imported if m in HEAVY}
            wrong.extend(f"{name} imports {m}, itself or through what it imports"
                         for m in sorted(heavy))
    return wrong


def _layer_crossings(name: str, imported: set[str], project: set[str]) -> list[str]:
    """The imports of server module ``name`` that its layer may not make."""
    layer = layer_of(name)
    if layer is None:
        if name in SERVER_LOOSE:
            return []
        where = "directly in server/" if name.count(".") == 1 else "in no layer of server/"
        return [f"{name} sits {where} (only {', '.join(sorted(SERVER_LOOSE))} may)"]
    wrong = []
    if layer == "domain":
        wrong.extend(f"the domain's {name} imports {m} (the domain speaks no HTTP)"
                     for m in sorted(imported) if m in HTTP)
    for m in sorted(project):
        other = layer_of(m)
        if m.startswith("server") and other is None:
            wrong.append(f"the {layer} layer's {name} imports {m}, the composition root")
        elif other is not None and other != layer \
                and other not in SERVER_MAY_IMPORT_LAYERS.get(layer, set()):
            wrong.append(f"the {layer} layer's {name} imports the {other} layer's {m}")
    return wrong


def private_imports(modules: dict[str, Path]) -> list[tuple[str, str, str]]:
    """(importer, module, name) for each underscore name one project file takes from
    another: by ``from module import _name``, or as ``module._name`` of a module it imported."""
    found = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}  # a local name -> the project module it stands for
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1]
                                    + ([node.module] if node.module else []))
                if base.split(".")[0] not in PACKAGES:
                    continue
                for alias in node.names:
                    if f"{base}.{alias.name}" in modules:
                        aliases[alias.asname or alias.name] = f"{base}.{alias.name}"
                    elif alias.name.startswith("_") and not alias.name.startswith("__"):
                        found.append((name, base, alias.name))
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) \
                    and node.value.id in aliases and node.attr.startswith("_") \
                    and not node.attr.startswith("__"):
                found.append((name, aliases[node.value.id], node.attr))
    return sorted(set(found))


def forbidden_private(found: list[tuple[str, str, str]]) -> list[str]:
    return [f"{importer} imports {module}'s underscore name {attr}"
            for importer, module, attr in found
            if importer.startswith("server") and module != importer]


def _crossings(name: str, project: set[str]) -> list[str]:
    """The imports of graders module ``name`` that its part may not make."""
    part = part_of(name)
    if part is None:
        return [f"{name} (the package root) imports {m}" for m in sorted(project)]
    wrong = []
    for m in sorted(project):
        other = part_of(m)
        if other is None or other == part:
            continue
        if other not in MAY_IMPORT.get(part, set()):
            side = "the trusted side's " if part == "runner" else \
                "the runner's " if other == "runner" else ""
            wrong.append(f"the {part} part's {name} imports {side}{m}")
        elif part == "engine" and other == "isolation" and m != ISOLATION_FACE:
            wrong.append(f"the engine's {name} imports isolation's internal {m} "
                         f"(the engine sees only {ISOLATION_FACE})")
    return wrong


def part_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph between parts: an edge where any module of one imports one of another."""
    parts: dict[str, set[str]] = {}
    for name, imported in graph.items():
        part = part_of(name)
        if part is None:
            continue
        parts.setdefault(part, set()).update(
            p for p in map(part_of, imported & graph.keys()) if p not in (None, part))
    return parts


def test_no_import_circle():
    graph = import_graph()
    assert circles(graph) == []
    assert circles(part_graph(graph)) == []


def test_no_import_crosses_a_line():
    assert forbidden(import_graph()) == []


def test_a_process_apart_is_never_imported():
    """The similarity run imports copydetect (numpy, matplotlib): it is started as a
    process (server/similarity/reports.py), and no server module imports it."""
    graph = import_graph()
    for apart, mods in RUN_APART.items():
        assert set(mods) <= graph[apart]
        assert not [name for name, imported in graph.items() if apart in imported]
        reports = "server.similarity.reports"
        graph[reports] = graph[reports] | {apart}
        assert [name for name, imported in graph.items() if apart in imported]


def test_no_file_imports_another_files_underscore_name():
    assert forbidden_private(private_imports(project_modules())) == []


def test_an_underscore_import_added_is_caught():
    """The extension pages took the instructor page's ``_admin`` before issue 38."""
    found = private_imports(project_modules())
    found.append(("server.web.extensions", "server.web.instructor", "_admin"))
    assert forbidden_private(found) == [
        "server.web.extensions imports server.web.instructor's underscore name _admin"]


def test_every_server_module_sits_in_a_layer_and_is_small():
    graph = import_graph()
    server = {m for m in graph if m.startswith("server")}
    assert {layer_of(m) for m in server} - {None} == set(SERVER_MAY_IMPORT_LAYERS)
    assert {m for m in server if layer_of(m) is None} == SERVER_LOOSE
    modules = project_modules()
    long = {m: n for m in server
            if (n := len(modules[m].read_text().splitlines())) > MAX_SERVER_MODULE_LINES}
    assert long == {}


def test_every_module_sits_in_a_part():
    graph = import_graph()
    loose = {m for m in graph if m.startswith("graders") and m.count(".") < 2
             and m not in LOOSE and (REPO / Path(*m.split("."))).with_suffix(".py").is_file()}
    assert loose == set()
    assert {part_of(m) for m in graph if m.startswith("graders.")} - {None} == set(MAY_IMPORT)


@pytest.mark.parametrize("edge, words", [
    (("graders.runner.main", "graders.engine.checker"),
     "the runner part's graders.runner.main imports the trusted side's graders.engine.checker"),
    (("graders.engine.performance", "graders.runner.timing"),
     "the engine part's graders.engine.performance imports the runner's graders.runner.timing"),
    (("graders.isolation.launch", "graders.runner.main"),
     "the isolation part's graders.isolation.launch imports the runner's"),
    (("graders.engine.lanes", "graders.isolation.sandbox"),
     "the engine's graders.engine.lanes imports isolation's internal graders.isolation.sandbox"),
    (("graders.isolation.seed_cache", "graders.engine.registry"),
     "the isolation part's graders.isolation.seed_cache imports graders.engine.registry"),
    (("graders.shared.protocol", "graders.isolation.launch"),
     "the shared part's graders.shared.protocol imports graders.isolation.launch"),
    (("server.grading.jobs", "graders.engine.checker"),
     "server.grading.jobs imports graders.engine.checker"),
    (("server.web.student", "copydetect"),
     "server.web.student imports copydetect, which only server.similarity.run may"),
    # server's layers (issue 38)
    (("server.domain.roster", "fastapi"),
     "the domain's server.domain.roster imports fastapi (the domain speaks no HTTP)"),
    (("server.domain.submissions", "server.api.deps"),
     "the domain layer's server.domain.submissions imports the api layer's server.api.deps"),
    (("server.domain.deadlines", "server.web.render"),
     "the domain layer's server.domain.deadlines imports the web layer's server.web.render"),
    (("server.api.submissions", "server.web.render"),
     "the api layer's server.api.submissions imports the web layer's server.web.render"),
    (("server.web.student", "server.api.deps"),
     "the web layer's server.web.student imports the api layer's server.api.deps"),
    (("server.core.settings", "server.domain.models"),
     "the core layer's server.core.settings imports the domain layer's server.domain.models"),
    (("server.grading.jobs", "server.auth.tokens"),
     "the grading layer's server.grading.jobs imports the auth layer's server.auth.tokens"),
    (("server.auth.deps", "server.app"),
     "the auth layer's server.auth.deps imports server.app, the composition root"),
    (("server.helpers", "server.core.db"),
     "server.helpers sits directly in server/"),
    (("graders.service.task_contract", "numpy"),
     "imports numpy, itself or through what it imports"),
])
def test_each_line_catches_a_forbidden_import_added(edge, words):
    graph = import_graph()
    assert not any(words in line for line in forbidden(graph))
    graph[edge[0]] = graph.get(edge[0], set()) | {edge[1]}
    assert any(words in line for line in forbidden(graph)), forbidden(graph)


def test_a_circle_added_is_caught():
    """launch and sandbox imported each other (Limits one way, RunnerJob the other) until
    Limits moved below both (graders/isolation/limits.py): put that back, and it is a
    circle. The sandbox took the repository's root from the engine's registry (until
    graders/shared/paths.py): between parts, that was a circle too."""
    graph = import_graph()
    launch, sandbox = "graders.isolation.launch", "graders.isolation.sandbox"
    graph[launch] = graph[launch] | {sandbox}
    assert any({launch, sandbox} <= set(part) for part in circles(graph))
    graph = import_graph()
    graph[sandbox] = graph[sandbox] | {"graders.engine.registry"}
    assert ["engine", "isolation"] in circles(part_graph(graph))
