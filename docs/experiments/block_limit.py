"""Calibration: how wide a one-program-per-row softmax block can the grader afford to compile?

A Triton softmax that keeps a whole row in one program needs BLOCK = next power of two >= cols
as a constexpr, so every element lives in registers. Past some width ptxas spends minutes on the
kernel (524288 is known not to finish in 300 s on the GPU host). This script compiles the same
small kernel for a grid of widths, dtypes and warp counts, each in its own subprocess with a
fresh TRITON_CACHE_DIR and a hard timeout, and, where a GPU is present, times the kernels that
compiled (rows x (BLOCK-1) input, read + write once for GB/s).

Usage, from the repository root (needs only torch + triton):

    python3 docs/experiments/block_limit.py --out $OUT/block_limit.md      # full grid, < 4 min
    python3 docs/experiments/block_limit.py --blocks 16384 65536 --warps 4 16 --timeout 60

Options:
    --blocks N ...     BLOCK widths (default 16384 32768 65536 131072 262144 524288)
    --dtypes D ...     float32 and/or bfloat16 (default both)
    --warps W ...      num_warps values (default 4 8 16)
    --timeout S        per-compile limit in seconds, import time excluded (default 60)
    --jobs N           compiles at once (default os.cpu_count()); they share the CPUs, so
                       compile seconds are under that load
    --rows N           rows of the timed input (default 64)
    --arch N           compile target without a GPU (default 90 = sm_90, H100/H200)
    --compile-only     skip the GPU timing even when a GPU is present
    --keep-cache       keep the per-compile cache directories (path is printed)
    --out FILE         also write the header + markdown table to FILE

Output: a header line, a markdown table (BLOCK, dtype, num_warps, elements per thread, compile
s (whole triton.compile), ptxas s (its ptxas share), run ms, GB/s, registers and spill-store
bytes per thread (both from ptxas -v), max abs error against torch.softmax), then one line of
JSON starting with `{"summary"`. Progress goes to stderr.
"""
import argparse
import concurrent.futures
import datetime
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import triton
import triton.language as tl

RESULT_TAG = "BLOCK_LIMIT_RESULT "  # prefix of the one JSON line a child prints
DTYPE_TAG = {"float32": "*fp32", "bfloat16": "*bf16"}  # Triton signature type of each pointer
ELEMENT_BYTES = {"float32": 4, "bfloat16": 2}


# The kernel under test: one program per row, the whole row in one BLOCK-wide tile.
@triton.jit
def row_softmax(x_ptr, y_ptr, stride, cols, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    # Padding lanes read -inf so they drop out of the max and give exp() == 0.
    x = tl.load(x_ptr + row * stride + offs, mask=mask, other=-float("inf")).to(tl.float32)
    x = x - tl.max(x, axis=0)
    e = tl.exp(x)
    y = e / tl.sum(e, axis=0)
    # Store in the input dtype.
    tl.store(y_ptr + row * stride + offs, y.to(y_ptr.dtype.element_ty), mask=mask)


def make_source(block, dtype):
    """The kernel specialised the way triton.jit would for a contiguous rows x (BLOCK-1) tensor:
    16-byte aligned pointers, an odd (so unhinted) stride and column count."""
    sig = {"x_ptr": DTYPE_TAG[dtype], "y_ptr": DTYPE_TAG[dtype], "stride": "i32", "cols": "i32",
           "BLOCK": "constexpr"}
    attrs = {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]]}
    return triton.compiler.ASTSource(row_softmax, sig, constexprs={"BLOCK": block}, attrs=attrs)


def compile_kernel(spec):
    """Compile one config for the target in spec (cache hits when the cache already holds it)."""
    target = triton.backends.compiler.GPUTarget("cuda", spec["arch"], 32)
    return triton.compile(make_source(spec["block"], spec["dtype"]), target=target,
                          options={"num_warps": spec["warps"]})


