// expect: causal — the causal rule masks j >= i instead of j > i: every query loses its own
// key (the diagonal), and row 0 is fully masked (written as zeros instead of [1, 0, ...])
// Reference solution: A07 exercise 2, fused scale -> additive mask -> softmax in HIP.
//
//     z[i, j] = x[i, j] * scale + mask[i, j]       (mask: 0 keeps, -inf removes)
//     z[i, j] = -inf where causal and j > i         (row i sees columns 0..i)
//     y[i, :] = softmax(z[i, :]);  a row whose z is all -inf gives all zeros
//
// Unfused, scale, mask and softmax are three kernels and seven trips of the tensor through
// memory. Fused, each row is read once, scaled and masked in registers, and written once.
//
// The mask is ADDITIVE: exp(-inf) = 0 exactly, so a masked position drops out of both the
// numerator and the denominator. A masked position also needs no data: where the causal
// rule or the mask says -inf, x is never loaded (for a causal 4096 x 4096 input that is
// half of x; the grader's byte count for the timed shapes assumes exactly this).
//
// THE TRAP, a fully masked row (every z = -inf, e.g. a padded sequence): its max is -inf,
// and z - max = -inf - (-inf) = NaN. The same NaN appears when two empty (max, sum)
// partials are merged. Every place that subtracts a max that may be -inf is guarded on
// max == -inf (not on sum == 0: by the time the sum is 0 * NaN it is already NaN), and
// such a row is written as zeros (our choice, as attention kernels do).
//
// Launch (fixed by the grader): one block of 256 threads per row, gridDim.x = rows; the
// kernel relies on blockDim.x == 256 (BLOCK below). `mask` is a float32 [rows, cols] array
// (a [1, C] mask arrives expanded to [rows, cols]) or a null pointer when there is none.
//
// Same structure as the safe softmax (exercise 1): rows up to 256 * ITEMS = 4096 columns
// are held in registers (1 read + 1 write); longer rows take two passes, the online
// (max, sum) recurrence then the normalisation. Reductions are __shfl_xor butterflies over
// warpSize lanes, read at run time (32 on NVIDIA, 64 on AMD CDNA). expf, not __expf: the
// grader compares with float64 at rtol 1e-5.

#include <hip/hip_runtime.h>

// Threads per block: the grader always launches 256 per row. A compile-time stride lets the
// compiler fold every offset into the load/store instructions (fewer registers, more
// blocks per SM) instead of keeping an address register per value.
#define BLOCK 256
// Values each thread keeps in registers on the one-pass path: 256 * 16 = 4096 columns.
#define ITEMS 16
// float4 loads each thread issues before using any, per step of the long-row loops.
#define UNROLL 2

// ---------------------------------------------------------------------------------------
// Reductions
// ---------------------------------------------------------------------------------------

// Butterfly: after log2(warpSize) steps every lane holds the warp's result, so no
// broadcast is needed afterwards (with __shfl_down only lane 0 would).
__device__ __forceinline__ float warp_max(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor(v, offset));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2)
    v += __shfl_xor(v, offset);
  return v;
}

// Block reductions: each warp reduces its lanes, lane 0 of every warp writes one slot of
// `red`, one barrier, then every thread folds the slots itself (in the same order, so all
// threads get bit-identical results). `red` has 32 slots: enough for 256 / warpSize warps
// (8 or 4) whatever warpSize the device reports.
// Each call must get its OWN scratch array: a fast thread may leave this function and
// write the next reduction's slots while a slow thread is still reading these ones. (With
// a single shared array you would need a second __syncthreads() before returning.)
__device__ __forceinline__ float block_max(float v, float* red) {
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  const int n_warps = BLOCK / warpSize;  // 256 is a multiple of 32 and of 64
  v = warp_max(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < n_warps; ++w) r = fmaxf(r, red[w]);
  return r;
}

__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  const int n_warps = BLOCK / warpSize;
  v = warp_sum(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < n_warps; ++w) r += red[w];
  return r;
}

// ---------------------------------------------------------------------------------------
// The online (max, sum) recurrence
// ---------------------------------------------------------------------------------------

