// klab built-in: transposes aimed at the copy limit, and a 16-byte copy ceiling.
//
// Out-of-place N x N row-major float32, the same contract as kernels/transpose.cu.
// Predictions written before measuring are in notes/transpose-fast.md.
//
// Compiled at run time by NVRTC (program name "fast.cu", -lineinfo).

constexpr int kTile = 32;

// The whole matrix as one flat array of N*N floats: block b copies the contiguous
// 1,024 floats starting at b * 1024, one 16-byte vector per thread (the base address is
// 16-byte aligned, and so is every b * 1024 + 4 * t). A tail shorter than a vector is
// copied by scalars. Launched on the transpose grid: ceil(N/32)^2 blocks of 256 threads.
extern "C" __global__ void copy_vec16(float* output, const float* input, int n) {
  const size_t total = static_cast<size_t>(n) * n;
  const size_t block = static_cast<size_t>(blockIdx.y) * gridDim.x + blockIdx.x;
  const size_t thread = threadIdx.y * blockDim.x + threadIdx.x;
  const size_t i = (block * 256 + thread) * 4;
  if (i + 3 < total) {
    *reinterpret_cast<float4*>(output + i) = *reinterpret_cast<const float4*>(input + i);
  } else {
    for (size_t j = i; j < total; ++j) {
      output[j] = input[j];
    }
  }
}

// T stacked 32 x 32 tiles per block of 8 x 32 threads: the block covers input columns
// [32 bx, 32 bx + 32) and input rows [32 T by, 32 T (by + 1)).
//
// N % 4 == 0 (the vector path): thread (tx, ty) loads one 16-byte vector per tile, input
// row 32 t + ty, columns 4 tx .. 4 tx + 3; all T loads are issued before any shared
// store. After the barrier it gathers output row ty of the tile (input column ty), output
// columns 4 tx .. 4 tx + 3, and stores them as one 16-byte vector. With the shared row
// stride 33, both the row stores (bank ty + 4 tx + k) and the column reads (bank
// 4 tx + k + ty) give the 32 lanes of a warp (tx 0..7, four consecutive ty) 32 distinct
// banks. Each warp request moves four full 128-byte lines.
//
// N % 4 != 0 (rows are not 16-byte aligned): the same tiles with scalar accesses and
// padded's mapping (threads as 32 x 8, four rows each), again with every tile's loads
// issued before the shared stores. The barrier is outside every guard.
template <int T>
__device__ __forceinline__ void transpose_vec4(float* output, const float* input, int n) {
  __shared__ float tile[T][kTile][kTile + 1];
  const int col0 = blockIdx.x * kTile;
  const int row0 = blockIdx.y * kTile * T;
  if ((n & 3) == 0) {
    const int tx = threadIdx.x;
    const int ty = threadIdx.y;
    float4 v[T];
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const int r = row0 + t * kTile + ty;
      const int c = col0 + 4 * tx;
      v[t] = make_float4(0.f, 0.f, 0.f, 0.f);
      // n and c are multiples of 4, so c < n means c + 3 < n.
      if (r < n && c < n) {
        v[t] = *reinterpret_cast<const float4*>(input + static_cast<size_t>(r) * n + c);
      }
    }
#pragma unroll
    for (int t = 0; t < T; ++t) {
      tile[t][ty][4 * tx + 0] = v[t].x;
      tile[t][ty][4 * tx + 1] = v[t].y;
      tile[t][ty][4 * tx + 2] = v[t].z;
      tile[t][ty][4 * tx + 3] = v[t].w;
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < T; ++t) {
      const int orow = col0 + ty;
      const int ocol = row0 + t * kTile + 4 * tx;
      if (orow < n && ocol < n) {
        const float4 w = make_float4(tile[t][4 * tx + 0][ty], tile[t][4 * tx + 1][ty],
                                     tile[t][4 * tx + 2][ty], tile[t][4 * tx + 3][ty]);
        *reinterpret_cast<float4*>(output + static_cast<size_t>(orow) * n + ocol) = w;
      }
    }
  } else {
    const int lin = threadIdx.y * 8 + threadIdx.x;
    const int sx = lin % kTile;
    const int sy = lin / kTile;
    float v[T][4];
#pragma unroll
    for (int t = 0; t < T; ++t) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int r = row0 + t * kTile + sy + 8 * k;
        const int c = col0 + sx;
        v[t][k] = 0.f;
        if (r < n && c < n) {
          v[t][k] = input[static_cast<size_t>(r) * n + c];
        }
      }
    }
#pragma unroll
    for (int t = 0; t < T; ++t) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        tile[t][sy + 8 * k][sx] = v[t][k];
      }
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < T; ++t) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const int orow = col0 + sy + 8 * k;
        const int ocol = row0 + t * kTile + sx;
        if (orow < n && ocol < n) {
          output[static_cast<size_t>(orow) * n + ocol] = tile[t][sx][sy + 8 * k];
        }
      }
    }
  }
}

extern "C" __global__ void transpose_vec4_t1(float* output, const float* input, int n) {
  transpose_vec4<1>(output, input, n);
}

extern "C" __global__ void transpose_vec4_t2(float* output, const float* input, int n) {
  transpose_vec4<2>(output, input, n);
}

extern "C" __global__ void transpose_vec4_t4(float* output, const float* input, int n) {
  transpose_vec4<4>(output, input, n);
}
