// A07 stretch: log_softmax in HIP. Read statement.md ("HIP submissions"), then fill in the
// TODOs. cross_entropy and ANSWERS are Triton's alone (a Python submission).
//
//     log softmax(x)_i = (x_i - m) - log(s),   m = max_j x_j,   s = sum_j exp(x_j - m)
//
// Device code only: the grader compiles this file and launches `log_softmax` itself, with
// gridDim.x = rows and blockDim.x = 256 (one block per row). float32 only.
#include <hip/hip_runtime.h>

// TODO: warp reductions as __shfl_xor butterflies over warpSize lanes (read at run time:
//       32 on NVIDIA, 64 on AMD CDNA; never write 32), then block reductions through one
//       __shared__ float[32] slot per warp (a separate array for each reduction).
__device__ float block_max(float v, float* red) {
  return v;  // TODO
}

__device__ float block_sum(float v, float* red) {
  return v;  // TODO
}

extern "C" __global__ void log_softmax(const float* x, float* y, int rows, int cols) {
  // TODO: this block's row, with a 64-bit offset:
  //         const size_t offset = static_cast<size_t>(blockIdx.x) * static_cast<size_t>(cols);
  // TODO: m = the row max (threads on columns tid, tid + 256, ...; start from -INFINITY).
  // TODO: s = sum over the row of expf(x - m), then log_s = logf(s).
  // TODO: y[j] = (x[j] - m) - log_s: no division, no exp of the result.
  // TODO: a row that is entirely -inf has m = -INFINITY and s = 0: x - m is NaN. The
  //       statement's policy: such a row is -INFINITY everywhere.
  // TODO (performance): rows of up to 256 * 16 = 4096 columns fit in registers (one read);
  //       longer rows: the online (max, sum) recurrence in one read, merged across threads
  //       with the guarded combine (guard on m == -INFINITY), then a writing pass.
}
