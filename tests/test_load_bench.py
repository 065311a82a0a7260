"""The load bench (graders/bench/load.py): its arithmetic on fake timestamps, the markdown
section it keeps in a file, the mix's manifest, and one small run through the real server
on the CPU (two cheap submissions: a compile error and a rejected mutant)."""

import datetime
import re

import pytest

from conftest import REPO, mutant_file
from graders.bench.load import (CLASSES, SECTION, MixEntry, Record, busy_per_hour, class_rows,
                                load_mix, percentile, render_section, run_load_bench,
                                select_mix, throughput_per_hour, timing_spread, write_section)

T0 = datetime.datetime(2026, 12, 1, 12, 0, 0, tzinfo=datetime.timezone.utc)


def _at(seconds: float) -> datetime.datetime:
    return T0 + datetime.timedelta(seconds=seconds)


def _record(i: int, klass: str, created: float, started: float, finished: float,
            verdict: str = "passed") -> Record:
    entry = MixEntry(REPO / f"fake/{klass}_{i}.py", "safe_softmax", klass)
    return Record(entry, i, status="graded", verdict=verdict, score=100.0,
                  created_at=_at(created), started_at=_at(started), finished_at=_at(finished),
                  result={"versions": {"python": "3.11", "torch": "2"}, "device": "cpu"})


def test_percentile_interpolates_between_ranks():
    assert percentile([], 50) is None
    assert percentile([7.0], 95) == 7.0
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert percentile([1.0, 2.0, 3.0, 4.0], 95) == pytest.approx(3.85)
    assert percentile(list(range(101)), 95) == pytest.approx(95.0)
    assert percentile([1.0, 2.0, 3.0], 100) == 3.0


def test_throughput_and_class_rows_on_fake_timestamps():
    # three gradings back to back, 12 s each, all queued at 0: 3 in 36 s = 300 an hour
    records = [_record(1, "passing", 0, 0, 12), _record(2, "mutant", 0, 12, 24, "failed"),
               _record(3, "hostile", 0, 24, 36, "timeout")]
    assert throughput_per_hour(records) == pytest.approx(300.0)
    # the two non-hostile ones busy the slot 24 s: 2 in 24 s = 300 an hour
    assert busy_per_hour(records[:2]) == pytest.approx(300.0)

    rows = {row.name: row for row in class_rows(records)}
    assert list(rows) == ["passing", "mutant", "hostile", "all but hostile", "all"]
    assert rows["all"].n == 3 and rows["all but hostile"].n == 2
    assert rows["all"].p50_s == pytest.approx(12.0) and rows["all"].max_s == pytest.approx(12.0)
    assert rows["mutant"].wait_p50_s == pytest.approx(12.0)
    assert rows["hostile"].verdicts == {"timeout": 1}
    assert sum(rows[k].n for k in ("passing", "mutant", "hostile")) == rows["all"].n

    # an unfinished one counts in n and in its verdicts, not in the latencies
    stuck = Record(MixEntry(REPO / "fake/x.py", "safe_softmax", "passing"), 4,
                   status="running", created_at=_at(0), started_at=_at(36))
    rows = {row.name: row for row in class_rows(records + [stuck])}
    assert rows["passing"].n == 2 and rows["passing"].verdicts == {"passed": 1,
                                                                  "unfinished (running)": 1}
    assert throughput_per_hour(records + [stuck]) == pytest.approx(300.0)


def test_the_section_says_whether_the_target_is_met():
    fast = [_record(i, "passing", 0, 8 * i, 8 * i + 8) for i in range(5)]  # 450 an hour
    text = render_section(fast, "cuda", 1, [])
    assert text.startswith(SECTION) and "**450 gradings per hour**" in text
    assert "**met**" in text
    slow = fast + [_record(9, "mutant", 0, 40, 65)]  # one non-hostile grading of 25 s
    text = render_section(slow, "cuda", 1, [])
    assert "**missed**" in text and "over 20 s" in text


def test_write_section_replaces_or_appends_and_keeps_the_rest(tmp_path):
    path = tmp_path / "benchmarks.md"
    write_section(path, f"{SECTION}\n\nfirst\n")
    assert path.read_text() == f"{SECTION}\n\nfirst\n"

    path.write_text(f"# Benchmarks\n\nintro\n\n{SECTION}\n\nold\n\n## Later\n\nkept\n")
    write_section(path, f"{SECTION}\n\nnew\n")
    text = path.read_text()
    assert "old" not in text and text.count(SECTION) == 1
    assert text.startswith("# Benchmarks\n\nintro\n\n") and text.endswith("## Later\n\nkept\n")

    path.write_text("# Benchmarks\n\n<!-- notes -->\n\nhand-written\n")
    write_section(path, f"{SECTION}\n\nappended\n")
    assert path.read_text() == (f"# Benchmarks\n\n<!-- notes -->\n\nhand-written\n\n"
                                f"{SECTION}\n\nappended\n")


