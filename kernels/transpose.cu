// klab built-in transpose lab (seed 000): copy, naive, tiled, padded, broken.
//
// Out-of-place N x N row-major float32. Every kernel is launched with 32 x 8 blocks
// (kBlockRows rows of kTile threads) on a ceil(N/32) x ceil(N/32) grid; each thread
// handles four rows of its block's 32 x 32 tile. Bounds guards admit only in-range
// elements; the block barrier sits outside every guard; index products are 64-bit.
//
// Compiled at run time by NVRTC (program name "transpose.cu", -lineinfo) for the
// device's own architecture, so sanitizer and profiler reports name this file.

constexpr int kTile = 32;
constexpr int kBlockRows = 8;

// Same logical read and write volume as a transpose, but a different operation:
// context for the memory path, never a denominator for a transpose speedup.
extern "C" __global__ void transpose_copy(float* output, const float* input, int n) {
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;

  for (int offset = 0; offset < kTile; offset += kBlockRows) {
    if (x < n && y + offset < n) {
      const size_t index = static_cast<size_t>(y + offset) * n + x;
      output[index] = input[index];
    }
  }
}

// Coalesced reads, stores strided by n: one sector per lane on the store side.
extern "C" __global__ void transpose_naive(float* output, const float* input, int n) {
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;

  for (int offset = 0; offset < kTile; offset += kBlockRows) {
    if (x < n && y + offset < n) {
      const size_t input_index = static_cast<size_t>(y + offset) * n + x;
      const size_t output_index = static_cast<size_t>(x) * n + y + offset;
      output[output_index] = input[input_index];
    }
  }
}

// Stage a tile in shared memory so both global directions are coalesced.
// Padding widens each shared row (0: tile[32][32], 1: tile[32][33]).
// Synchronize = false drops the barrier: the known-racy "broken" variant.
template <int Padding, bool Synchronize>
__device__ __forceinline__ void transpose_tile(float* output, const float* input, int n) {
  __shared__ float tile[kTile][kTile + Padding];

  const int input_x = blockIdx.x * kTile + threadIdx.x;
  const int input_y = blockIdx.y * kTile + threadIdx.y;

  for (int offset = 0; offset < kTile; offset += kBlockRows) {
    if (input_x < n && input_y + offset < n) {
      tile[threadIdx.y + offset][threadIdx.x] =
          input[static_cast<size_t>(input_y + offset) * n + input_x];
    }
  }

  if (Synchronize) {
    __syncthreads();
  }

  const int output_x = blockIdx.y * kTile + threadIdx.x;
  const int output_y = blockIdx.x * kTile + threadIdx.y;

  for (int offset = 0; offset < kTile; offset += kBlockRows) {
    if (output_x < n && output_y + offset < n) {
      output[static_cast<size_t>(output_y + offset) * n + output_x] =
          tile[threadIdx.x][threadIdx.y + offset];
    }
  }
}

extern "C" __global__ void transpose_tiled(float* output, const float* input, int n) {
  transpose_tile<0, true>(output, input, n);
}

extern "C" __global__ void transpose_padded(float* output, const float* input, int n) {
  transpose_tile<1, true>(output, input, n);
}

// Deliberately wrong: the padded tile without its barrier. Always rejected.
extern "C" __global__ void transpose_broken(float* output, const float* input, int n) {
  transpose_tile<1, false>(output, input, n);
}
