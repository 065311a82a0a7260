// A07 exercise 2: fused scale -> additive mask -> softmax in HIP. Read statement.md
// ("HIP submissions"), then fill in the TODOs.
//
//     z[i, j] = x[i, j] * scale + mask[i, j],  and -inf where causal != 0 and j > i
//     y[i, :] = softmax(z[i, :]);  a fully masked row (every z = -inf) gives all zeros
//
// Device code only: the grader compiles this file and launches `masked_softmax` itself, with
// gridDim.x = rows and blockDim.x = 256 (one block per row). float32 only. `mask` is a
// [rows, cols] float32 array (a [1, C] mask arrives expanded) or a null pointer.
#include <hip/hip_runtime.h>

// TODO: warp and block reductions as in exercise 1: __shfl_xor butterflies over warpSize
//       lanes (read at run time, never 32), one __shared__ float[32] slot per warp.
__device__ float block_max(float v, float* red) {
  return v;  // TODO
}

__device__ float block_sum(float v, float* red) {
  return v;  // TODO
}

// TODO (rows longer than one pass can hold): the guarded merge of two (max, sum) partials,
//         m = max(m_a, m_b),  s = s_a * exp(m_a - m) + s_b * exp(m_b - m).
//       When m == -inf (both partials empty), m_a - m is -inf - (-inf) = NaN: rescale
//       against 0 instead (exp(-inf - 0) = 0), so the result is (-inf, 0), never NaN.
__device__ void combine(float& m, float& s, float m_b, float s_b) {
  // TODO
}

extern "C" __global__ void masked_softmax(const float* x, const float* mask, float* y, int rows,
                                          int cols, float scale, int causal) {
  // TODO: this block's row, with a 64-bit offset:
  //         const size_t offset = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(cols);
  //       and the mask row only when mask != nullptr.
  // TODO: decide which columns are kept: j < cols, and j <= row when causal; a column is
  //       also removed where the mask is -inf. Where a column is removed, z = -INFINITY and
  //       x need not be loaded at all (the timed causal and padding shapes count only the
  //       bytes of x that are kept).
  // TODO: z = x * scale + mask (mask 0 when there is none); m = block max of z.
  // TODO: THE TRAP: a fully masked row has m == -inf, and z - m = -inf - (-inf) = NaN.
  //       Guard on m == -inf (not on s == 0: that comes too late) and write zeros.
  // TODO: p = expf(z - m); s = block sum of p; y = p / s for every j < cols, zeros where
  //       masked. expf, not __expf: the grader compares with float64 at rtol 1e-5.
  // TODO (performance): as in exercise 1, keep rows of up to 4096 columns in registers
  //       (1 read + 1 write, float4 when cols % 4 == 0 and the pointers are 16-byte
  //       aligned); longer rows: online (max, sum) in one read, merged with combine, then
  //       a normalising pass.
}
