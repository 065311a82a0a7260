// A07 exercise 3: the online (max, sum) recurrence in HIP. Read statement.md ("HIP
// submissions"), then fill in the TODOs. Everything is float32.
//
// Device code only: the grader compiles this file and launches each kernel itself, with
// gridDim.x = rows and blockDim.x = 256 (one block per row, however long the row).
// (combine and ANSWERS are graded for Triton submissions only.)
#include <hip/hip_runtime.h>

// TODO: the guarded merge of two partials (m = max, s = sum exp(x - m)):
//         m' = max(m, m_b),  s' = s * exp(m - m') + s_b * exp(m_b - m').
//       (-inf, 0) is the identity. When m' == -inf, m - m' is -inf - (-inf) = NaN: rescale
//       against 0 instead, so the merge gives (-inf, 0), never NaN. Guard on m' == -inf,
//       not on s == 0.
__device__ void combine(float& m, float& s, float m_b, float s_b) {
  // TODO
}

// TODO: add one element x to a running (m, s): the merge with the partial (x, 1),
//         m' = max(m, x),  s' = s * exp(m - m') + exp(x - m').
//       The rescale of the old sum by exp(m - m') is the whole point.
__device__ void online_add(float& m, float& s, float x) {
  // TODO
}

// TODO: merge the (m, s) of all 256 threads: a __shfl_xor butterfly with combine over
//       warpSize lanes (read at run time: 32 on NVIDIA, 64 on AMD), then one slot per warp
//       in __shared__ float[32] arrays, __syncthreads(), and every thread merges the slots.
__device__ void block_stats(float& m, float& s, float* red_m, float* red_s) {
  // TODO
}

// m[row] = max of the row, s[row] = sum exp(x - max): ONE read of the row.
extern "C" __global__ void row_stats(const float* x, float* m, float* s, int rows, int cols) {
  // TODO: this block's row: x + static_cast<size_t>(blockIdx.x) * static_cast<size_t>(cols).
  // TODO: running (m, s) = (-INFINITY, 0.0f); thread t updates it with online_add over
  //       columns t, t + 256, ... (no separate pass for the max).
  // TODO: block_stats, then one thread stores m[row] and s[row].
}

// y = softmax of each row, rows of any length (up to 1,048,576 columns): 2 passes.
extern "C" __global__ void online_softmax(const float* x, float* y, int rows, int cols) {
  // TODO: pass 1 as in row_stats (online (m, s), then block_stats).
  // TODO: pass 2: y[j] = expf(x[j] - m) / s for every j < cols. expf, not __expf: the
  //       grader compares with float64 at rtol 2e-5.
  // TODO (performance): float4 loads when cols % 4 == 0 and the pointers are 16-byte
  //       aligned, several loads in flight per thread; 64-bit row offsets.
}
