"""End to end on the CPU interpreter: a real runner process grades real files."""

import ast
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import REPO, mutant_file, run_cli

from graders.engine import plan
from graders.engine.checker import grade
from graders.engine.registry import get_exercise
from graders.isolation.sandbox import Limits
from graders.shared.vocabulary import Device, Verdict

SAFE_KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    # one program per row, the row walked in tiles: running (max, sum) per lane
    base = tl.program_id(0).to(tl.int64) * n_cols
    m = tl.full([BLOCK], -float("inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        ref = tl.where(m_new == -float("inf"), 0.0, m_new)
        s = s * tl.exp(m - ref) + tl.exp(x - ref)
        m = m_new
    row_max = tl.max(m, axis=0)
    total = tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK):
        cols = start + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + base + cols, mask=cols < n_cols, other=-float("inf")).to(tl.float32)
        tl.store(y_ptr + base + cols, tl.exp(x - row_max) / total, mask=cols < n_cols)


def launch(x, y):
    block = min(triton.next_power_of_2(x.shape[1]), 1024)
    _kernel[(x.shape[0],)](x, y, x.shape[1], BLOCK=block)
'''


def safe(body: str) -> str:
    return SAFE_KERNEL + "\n\ndef softmax(x):\n" + body


GOOD = safe("    y = torch.empty_like(x)\n    launch(x, y)\n    return y\n")


def test_reference_passes_with_score_100_as_json():
    ref = REPO / "reference_solutions" / "safe_softmax" / "solution.py"
    proc = run_cli("grade", "safe_softmax", str(ref), "--device", "cpu", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"] == "passed" and result["score"] == 100
    assert set(result) >= {"exercise", "language", "device", "verdict", "score", "checks",
                           "performance", "grader_version"}
    assert result["performance"] is None and result["device"] == "cpu"
    assert all(set(c) >= {"name", "passed", "message", "points", "max_points"}
               for c in result["checks"])


def test_a_good_kernel_passes(grade_source):
    result = grade_source("safe_softmax", GOOD)
    assert result.verdict is Verdict.PASSED, result.message
    assert result.score == 100


def test_syntax_error_is_a_compile_error_with_the_line(grade_source):
    result = grade_source("safe_softmax", "import torch\n\ndef softmax(x)\n    return x\n")
    assert result.verdict is Verdict.COMPILE_ERROR and result.line == 3
    assert "line 3" in result.message


def test_missing_function_is_a_compile_error_that_names_it(grade_source):
    result = grade_source("safe_softmax", "import torch\n\ndef soft_max(x):\n    return x\n")
    assert result.verdict is Verdict.COMPILE_ERROR
    assert "`softmax`" in result.message


def test_exception_at_import_points_at_the_students_line(grade_source):
    result = grade_source("safe_softmax", "import torch\nx = 1\nraise ValueError('boom')\n")
    assert result.verdict is Verdict.COMPILE_ERROR and result.line == 3


def test_runtime_error_has_the_students_line(grade_source):
    source = safe("    y = torch.empty_like(x)\n    launch(x, y)\n    raise RuntimeError('oops')\n")
    result = grade_source("safe_softmax", source)
    lines = source.splitlines()
    assert result.verdict is Verdict.RUNTIME_ERROR
    assert lines[result.line - 1].strip() == "raise RuntimeError('oops')"
    assert "oops" in result.message and "random_rows" in result.message


def test_torch_softmax_is_rejected_even_when_the_error_is_caught(grade_source):
    source = safe("    try:\n        return torch.softmax(x, dim=1)\n    except Exception:\n"
                  "        y = torch.empty_like(x)\n        launch(x, y)\n        return y\n")
    result = grade_source("safe_softmax", source)
    assert result.verdict is Verdict.REJECTED
    assert "Triton" in result.message and "_softmax" in result.message


@pytest.mark.parametrize("math", ["x.exp()", "x.sum(dim=1)", "x.max(dim=1)", "x * 2",
                                  "torch.nn.functional.softmax(x, -1)"])
def test_torch_math_is_rejected(grade_source, math):
    source = safe(f"    y = torch.empty_like(x)\n    launch(x, y)\n    z = {math}\n    return y\n")
    assert grade_source("safe_softmax", source).verdict is Verdict.REJECTED


def test_allocation_and_views_are_allowed(grade_source):
    source = safe("    y = torch.zeros_like(x).view(-1).reshape(x.shape).contiguous()\n"
                  "    launch(x.contiguous(), y)\n    return y\n")
    assert grade_source("safe_softmax", source).verdict is Verdict.PASSED


def test_cached_outputs_without_a_launch_are_rejected(grade_source):
    source = safe("    key = tuple(x.shape) + (x.dtype,)\n    if key not in CACHE:\n"
                  "        CACHE[key] = torch.empty_like(x)\n        launch(x, CACHE[key])\n"
                  "    return CACHE[key]\n") + "\nCACHE = {}\n"
    assert grade_source("safe_softmax", source).verdict is Verdict.REJECTED


def test_no_kernel_launch_is_rejected(grade_source):
    result = grade_source("safe_softmax", "import torch\n\ndef softmax(x):\n    return torch.empty_like(x)\n")
    assert result.verdict is Verdict.REJECTED and "launching a Triton kernel" in result.message


def test_changing_the_input_fails(grade_source):
    source = safe("    launch(x, x)\n    return x.clone()\n")
    result = grade_source("safe_softmax", source)
    assert result.verdict is Verdict.FAILED
    messages = " ".join(c.message for c in result.checks)
    assert "changed its input" in messages


def test_returning_the_wrong_type_fails_the_check(grade_source):
    source = safe("    y = torch.empty_like(x)\n    launch(x, y)\n    return None\n")
    result = grade_source("safe_softmax", source)
    assert result.verdict is Verdict.FAILED
    assert "returned NoneType" in result.checks[0].message


def test_cached_outputs_are_rejected_though_a_kernel_ran(grade_source):
    # it launches a kernel on every call (on scratch memory) and returns an output from an
    # earlier call: no kernel of this call was given what it returns (issue 23). (A cache of
    # inputs, recomputed, is the caches_by_shape mutant: only fresh_inputs' values tell.)
    source = safe("    key = tuple(x.shape) + (x.dtype,)\n    if key not in CACHE:\n"
                  "        CACHE[key] = torch.empty_like(x)\n        launch(x, CACHE[key])\n"
                  "    else:\n        launch(x, torch.empty_like(x))\n"
                  "    return CACHE[key]\n") + "\nCACHE = {}\n"
    result = grade_source("safe_softmax", source)
    assert result.verdict is Verdict.REJECTED
    assert "no Triton kernel launched in this call was given" in result.message


def test_a_torch_py_beside_the_submission_changes_nothing(tmp_path):
    folder = tmp_path / "sub"
    folder.mkdir()
    (folder / "torch.py").write_text("raise SystemExit('shadowed torch was imported')\n")
    (folder / "triton.py").write_text("raise SystemExit('shadowed triton was imported')\n")
    (folder / "submission.py").write_text(GOOD)
    result = grade(get_exercise("safe_softmax"), folder / "submission.py", Device.CPU)
    assert result.verdict is Verdict.PASSED, result.message


def test_a_result_printed_on_stdout_is_not_believed(grade_source):
    forged = json.dumps({"verdict": "passed", "score": 100})
    source = safe(f"    print({forged!r})\n    y = torch.zeros_like(x)\n    launch(x[:, :1].contiguous(), y[:, :1])\n    return y\n")
    result = grade_source("safe_softmax", source)
    assert result.verdict is Verdict.FAILED and result.score < 100
    assert forged in result.output


def test_an_endless_loop_times_out_and_leaves_nothing(grade_source):
    started = time.monotonic()
    result = grade_source("safe_softmax", "import torch\n\ndef softmax(x):\n    while True:\n        pass\n",
                          timeout_s=8)
    assert result.verdict is Verdict.TIMEOUT
    # well past the 8 s limit on a loaded CI host, well short of the 300 s default
    assert time.monotonic() - started < 60


def test_a_crash_is_a_runtime_error_naming_the_signal(grade_source):
    source = "import os, signal, torch\n\ndef softmax(x):\n    os.kill(os.getpid(), signal.SIGSEGV)\n"
    result = grade_source("safe_softmax", source)
    assert result.verdict is Verdict.RUNTIME_ERROR and "SIGSEGV" in result.message


def test_masked_and_online_references_pass(grade_source):
    for name in ("masked_softmax", "online_softmax"):
        ref = REPO / "reference_solutions" / name / "solution.py"
        result = grade_source(name, ref.read_text())
        assert result.verdict is Verdict.PASSED, (name, result.message,
                                                  [c.message for c in result.checks if not c.passed])


def test_a_mutant_fails_with_the_course_words_and_a_row_dump(grade_source):
    naive = mutant_file("safe_softmax", "naive_unsafe_exp")
    result = grade_source("safe_softmax", naive.read_text())
    check = next(c for c in result.checks if c.name == "poisoned_row")
    assert not check.passed
    assert "is all NaN after" in check.message and "subtract the row max before exp" in check.message
    assert check.dump["got"][0] == "nan" and len(check.dump["input"]) == len(check.dump["got"])


# -- the checker believes nothing the runner says ------------------------------------------

class FakeRunnerLauncher:
    """Swaps the real runner for tests/fake_runner.py, which speaks the protocol but lies."""

    sandboxed = False
    gpu_index = None

    def __init__(self, mode: str, script: str = "fake_runner.py"):
        self.mode, self.script = mode, script
        self.limits = Limits()

    def command(self, job):
        fds = f"{job.fds[0]},{job.fds[1]}"
        return ([sys.executable, str(Path(__file__).with_name(self.script)), self.mode,
                 "--fds", fds], dict(job.env, GRADERS_REPO=str(REPO)))

    def inbox_path(self, job, filename):
        return str(job.inbox / filename)


@pytest.mark.parametrize("mode, verdict", [
    ("wrong_known_answer", Verdict.GRADER_ERROR),
    ("dies_at_start", Verdict.GRADER_ERROR),
    ("uniform", Verdict.FAILED),
    ("claims_passed", Verdict.REJECTED),
    ("garbage", Verdict.REJECTED),
])
def test_lying_runners_do_not_pass(tmp_path, mode, verdict):
    path = tmp_path / "submission.py"
    path.write_text(GOOD)
    result = grade(get_exercise("safe_softmax"), path, Device.CPU,
                   launcher=FakeRunnerLauncher(mode), timeout_s=30)
    assert result.verdict is verdict, result.message
    assert result.score < 100


def test_a_file_that_does_not_parse_is_answered_with_its_line_and_no_runner(tmp_path):
    """Parsed by the trusted side (nothing runs): a runner that cannot even start is never
    asked, and the student gets the line at once."""
    path = tmp_path / "submission.py"
    path.write_text("import torch\n\ndef softmax(x:\n    return x\n")
    result = grade(get_exercise("safe_softmax"), path, Device.CPU,
                   launcher=FakeRunnerLauncher("dies_at_start"), timeout_s=30)
    assert result.verdict is Verdict.COMPILE_ERROR, result.message
    assert result.line == 3 and "(line 3 of your file)" in result.message
    assert "SyntaxError" in result.message


def test_files_graded_at_once_are_parsed_one_at_a_time(monkeypatch):
    """CPython 3.11's ast.parse keeps its depth count in one shared struct: two threads
    parsing at once raised "AST constructor recursion depth mismatch" in our CI (a fork
    bomb and a good file graded side by side). The trusted parse takes them in turn."""
    real_parse, count_lock = ast.parse, threading.Lock()
    inside = most = 0

    def counting_parse(*args, **kwargs):
        nonlocal inside, most
        with count_lock:
            inside += 1
            most = max(most, inside)
        time.sleep(0.05)  # long enough for every thread to arrive while one parses
        try:
            return real_parse(*args, **kwargs)
        finally:
            with count_lock:
                inside -= 1

    monkeypatch.setattr(plan.ast, "parse", counting_parse)
    threads = [threading.Thread(target=plan.parse_python, args=(b"x = 1\n",))
               for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert most == 1


# -- the command line ---------------------------------------------------------------------

def test_cli_exit_codes_and_list():
    listed = run_cli("list")
    assert listed.returncode == 0
    for name in ("safe_softmax", "masked_softmax", "online_softmax"):
        assert name in listed.stdout
    assert run_cli("grade", "no_such_exercise", "x.py").returncode == 2
    naive = mutant_file("safe_softmax", "naive_unsafe_exp")
    proc = run_cli("grade", "safe_softmax", str(naive), "--device", "cpu")
    assert proc.returncode == 1
    assert "FAIL  poisoned_row" in proc.stdout


# -- one program per row (the Triton tutorial's design): issue 11 ------------------------

ROW_PER_PROGRAM = {  # fixture -> exactly the checks it fails, on the CPU and on a GPU alike
    "row_per_program.py": {"long_rows"},
    "row_per_program_naive_exp.py": {"long_rows", "poisoned_row", "underflow"},
    "row_per_program_tail_zero.py": {"long_rows", "non_power_of_two_cols", "random_rows",
                                     "poisoned_row", "tiny_rows", "underflow"},
}


@pytest.mark.parametrize("name", sorted(ROW_PER_PROGRAM))
def test_a_row_per_program_kernel_fails_long_rows_at_once_and_keeps_its_other_points(name):
    """Its 131072-wide block is refused before anything compiles (the same words as on
    a GPU); the checks it passed keep their points."""
    path = mutant_file("safe_softmax", name.removesuffix(".py"))
    result = grade(get_exercise("safe_softmax"), path, Device.CPU)
    failed = {c.name for c in result.checks if not c.passed}
    assert result.verdict is Verdict.FAILED and failed == ROW_PER_PROGRAM[name]
    assert result.score == pytest.approx(sum(c.max_points for c in result.checks if c.passed))
    long_rows = next(c for c in result.checks if c.name == "long_rows")
    if name != "row_per_program_tail_zero.py":  # that one already fails at 10000 columns
        assert "asked for a block of 131072 elements" in long_rows.message
        assert "refused before compiling" in long_rows.message and "line " in long_rows.message


def test_checks_split_over_lanes_judge_as_one_lane_does():
    """With several lanes a check's shapes run as parts in parallel runners; the verdict,
    the failing checks and the points are those of the one-lane run."""
    path = mutant_file("safe_softmax", "row_per_program_naive_exp")
    one = grade(get_exercise("safe_softmax"), path, Device.CPU, lanes=1)
    three = grade(get_exercise("safe_softmax"), path, Device.CPU, lanes=3)
    assert [(c.name, c.passed, c.points) for c in one.checks] == \
        [(c.name, c.passed, c.points) for c in three.checks]
    assert one.verdict is three.verdict is Verdict.FAILED and one.score == three.score
    assert set(three.phases["checks"]) == {c.name for c in three.checks}


# -- budgets per call: issue 11 ------------------------------------------------------------

def hangs_on(cols: int) -> str:
    """A good kernel whose wrapper never returns for rows of ``cols`` columns."""
    return safe(f"    if x.shape[1] == {cols}:\n        while True:\n            pass\n"
                "    y = torch.empty_like(x)\n    launch(x, y)\n    return y\n")


def test_a_call_past_its_budget_fails_its_check_and_the_others_still_run(grade_source):
    started = time.monotonic()
    result = grade_source("safe_softmax", hangs_on(1500), call_budget_s=3)  # only there
    by_name = {c.name: c for c in result.checks}
    assert result.verdict is Verdict.FAILED
    assert [c.name for c in result.checks if not c.passed] == ["non_power_of_two_cols"]
    message = by_name["non_power_of_two_cols"].message
    assert "softmax(2×1500 float32) was still running after 3 s" in message
    assert all(c.ran for c in result.checks)  # the runner was replaced; the rest ran
    assert result.score == 100 - by_name["non_power_of_two_cols"].max_points
    # a replacement runner and the other checks, not the run's 300 s wall clock
    assert time.monotonic() - started < 120


def test_a_second_overrun_ends_the_run_as_timeout_keeping_earned_points(grade_source):
    result = grade_source("safe_softmax", hangs_on(1000), call_budget_s=3)  # two checks
    assert result.verdict is Verdict.TIMEOUT
    assert "2 calls ran past their 3 s budget" in result.message
    passed = [c for c in result.checks if c.passed]
    assert passed and result.score == pytest.approx(sum(c.points for c in passed))
    assert result.duration_s < 120  # ended by the second overrun, not the 300 s wall clock


def test_the_worker_grades_jobs_from_json_lines_on_warm_runners(tmp_path):
    good, bad = tmp_path / "good.py", tmp_path / "bad.py"
    good.write_text(GOOD)
    bad.write_text("def softmax(x:\n")
    jobs = "".join(json.dumps({"id": i, "exercise": "safe_softmax", "file": str(p)}) + "\n"
                   for i, p in enumerate([good, bad, good]))
    jobs += "not json\n"
    proc = subprocess.run([sys.executable, "-m", "graders", "worker", "--device", "cpu"],
                          input=jobs, capture_output=True, text=True, cwd=REPO, timeout=240)
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0, proc.stderr[-2000:]
    # on the CPU a slot keeps one grading's runner and a spare ready (default_warm)
    assert lines[0]["ready"] is True and lines[0]["warm"] == 2
    # progress lines aside; each job's answer, then its line once settled (its runners gone,
    # its slot judged)
    answers = [line for line in lines[1:] if "check" not in line and "settled" not in line]
    assert [a["id"] for a in answers] == [0, 1, 2, None]
    settled = [(line["id"], line["slot"]["healthy"]) for line in lines[1:] if "settled" in line]
    assert settled == [(0, True), (1, True), (2, True)]
    order = [line["id"] for line in lines[1:] if "check" not in line]
    assert order == [0, 0, 1, 1, 2, 2, None]
    progress = [line["id"] for line in lines[1:] if "check" in line]
    assert progress.count(0) == len(answers[0]["result"]["checks"])
    assert 1 not in progress  # a file that does not parse runs no check
    assert answers[0]["result"]["verdict"] == "passed" and answers[0]["slot"]["healthy"]
    assert answers[1]["result"]["verdict"] == "compile_error"
    assert answers[0]["result"]["phases"]["runner_start_s"] == 0.0  # a runner made ahead
    assert answers[2]["result"]["verdict"] == "passed"
    assert "bad job line" in answers[3]["error"]


def test_the_cli_prints_a_line_per_check_on_a_terminal_and_nothing_extra_when_piped():
    """Issue 14: on a terminal the CLI printed nothing until the end."""
    import os
    import pty

    ref = str(mutant_file("safe_softmax", "naive_unsafe_exp"))
    argv = [sys.executable, "-m", "graders", "grade", "safe_softmax", ref, "--device", "cpu"]
    main, secondary = pty.openpty()
    proc = subprocess.Popen(argv, cwd=REPO, stdout=secondary, stderr=secondary)
    os.close(secondary)
    chunks = []
    while True:
        try:
            data = os.read(main, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    proc.wait(timeout=120)
    os.close(main)
    shown = b"".join(chunks).decode(errors="replace")
    progress = [line for line in shown.splitlines() if "[" in line and " s]" in line]
    assert len(progress) == 8, shown
    assert any("FAIL  poisoned_row" in line for line in progress)
    piped = run_cli("grade", "safe_softmax", ref, "--device", "cpu")
    assert " s]" not in piped.stdout and "grading " not in piped.stdout


# -- runners made ready: the seed cache, and lanes that join late --------------------------

def test_a_lane_can_take_a_runner_that_becomes_ready_while_it_waits():
    """A grading's extra lanes join when a runner being made becomes ready, instead of
    giving up at once; with nothing on the way, the wait ends empty-handed."""
    from graders.isolation.pool import RunnerPool

    pool = RunnerPool(Device.CPU, FakeRunnerLauncher("uniform"), warm=1)
    try:
        assert pool.take_ready() is None  # nothing made yet
        pool.fill()
        ready = pool.take_ready(wait_s=60)
        assert ready is not None and ready.hello["device_name"] == "fake"
        ready.process.close()
        pool.warm = 0
        pool.wait_idle()
        while (extra := pool.take_ready()) is not None:
            extra.process.close()
        started = time.monotonic()
        assert pool.take_ready(wait_s=0.3) is None
        assert 0.25 < time.monotonic() - started < 5
    finally:
        pool.close()


def test_a_pool_is_filled_only_when_every_warm_runner_is_ready():
    """A worker says ready after ``wait_filled``: by then every runner it keeps warm has
    started, so its first grading's lanes find theirs as every later grading does."""
    from graders.isolation.pool import RunnerPool

    pool = RunnerPool(Device.CPU, FakeRunnerLauncher("uniform"), warm=3)
    try:
        pool.fill()
        assert pool.wait_filled(timeout_s=60) == ""
        assert pool.ready_count == 3
    finally:
        pool.close()
    broken = RunnerPool(Device.CPU, FakeRunnerLauncher("dies_at_start"), warm=2)
    try:
        broken.fill()
        assert broken.wait_filled(timeout_s=60) != ""  # none could start: it says why
        assert broken.ready_count == 0
    finally:
        broken.close()


def test_the_seed_cache_is_hit_copied_or_missed_as_the_runner_says(tmp_path, monkeypatch):
    """A runner copies the grader's seed into its own Triton cache and compiles; it says
    "hit" only when the compile added nothing, so a stale seed shows as "miss"."""
    from graders.runner import known_answer

    seed, cache = tmp_path / "seed", tmp_path / "cache"
    (seed / "KEY").mkdir(parents=True)
    (seed / "KEY" / "_row_logsumexp.cubin").write_text("compiled by the grader")

    def compile_into_cache(key, artifact="_row_logsumexp.cubin"):
        def fake_compile(rows, cols):  # Triton compiles what its cache lacks, under its key
            (cache / key).mkdir(parents=True, exist_ok=True)
            if not (cache / key / artifact).exists():
                (cache / key / artifact).write_text("compiled by the runner")
        return fake_compile

    monkeypatch.setattr(known_answer, "compile_ahead", compile_into_cache("KEY"))
    assert known_answer.compile_from_seed(5, 300, str(seed), str(cache))["seed"] == "hit"
    assert (cache / "KEY" / "_row_logsumexp.cubin").read_text() == "compiled by the grader"
    # the host stubs are never in the seed (graders.isolation.seed_cache.strip_host_stubs): the
    # runner builds its own, and the kernel is still a hit
    monkeypatch.setattr(known_answer, "compile_ahead",
                        compile_into_cache("STUB", "cuda_utils.cpython-312-x86_64-linux-gnu.so"))
    assert known_answer.compile_from_seed(5, 300, str(seed), str(cache))["seed"] == "hit"
    monkeypatch.setattr(known_answer, "compile_ahead", compile_into_cache("OTHER"))
    assert known_answer.compile_from_seed(5, 300, str(seed), str(cache))["seed"] == "miss"
    assert known_answer.compile_from_seed(5, 300, None, str(tmp_path / "c2"))["seed"] == "none"
    assert known_answer.compile_from_seed(5, 300, str(tmp_path / "gone"), str(cache))["seed"] \
        == "none"


def test_without_a_gpu_no_seed_cache_is_made_and_runners_compile_as_before(tmp_path, monkeypatch):
    """The seed is made by a process of its own; where it cannot compile (here: no GPU
    for Triton's warmup) the slot has none and says so, and nothing is left behind."""
    import tempfile

    from graders.isolation.launch import runner_env
    from graders.isolation.seed_cache import make_seed_cache

    # a temporary folder of this test's own: another process's seeds come and go in /tmp
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert make_seed_cache((5, 300), None, runner_env()) is None
    assert list(tmp_path.glob("graders-seed-*")) == []


def test_a_sandboxed_gpu_is_named_by_its_uuid_not_its_index(tmp_path, monkeypatch):
    """In the sandbox only /dev/nvidia<N> exists, so CUDA numbers that GPU 0 and an
    index N > 0 names nothing: the runner is given the UUID of the GPU with minor N."""
    from graders.shared import gpuinfo

    for bus, minor, uuid in (("0000:18:00.0", 0, "GPU-aaaa"), ("0000:2a:00.0", 1, "GPU-bbbb")):
        (tmp_path / bus).mkdir()
        (tmp_path / bus / "information").write_text(
            f"Model: \t\t NVIDIA H200\nGPU UUID: \t {uuid}\nBus Location: \t {bus}\n"
            f"Device Minor: \t {minor}\n")
    monkeypatch.setattr(gpuinfo, "DRIVER_GPUS", tmp_path)
    assert gpuinfo.cuda_visible_devices(1) == "GPU-bbbb"
    assert gpuinfo.cuda_visible_devices(0) == "GPU-aaaa"
    assert gpuinfo.cuda_visible_devices(2) == "2"  # unknown to the driver: the index


# -- a call that raises or crashes fails its check, not the run: issue 23 ------------------

def raises_on_wide_rows(cols: int) -> str:
    """A good kernel whose wrapper raises, as Liger-Kernel's does, for rows over ``cols``."""
    return safe(f"    if x.shape[1] > {cols}:\n"
                f"        raise RuntimeError('rows over {cols} columns are not supported')\n"
                "    y = torch.empty_like(x)\n    launch(x, y)\n    return y\n")


def test_a_call_that_raises_on_one_shape_fails_that_check_and_the_others_keep_their_points(
        grade_source):
    source = raises_on_wide_rows(50000)  # only long_rows' 2×100003 on the CPU
    result = grade_source("safe_softmax", source)
    by_name = {c.name: c for c in result.checks}
    assert result.verdict is Verdict.FAILED, result.message
    assert [c.name for c in result.checks if not c.passed] == ["long_rows"]
    message = by_name["long_rows"].message
    assert message.startswith("softmax(2×100003 float32) raised RuntimeError: rows over 50000")
    line = source.splitlines().index("        raise RuntimeError('rows over 50000 columns are "
                                     "not supported')") + 1
    assert f"(line {line} of your file)" in message and by_name["long_rows"].line == line
    assert result.score == 100 - by_name["long_rows"].max_points


def test_a_crash_on_one_shape_fails_that_check_and_a_fresh_runner_takes_the_rest(grade_source):
    source = safe("    if x.shape[1] == 1500:\n        import os, signal\n"
                  "        os.kill(os.getpid(), signal.SIGSEGV)\n"
                  "    y = torch.empty_like(x)\n    launch(x, y)\n    return y\n")
    result = grade_source("safe_softmax", source)
    failed = [c for c in result.checks if not c.passed]
    assert result.verdict is Verdict.FAILED, result.message
    assert [c.name for c in failed] == ["non_power_of_two_cols"]
    assert "crashed with SIGSEGV" in failed[0].message and "2×1500" in failed[0].message
    assert all(c.ran for c in result.checks) and result.phases["runners"] >= 2


# -- the work stays on the device, on the CPU as on the GPU: issue 23 ----------------------

@pytest.mark.parametrize("off_device", [
    "x.numpy()", "np.asarray(x)", "x.tolist()", "np.from_dlpack(x)", "x[0, 0].item()",
    "x.to('cpu')"])
def test_data_taken_off_the_device_is_rejected_on_the_cpu_too(grade_source, off_device):
    source = "import numpy as np\n" + safe(
        f"    host = {off_device}\n    y = torch.empty_like(x)\n    launch(x, y)\n    return y\n")
    result = grade_source("safe_softmax", source)
    assert result.verdict is Verdict.REJECTED, result.message
    assert "moved data off the device" in result.message
    line = next(i for i, text in enumerate(source.splitlines(), 1) if "host = " in text)
    assert result.line == line


def test_a_result_no_kernel_of_the_call_was_given_is_rejected(grade_source):
    source = safe("    y = torch.empty_like(x)\n    scratch = torch.empty_like(x)\n"
                  "    launch(x, scratch)\n    return y\n")
    result = grade_source("safe_softmax", source)
    assert result.verdict is Verdict.REJECTED
    assert "no Triton kernel launched in this call was given" in result.message


def test_a_copy_of_what_a_kernel_wrote_counts_as_written(grade_source):
    source = safe("    scratch = torch.empty_like(x)\n    launch(x, scratch)\n"
                  "    return scratch.clone()\n")
    assert grade_source("safe_softmax", source).verdict is Verdict.PASSED


def _autotuned_kernel() -> str:
    """SAFE_KERNEL autotuned over two configs; the first would write zeros: the
    interpreter's autotune keeps the first config that runs, so only skipping it (16384
    values on one warp: 512 a thread) lets the kernel pass."""
    source = SAFE_KERNEL
    for old, new in [
        ("@triton.jit\ndef _kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):",
         "@triton.autotune(configs=[triton.Config({'KEEP': 0}, num_warps=1),\n"
         "                          triton.Config({'KEEP': 1}, num_warps=8)], key=['n_cols'])\n"
         "@triton.jit\ndef _kernel(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr, KEEP: tl.constexpr):"),
        ("tl.exp(x - row_max) / total, mask", "tl.exp(x - row_max) / total * KEEP, mask"),
        ("block = min(triton.next_power_of_2(x.shape[1]), 1024)", "block = 16384")]:
        assert old in source
        source = source.replace(old, new)
    return source + "\n\ndef softmax(x):\n    y = torch.empty_like(x)\n    launch(x, y)\n    return y\n"


def test_autotune_skips_a_config_that_holds_too_much_per_thread_before_it_compiles(grade_source):
    """Issue 23: a 32768-wide block took 12 s to compile on 1 warp on the H200; the grader's
    autotune skips configs over 256 values a thread, so the other configs are chosen."""
    result = grade_source("safe_softmax", _autotuned_kernel())
    assert result.verdict is Verdict.PASSED, [c.message for c in result.checks if not c.passed]


def test_a_lane_out_of_parts_closes_its_runner_while_the_others_still_check(grade_source):
    """Issue 43: lanes closed at the end made the timing wait for each (0.4-0.7 s with four
    on the H200). A lane with nothing left to take closes its runner at once; each close is
    on the grading's timeline. The reference, made to sleep 3 s in the underflow check (8×300
    on the CPU, no other check's shape), keeps one lane busy long after the others
    are out of parts: their lanes close while it still checks. (The plain reference's lanes
    can end within 50 ms of each other on a loaded CI, where the order said nothing.)"""
    reference = (REPO / "reference_solutions" / "safe_softmax" / "solution.py").read_text()
    slow = reference.replace("def softmax(", "def _softmax(", 1) + (
        "\n\nimport time as _time\n\n\ndef softmax(x):\n"
        "    if tuple(x.shape) == (8, 300):  # the underflow check's one call\n"
        "        _time.sleep(3.0)\n"
        "    return _softmax(x)\n")
    assert slow.count("def softmax(") == 1
    result = grade_source("safe_softmax", slow, lanes=3)
    assert result.verdict is Verdict.PASSED, [c.message for c in result.checks if not c.passed]
    timeline = result.phases["timeline"]
    closes = [t for t in timeline if t[1] == "runner closed"]
    assert len(closes) == 3 and {t[0] for t in closes} == {0, 1, 2}
    [(slow_lane, _, began, seconds, _)] = [t for t in timeline if t[1].startswith("underflow/")]
    assert seconds >= 3.0
    others = [t for t in closes if t[0] != slow_lane]
    assert max(t[2] for t in others) < began + seconds - 1.0  # closed while it still checked
    [slow_close] = [t for t in closes if t[0] == slow_lane]
    # its own runner closed after its last part (each of the timeline's figures is rounded
    # to the ms: a start and a length can sum 1.5 ms past the close that followed them)
    assert slow_close[2] >= began + seconds - 0.002
    assert result.phases["close_s"] < 0.1  # nothing was left open at the end