// Merge partial (m_b, s_b) into (m, s), where s = sum exp(x - m) over a partial's elements:
//     m' = max(m, m_b),   s' = s * exp(m - m') + s_b * exp(m_b - m').
// Both exponents are <= 0, so nothing overflows; (-inf, 0) is the identity.
// THE GUARD: if both sides are empty (m = m_b = -inf), then m' = -inf and m - m' is
// -inf - (-inf) = NaN, and 0 * NaN is still NaN. The NaN is born in the exponent, before the
// zero sums could cancel it, so the guard tests m' == -inf (not s == 0): rescaling against
// 0 instead gives exp(-inf - 0) = 0, and the merge returns the identity (-inf, 0).
__device__ __forceinline__ void combine(float& m, float& s, float m_b, float s_b) {
  const float m_new = fmaxf(m, m_b);
  const float ref = (m_new == -INFINITY) ? 0.0f : m_new;
  s = s * expf(m - ref) + s_b * expf(m_b - ref);
  m = m_new;
}

// Add one element x to a thread's running (m, s): the merge with the partial (x, 1),
//     m' = max(m, x),   s' = s * exp(m - m') + exp(x - m').
// One of the two factors is always exp(0) = 1 and the other is exp(min - max), so one expf
// per element suffices (softmax is memory-bound, but two expf per element would start to
// show on the long rows):
//     x > m (new max):  s' = s * exp(m - x) + 1     (the old sum is rescaled onto x)
//     otherwise:        s' = s + exp(x - m)
// Guard as in combine: while the thread has seen only -inf, max is -inf and min - max would
// be NaN; the term is 0 then (x = -inf adds nothing, and m = -inf holds s = 0).
__device__ __forceinline__ void online_add(float& m, float& s, float x) {
  const float hi = fmaxf(m, x), lo = fminf(m, x);
  const float e = (hi == -INFINITY) ? 0.0f : expf(lo - hi);
  s = (x > m) ? fmaf(s, e, 1.0f) : s + e;
  m = hi;
}

// Each warp merges its lanes' partials, then the warps' partials are merged through shared
// memory; every thread ends up holding the row's (m, s).
__device__ __forceinline__ void block_stats(float& m, float& s, float* red_m, float* red_s) {
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  const int n_warps = BLOCK / warpSize;
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
    const float m_b = __shfl_xor(m, offset);  // every lane shuffles: no lane may skip this
    const float s_b = __shfl_xor(s, offset);
    combine(m, s, m_b, s_b);
  }
  if (lane == 0) {
    red_m[warp] = m;
    red_s[warp] = s;
  }
  __syncthreads();
  m = red_m[0];
  s = red_s[0];
  for (int w = 1; w < n_warps; ++w) combine(m, s, red_m[w], red_s[w]);
}

__device__ __forceinline__ bool aligned16(const void* p) {
  return (reinterpret_cast<size_t>(p) & 15) == 0;
}

// ---------------------------------------------------------------------------------------
// The logits: z = x * scale + mask, -inf where hidden, without reading x there
// ---------------------------------------------------------------------------------------
// `visible` = the number of leading columns the row may see: cols, or min(cols, i + 1)
// under the causal rule. Columns at or past it (the causal upper triangle and anything
// past the end of the row) are -inf and read nothing at all.
// fmaf rounds x * scale + mask once, and computes the same z in both passes of the long
// path (a separate multiply and add could be contracted differently in the two places).
__device__ __forceinline__ float logit(const float* x_row, const float* m_row, int j, int visible,
                                       float scale) {
  if (j >= visible) return -INFINITY;
  const float mk = m_row ? m_row[j] : 0.0f;
  if (mk == -INFINITY) return -INFINITY;  // masked: x is not read
  return fmaf(x_row[j], scale, mk);
}

// The same for the 4 columns 4i .. 4i + 3 (float4 path): x is read only if one of the four
// is visible and unmasked.
__device__ __forceinline__ float4 logit4(const float4* x4, const float4* m4, int i, int visible,
                                         float scale) {
  float4 z = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
  const int j = 4 * i;
  if (j >= visible) return z;  // all four hidden (causal, or past the end of the row)
  const float4 mk = m4 ? m4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (fmaxf(fmaxf(mk.x, mk.y), fmaxf(mk.z, mk.w)) == -INFINITY) return z;  // all masked
  const float4 xv = x4[i];
  if (j + 0 < visible && mk.x != -INFINITY) z.x = fmaf(xv.x, scale, mk.x);
  if (j + 1 < visible && mk.y != -INFINITY) z.y = fmaf(xv.y, scale, mk.y);
  if (j + 2 < visible && mk.z != -INFINITY) z.z = fmaf(xv.z, scale, mk.z);
  if (j + 3 < visible && mk.w != -INFINITY) z.w = fmaf(xv.w, scale, mk.w);
  return z;
}

