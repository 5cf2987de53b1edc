// klab built-in reduction lab (seed 002): a block-tree sum.
//
// Each block of 256 threads loads one element per thread (0 past the end), reduces them in
// shared memory (strides 128, 64, ..., 1, a barrier after each step, every barrier outside
// the guards) and writes one partial sum; the host folds the partials in block order. The
// grid is part of the thing under test: ceil(n / 256) blocks covers every element,
// n / 256 ("drop-tail") never reads the last n mod 256.

constexpr int kThreads = 256;

extern "C" __global__ void reduce_block_tree(const float* in, float* partials,
                                             unsigned long long n) {
  __shared__ float buffer[kThreads];
  const unsigned long long i =
      static_cast<unsigned long long>(blockIdx.x) * kThreads + threadIdx.x;
  buffer[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      buffer[threadIdx.x] += buffer[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = buffer[0];
  }
}
