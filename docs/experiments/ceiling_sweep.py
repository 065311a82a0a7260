"""Issue 16: which launch settings bring the safe-softmax reference to the copy ceiling?

The best public kernel on 32768×1024 and 4096×4096 bfloat16 is a plain one-row-per-program
kernel that picks num_warps per shape; the reference picks rows per program and warps with a
formula. This sweep times the reference's own single-pass kernel over (rows per program,
num_warps) on the graded shapes below 0.99 of copy, then, for the long bfloat16 rows
(1024×32768, 0.75 of copy), a persistent kernel striding over rows, and the online
reference's split-row kernel (each row cut across 2 or 4 programs that keep their part in
registers). For the online shapes (0.85 and 0.79), the reference's one-read persistent
kernel at larger chunks, and a version that loads its next chunk before waiting for the
rest of the row. `--only "1024x32768"` limits a run to some shapes.

Same method as the grader (graders.bench.time_in_process: L2 flushed, fresh inputs, a copy
timed beside every call). Run on the GPU from the repo root:
    python3 docs/experiments/ceiling_sweep.py [--budget-s 120] [--out FILE]
and, to check every variant's values on the CPU interpreter first (no timing):
    TRITON_INTERPRET=1 python3 docs/experiments/ceiling_sweep.py --check-cpu
"""
import argparse
import importlib.util
import sys
import time

import torch
import triton
import triton.language as tl

sys.path.insert(0, ".")


def _load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


safe = _load("reference_solutions/safe_softmax/solution.py", "safe_reference")
online = _load("reference_solutions/online_softmax/solution.py", "online_reference")
NEG_INF = tl.constexpr(float("-inf"))


def rows_kernel(block_m, warps):
    """The reference's single-pass kernel with a chosen rows-per-program and warps."""
    def run(x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        safe._softmax_rows_kernel[(triton.cdiv(n_rows, block_m),)](
            x, y, n_rows, n_cols, x.stride(0), y.stride(0),
            BLOCK_M=block_m, BLOCK_N=triton.next_power_of_2(n_cols), num_warps=warps)
        return y
    return run


@triton.jit
def _persistent_rows_kernel(x_ptr, y_ptr, n_rows, n_cols, x_row_stride, y_row_stride,
                            BLOCK_N: tl.constexpr, STAGES: tl.constexpr):
    """One whole row at a time, programs striding over rows; STAGES > 1 lets the compiler
    start loading the next row while this one is reduced."""
    cols = tl.arange(0, BLOCK_N)
    ok = cols < n_cols
    for row in tl.range(tl.program_id(0), n_rows, tl.num_programs(0), num_stages=STAGES):
        # int32 offsets: every shape swept here has fewer than 2**31 elements
        x = tl.load(x_ptr + row * x_row_stride + cols, mask=ok, other=float("-inf"))
        x = x.to(tl.float32)
        m = tl.max(x, axis=0)
        p = tl.exp(x - m)
        y = p * (1.0 / tl.sum(p, axis=0))
        tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty), mask=ok)


