// expect: row_stats_match_two_pass — the running sum is not rescaled by exp(m_old - m_new) when a
// new max arrives (each thread's online update adds 1 for the new max but leaves the old sum
// measured against the old max), so every thread that meets a larger value overcounts; long_rows
// and poisoned_row fail the same way
// Reference solution: A07 exercise 3, the online (max, sum) recurrence in HIP.
//
// The math
// --------
// Track, over the elements seen so far, m = their max and s = sum exp(x - m).
// * One new element x: the max becomes m' = max(m, x), and the old sum, measured against m,
//   moves onto m' when multiplied by exp(m - m'):  s' = s * exp(m - m') + exp(x - m').
//   Both exponents are <= 0: nothing overflows.
// * Two partials of disjoint sets: m = max(m_a, m_b), s = s_a exp(m_a - m) + s_b exp(m_b - m).
//   This merge is commutative and associative, so partials reduce in any tree: across the
//   lanes of a warp, across warps, across tiles. (-inf, 0), the empty set, is its identity.
// * The guard: merging two empty partials computes exp(-inf - (-inf)) = exp(NaN) = NaN, and
//   0 * NaN is NaN. The NaN is born in the exponent, so the test is m == -inf, not s == 0.
//
// The kernels (launch fixed by the grader: one block of 256 threads per row, gridDim.x =
// rows; they rely on blockDim.x == 256, BLOCK below)
// -----------
// * row_stats: one read of the row. Each thread runs the recurrence over its own columns,
//   then the 256 partials are merged with the guarded combine (a __shfl_xor butterfly over
//   warpSize lanes, read at run time, then through shared memory across warps).
//   m[row] = max, s[row] = sum exp(x - max).
// * online_softmax: the same first pass, then a second read writing exp(x - m) / s:
//   2 reads + 1 write for a row of any length (a row of 2**20 float32 is 4 MiB: it cannot
//   live in registers). The textbook safe softmax needs 3 reads + 1 write.
//
// expf, not __expf: the grader compares with float64 at rtol 2e-5, and __expf's error
// grows with |x|.

#include <hip/hip_runtime.h>

// Threads per block: the grader always launches 256 per row. A compile-time stride lets the
// compiler fold every offset into the load/store instructions.
#define BLOCK 256
// float4 loads each thread issues before using any, per step of the loops. These rows are
// long and few (64 rows of 1M columns are only 64 blocks), so each thread must keep many
// bytes in flight itself: 4 float4 = 64 bytes per thread, 16 KiB per block.
#define UNROLL 4

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
  s = (x > m) ? s + 1.0f : s + e;  // BUG (mutant): a new max adds exp(0) = 1 but never
                                   // rescales the old sum by exp(m - x)
  m = hi;
}

// Block reduction of the (m, s) partials. Butterfly first: at each step every lane swaps
// partials with lane ^ offset and merges, so after log2(warpSize) steps every lane holds
// its warp's merge (warpSize read at run time: 32 on NVIDIA, 64 on AMD CDNA; 256 is a
// multiple of both, so every warp is full). Lane 0 of each warp writes one slot of
// red_m/red_s (32 slots: enough for 256 / warpSize warps), one barrier, then every thread
// merges the slots in the same order, so all threads hold bit-identical (m, s).
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
// Pass 1: the row's (max, sum) in one read
// ---------------------------------------------------------------------------------------
// A step covers, per thread, UNROLL float4 (VEC) or 4 * UNROLL floats: position
//     index = step * per_step + u * 256 + tid   (a float4 index if VEC, else a column),
// consecutive threads on consecutive addresses (coalesced), all of a step's loads issued
// before any is used. Positions past the end of the row are loaded as -inf, which
// online_add ignores (the identity of max; exp(-inf) = 0 in the sum).
// VEC is a template parameter (float4 or scalar code, chosen per row at run time), and the
// passes are __noinline__ so each gets its own register allocation.
template <bool VEC>
__device__ __noinline__ float2 row_max_sum(const float* x_row, int cols) {
  __shared__ float red_m[32];  // 256 threads are at most 8 warps; 32 slots cover any case
  __shared__ float red_s[32];
  const int tid = threadIdx.x, n_threads = BLOCK;
  const float4* x4 = reinterpret_cast<const float4*>(x_row);
  const int n = VEC ? cols / 4 : cols;  // float4s or floats in the row
  const int per_step = (VEC ? UNROLL : 4 * UNROLL) * n_threads;

  float m = -INFINITY, s = 0.0f;  // the identity: nothing seen yet
  for (int base = tid; base < n; base += per_step) {
    if constexpr (VEC) {
      float4 q[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * n_threads;
        q[u] = make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
        if (i < n) q[u] = x4[i];
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        online_add(m, s, q[u].x);
        online_add(m, s, q[u].y);
        online_add(m, s, q[u].z);
        online_add(m, s, q[u].w);
      }
    } else {
      float q[4 * UNROLL];
#pragma unroll
      for (int u = 0; u < 4 * UNROLL; ++u) {
        const int j = base + u * n_threads;
        q[u] = (j < n) ? x_row[j] : -INFINITY;
      }
#pragma unroll
      for (int u = 0; u < 4 * UNROLL; ++u) online_add(m, s, q[u]);
    }
  }
  // Threads past a short row (e.g. 3 columns) saw nothing and still hold (-inf, 0); the
  // guarded combine merges them away without a NaN.
  block_stats(m, s, red_m, red_s);
  return make_float2(m, s);
}

