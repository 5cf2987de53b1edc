// klab's mutation audit (klab audit): deliberately wrong kernels, each a labelled bug that
// one of klab's gates must reject. Every mutant is a small edit of a correct built-in
// (kernels/transpose.cu, triad.cu, reduce.cu); the comment says what changed.
// DO NOT use these kernels for anything but the audit.

constexpr int kTile = 32;
constexpr int kBlockRows = 8;

// The correct padded transpose with switches for each tile-family bug.
// Barrier: 0 none, 1 outside the guards (correct), 2 inside the load guard.
template <int Barrier, bool SwapBlocks, bool SkipRaggedTile, bool GuardLe>
__device__ __forceinline__ void tile_mutant(float* output, const float* input, int n) {
  __shared__ float tile[kTile][kTile + 1];
  if (SkipRaggedTile && n % kTile != 0 &&
      (blockIdx.x == gridDim.x - 1 || blockIdx.y == gridDim.y - 1)) {
    return;  // BUG: the last, partial tiles are never transposed
  }
  const int input_x = blockIdx.x * kTile + threadIdx.x;
  const int input_y = blockIdx.y * kTile + threadIdx.y;
  for (int offset = 0; offset < kTile; offset += kBlockRows) {
    const bool in = GuardLe ? (input_x <= n && input_y + offset <= n)  // BUG: <= admits n
                            : (input_x < n && input_y + offset < n);
    if (in) {
      tile[threadIdx.y + offset][threadIdx.x] =
          input[static_cast<size_t>(input_y + offset) * n + input_x];
      if (Barrier == 2) {
        __syncthreads();  // BUG: a barrier only the admitted threads reach
      }
    }
  }
  if (Barrier == 1) {
    __syncthreads();
  }
  // BUG when SwapBlocks is false: the output tile keeps the input's block coordinates.
  const int output_x = (SwapBlocks ? blockIdx.y : blockIdx.x) * kTile + threadIdx.x;
  const int output_y = (SwapBlocks ? blockIdx.x : blockIdx.y) * kTile + threadIdx.y;
  for (int offset = 0; offset < kTile; offset += kBlockRows) {
    const bool out = GuardLe ? (output_x <= n && output_y + offset <= n)
                             : (output_x < n && output_y + offset < n);
    if (out) {
      output[static_cast<size_t>(output_y + offset) * n + output_x] =
          tile[threadIdx.x][threadIdx.y + offset];
    }
  }
}

extern "C" __global__ void mut_missing_barrier(float* o, const float* i, int n) {
  tile_mutant<0, true, false, false>(o, i, n);
}
extern "C" __global__ void mut_barrier_in_guard(float* o, const float* i, int n) {
  tile_mutant<2, true, false, false>(o, i, n);
}
extern "C" __global__ void mut_guard_le(float* o, const float* i, int n) {
  tile_mutant<1, true, false, true>(o, i, n);
}
extern "C" __global__ void mut_skip_ragged_tile(float* o, const float* i, int n) {
  tile_mutant<1, true, true, false>(o, i, n);
}
extern "C" __global__ void mut_unswapped_blocks(float* o, const float* i, int n) {
  tile_mutant<1, false, false, false>(o, i, n);
}

// The naive transpose with its store guard removed.
extern "C" __global__ void mut_store_unguarded(float* output, const float* input, int n) {
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  for (int offset = 0; offset < kTile; offset += kBlockRows) {
    const bool in = x < n && y + offset < n;
    const float v = in ? input[static_cast<size_t>(y + offset) * n + x] : 0.0f;
    output[static_cast<size_t>(x) * n + y + offset] = v;  // BUG: no guard on the store
  }
}

// Copies that "normalise" values: exact on ordinary numbers, wrong on the bit patterns the
// oracle's large-N input contains.
extern "C" __global__ void mut_canonical_zero(float* output, const float* input, int n) {
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  for (int offset = 0; offset < kTile; offset += kBlockRows) {
    if (x < n && y + offset < n) {
      const size_t idx = static_cast<size_t>(y + offset) * n + x;
      const float v = input[idx];
      output[idx] = v == 0.0f ? 0.0f : v;  // BUG: -0.0 becomes +0.0
    }
  }
}
extern "C" __global__ void mut_canonical_nan(float* output, const float* input, int n) {
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  for (int offset = 0; offset < kTile; offset += kBlockRows) {
    if (x < n && y + offset < n) {
      const size_t idx = static_cast<size_t>(y + offset) * n + x;
      const float v = input[idx];
      output[idx] = v != v ? __int_as_float(0x7fffffff) : v;  // BUG: NaN payloads lost
    }
  }
}

// Triad with the seed's `i <= n` guard.
extern "C" __global__ void mut_triad_le(const float* x, const float* z, float* y,
                                        unsigned long long n, float alpha) {
  const unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i <= n) {  // BUG
    y[i] = fmaf(alpha, x[i], z[i]);
  }
}

// Triad that is right everywhere and also writes one element past the end.
extern "C" __global__ void mut_store_past_end(const float* x, const float* z, float* y,
                                              unsigned long long n, float alpha) {
  const unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = fmaf(alpha, x[i], z[i]);
  }
  if (i == 0) {
    y[n] = 0.0f;  // BUG: one 4-byte store past the allocation
  }
}

// The block-tree sum, launched with the drop-tail grid by the manifest (n / 256 blocks).
extern "C" __global__ void mut_reduce(const float* in, float* partials, unsigned long long n) {
  __shared__ float buffer[256];
  const unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * 256 + threadIdx.x;
  buffer[threadIdx.x] = i < n ? in[i] : 0.0f;
  __syncthreads();
  for (int stride = 128; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) {
      buffer[threadIdx.x] += buffer[threadIdx.x + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = buffer[0];
  }
}

// A copy that stores far outside every allocation: the launch faults (an illegal address
// poisons the CUDA context), which isolation must report as this kernel's failure.
extern "C" __global__ void mut_wild_store(float* output, const float* input, int n) {
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  if (x < n && y < n) {
    output[static_cast<size_t>(y) * n + x + (static_cast<size_t>(1) << 40)] = input[0];  // BUG
  }
}

// The naive transpose with its offsets in 32-bit int: right until a matrix passes 2^31
// elements (N >= 46341; the ladder runs 46342), where (y + offset) * n + x wraps. Only the ladder's
// index-overflow case reaches it.
extern "C" __global__ void mut_index_int32(float* output, const float* input, int n) {
  const int x = blockIdx.x * kTile + threadIdx.x;
  const int y = blockIdx.y * kTile + threadIdx.y;
  for (int offset = 0; offset < kTile; offset += kBlockRows) {
    if (x < n && y + offset < n) {
      output[x * n + y + offset] = input[(y + offset) * n + x];  // BUG: int offsets
    }
  }
}