// ---------------------------------------------------------------------------------------
// Short rows (cols <= 256 * ITEMS): the whole row in registers, 1 read + 1 write
// ---------------------------------------------------------------------------------------
// VEC: float4 loads and stores, or scalar ones; a template parameter so that each variant
// is straight-line code. __noinline__ (here and on the long-row path): each path gets its
// own register allocation instead of the kernel paying for all of them merged.
template <bool VEC>
__device__ __noinline__ void masked_in_registers(const float* x_row, const float* m_row,
                                                 float* y_row, int cols, int visible,
                                                 float scale) {
  __shared__ float red_a[32];  // 256 threads are at most 8 warps; 32 slots cover any case
  __shared__ float red_b[32];
  const int tid = threadIdx.x, n_threads = BLOCK;
  // v[] is indexed only by compile-time constants (fully unrolled loops): it lives in
  // registers. Layout as in exercise 1: float4 path v[4c..4c+3] = float4 number
  // c * 256 + tid; scalar path v[k] = column k * 256 + tid (coalesced either way).
  // Slots whose whole 256-wide chunk lies past the end of the row are not used (n_used);
  // every hidden position inside the used chunks holds -inf, which drops out of the max,
  // and exp(-inf - m) = 0 drops it out of the sum.
  float v[ITEMS];
  int n_used;
  if constexpr (VEC) {
    const float4* x4 = reinterpret_cast<const float4*>(x_row);
    const float4* m4 = reinterpret_cast<const float4*>(m_row);  // null when no mask
    const int n4 = cols / 4;
    n_used = 4 * ((n4 + n_threads - 1) / n_threads);
#pragma unroll
    for (int c = 0; c < ITEMS / 4; ++c) {
      const int i = c * n_threads + tid;
      float4 z = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
      if (i < n4) z = logit4(x4, m4, i, visible, scale);
      v[4 * c + 0] = z.x;
      v[4 * c + 1] = z.y;
      v[4 * c + 2] = z.z;
      v[4 * c + 3] = z.w;
    }
  } else {
    n_used = (cols + n_threads - 1) / n_threads;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) v[k] = logit(x_row, m_row, k * n_threads + tid, visible, scale);
  }

  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k)
    if (k < n_used) m = fmaxf(m, v[k]);
  m = block_max(m, red_a);

  // THE GUARD. A fully masked row has m = -inf, and z - m = -inf - (-inf) = NaN. Shifting
  // by 0 instead gives exp(-inf) = 0 for every element: s = 0, and the row is written as
  // zeros (inv_s = 0 rather than 1/0 = inf, since 0 * inf would be NaN again).
  const float m_ref = (m == -INFINITY) ? 0.0f : m;
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    if (k < n_used) {
      v[k] = expf(v[k] - m_ref);  // in [0, 1]; hidden positions give exactly 0
      s += v[k];
    }
  }
  s = block_sum(s, red_b);
  const float inv_s = (m == -INFINITY) ? 0.0f : 1.0f / s;  // otherwise s >= 1

  // Every column of the row is written (zeros where hidden); nothing past its end.
  if constexpr (VEC) {
    float4* y4 = reinterpret_cast<float4*>(y_row);
    const int n4 = cols / 4;
#pragma unroll
    for (int c = 0; c < ITEMS / 4; ++c) {
      const int i = c * n_threads + tid;
      if (i < n4)
        y4[i] = make_float4(v[4 * c] * inv_s, v[4 * c + 1] * inv_s, v[4 * c + 2] * inv_s,
                            v[4 * c + 3] * inv_s);
    }
  } else {
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const int j = k * n_threads + tid;
      if (j < cols) y_row[j] = v[k] * inv_s;
    }
  }
}

