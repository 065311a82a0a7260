"""The web tier's install (``pip install ".[server]"``, docker/server.Dockerfile) holds every
package server/ imports. requirements.txt installs everything for the tests, so a package
missing from the ``server`` extra passes every other test and only fails where the image
starts: the LTI packages were missing so (the server imports them as it starts).

Read from the source with test_import_graph.py's reader (every import, at any depth) and
from the installed packages' own metadata: a package is covered if the extra names it or what
the extra names requires it, with the extras asked for (``celery[redis]``).
"""

from __future__ import annotations

import sys
import tomllib
from importlib.metadata import PackageNotFoundError, packages_distributions, requires

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from conftest import REPO
from test_import_graph import imports_of, module_name

LOCAL = {"server", "graders"}


def imported_distributions(folder) -> dict[str, str]:
    """Each third-party distribution the folder's modules import: {name: a module that does}.
    Its migrations included: the server applies them as it starts."""
    by_module = packages_distributions()
    found: dict[str, str] = {}
    for path in sorted(folder.rglob("*.py")):
        # with no project module known, imports_of names each import by its top package
        for top in sorted(imports_of(module_name(path), path, known=set())):
            if top in LOCAL or top in sys.stdlib_module_names:
                continue
            for dist in by_module.get(top, [top]):
                found.setdefault(canonicalize_name(dist), str(path.relative_to(REPO)))
    return found


def installed_by(requirements: list[str]) -> set[str]:
    """The distributions these requirements install, what they require included."""
    todo = [Requirement(text) for text in requirements]
    seen: set[str] = set()
    while todo:
        req = todo.pop()
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        try:
            needs = requires(name) or []
        except PackageNotFoundError:
            continue
        asked = [{"extra": extra} for extra in req.extras] or [{"extra": ""}]
        for text in needs:
            need = Requirement(text)
            if need.marker is None or any(need.marker.evaluate(env) for env in asked):
                todo.append(need)
    return seen


def server_extra() -> list[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    return project["dependencies"] + project["optional-dependencies"]["server"]


def test_the_server_extra_installs_everything_server_imports():
    covered = installed_by(server_extra())
    missing = {dist: where for dist, where in imported_distributions(REPO / "server").items()
               if dist not in covered}
    assert missing == {}, f"imported by server/ but not installed by .[server]: {missing}"


def test_a_package_left_out_of_the_extra_is_caught():
    extra = [text for text in server_extra() if not text.startswith("alembic")]
    covered = installed_by(extra)
    assert "alembic" not in covered
    assert "alembic" in imported_distributions(REPO / "server")


def test_the_server_extra_pins_what_requirements_txt_pins():
    """requirements.txt is the lock CI runs; the image must install the same versions."""
    locked = {}
    for line in (REPO / "requirements.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            locked[canonicalize_name(req.name)] = str(req.specifier)
    pins = {canonicalize_name(req.name): str(req.specifier)
            for req in map(Requirement, server_extra())}
    assert {name: (pin, locked.get(name)) for name, pin in pins.items()
            if locked.get(name) != pin} == {}
