"""Issue 44: which designs bring the two stretch references to 0.90 of copy on the H200.

Each variant is timed like graders/runner/timing.py times a submission: L2 flushed before each
call, CUDA events, the median of 25 calls, beside a device-to-device copy of the spec's bytes
(half read, half written). Run on a GPU: python docs/experiments/issue44_speed.py
"""

import statistics

import torch
import triton
import triton.language as tl

NEG_INF = tl.constexpr(float("-inf"))


def cold_ms(fn, reps=25):
    flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def copy_gbps(nbytes):
    src = torch.zeros(nbytes // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return nbytes / cold_ms(lambda: dst.copy_(src)) / 1e6


# --------------------------------------------------------------------------- causal
@triton.jit
def causal_rows(x_ptr, y_ptr, n_rows, n_cols, xs, ys, offset, scale,
                BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, VEC: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tl.arange(0, BLOCK_N)
    n_vis = tl.minimum(tl.maximum(rows + offset + 1, 0), n_cols)
    if VEC > 1:
        # a bound that is a multiple of VEC: the load mask is constant over VEC lanes, so
        # the compiler can issue vector loads; the exact mask is applied to the values
        bound = (n_vis + (VEC - 1)) // VEC * VEC
    else:
        bound = n_vis
    ld = (rows[:, None] < n_rows) & (cols[None, :] < bound[:, None]) & (cols[None, :] < n_cols)
    x = tl.load(x_ptr + rows[:, None] * xs + cols[None, :], mask=ld, other=0.0)
    keep = cols[None, :] < n_vis[:, None]
    z = tl.where(keep, x.to(tl.float32) * scale, NEG_INF)
    m = tl.max(z, axis=1)
    m_ref = tl.where(m == NEG_INF, 0.0, m)
    p = tl.exp(z - m_ref[:, None])
    s = tl.sum(p, axis=1)
    y = p * (1.0 / tl.where(m == NEG_INF, 1.0, s))[:, None]
    out = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
    tl.store(y_ptr + rows[:, None] * ys + cols[None, :], y.to(y_ptr.dtype.element_ty),
             mask=out)


@triton.jit
def causal_tiles(x_ptr, y_ptr, n_rows, n_cols, xs, ys, offset, scale,
                 TILE: tl.constexpr, VEC: tl.constexpr):
    """Two reads of the visible part (the second from L2), a scalar running max."""
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, TILE)
    n_vis = tl.minimum(tl.maximum(row + offset + 1, 0), n_cols)
    bound = (n_vis + (VEC - 1)) // VEC * VEC
    end = tl.cdiv(n_vis, TILE) * TILE
    m = tl.max(tl.full([TILE], NEG_INF, tl.float32), axis=0)
    s = tl.zeros([TILE], tl.float32)
    for start in tl.range(0, end, TILE):
        c = start + offs
        x = tl.load(x_ptr + row * xs + c, mask=(c < bound) & (c < n_cols), other=0.0)
        z = tl.where(c < n_vis, x.to(tl.float32) * scale, NEG_INF)
        m_new = tl.maximum(m, tl.max(z, axis=0))
        m_ref = tl.where(m_new == NEG_INF, 0.0, m_new)
        s = s * tl.exp(m - m_ref) + tl.exp(z - m_ref)
        m = m_new
    m_ref = tl.where(m == NEG_INF, 0.0, m)
    inv = 1.0 / tl.where(m == NEG_INF, 1.0, tl.sum(s, axis=0))
    for start in tl.range(0, end, TILE):
        c = start + offs
        x = tl.load(x_ptr + row * xs + c, mask=(c < bound) & (c < n_cols), other=0.0)
        z = tl.where(c < n_vis, x.to(tl.float32) * scale, NEG_INF)
        tl.store(y_ptr + row * ys + c, (tl.exp(z - m_ref) * inv).to(y_ptr.dtype.element_ty),
                 mask=c < n_cols)
    for start in tl.range(end, n_cols, TILE):
        c = start + offs
        tl.store(y_ptr + row * ys + c, tl.zeros([TILE], y_ptr.dtype.element_ty),
                 mask=c < n_cols)


def run_causal_rows(x, offset, vec, warps, block_m=1):
    R, C = x.shape
    y = torch.empty_like(x)
    bn = triton.next_power_of_2(C)
    return y, lambda: causal_rows[(triton.cdiv(R, block_m),)](
        x, y, R, C, x.stride(0), y.stride(0), offset, 0.125, BLOCK_M=block_m, BLOCK_N=bn,
        VEC=vec, num_warps=warps)


def run_causal_tiles(x, offset, tile, warps, vec=16):
    R, C = x.shape
    y = torch.empty_like(x)
    return y, lambda: causal_tiles[(R,)](
        x, y, R, C, x.stride(0), y.stride(0), offset, 0.125, TILE=tile, VEC=vec,
        num_warps=warps)


def causal_expected(x, offset):
    R, C = x.shape
    i = torch.arange(R, device=x.device)[:, None]
    j = torch.arange(C, device=x.device)[None, :]
    z = (x.float() * 0.125).masked_fill(j > i + offset, float("-inf"))
    return torch.nan_to_num(torch.softmax(z, dim=1), nan=0.0)


@triton.jit
def causal_tiles2(x_ptr, y_ptr, n_rows, n_cols, xs, ys, offset, scale,
                  TILE: tl.constexpr, VEC: tl.constexpr, STAGES: tl.constexpr):
    """causal_tiles with exp2 and a pipelining hint on both loops."""
    LOG2E: tl.constexpr = 1.4426950408889634
    row = tl.program_id(0).to(tl.int64)
    offs = tl.arange(0, TILE)
    n_vis = tl.minimum(tl.maximum(row + offset + 1, 0), n_cols)
    bound = (n_vis + (VEC - 1)) // VEC * VEC
    end = tl.cdiv(n_vis, TILE) * TILE
    k = scale * LOG2E
    m = tl.max(tl.full([TILE], NEG_INF, tl.float32), axis=0)
    s = tl.zeros([TILE], tl.float32)
    for start in tl.range(0, end, TILE, num_stages=STAGES):
        c = start + offs
        x = tl.load(x_ptr + row * xs + c, mask=(c < bound) & (c < n_cols), other=0.0)
        z = tl.where(c < n_vis, x.to(tl.float32) * k, NEG_INF)
        m_new = tl.maximum(m, tl.max(z, axis=0))
        m_ref = tl.where(m_new == NEG_INF, 0.0, m_new)
        s = s * tl.exp2(m - m_ref) + tl.exp2(z - m_ref)
        m = m_new
    m_ref = tl.where(m == NEG_INF, 0.0, m)
    inv = 1.0 / tl.where(m == NEG_INF, 1.0, tl.sum(s, axis=0))
    for start in tl.range(0, end, TILE, num_stages=STAGES):
        c = start + offs
        x = tl.load(x_ptr + row * xs + c, mask=(c < bound) & (c < n_cols), other=0.0)
        z = tl.where(c < n_vis, x.to(tl.float32) * k, NEG_INF)
        tl.store(y_ptr + row * ys + c, (tl.exp2(z - m_ref) * inv).to(y_ptr.dtype.element_ty),
                 mask=c < n_cols)
    for start in tl.range(end, n_cols, TILE):
        c = start + offs
        tl.store(y_ptr + row * ys + c, tl.zeros([TILE], y_ptr.dtype.element_ty),
                 mask=c < n_cols)


def run_causal_tiles2(x, offset, tile, warps, vec, stages):
    R, C = x.shape
    y = torch.empty_like(x)
    return y, lambda: causal_tiles2[(R,)](
        x, y, R, C, x.stride(0), y.stride(0), offset, 0.125, TILE=tile, VEC=vec,
        STAGES=stages, num_warps=warps)


def causal():
    shapes = [((4096, 4096), torch.float32, 0, 100671488),
              ((8192, 8192), torch.bfloat16, -2048, 171972608),
              ((2048, 16384), torch.float32, 8192, 209719296)]
    for (R, C), dt, off, nbytes in shapes:
        x = torch.randn(R, C, device="cuda").to(dt)
        ref = causal_expected(x, off)
        ceiling = copy_gbps(nbytes)
        print(f"causal {R}x{C} {dt} offset {off}: copy {ceiling:.0f} GB/s", flush=True)
        variants = []
        for warps in (4, 8, 16):
            variants.append((f"rows vec16 w{warps}",
                             lambda w=warps: run_causal_rows(x, off, 16, w)))
        for tile in (1024, 2048, 4096):
            for warps in (2, 4, 8):
                variants.append((f"tiles {tile} w{warps}",
                                 lambda t=tile, w=warps: run_causal_tiles(x, off, t, w)))
                for stages in (1, 3):
                    variants.append((f"tiles2 st{stages} {tile} w{warps}",
                                     lambda t=tile, w=warps, st=stages:
                                     run_causal_tiles2(x, off, t, w, 16, st)))
        for name, make in variants:
            try:
                y, fn = make()
                fn()
                err = (y.float() - ref).abs().max().item()
                ms = cold_ms(fn)
                gbps = nbytes / ms / 1e6
                print(f"  {name:22s} {ms:7.3f} ms {gbps:6.0f} GB/s {gbps / ceiling:6.1%}"
                      f"  max err {err:.1e}", flush=True)
            except Exception as e:  # a variant that does not compile is a finding too
                print(f"  {name:22s} failed: {type(e).__name__}: {str(e)[:120]}", flush=True)


# --------------------------------------------------------------------------- xent
@triton.jit
def xent_tiled(x_ptr, t_ptr, loss_ptr, n_cols, xs, ignore_index, TILE: tl.constexpr,
               LANE_MAX: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * xs
    t = tl.load(t_ptr + row)
    x_t = tl.load(x_row + t, mask=(t >= 0) & (t < n_cols), other=0.0).to(tl.float32)
    if LANE_MAX:
        mv = tl.full([TILE], NEG_INF, tl.float32)
        sv = tl.zeros([TILE], tl.float32)
        for off in range(0, n_cols, TILE):
            c = off + tl.arange(0, TILE)
            x = tl.load(x_row + c, mask=c < n_cols, other=NEG_INF).to(tl.float32)
            mn = tl.maximum(mv, x)
            mr = tl.where(mn == NEG_INF, 0.0, mn)
            sv = sv * tl.exp(mv - mr) + tl.exp(x - mr)
            mv = mn
        m = tl.max(mv, axis=0)
        m_ref = tl.where(m == NEG_INF, 0.0, m)
        s = tl.sum(sv * tl.exp(mv - m_ref), axis=0)
    else:
        m = tl.max(tl.full([TILE], NEG_INF, tl.float32), axis=0)
        sv = tl.zeros([TILE], tl.float32)
        for off in range(0, n_cols, TILE):
            c = off + tl.arange(0, TILE)
            x = tl.load(x_row + c, mask=c < n_cols, other=NEG_INF).to(tl.float32)
            m_new = tl.maximum(m, tl.max(x, axis=0))
            mr = tl.where(m_new == NEG_INF, 0.0, m_new)
            sv = sv * tl.exp(m - mr) + tl.exp(x - mr)
            m = m_new
        m_ref = tl.where(m == NEG_INF, 0.0, m)
        s = tl.sum(sv, axis=0)
    loss = (m_ref - x_t) + tl.log(s)
    loss = tl.where(m == NEG_INF, float("inf"), loss)
    loss = tl.where(t == ignore_index, 0.0, loss)
    tl.store(loss_ptr + row, loss)


@triton.jit
def xent_prefetch(x_ptr, t_ptr, loss_ptr, n_cols, xs, ignore_index, TILE: tl.constexpr,
                  PREFETCH: tl.constexpr, STAGES: tl.constexpr):
    """The scalar running max, exp2 with the shift folded in, and optionally the next tile
    loaded before this one is reduced (two tiles in flight per program)."""
    LOG2E: tl.constexpr = 1.4426950408889634
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * xs
    t = tl.load(t_ptr + row)
    x_t = tl.load(x_row + t, mask=(t >= 0) & (t < n_cols), other=0.0).to(tl.float32)
    m = tl.max(tl.full([TILE], NEG_INF, tl.float32), axis=0)
    sv = tl.zeros([TILE], tl.float32)
    c0 = tl.arange(0, TILE)
    nxt = tl.load(x_row + c0, mask=c0 < n_cols, other=NEG_INF)
    for off in tl.range(0, n_cols, TILE, num_stages=STAGES):
        if PREFETCH:
            x = nxt.to(tl.float32)
            c = off + TILE + c0
            nxt = tl.load(x_row + c, mask=c < n_cols, other=NEG_INF)
        else:
            c = off + c0
            x = tl.load(x_row + c, mask=c < n_cols, other=NEG_INF).to(tl.float32)
        m_new = tl.maximum(m, tl.max(x, axis=0))
        mr = tl.where(m_new == NEG_INF, 0.0, m_new) * LOG2E
        sv = sv * tl.exp2(m * LOG2E - mr) + tl.exp2(x * LOG2E - mr)
        m = m_new
    m_ref = tl.where(m == NEG_INF, 0.0, m)
    s = tl.sum(sv, axis=0)
    loss = (m_ref - x_t) + tl.log(s)
    loss = tl.where(m == NEG_INF, float("inf"), loss)
    loss = tl.where(t == ignore_index, 0.0, loss)
    tl.store(loss_ptr + row, loss)


@triton.jit
def xent_whole(x_ptr, t_ptr, loss_ptr, n_cols, xs, ignore_index, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * xs
    t = tl.load(t_ptr + row)
    x_t = tl.load(x_row + t, mask=(t >= 0) & (t < n_cols), other=0.0).to(tl.float32)
    c = tl.arange(0, BLOCK_N)
    x = tl.load(x_row + c, mask=c < n_cols, other=NEG_INF).to(tl.float32)
    m = tl.max(x, axis=0)
    m_ref = tl.where(m == NEG_INF, 0.0, m)
    s = tl.sum(tl.exp(x - m_ref), axis=0)
    loss = (m_ref - x_t) + tl.log(s)
    loss = tl.where(m == NEG_INF, float("inf"), loss)
    loss = tl.where(t == ignore_index, 0.0, loss)
    tl.store(loss_ptr + row, loss)


def xent():
    shapes = [((16384, 32768), torch.bfloat16), ((4096, 32768), torch.float32)]
    for (R, C), dt in shapes:
        x = torch.randn(R, C, device="cuda").to(dt)
        t = torch.randint(0, C, (R,), device="cuda")
        ref = torch.nn.functional.cross_entropy(x.float(), t, reduction="none")
        nbytes = x.element_size() * R * C + 8 * R + 4 * R
        ceiling = copy_gbps(nbytes)
        print(f"xent {R}x{C} {dt}: copy {ceiling:.0f} GB/s", flush=True)
        loss = torch.empty(R, device="cuda")
        variants = [("tiled 4096 w8 (now)", lambda: xent_tiled[(R,)](
            x, t, loss, C, x.stride(0), -100, TILE=4096, LANE_MAX=False, num_warps=8))]
        for tile in (2048, 4096, 8192):
            for warps in (4, 8, 16):
                for pre, stages in ((0, 1), (1, 1), (0, 3)):
                    variants.append((f"pre{pre} st{stages} {tile} w{warps}",
                                     lambda tile=tile, w=warps, p=pre, st=stages:
                                     xent_prefetch[(R,)](
                                         x, t, loss, C, x.stride(0), -100, TILE=tile,
                                         PREFETCH=p, STAGES=st, num_warps=w)))
        for name, fn in variants:
            try:
                fn()
                err = (loss - ref).abs().max().item()
                ms = cold_ms(fn)
                gbps = nbytes / ms / 1e6
                print(f"  {name:22s} {ms:7.3f} ms {gbps:6.0f} GB/s {gbps / ceiling:6.1%}"
                      f"  max err {err:.1e}", flush=True)
            except Exception as e:
                print(f"  {name:22s} failed: {type(e).__name__}: {str(e)[:120]}", flush=True)


if __name__ == "__main__":
    print(torch.__version__, triton.__version__, torch.cuda.get_device_name(), flush=True)
    xent()
    causal()
