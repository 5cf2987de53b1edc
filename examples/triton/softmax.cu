// A row softmax in CUDA, the Triton softmax's counterpart for `klab rounds`: one block per
// row, three passes over the row (its max, the sum of exp(x - max), the outputs), each
// reduction over a warp by shuffles and then over the block's warps through shared memory.

__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Every thread gets the block's result; `part` (one float per warp) is free again on return.
__device__ float block_max(float v, float* part) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_max(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = warp_max(lane < warps ? part[lane] : __int_as_float(0xff800000));
  __syncthreads();
  return v;
}

__device__ float block_sum(float v, float* part) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  v = warp_sum(v);
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = warp_sum(lane < warps ? part[lane] : 0.0f);
  __syncthreads();
  return v;
}

extern "C" __global__ void softmax_cuda(float* y, const float* x, int rows, int cols) {
  __shared__ float part[32];
  const long long base = static_cast<long long>(blockIdx.x) * cols;
  const float* xr = x + base;
  float* yr = y + base;
  float m = __int_as_float(0xff800000);  // -inf
  for (int c = threadIdx.x; c < cols; c += blockDim.x) m = fmaxf(m, xr[c]);
  m = block_max(m, part);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
  s = block_sum(s, part);
  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}
