"""Two engines on one SQLite file in one process (the requests' pool and the grading's, issue
39) and another process beside them (a similarity report) keep the database's WAL whole.

Creating the second engine once opened and closed the database file, which drops every POSIX
lock the process holds on it. The other process, closing its connection, then found the
database unused, checkpointed it and deleted its -wal and -shm files under the server's open
connections: a page read "disk I/O error" (a CI run's 503) and a write could go to an unlinked
WAL.
"""

import os
import stat
import subprocess
import sys

from sqlalchemy import text

from conftest import REPO
from server.core.db import make_engine

# another process's short visit, as the similarity report's run makes
VISIT = """
import sys
from sqlalchemy import text
from server.core.db import make_engine
engine = make_engine(sys.argv[1])
with engine.begin() as c:
    c.execute(text("INSERT INTO t VALUES (2)"))
engine.dispose()
"""


def test_a_second_engine_keeps_the_first_ones_wal_under_another_process(tmp_path):
    path = tmp_path / "db.sqlite"
    url = f"sqlite:///{path}"
    requests = make_engine(url, pool_size=4)
    with requests.begin() as c:
        c.execute(text("CREATE TABLE t (x INTEGER)"))
        c.execute(text("INSERT INTO t VALUES (1)"))
    held = requests.connect()  # a pooled connection, open as the server's are
    held.execute(text("SELECT count(*) FROM t")).scalar_one()
    assert (tmp_path / "db.sqlite-wal").exists()

    grading = make_engine(url, pool_size=2)  # what the grading's own pool does at start
    subprocess.run([sys.executable, "-c", VISIT, url], cwd=REPO, check=True, timeout=60)

    # the other process saw this one still using the database: the WAL is where it was
    assert (tmp_path / "db.sqlite-wal").exists()
    assert (tmp_path / "db.sqlite-shm").exists()
    with grading.begin() as c:  # a new connection of either engine reads and writes
        c.execute(text("INSERT INTO t VALUES (3)"))
    with requests.connect() as c:
        assert c.execute(text("SELECT count(*) FROM t")).scalar_one() == 3
    held.close()
    grading.dispose()
    requests.dispose()
    # and what all three wrote is in the file once everyone has gone
    again = make_engine(url)
    with again.connect() as c:
        assert sorted(c.execute(text("SELECT x FROM t")).scalars()) == [1, 2, 3]
    again.dispose()


def test_the_database_file_is_the_owners_only(tmp_path):
    path = tmp_path / "new" / "db.sqlite"
    make_engine(f"sqlite:///{path}").dispose()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    os.chmod(path, 0o644)  # one made before, or by hand: made the owner's again
    make_engine(f"sqlite:///{path}").dispose()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
