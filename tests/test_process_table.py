"""The host's process table, scanned once for every runner's watch (issue 43): each armed
runner counting its job's processes by a scan of /proc of its own cost 1.6 CPU-seconds of
every grading on the H200."""

import os
import subprocess
import sys
import threading

from graders.isolation import jobuids


def test_watches_within_the_age_share_one_scan_and_a_fresh_count_scans_again(monkeypatch):
    table = jobuids.ProcessTable()
    scans = []
    real_scan = table._scan

    def counted():
        scans.append(1)
        return real_scan()

    monkeypatch.setattr(table, "_scan", counted)
    threads = [threading.Thread(target=table.of, args=(os.getuid(), True, 5.0))
               for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(scans) == 1  # eight watches, one scan
    assert os.getpid() in table.of(os.getuid(), False, 5.0)
    assert len(scans) == 1
    table.of(os.getuid(), False, 0.0)  # a count that must be now: a fork bomb's, a close's
    assert len(scans) == 2


def test_the_table_finds_a_process_started_after_the_last_scan_only_when_fresh():
    table = jobuids.ProcessTable()
    table.of(os.getuid(), False, 0.0)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        assert child.pid not in table.of(os.getuid(), False, 60.0)  # the old view
        assert child.pid in table.of(os.getuid(), False, 0.0)
    finally:
        child.kill()
        child.wait()


def test_zombies_count_only_when_asked():
    table = jobuids.ProcessTable()
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not reaped
    try:
        assert child.pid in table.of(os.getuid(), True, 0.0)
        assert child.pid not in table.of(os.getuid(), False, 0.0)
    finally:
        child.wait()