// ---------------------------------------------------------------------------------------
// Long rows: the online (max, sum) in one read, then a second read to normalise
// ---------------------------------------------------------------------------------------
// A step covers, per thread, UNROLL float4 (VEC) or 4 * UNROLL floats, all loads issued
// before any is used. Hidden positions come back as -inf from logit()/logit4(), which
// online_add ignores; a thread that sees only hidden positions keeps the identity
// (-inf, 0), and the guarded combine merges it away without a NaN.
template <bool VEC>
__device__ __noinline__ void masked_two_pass(const float* x_row, const float* m_row,
                                             float* y_row, int cols, int visible,
                                             float scale) {
  __shared__ float red_a[32];
  __shared__ float red_b[32];
  const int tid = threadIdx.x, n_threads = BLOCK;
  const float4* x4 = reinterpret_cast<const float4*>(x_row);
  const float4* m4 = reinterpret_cast<const float4*>(m_row);
  float4* y4 = reinterpret_cast<float4*>(y_row);
  const int n = VEC ? cols / 4 : cols;  // float4s or floats in the row
  const int per_step = (VEC ? UNROLL : 4 * UNROLL) * n_threads;
  const int n_steps = (n + per_step - 1) / per_step;

  // Pass 1: each thread's running (m, s) over its own positions, then merged.
  float m = -INFINITY, s = 0.0f;
  for (int step = 0; step < n_steps; ++step) {
    const int base = step * per_step + tid;
    if constexpr (VEC) {
      float4 z[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * n_threads;
        z[u] = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        if (i < n) z[u] = logit4(x4, m4, i, visible, scale);
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        online_add(m, s, z[u].x);
        online_add(m, s, z[u].y);
        online_add(m, s, z[u].z);
        online_add(m, s, z[u].w);
      }
    } else {
      float z[4 * UNROLL];
#pragma unroll
      for (int u = 0; u < 4 * UNROLL; ++u)
        z[u] = logit(x_row, m_row, base + u * n_threads, visible, scale);
#pragma unroll
      for (int u = 0; u < 4 * UNROLL; ++u) online_add(m, s, z[u]);
    }
  }
  block_stats(m, s, red_a, red_b);  // the guarded combine, across lanes then warps

  // The same guard as on the register path: a fully masked row has m = -inf, s = 0.
  const float m_ref = (m == -INFINITY) ? 0.0f : m;
  const float inv_s = (m == -INFINITY) ? 0.0f : 1.0f / s;

  // Pass 2: y = exp(z - m) / s, from the end of the row backwards (the part pass 1 read
  // last is the most likely to still be in L2). z is recomputed exactly as in pass 1.
  for (int step = n_steps - 1; step >= 0; --step) {
    const int base = step * per_step + tid;
    if constexpr (VEC) {
      float4 z[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * n_threads;
        if (i < n) z[u] = logit4(x4, m4, i, visible, scale);
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * n_threads;
        if (i < n)
          y4[i] = make_float4(expf(z[u].x - m_ref) * inv_s, expf(z[u].y - m_ref) * inv_s,
                              expf(z[u].z - m_ref) * inv_s, expf(z[u].w - m_ref) * inv_s);
      }
    } else {
      float z[4 * UNROLL];
#pragma unroll
      for (int u = 0; u < 4 * UNROLL; ++u)
        z[u] = logit(x_row, m_row, base + u * n_threads, visible, scale);
#pragma unroll
      for (int u = 0; u < 4 * UNROLL; ++u) {
        const int j = base + u * n_threads;
        if (j < n) y_row[j] = expf(z[u] - m_ref) * inv_s;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// The kernel: one block per row
// ---------------------------------------------------------------------------------------
extern "C" __global__ void masked_softmax(const float* x, const float* mask, float* y, int rows,
                                          int cols, float scale, int causal) {
  const int row = blockIdx.x;
  if (row >= rows) return;  // the whole block leaves together: no barrier is left waiting

  // 64-bit row offset: row * cols in int overflows past 2**31 elements.
  const size_t offset = static_cast<size_t>(row) * static_cast<size_t>(cols);
  const float* x_row = x + offset;
  const float* m_row = mask ? mask + offset : nullptr;  // no mask: no pointer arithmetic on null
  float* y_row = y + offset;

  // Causal: row i sees columns 0..i, i.e. the first i + 1 (all of them when i >= cols - 1;
  // rows and cols may differ).
  const int visible = causal ? min(cols, row) : cols;  // BUG (mutant): hides j >= i

  // float4 needs every row start 16-byte aligned (cols % 4 == 0, aligned bases), for the
  // mask as well when there is one.
  const bool vec = (cols % 4 == 0) && aligned16(x) && aligned16(y) && (!mask || aligned16(mask));

  if (cols <= BLOCK * ITEMS) {
    if (vec)
      masked_in_registers<true>(x_row, m_row, y_row, cols, visible, scale);
    else
      masked_in_registers<false>(x_row, m_row, y_row, cols, visible, scale);
  } else {
    if (vec)
      masked_two_pass<true>(x_row, m_row, y_row, cols, visible, scale);
    else
      masked_two_pass<false>(x_row, m_row, y_row, cols, visible, scale);
  }
}
