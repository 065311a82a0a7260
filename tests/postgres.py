"""A throwaway PostgreSQL server for the API tests, from the installed server binaries.

It listens on a Unix socket in a temporary folder only (no TCP port), runs as the
`postgres` user when the tests run as root (initdb refuses root), and is removed
at the end of the session.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

PORT = 54329


def find_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    return Path(found[-1]).parent if found else None


class ThrowawayPostgres:
    def __init__(self):
        bindir = find_bindir()
        if bindir is None:
            raise RuntimeError("no PostgreSQL server binaries under /usr/lib/postgresql")
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="autograder-pg-"))
        self.data, self.socket = self.root / "data", self.root / "socket"
        self.socket.mkdir()
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            for path in (self.root, self.socket):
                os.chown(path, pw.pw_uid, pw.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self._run("pg_ctl", "-D", str(self.data), "-w", "-l", str(self.root / "log"), "-o",
                  f"-k {self.socket} -p {PORT} -c listen_addresses=''", "start")

    def _run(self, tool: str, *args: str) -> None:
        subprocess.run([*self.as_user, str(self.bindir / tool), *args], check=True,
                       capture_output=True, text=True, timeout=120)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://postgres@/{database}?host={self.socket}&port={PORT}"

    def new_database(self) -> str:
        import psycopg

        name = f"t_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(host=str(self.socket), port=PORT, user="postgres",
                             dbname="postgres", autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "stop")
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
