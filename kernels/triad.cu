// klab built-in triad lab (seed 003): y[i] = fmaf(alpha, x[i], z[i]).
//
// One multiply and one add (2 FLOPs) per element; the algorithmic minimum traffic is two
// float32 loads and one float32 store (12 bytes). Launched with 256-thread blocks and
// ceil(n / 256) blocks, so the last block has threads past the end that the guard must
// reject. Compiled at run time by NVRTC (program name "triad.cu", -lineinfo).

// Deliberately wrong: `i <= n` lets thread i == n read x[n], z[n] and write y[n], one past
// the end of exact-length allocations. Always rejected.
extern "C" __global__ void triad_buggy(const float* x, const float* z, float* y,
                                       unsigned long long n, float alpha) {
  const unsigned long long i =
      static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i <= n) {
    y[i] = fmaf(alpha, x[i], z[i]);
  }
}

extern "C" __global__ void triad_f32(const float* x, const float* z, float* y,
                                     unsigned long long n, float alpha) {
  const unsigned long long i =
      static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = fmaf(alpha, x[i], z[i]);
  }
}
