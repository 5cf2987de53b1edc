// A row softmax in CUDA, the Triton softmax's counterpart for `klab rounds`: one block per
// row, three passes over the row (its max, the sum of exp(x - max), the outputs), each
// reduction over a warp by shuffles and then over the block's warps through shared memory.

struct Max {
  __device__ static float of(float a, float b) { return fmaxf(a, b); }
};
struct Sum {
  __device__ static float of(float a, float b) { return a + b; }
};

// Every thread gets the block's `Op` of `v`, `identity` filling the lanes past the block's
// warps; `part` (one float per warp) is free again on return.
template <typename Op>
__device__ float block_reduce(float v, float identity, float* part) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  for (int o = 16; o > 0; o >>= 1) v = Op::of(v, __shfl_xor_sync(0xffffffffu, v, o));
  if (lane == 0) part[warp] = v;
  __syncthreads();
  v = lane < warps ? part[lane] : identity;
  for (int o = 16; o > 0; o >>= 1) v = Op::of(v, __shfl_xor_sync(0xffffffffu, v, o));
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
  m = block_reduce<Max>(m, __int_as_float(0xff800000), part);
  float s = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) s += expf(xr[c] - m);
  s = block_reduce<Sum>(s, 0.0f, part);
  const float inv = 1.0f / s;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) yr[c] = expf(xr[c] - m) * inv;
}
