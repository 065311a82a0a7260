"""docker/ (issue 13): the compose file is valid, and it runs what the topology test runs.

There is no Docker engine on CI, only the client; ``docker compose config`` reads and
checks the files without one.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tomllib

import pytest

from conftest import REPO

COMPOSE = ["docker", "compose", "-f", str(REPO / "docker" / "compose.yaml"),
           "--env-file", str(REPO / "docker" / ".env.example")]


def _has_compose() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "compose", "version"], capture_output=True).returncode == 0


pytestmark = pytest.mark.skipif(not _has_compose(), reason="needs the docker client's compose "
                                "plugin (scripts/setup installs it where it can)")


def _config() -> dict:
    proc = subprocess.run([*COMPOSE, "config", "--format", "json"], capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_compose_config_is_valid():
    proc = subprocess.run([*COMPOSE, "config", "-q"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_every_secret_is_named_in_the_env_example_and_required():
    example = (REPO / "docker" / ".env.example").read_text()
    compose = (REPO / "docker" / "compose.yaml").read_text()
    for secret in ("POSTGRES_PASSWORD", "ADMIN_TOKEN", "TASK_SECRET"):
        assert f"\n{secret}=" in example
        assert f"${{{secret}:?" in compose  # compose refuses to start without it


def test_the_worker_holds_no_credentials_and_the_server_no_torch():
    services = _config()["services"]
    worker_env = services["worker"]["environment"]
    assert not {"DATABASE_URL", "ADMIN_TOKEN", "TASK_SECRET"} & set(worker_env)
    assert {"BROKER_URL", "SERVER_URL"} <= set(worker_env)
    assert services["worker"].get("gpus")
    server_env = services["server"]["environment"]
    assert server_env["DISPATCHER"] == "celery" and "TASK_SECRET" in server_env
    dockerfile = (REPO / "docker" / "server.Dockerfile").read_text()
    runs = [line for line in dockerfile.splitlines() if line.startswith("RUN")]
    assert any('".[server]"' in line for line in runs)
    assert not any("torch" in line or "triton" in line for line in runs)
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert not [d for d in extras["server"] if d.startswith(("torch", "triton"))]
    assert [d for d in extras["grader"] if d.startswith("torch")]


def test_the_services_run_the_commands_of_the_topology_test():
    services = _config()["services"]
    assert services["server"]["command"][:3] == ["python", "-m", "server"]
    worker = services["worker"]["command"]
    assert worker[:5] == ["celery", "-A", "graders.remote_worker", "worker", "--pool"]
    topology = (REPO / "tests" / "test_topology.py").read_text()
    assert '"-m", "celery", "-A", "graders.remote_worker", "worker",\n             "--pool", "solo"' \
        in topology
    assert '"-m", "server", "--port"' in topology