# ---------------------------------------------------------------- child: one compile
def child_compile(spec):
    # Survive the parent's SIGTERM (ptxas, exec'd with default handlers, dies of it) so ptxas
    # is reaped here; the parent's SIGKILL then ends this process.
    signal.signal(signal.SIGTERM, lambda *_: None)
    # Imports are done; the parent starts the timeout clock at this line.
    print("READY", flush=True)
    t0 = time.perf_counter()
    try:
        k = compile_kernel(spec)
        out = {"status": "ok", "compile_s": time.perf_counter() - t0,
               "shared": getattr(k.metadata, "shared", None)}
    except Exception as exc:  # ptxas error, out of resources, ...
        first_line = (str(exc).strip().splitlines() or [""])[0][:120]
        out = {"status": "error", "compile_s": time.perf_counter() - t0,
               "error": f"{type(exc).__name__}: {first_line}"}
    print(RESULT_TAG + json.dumps(out), flush=True)


# ---------------------------------------------------------------- child: GPU timing
def child_bench(specs):
    import torch
    from triton.testing import do_bench
    for spec in specs:
        res = {"key": spec["key"]}
        try:
            # Cache hit: the parent merged every compile's cache into our TRITON_CACHE_DIR.
            t0 = time.perf_counter()
            k = compile_kernel(spec)
            run = k[(spec["rows"], 1, 1)]  # loads the cubin (n_regs / n_spills come from here)
            res["load_s"] = time.perf_counter() - t0
            res["n_regs"], res["n_spills"] = k.n_regs, k.n_spills
            # rows x (BLOCK-1): the widest row that still needs this BLOCK, odd like 300007.
            cols = spec["block"] - 1
            dt = getattr(torch, spec["dtype"])
            x = (torch.randn(spec["rows"], cols, device="cuda") * 3).to(dt)
            y = torch.empty_like(x)
            args = (x, y, cols, cols, spec["block"])  # the constexpr is passed too, and ignored
            run(*args)
            torch.cuda.synchronize()
            res["max_err"] = (y.float() - torch.softmax(x.float(), -1)).abs().max().item()
            ms = do_bench(lambda: run(*args), return_mode="median")
            res["run_ms"] = ms
            res["gbs"] = 2 * x.numel() * x.element_size() / (ms * 1e-3) / 1e9  # read + write once
            del x, y
        except Exception as exc:
            res["error"] = f"{type(exc).__name__}: {str(exc)[:120]}"
        print(RESULT_TAG + json.dumps(res), flush=True)


# ---------------------------------------------------------------- parent: subprocess control
LIVE = set()  # process groups still running, killed on the way out (Ctrl-C included)
LIVE_LOCK = threading.Lock()


def spawn(mode, payload, env):
    """Start this script as a child in its own session, so killpg reaches ptxas as well."""
    p = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--_child", mode, json.dumps(payload)],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                         start_new_session=True)
    with LIVE_LOCK:
        LIVE.add(p)
    return p


def kill(p):
    """Kill the child's whole process group (python + ptxas), then reap it.

    SIGTERM first: it kills ptxas, while the compile child ignores it and so reaps ptxas (no
    zombie left to init); SIGKILL a second later ends the child itself (e.g. stuck in LLVM)."""
    out = ""
    for sig, grace in ((signal.SIGTERM, 1.0), (signal.SIGKILL, None)):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            out += p.communicate(timeout=grace)[0] or ""
            break
        except subprocess.TimeoutExpired:
            continue
    return out


def finish(p, timeout):
    """Wait for the child; on timeout kill its group. Returns (output, timed_out)."""
    try:
        out, _ = p.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        out, timed_out = kill(p), True
    with LIVE_LOCK:
        LIVE.discard(p)
    return out or "", timed_out


def parse_results(out):
    return [json.loads(line[len(RESULT_TAG):]) for line in out.splitlines() if line.startswith(RESULT_TAG)]


def parse_ptxas(out):
    """Registers, spill-store bytes and ptxas seconds from the `ptxas -v` log Triton prints (TRITON_DUMP_PTXAS_LOG)."""
    regs = re.search(r"Used (\d+) registers", out)
    spill = re.search(r"(\d+) bytes spill stores", out)
    ptxas_ms = re.search(r"Compile time = ([\d.]+) ms", out)
    return ((int(regs.group(1)) if regs else None), (int(spill.group(1)) if spill else None),
            (float(ptxas_ms.group(1)) / 1e3 if ptxas_ms else None))


