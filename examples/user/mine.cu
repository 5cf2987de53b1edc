// A user's own kernels, as a CUDA engineer would bring them: a naive transpose and a
// shared-memory tiled one, each launched 32 x 8 over 32 x 32 tiles of an N x N float32
// matrix. `tiled` shares its name with the transpose lab's kernel on purpose: klab must
// refuse it by name instead of silently measuring the built-in.

constexpr int T = 32;
constexpr int R = 8;

extern "C" __global__ void my_naive(float* out, const float* in, int n) {
  const int x = blockIdx.x * T + threadIdx.x;
  const int y = blockIdx.y * T + threadIdx.y;
  for (int k = 0; k < T; k += R) {
    if (x < n && y + k < n) {
      out[static_cast<size_t>(x) * n + y + k] = in[static_cast<size_t>(y + k) * n + x];
    }
  }
}

extern "C" __global__ void my_tiled(float* out, const float* in, int n) {
  __shared__ float tile[T][T + 1];
  const int x = blockIdx.x * T + threadIdx.x;
  const int y = blockIdx.y * T + threadIdx.y;
  for (int k = 0; k < T; k += R) {
    if (x < n && y + k < n) {
      tile[threadIdx.y + k][threadIdx.x] = in[static_cast<size_t>(y + k) * n + x];
    }
  }
  __syncthreads();
  const int ox = blockIdx.y * T + threadIdx.x;
  const int oy = blockIdx.x * T + threadIdx.y;
  for (int k = 0; k < T; k += R) {
    if (ox < n && oy + k < n) {
      out[static_cast<size_t>(oy + k) * n + ox] = tile[threadIdx.x][threadIdx.y + k];
    }
  }
}
