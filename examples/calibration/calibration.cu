// The calibration kernels: the transpose lab's 2D copy, and the same copy that holds every
// block D more SM cycles after its stores, so that a known slowdown can be put into a
// comparison. At n = 1024 the grid's 1024 blocks of 256 threads fit in one wave on an H200
// (8 per SM), so the kernel takes about D cycles longer.
template <int D>
__global__ void copy_delay(float* out, const float* in, int n) {
  const int x = blockIdx.x * 32 + threadIdx.x;
  const int y = blockIdx.y * 32 + threadIdx.y;
  for (int k = 0; k < 32; k += 8) {
    if (x < n && y + k < n) {
      const size_t i = static_cast<size_t>(y + k) * n + x;
      out[i] = in[i];
    }
  }
  if (D > 0) {
    const long long start = clock64();
    while (clock64() - start < D) {
    }
  }
}