def child_env(cache_dir):
    env = dict(os.environ)
    env["TRITON_CACHE_DIR"] = cache_dir  # fresh cache: a real compile, never a hit
    env["TRITON_DUMP_PTXAS_LOG"] = "1"   # ptxas -v output -> registers / spills
    env["TMPDIR"] = cache_dir            # ptxas temp files of killed compiles are removed with it
    return env


def run_compile(cfg, root, timeout):
    """One compile in a subprocess, limited to `timeout` seconds after the child's imports."""
    cache = os.path.join(root, cfg["key"])
    os.makedirs(cache)
    p = spawn("compile", cfg, child_env(cache))
    first = p.stdout.readline()  # "READY" once triton is imported
    if first.strip() != "READY":  # died while importing
        out, _ = finish(p, timeout)
        return {"status": "error", "error": ((first + out).strip().splitlines() or ["child died"])[-1][:120]}
    t0 = time.perf_counter()
    out, timed_out = finish(p, timeout)
    if timed_out:
        return {"status": "timeout", "compile_s": time.perf_counter() - t0}
    last_line = (out.strip().splitlines() or ["no output"])[-1][:120]
    res = (parse_results(out) or [{"status": "error", "error": last_line}])[0]
    res["regs"], res["spill_bytes"], res["ptxas_s"] = parse_ptxas(out)
    return res


# ---------------------------------------------------------------- report
def fmt(v, spec):
    return "–" if v is None else format(v, spec)