def test_the_timing_spread_of_passing_files_graded_more_than_once(tmp_path):
    def timed(i: int, name: str, fraction: float, gbs: float, klass: str = "passing"):
        record = _record(i, klass, 0, i, i + 1)
        record.entry = MixEntry(REPO / f"fake/{name}", "safe_softmax", klass)
        record.result = {**record.result,
                         "performance": {"fraction_of_copy": fraction, "gbs": gbs}}
        return record

    records = [timed(1, "a.py", 0.90, 3000), timed(2, "a.py", 1.00, 3300),
               timed(3, "a.py", 0.95, 3150), timed(4, "b.py", 0.5, 2000),
               timed(5, "b.py", 0.5, 2000), timed(6, "c.py", 0.7, 1000),  # once: no spread
               timed(7, "d.py", 0.1, 10, "mutant"), timed(8, "d.py", 0.9, 10, "mutant")]
    median, worst, files = timing_spread(records, "fraction_of_copy")
    # a.py: (1.00 − 0.90) / 0.95; b.py: 0; c.py timed once, d.py not of the passing class
    assert files == 2 and worst == pytest.approx(0.1 / 0.95)
    assert median == pytest.approx(0.05 / 0.95)

    shared = render_section(records, "cuda", 2, [], slots_per_gpu=2)
    assert shared.startswith(f"{SECTION}, 2 slots per GPU\n")
    assert "2 grading slots sharing one GPU (SLOTS_PER_GPU=2" in shared
    assert "fraction of copy median 5.3%, max 10.5% (2 files)" in shared
    alone = render_section(records[:1], "cuda", 1, [])
    assert alone.startswith(f"{SECTION}\n") and "(SLOTS_PER_GPU=1)" in alone
    assert "no passing file was timed twice" in alone
    # sharing on and off keep a section each in one file
    path = tmp_path / "benchmarks.md"
    write_section(path, alone)
    write_section(path, shared)
    write_section(path, alone)
    assert path.read_text().count(SECTION) == 2


def test_the_manifest_holds_the_mix_the_issue_asks_for():
    mix = load_mix()  # also checks that every file exists
    counts = {k: sum(e.klass == k for e in mix) for k in CLASSES}
    assert counts == {"passing": 8, "row_per_program": 8, "mutant": 6, "hostile": 2}
    assert {e.exercise for e in mix if e.klass == "mutant"} == {
        "safe_softmax", "masked_softmax", "online_softmax"}
    # on the CPU the hostile class is left out unless asked for by name
    assert not any(e.klass == "hostile" for e in select_mix(mix, "cpu", None))
    assert len(select_mix(mix, "cuda", None)) == len(mix)
    assert {e.klass for e in select_mix(mix, "cpu", ["hostile"])} == {"hostile"}
    with pytest.raises(ValueError):
        select_mix(mix, "cpu", ["nonsense"])


def test_a_small_mix_through_the_real_server_on_the_cpu(tmp_path):
    broken = tmp_path / "compile_error.py"
    broken.write_text("def softmax(x)\n    return x\n")
    mix = [MixEntry(broken, "safe_softmax", "passing"),
           MixEntry(mutant_file("safe_softmax", "torch_softmax_inside"), "safe_softmax",
                    "mutant")]
    out = tmp_path / "benchmarks.md"
    out.write_text("# Benchmarks\n\nkept\n")

    assert run_load_bench(out, device="cpu", mix=mix, time_cap_s=300, poll_s=0.5) == 0

    text = out.read_text()
    assert text.startswith("# Benchmarks\n\nkept\n") and text.count(SECTION) == 1
    class_table = {m.group(1): int(m.group(2))
                   for m in re.finditer(r"^\| ([a-z_ ]+) \| (\d+) \| ", text, re.M)}
    assert class_table == {"passing": 1, "mutant": 1, "all": 2}
    submissions = re.findall(r"^\| \d+ \| .+ \| safe_softmax \| (\w+) \| (\w+) \|", text, re.M)
    assert sorted(submissions) == [("mutant", "rejected"), ("passing", "compile_error")]
    assert re.search(r"\*\*\d+ gradings per hour\*\*: 2 of 2 graded", text)