def persistent(per_sm, warps, stages):
    def run(x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 2
        _persistent_rows_kernel[(min(n_rows, sms * per_sm),)](
            x, y, n_rows, n_cols, x.stride(0), y.stride(0),
            BLOCK_N=triton.next_power_of_2(n_cols), STAGES=stages, num_warps=warps)
        return y
    return run


@triton.jit(do_not_specialize=["n_tasks", "G"])
def _prefetching_persistent_kernel(
    x_ptr, y_ptr, m_part_ptr, s_part_ptr, sync_ptr,
    n_rows, n_cols, x_row_stride, y_row_stride, n_splits, n_tasks, G,
    CHUNK: tl.constexpr, SPLITS_POW2: tl.constexpr, MAX_SPINS: tl.constexpr,
):
    """The online reference's one-read persistent kernel, with one change: the load of a
    program's NEXT chunk is issued before it waits for the rest of this row's partials, so
    HBM keeps working while the SM waits. Costs a second chunk of registers."""
    offs = tl.arange(0, CHUNK)
    k = tl.arange(0, SPLITS_POW2)
    # int32 offsets: the swept shapes have 2**26 elements
    t0 = tl.program_id(0)
    r0 = t0 // n_splits
    c0 = (t0 - r0 * n_splits) * CHUNK + offs
    x_next = tl.load(x_ptr + r0 * x_row_stride + c0, mask=(t0 < n_tasks) & (c0 < n_cols),
                     other=NEG_INF)
    for t in tl.range(tl.program_id(0), n_tasks, G):
        row = t // n_splits
        split = t - row * n_splits
        cols = split * CHUNK + offs
        x = x_next.to(tl.float32)
        m = tl.max(x, axis=0)
        m_ref = tl.where(m == NEG_INF, 0.0, m)
        e = tl.exp(x - m_ref)
        s = tl.sum(e, axis=0)
        tl.store(m_part_ptr + row * n_splits + split, m)
        tl.store(s_part_ptr + row * n_splits + split, s)
        # the next task's chunk, in flight during the wait below
        tn = t + G
        rn = tn // n_splits
        cn = (tn - rn * n_splits) * CHUNK + offs
        x_next = tl.load(x_ptr + rn * x_row_stride + cn, mask=(tn < n_tasks) & (cn < n_cols),
                         other=NEG_INF)
        tl.debug_barrier()
        arrived = tl.atomic_add(sync_ptr + row, 1, sem="acq_rel", scope="gpu") + 1
        spins = 0
        while (arrived < n_splits) & (spins < MAX_SPINS):
            arrived = tl.atomic_add(sync_ptr + row, 0, sem="acquire", scope="gpu")
            spins += 1
        tl.debug_barrier()
        m_p = tl.load(m_part_ptr + row * n_splits + k, mask=k < n_splits, other=NEG_INF,
                      cache_modifier=".cg")
        s_p = tl.load(s_part_ptr + row * n_splits + k, mask=k < n_splits, other=0.0,
                      cache_modifier=".cg")
        big_m = tl.max(m_p, axis=0)
        big_m_ref = tl.where(big_m == NEG_INF, 0.0, big_m)
        big_s = tl.sum(s_p * tl.exp(m_p - big_m_ref), axis=0)
        y = e * (tl.exp(m_ref - big_m_ref) / big_s)
        tl.store(y_ptr + row * y_row_stride + cols, y, mask=cols < n_cols)


def prefetching(chunk, warps):
    """Launch like the reference's _persistent_softmax: no more programs than fit at once."""
    resident = {}

    def run(x):
        n_rows, n_cols = x.shape
        y = torch.empty_like(x)
        n_splits = triton.cdiv(n_cols, chunk)
        pow2 = triton.next_power_of_2(n_splits)
        m_part = torch.empty((n_rows, n_splits), dtype=torch.float32, device=x.device)
        s_part = torch.empty_like(m_part)
        sync = torch.zeros((n_rows + 1,), dtype=torch.int32, device=x.device)
        args = (x, y, m_part, s_part, sync, n_rows, n_cols, x.stride(0), y.stride(0),
                n_splits, n_rows * n_splits)
        consts = dict(CHUNK=chunk, SPLITS_POW2=pow2, MAX_SPINS=1 << 22, num_warps=warps)
        if not x.is_cuda:  # interpreter: one program, rows of one chunk, no waiting
            _prefetching_persistent_kernel[(1,)](*args, 1, **consts)
            return y
        if "per_sm" not in resident:
            kernel = _prefetching_persistent_kernel.warmup(*args, 1, grid=(1,), num_stages=1,
                                                           **consts)
            kernel._init_handles()
            warp_regs = -(-kernel.n_regs * 32 // 256) * 256
            resident["per_sm"] = min(65536 // (warp_regs * warps), 2048 // (32 * warps), 32)
            print(f"  prefetching c{chunk} w{warps}: {kernel.n_regs} regs, "
                  f"{resident['per_sm']} programs per SM", flush=True)
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        grid = min((resident["per_sm"] * sms // n_splits) * n_splits, n_rows * n_splits)
        assert grid >= n_splits, "a row's chunks cannot all be resident"
        _prefetching_persistent_kernel[(grid,)](*args, grid, num_stages=1, **consts)
        return y
    return run


@triton.jit(do_not_specialize=["n_tasks", "G"])
def _wait_variant_kernel(
    x_ptr, y_ptr, m_part_ptr, s_part_ptr, sync_ptr,
    n_rows, n_cols, x_row_stride, y_row_stride, n_splits, n_tasks, G,
    CHUNK: tl.constexpr, SPLITS_POW2: tl.constexpr, MAX_SPINS: tl.constexpr,
    WAIT: tl.constexpr,
):
    """The online reference's one-read persistent kernel (full chunks only) with its wait
    for the row's partials kept or left out, to measure what the wait costs:
    WAIT=0 skips it (wrong values: the structure's cost without the dependency),
    WAIT=1 waits as the reference does. (Triton 3.6 already compiles the reference's
    polling atomic_add(ptr, 0, sem="acquire") to one thread's ld.global.gpu.acquire, not a
    read-modify-write: checked in the PTX for sm_90, so a plain volatile poll adds nothing.)"""
    offs = tl.arange(0, CHUNK)
    k = tl.arange(0, SPLITS_POW2)
    for t in range(tl.program_id(0), n_tasks, G):
        row = t // n_splits
        split = t - row * n_splits
        cols = split * CHUNK + offs
        x = tl.load(x_ptr + row * x_row_stride + cols).to(tl.float32)
        m = tl.max(x, axis=0)
        m_ref = tl.where(m == NEG_INF, 0.0, m)
        e = tl.exp(x - m_ref)
        s = tl.sum(e, axis=0)
        tl.store(m_part_ptr + row * n_splits + split, m)
        tl.store(s_part_ptr + row * n_splits + split, s)
        tl.debug_barrier()
        arrived = tl.atomic_add(sync_ptr + row, 1, sem="acq_rel", scope="gpu") + 1
        if WAIT == 1:
            spins = 0
            while (arrived < n_splits) & (spins < MAX_SPINS):
                arrived = tl.atomic_add(sync_ptr + row, 0, sem="acquire", scope="gpu")
                spins += 1
        tl.debug_barrier()
        m_p = tl.load(m_part_ptr + row * n_splits + k, mask=k < n_splits, other=NEG_INF,
                      cache_modifier=".cg")
        s_p = tl.load(s_part_ptr + row * n_splits + k, mask=k < n_splits, other=0.0,
                      cache_modifier=".cg")
        big_m = tl.max(m_p, axis=0)
        big_m_ref = tl.where(big_m == NEG_INF, 0.0, big_m)
        big_s = tl.sum(s_p * tl.exp(m_p - big_m_ref), axis=0)
        y = e * (tl.exp(m_ref - big_m_ref) / big_s)
        tl.store(y_ptr + row * y_row_stride + cols, y.to(y_ptr.dtype.element_ty))


def wait_variant(chunk, warps, wait, per_sm_less=0):
    """Launch _wait_variant_kernel like the reference: no more programs than fit at once
    (per_sm_less: that many fewer per SM, to see whether a spare slot helps)."""
    resident = {}

    def run(x):
        n_rows, n_cols = x.shape
        assert n_cols % chunk == 0
        y = torch.empty_like(x)
        n_splits = n_cols // chunk
        pow2 = triton.next_power_of_2(n_splits)
        m_part = torch.empty((n_rows, n_splits), dtype=torch.float32, device=x.device)
        s_part = torch.empty_like(m_part)
        sync = torch.zeros((n_rows + 1,), dtype=torch.int32, device=x.device)
        args = (x, y, m_part, s_part, sync, n_rows, n_cols, x.stride(0), y.stride(0),
                n_splits, n_rows * n_splits)
        consts = dict(CHUNK=chunk, SPLITS_POW2=pow2, MAX_SPINS=1 << 22, WAIT=wait,
                      num_warps=warps)
        if not x.is_cuda:  # interpreter: programs run one by one, so one program in all
            _wait_variant_kernel[(1,)](*args, 1, **consts)
            return y
        if "per_sm" not in resident:
            kernel = _wait_variant_kernel.warmup(*args, 1, grid=(1,), num_stages=1, **consts)
            kernel._init_handles()
            warp_regs = -(-kernel.n_regs * 32 // 256) * 256
            resident["per_sm"] = min(65536 // (warp_regs * warps), 2048 // (32 * warps), 32)
            resident["per_sm"] -= per_sm_less
            print(f"  wait{wait} c{chunk} w{warps}: {kernel.n_regs} regs, "
                  f"{resident['per_sm']} programs per SM", file=LOG, flush=True)
        sms = torch.cuda.get_device_properties(x.device).multi_processor_count
        grid = min((resident["per_sm"] * sms // n_splits) * n_splits, n_rows * n_splits)
        assert grid >= n_splits, "a row's chunks cannot all be resident"
        _wait_variant_kernel[(grid,)](*args, grid, num_stages=1, **consts)
        return y
    return run


LOG = sys.stdout  # where the sweep writes; the variants note their occupancy there too


def split_rows(chunk, warps):
    """The online reference's one-read persistent kernel (a row split across programs that
    each keep their chunk in registers and wait for the row's partials) at another chunk
    size and warps; it stores y in x's dtype, so it also serves bfloat16 rows."""
    def run(x):
        saved = online.PERSISTENT_CHUNK, online.PERSISTENT_WARPS
        online.PERSISTENT_CHUNK, online.PERSISTENT_WARPS = chunk, warps
        try:
            y = torch.empty_like(x)
            assert online._persistent_softmax(x, y), "a row's chunks cannot all be resident"
            return y
        finally:
            online.PERSISTENT_CHUNK, online.PERSISTENT_WARPS = saved
    return run


def variants(rows, cols):
    if cols >= 65536 or (rows, cols) == (3, 256):  # the online shapes (and their CPU check)
        chunks = ((256, 4),) if cols < 65536 else ((8192, 4), (4096, 4), (4096, 8), (8192, 8))
        split = [] if cols < 65536 else [(f"split c{c} w{w}", split_rows(c, w))
                                         for c, w in ((16384, 8), (16384, 16))]
        waits = [] if cols < 65536 else [
            (f"wait{w} c8192 w4{' -1/SM' if less else ''}", wait_variant(8192, 4, w, less))
            for w, less in ((0, 0), (1, 0), (1, 1))]
        return ([("online reference", online.online_softmax)] + waits + split
                + [(f"prefetching c{c} w{w}", prefetching(c, w)) for c, w in chunks[:1]])
    out = [("reference", safe.softmax)]
    if cols <= 4096:
        for block_m in (1, 2, 4) if cols >= 1024 else (4, 8, 16, 32):
            for warps in (2, 4, 8, 16):
                if block_m * cols // (32 * warps) >= 4:  # at least 4 values a thread
                    out.append((f"rows m{block_m} w{warps}", rows_kernel(block_m, warps)))
    else:
        if x_is_gpu():  # two or four programs per row, each half or a quarter in registers
            out += [(f"split c{c} w{w}", split_rows(c, w))
                    for c, w in ((16384, 8), (16384, 16), (8192, 8), (8192, 4))]
        # (1, 2 or 3 stages give the same PTX with triton 3.6: the whole-row load is not
        # pipelined; docs/benchmarks.md. Kept as one persistent baseline per grid size.)
        for per_sm, warps, stages in ((1, 16, 1), (2, 16, 1)):
            out.append((f"persistent {per_sm}/SM w{warps} s{stages}",
                        persistent(per_sm, warps, stages)))
    return out


def x_is_gpu():
    return torch.cuda.is_available()


# The graded shapes, most wanted first (issue 16's "done when"), then the rest.
SHAPES = [(32768, 1024, "bfloat16"), (32768, 1024, "float32"), (4096, 4096, "bfloat16"),
          (256, 262144, "float32"), (64, 1048576, "float32"), (1024, 32768, "bfloat16"), (4096, 4096, "float32"), (65536, 256, "float32"),
          (65536, 256, "bfloat16")]


def check_cpu():
    """Every variant against float64 softmax on small shapes of the same kind."""
    for rows, cols, dt in [(6, 1024, "bfloat16"), (5, 4096, "float32"), (3, 32768, "bfloat16"),
                           (40, 256, "float32"), (3, 256, "float32")]:
        x = (torch.randn(rows, cols) * 3).to(getattr(torch, dt))
        ref = torch.softmax(x.double(), -1)
        for name, fn in variants(rows, cols):
            err = (fn(x).double() - ref).abs().max().item()
            print(f"{rows}x{cols} {dt:<9} {name:<26} max abs err {err:.1e}", flush=True)
            assert err < 1e-2, name


def sweep(budget_s, out, only=()):
    from graders.bench import time_in_process
    from graders.perfinputs import InputRecipe
    from graders.spec import PerfShape

    global LOG
    LOG = out
    started = time.monotonic()
    for rows, cols, dt in SHAPES:
        label = f"{rows}×{cols} {dt}"
        if only and not any(o in f"{rows}x{cols} {dt}" for o in only):
            continue
        shape = PerfShape("softmax", (InputRecipe("x", "uniform", rows, cols, dt),), ("@x",),
                          {}, label)
        x = (torch.randn(rows, cols, device="cuda") * 3).to(getattr(torch, dt))
        ref = torch.softmax(x.double(), -1)
        for name, fn in variants(rows, cols):
            if time.monotonic() - started > budget_s:
                print("budget spent: stopping", file=out, flush=True)
                return
            try:
                err = (fn(x).double() - ref).abs().max().item()
                r = time_in_process(torch, fn, shape)
                line = (f"{label:<22} {name:<26} err {err:.1e} {r['ms']:.4f} ms "
                        f"{r['gbs']:6.0f} GB/s copy {r['copy_gbs']:6.0f} "
                        f"frac {r['fraction']:.3f} spread {r['spread']:.3f}")
            except Exception as exc:  # noqa: BLE001 - a config that does not fit is a result
                line = f"{label:<22} {name:<26} FAILED {type(exc).__name__}: {str(exc)[:160]}"
            print(line, file=out, flush=True)
            if out is not sys.stdout:
                print(line, flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--check-cpu", action="store_true")
    parser.add_argument("--budget-s", type=float, default=120.0)
    parser.add_argument("--out")
    parser.add_argument("--only", action="append", default=[],
                        help="shapes whose 'ROWSxCOLS DTYPE' contains this (repeatable)")
    args = parser.parse_args()
    if args.check_cpu:
        check_cpu()
    else:
        sweep(args.budget_s, open(args.out, "w") if args.out else sys.stdout, args.only)
