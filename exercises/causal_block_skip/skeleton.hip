// A07 stretch: the causal softmax that skips fully masked blocks, in HIP. Read statement.md
// ("HIP submissions"), then fill in the TODOs.
//
//     row i sees the columns j <= i + offset
//     y[i, :] = softmax(x[i, :] * scale) over them, 0 elsewhere; all zeros when i + offset < 0
//
// Device code only: the grader compiles this file and launches `causal_softmax` itself, with
// gridDim.x = rows and blockDim.x = 256 (one block per row). float32 only.
#include <hip/hip_runtime.h>

// TODO: warp and block reductions as in exercise 1: __shfl_xor butterflies over warpSize
//       lanes (read at run time, never 32), one __shared__ float[32] slot per warp.
__device__ float block_max(float v, float* red) {
  return v;  // TODO
}

__device__ float block_sum(float v, float* red) {
  return v;  // TODO
}

extern "C" __global__ void causal_softmax(const float* x, float* y, int rows, int cols,
                                          int offset, float scale) {
  // TODO: this block's row, with a 64-bit offset:
  //         const size_t base = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(cols);
  // TODO: visible = min(cols, max(0, row + offset + 1)), computed in 64 bits (long long).
  // TODO: loop over the columns j < visible only: m = block max of x * scale.
  // TODO: THE TRAP: a fully masked row (visible == 0) has m == -inf, and z - m is
  //       -inf - (-inf) = NaN. Guard on m == -inf (not on s == 0) and write zeros.
  // TODO: s = block sum of expf(x * scale - m) over j < visible; y[j] = expf(...) / s there.
  // TODO: the columns j >= visible: y[j] = 0, without reading x.
}