def table(rows, timeout):
    lines = ["| BLOCK | dtype | num_warps | elem/thread | compile s | ptxas s | run ms | GB/s | regs | spill B | max err |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r["status"] == "ok":
            comp = f"{r['compile_s']:.1f}"
        elif r["status"] == "timeout":
            comp = f"> {timeout:g}"
        else:
            comp = f"error: {r.get('error', '?')}"
        run_ms = fmt(r.get("run_ms"), ".4f") if "bench_error" not in r else f"error: {r['bench_error']}"
        lines.append(f"| {r['block']} | {r['dtype']} | {r['warps']} | {r['block'] // (32 * r['warps'])} | {comp} | "
                     f"{fmt(r.get('ptxas_s'), '.1f')} | "
                     f"{run_ms} | {fmt(r.get('gbs'), '.0f')} | {fmt(r.get('regs'), 'd')} | "
                     f"{fmt(r.get('spill_bytes'), 'd')} | {fmt(r.get('max_err'), '.1e')} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[16384, 32768, 65536, 131072, 262144, 524288])
    ap.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"], choices=list(DTYPE_TAG))
    ap.add_argument("--warps", type=int, nargs="+", default=[4, 8, 16])
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rows", type=int, default=64)
    ap.add_argument("--arch", type=int, default=90)
    ap.add_argument("--compile-only", action="store_true")
    ap.add_argument("--keep-cache", action="store_true")
    ap.add_argument("--out")
    ap.add_argument("--_child", nargs=2, help=argparse.SUPPRESS)
    a = ap.parse_args()

    # Child modes: this same file, started by the parent below.
    if a._child:
        mode, payload = a._child
        return child_compile(json.loads(payload)) if mode == "compile" else child_bench(json.loads(payload))

    wall0 = time.perf_counter()
    import torch
    # Target: the GPU here if there is one, else --arch (compile-only: no run times).
    gpu = torch.cuda.is_available()
    if gpu:
        major, minor = torch.cuda.get_device_capability()
        arch, device = major * 10 + minor, torch.cuda.get_device_name()
    else:
        arch, device = a.arch, "no GPU"
    timing = gpu and not a.compile_only
    mode = ("compile + run" if timing else
            "compile only (--compile-only)" if gpu else f"compile only (no GPU; target sm_{arch})")

    # Every config, widest first so the slow compiles start at once and overlap the rest.
    configs = [{"block": b, "dtype": d, "warps": w, "arch": arch, "rows": a.rows, "key": f"b{b}_{d}_w{w}"}
               for b, d, w in itertools.product(sorted(set(a.blocks), reverse=True), a.dtypes, a.warps)]
    root = tempfile.mkdtemp(prefix="block_limit_")
    print(f"{len(configs)} compiles, {a.jobs} at once, timeout {a.timeout:g} s, target sm_{arch}, cache {root}",
          file=sys.stderr, flush=True)
    try:
        # Phase 1: compile every config in its own subprocess, `jobs` at once.
        results = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            futures = {pool.submit(run_compile, c, root, a.timeout): c for c in configs}
            for f in concurrent.futures.as_completed(futures):
                c = futures[f]
                results[c["key"]] = {**c, **f.result()}
                r = results[c["key"]]
                print(f"  compiled {c['key']:<22} {r['status']:<8} {fmt(r.get('compile_s'), '.1f')} s",
                      file=sys.stderr, flush=True)

        # Phase 2 (GPU only): time the compiled kernels one after another in one child, which
        # finds them in a cache merged from the per-compile caches (so nothing recompiles).
        ok = [c for c in configs if results[c["key"]]["status"] == "ok"]
        if timing and ok:
            merged = os.path.join(root, "_merged")
            for c in ok:
                shutil.copytree(os.path.join(root, c["key"]), merged, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("*.ptx", "*.log", "*.o"))
            p = spawn("bench", ok, child_env(merged))
            out, timed_out = finish(p, a.timeout + 10 * len(ok))
            for r in parse_results(out):
                res = results[r.pop("key")]
                if "error" in r:
                    res["bench_error"] = r.pop("error")
                res.update(r)
                # ptxas -v is the source for regs/spills; the loaded kernel is the fallback.
                res["regs"] = res["regs"] if res.get("regs") is not None else r.get("n_regs")
            if timed_out:
                print("GPU timing child timed out; later configs have no run time", file=sys.stderr)
            slow = [k for k, r in results.items() if r.get("load_s", 0) > 2]
            if slow:
                print(f"warning: cache miss in the timing child for {slow} (recompiled)", file=sys.stderr)
    finally:
        # Kill anything still running (Ctrl-C) and drop the caches.
        with LIVE_LOCK:
            for p in list(LIVE):
                kill(p)
        if not a.keep_cache:
            shutil.rmtree(root, ignore_errors=True)

    # Report: header line, markdown table, then a one-line JSON summary.
    rows = [results[c["key"]] for c in sorted(configs, key=lambda c: (c["block"], c["dtype"] != "float32", c["warps"]))]
    wall = time.perf_counter() - wall0
    date = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    header = (f"Device: {device} (sm_{arch}), {mode} | {date} | torch {torch.__version__} | "
              f"triton {triton.__version__} | {a.jobs} compiles at once on {os.cpu_count()} CPUs, "
              f"timeout {a.timeout:g} s | rows {a.rows}, cols BLOCK-1 | wall {wall:.0f} s")
    text = header + "\n\n" + table(rows, a.timeout) + "\n"
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)

    # Largest BLOCK per dtype with at least one num_warps compiling within the timeout.
    largest = {}
    for r in rows:
        if r["status"] == "ok":
            best = largest.get(r["dtype"])
            if best is None or (r["block"], -r["compile_s"]) > (best["block"], -best["compile_s"]):
                largest[r["dtype"]] = {"block": r["block"], "num_warps": r["warps"],
                                       "compile_s": round(r["compile_s"], 2)}
    summary = {
        "summary": "block_limit", "device": device, "arch": arch, "mode": mode, "date": date,
        "torch": torch.__version__, "triton": triton.__version__, "timeout_s": a.timeout, "jobs": a.jobs,
        "wall_s": round(wall, 1), "largest_block_within_timeout": largest,
        "timeouts": [[r["block"], r["dtype"], r["warps"]] for r in rows if r["status"] == "timeout"],
        "results": [{"block": r["block"], "dtype": r["dtype"], "warps": r["warps"], "status": r["status"],
                     "compile_s": round(r["compile_s"], 2) if r.get("compile_s") is not None else None,
                     "run_ms": r.get("run_ms"), "gbs": round(r["gbs"], 1) if r.get("gbs") else None,
                     "ptxas_s": r.get("ptxas_s"), "regs": r.get("regs"), "spill_bytes": r.get("spill_bytes")} for r in rows],
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
