// Reference solution: log_softmax in HIP (A07, stretch exercise), float32.
//
//     log softmax(x)_i = (x_i - m) - log(s),   m = max_j x_j,   s = sum_j exp(x_j - m)
//
// No division and no exp of the result: log(exp(x - m) / s) in two steps would round each
// probability first, and one that underflows to 0 (a logit 1000 below the max) would come
// back as log(0) = -inf where the answer is about -1000.
//
// Launch (fixed by the grader): one block of 256 threads per row, gridDim.x = rows.
// * cols <= 256 * ITEMS: the row is held in registers, ITEMS values a thread: one read of
//   x, one write of y.
// * longer rows: each thread runs the online (max, sum) recurrence over its columns (one
//   read), the 256 partials are merged with the guarded combine, then a second read writes y.
// Policy (statement.md): a row that is entirely -inf gives -inf everywhere, never NaN.
// Reductions are __shfl_xor butterflies over warpSize lanes, read at run time.

#include <hip/hip_runtime.h>

#define BLOCK 256
#define ITEMS 16

__device__ __forceinline__ float warp_max(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor(v, offset));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int offset = warpSize / 2; offset > 0; offset /= 2) v += __shfl_xor(v, offset);
  return v;
}

// Each call gets its own scratch array: a fast thread may start the next reduction while a
// slow one still reads this one's slots.
__device__ __forceinline__ float block_max(float v, float* red) {
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  v = warp_max(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < BLOCK / warpSize; ++w) r = fmaxf(r, red[w]);
  return r;
}

__device__ __forceinline__ float block_sum(float v, float* red) {
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  v = warp_sum(v);
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < BLOCK / warpSize; ++w) r += red[w];
  return r;
}

// The guarded merge of (m_b, s_b) into (m, s). Both empty (m = m_b = -inf): m' = -inf and
// m - m' would be -inf - (-inf) = NaN; shifting by 0 instead keeps the identity (-inf, 0).
__device__ __forceinline__ void combine(float& m, float& s, float m_b, float s_b) {
  const float m_new = fmaxf(m, m_b);
  const float ref = (m_new == -INFINITY) ? 0.0f : m_new;
  s = s * expf(m - ref) + s_b * expf(m_b - ref);
  m = m_new;
}

// One element into a thread's (m, s), one expf: the factor that is not exp(0) = 1 is
// exp(min - max), applied to the old sum when x is the new max, else to x's own term.
__device__ __forceinline__ void online_add(float& m, float& s, float x) {
  const float hi = fmaxf(m, x), lo = fminf(m, x);
  const float e = (hi == -INFINITY) ? 0.0f : expf(lo - hi);
  s = (x > m) ? fmaf(s, e, 1.0f) : s + e;
  m = hi;
}

__device__ __forceinline__ void block_stats(float& m, float& s, float* red_m, float* red_s) {
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  for (int offset = warpSize / 2; offset > 0; offset /= 2) {
    const float m_b = __shfl_xor(m, offset);
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
  for (int w = 1; w < BLOCK / warpSize; ++w) combine(m, s, red_m[w], red_s[w]);
}

// (x - m) - log(s), and -inf across a row that is entirely -inf (m = -inf, s = 0).
__device__ __forceinline__ float log_prob(float x, float m, float log_s) {
  return (m == -INFINITY) ? -INFINITY : (x - m) - log_s;
}

__device__ __noinline__ void rows_in_registers(const float* x_row, float* y_row, int cols) {
  __shared__ float red_a[32];
  __shared__ float red_b[32];
  const int tid = threadIdx.x;
  float v[ITEMS];  // indexed by unrolled loops only: it stays in registers
  float m = -INFINITY;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int j = k * BLOCK + tid;  // consecutive threads, consecutive columns
    v[k] = (j < cols) ? x_row[j] : -INFINITY;
    m = fmaxf(m, v[k]);
  }
  m = block_max(m, red_a);
  const float ref = (m == -INFINITY) ? 0.0f : m;
  float s = 0.0f;
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) s += expf(v[k] - ref);  // padding: exp(-inf) = 0
  s = block_sum(s, red_b);
  const float log_s = logf(s);
#pragma unroll
  for (int k = 0; k < ITEMS; ++k) {
    const int j = k * BLOCK + tid;
    if (j < cols) y_row[j] = log_prob(v[k], m, log_s);
  }
}

__device__ __noinline__ void rows_two_pass(const float* x_row, float* y_row, int cols) {
  __shared__ float red_m[32];
  __shared__ float red_s[32];
  float m = -INFINITY, s = 0.0f;
  for (int j = threadIdx.x; j < cols; j += BLOCK) online_add(m, s, x_row[j]);
  block_stats(m, s, red_m, red_s);
  const float log_s = logf(s);
  for (int j = threadIdx.x; j < cols; j += BLOCK) y_row[j] = log_prob(x_row[j], m, log_s);
}

extern "C" __global__ void log_softmax(const float* x, float* y, int rows, int cols) {
  const int row = blockIdx.x;
  if (row >= rows) return;
  const size_t offset = static_cast<size_t>(row) * static_cast<size_t>(cols);  // 64-bit
  if (cols <= BLOCK * ITEMS)
    rows_in_registers(x + offset, y + offset, cols);
  else
    rows_two_pass(x + offset, y + offset, cols);
}