// ---------------------------------------------------------------------------------------
// Pass 2: y = exp(x - m) / s
// ---------------------------------------------------------------------------------------
// Walked from the end of the row backwards: pass 1 read that part last, so it is the most
// likely to still be in L2.
template <bool VEC>
__device__ __noinline__ void write_softmax(const float* x_row, float* y_row, int cols, float m,
                                           float inv_s) {
  const int tid = threadIdx.x, n_threads = BLOCK;
  const float4* x4 = reinterpret_cast<const float4*>(x_row);
  float4* y4 = reinterpret_cast<float4*>(y_row);
  const int n = VEC ? cols / 4 : cols;
  const int per_step = (VEC ? UNROLL : 4 * UNROLL) * n_threads;
  for (int step = (n + per_step - 1) / per_step - 1; step >= 0; --step) {
    const int base = step * per_step + tid;
    if constexpr (VEC) {
      float4 q[UNROLL];
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * n_threads;
        if (i < n) q[u] = x4[i];
      }
#pragma unroll
      for (int u = 0; u < UNROLL; ++u) {
        const int i = base + u * n_threads;
        if (i < n)
          y4[i] = make_float4(expf(q[u].x - m) * inv_s, expf(q[u].y - m) * inv_s,
                              expf(q[u].z - m) * inv_s, expf(q[u].w - m) * inv_s);
      }
    } else {
      float q[4 * UNROLL];
#pragma unroll
      for (int u = 0; u < 4 * UNROLL; ++u) {
        const int j = base + u * n_threads;
        if (j < n) q[u] = x_row[j];
      }
#pragma unroll
      for (int u = 0; u < 4 * UNROLL; ++u) {
        const int j = base + u * n_threads;
        if (j < n) y_row[j] = expf(q[u] - m) * inv_s;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// The kernels: one block per row
// ---------------------------------------------------------------------------------------
// float4 needs every row start 16-byte aligned: cols % 4 == 0 puts each row a multiple of
// 16 bytes after the base, and the bases themselves are checked. Otherwise scalar code.

extern "C" __global__ void row_stats(const float* x, float* m, float* s, int rows, int cols) {
  const int row = blockIdx.x;
  if (row >= rows) return;  // the whole block leaves together: no barrier is left waiting
  // 64-bit row offset: row * cols in int overflows past 2**31 elements.
  const float* x_row = x + static_cast<size_t>(row) * static_cast<size_t>(cols);
  const bool vec = (cols % 4 == 0) && aligned16(x);
  const float2 ms = vec ? row_max_sum<true>(x_row, cols) : row_max_sum<false>(x_row, cols);
  if (threadIdx.x == 0) {  // every thread holds the same (m, s); one writes it
    m[row] = ms.x;
    s[row] = ms.y;
  }
}

extern "C" __global__ void online_softmax(const float* x, float* y, int rows, int cols) {
  const int row = blockIdx.x;
  if (row >= rows) return;
  const size_t offset = static_cast<size_t>(row) * static_cast<size_t>(cols);
  const float* x_row = x + offset;
  float* y_row = y + offset;
  const bool vec = (cols % 4 == 0) && aligned16(x) && aligned16(y);

  const float2 ms = vec ? row_max_sum<true>(x_row, cols) : row_max_sum<false>(x_row, cols);
  // Every row here holds finite values, so m is finite and s >= 1 (the max element adds
  // exp(0) = 1): one division per row, then a multiply per element.
  const float inv_s = 1.0f / ms.y;
  if (vec)
    write_softmax<true>(x_row, y_row, cols, ms.x, inv_s);
  else
    write_softmax<false>(x_row, y_row, cols, ms.x, inv_s);
}
