// Reference solution: the causal softmax that skips the fully masked blocks, in HIP.
//
//     y[i, j] = softmax_j(x[i, :] * scale)  over the columns j <= i + offset,  0 elsewhere
//
// Row i sees its first visible = min(cols, max(0, i + offset + 1)) columns. x is never read
// past them: the loops below stop at the diagonal, and the columns after it are written as
// zeros without a load (FlashAttention's block sparsity, applied to one softmax).
//
// THE TRAP, a fully masked row (i + offset < 0): its max is -inf, and z - max would be
// -inf - (-inf) = NaN; merging two empty (max, sum) partials hits the same NaN. Every max
// that may be -inf is guarded (shift by 0 instead), and such a row is written as zeros.
//
// Launch (fixed by the grader): one block of 256 threads per row, gridDim.x = rows.
// Reductions are __shfl_xor butterflies over warpSize lanes read at run time (32 on NVIDIA,
// 64 on AMD CDNA). expf, not __expf: the grader compares with float64 at rtol 1e-5.

#include <hip/hip_runtime.h>

#define BLOCK 256
// Values each thread keeps in registers on the one-read path: 256 * 16 = 4096 columns.
#define ITEMS 16

// ---------------------------------------------------------------------------------------
// The guarded (max, sum) merge and the block reductions
// ---------------------------------------------------------------------------------------
// m' = max(m, m_b), s' = s * exp(m - m') + s_b * exp(m_b - m'); (-inf, 0) is the identity.
// When m' = -inf both sides are empty: rescaling against 0 gives exp(-inf) = 0, not NaN.
__device__ __forceinline__ void combine(float& m, float& s, float m_b, float s_b) {
  const float m_new = fmaxf(m, m_b);
  const float ref = (m_new == -INFINITY) ? 0.0f : m_new;
  s = s * expf(m - ref) + s_b * expf(m_b - ref);
  m = m_new;
}

// Every thread ends up with the block's merged (m, s). Each call needs its own scratch.
__device__ __forceinline__ void block_stats(float& m, float& s, float* red_m, float* red_s) {
  const int lane = threadIdx.x % warpSize, warp = threadIdx.x / warpSize;
  const int n_warps = BLOCK / warpSize;
  for (int d = warpSize / 2; d > 0; d /= 2) {
    const float m_b = __shfl_xor(m, d);
    const float s_b = __shfl_xor(s, d);
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

// z for column j: x * scale where the row sees it, -inf (and no load) elsewhere.
__device__ __forceinline__ float logit(const float* x_row, int j, int visible, float scale) {
  return j < visible ? x_row[j] * scale : -INFINITY;
}

// ---------------------------------------------------------------------------------------
// The kernel: one block per row
// ---------------------------------------------------------------------------------------
extern "C" __global__ void causal_softmax(const float* x, float* y, int rows, int cols,
                                          int offset, float scale) {
  __shared__ float red_m[32];
  __shared__ float red_s[32];
  const int row = blockIdx.x;
  if (row >= rows) return;  // the whole block leaves together
  const size_t base = static_cast<size_t>(row) * static_cast<size_t>(cols);  // 64-bit
  const float* x_row = x + base;
  float* y_row = y + base;
  const int tid = threadIdx.x;

  // The columns this row sees, in 64 bits (row + offset + 1 may pass INT_MAX).
  const long long last = static_cast<long long>(row) + offset + 1;
  const int visible = static_cast<int>(last < 0 ? 0 : (last > cols ? cols : last));

  if (cols <= BLOCK * ITEMS) {
    // One read: the visible part of the row in registers (columns k * 256 + tid).
    float v[ITEMS];
    float m = -INFINITY;
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      v[k] = logit(x_row, k * BLOCK + tid, visible, scale);
      m = fmaxf(m, v[k]);
    }
    float s = 0.0f;
    const float m_ref = (m == -INFINITY) ? 0.0f : m;  // the guard, per thread
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) s += expf(v[k] - m_ref);
    block_stats(m, s, red_m, red_s);
    const float shift = (m == -INFINITY) ? 0.0f : m;
    const float inv_s = (m == -INFINITY) ? 0.0f : 1.0f / s;  // fully masked: zeros
#pragma unroll
    for (int k = 0; k < ITEMS; ++k) {
      const int j = k * BLOCK + tid;
      if (j < cols) y_row[j] = expf(v[k] - shift) * inv_s;  // hidden: exp(-inf) = 0
    }
    return;
  }

  // Long rows. Pass 1: each thread's running (max, sum) over the visible columns only.
  float m = -INFINITY, s = 0.0f;
  for (int j = tid; j < visible; j += BLOCK) combine(m, s, x_row[j] * scale, 1.0f);
  block_stats(m, s, red_m, red_s);
  const float shift = (m == -INFINITY) ? 0.0f : m;
  const float inv_s = (m == -INFINITY) ? 0.0f : 1.0f / s;
  // Pass 2: normalise the visible columns; pass 3: zeros after the diagonal, nothing read.
  for (int j = tid; j < visible; j += BLOCK) y_row[j] = expf(x_row[j] * scale - shift) * inv_s;
  for (int j = visible + tid; j < cols; j += BLOCK) y_row[j] = 0.0f;
}
