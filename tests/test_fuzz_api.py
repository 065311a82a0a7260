"""The OpenAPI schema fuzzed by schemathesis: no input makes the server answer 5xx (issue 12).

The real app (SQLite, an instructor token, no grading: submissions stay queued) is served
by uvicorn on a loopback port; `st run` generates requests from /openapi.json for every
operation, as the instructor, and checks only that no answer is a server error.
"""

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import uvicorn

from server.app import create_app
from services import free_port
from test_server_api import ADMIN, NoDispatch, settings_for



def test_no_generated_request_gets_a_server_error(tmp_path):
    app = create_app(settings_for(f"sqlite:///{tmp_path / 'db.sqlite'}"), dispatcher=NoDispatch())
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.1)
    assert server.started
    st = shutil.which("st", path=str(Path(sys.executable).parent)) or "st"
    try:
        proc = subprocess.run(
            [st, "run", f"http://127.0.0.1:{port}/openapi.json", "--checks",
             "not_a_server_error", "--max-examples", "40", "--seed", "1",
             "--header", f"Authorization: Bearer {ADMIN}", "--request-timeout", "20",
             "--continue-on-failure"],
            capture_output=True, text=True, timeout=600,
            env={**os.environ, "SCHEMATHESIS_HOOKS": ""}, cwd=tmp_path)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
    print(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
