// klab built-in: transposes aimed at the copy limit, and a 16-byte copy ceiling.
//
// Out-of-place N x N row-major float32, the same contract as kernels/transpose.cu.
// Predictions written before measuring are in notes/transpose-fast.md.
//
// Compiled at run time by NVRTC (program name "fast.cu", -lineinfo).

constexpr int kTile = 32;

// The CPU emulation (tests/emulate) logs the lean path's shared-memory accesses to count bank
// conflicts from the kernel's own addresses: KLAB_SHARED_ACCESS notes an access of `bytes` at
// p, KLAB_LDS(a, i) is a logged 4-byte load of a[i]. Compiled for a GPU they are nothing and
// a[i] (the generated code is the same as without them; checked on the sm_90 disassembly).
#if defined(KLAB_EMU_TRACE) && !defined(__CUDA_ARCH__)
void klab_emu_shared_access(const void* p, int bytes);
#define KLAB_SHARED_ACCESS(p, bytes) klab_emu_shared_access(p, bytes)
#define KLAB_LDS(a, i) (klab_emu_shared_access(&(a)[i], 4), (a)[i])
#else
#define KLAB_SHARED_ACCESS(p, bytes)
#define KLAB_LDS(a, i) ((a)[i])
#endif

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

// ---------------------------------------------------------------------------------------
// The register-transpose family (issue 6, second set; predictions in
// notes/transpose-fast.md). Template parameters, one mechanism each:
//   TR x TC   the tile: TR input rows by TC input columns (output: TC rows by TR columns)
//   W         the vector width in floats: 4 (16-byte accesses) or 2 (8-byte)
//   THREADS   threads per block (a 1-D block); fewer threads = more elements per thread
//   G         block order: 1 = row-major over the tile grid; G > 1 = groups of G tile rows
//             walked column by column, so the blocks resident at one time cover a square-ish
//             region of both matrices instead of a few full input rows and every output row;
//             -1 = column-major (the resident blocks cover a few full output rows instead);
//             -2 = diagonal (consecutive blocks take tiles from every tile row and column)
//
// N % W == 0 (every row starts W-aligned): each thread loads W x W "register blocks": W
// vectors from W consecutive input rows at the same columns, transposes them in registers,
// and stores W vectors, each a piece of one output row, to shared memory. Shared memory
// holds vectors, TC output rows of TR / W slots, slot q of row j stored at q ^ ((j / W) %
// (32 / W)): the 8 (W = 4) or 16 (W = 2) lanes that share a shared-memory wavefront then
// hit distinct bank groups on both sides, so every shared access is one vector and
// conflict-free. Every global access is one aligned vector; a warp covers whole 128-byte
// lines.
//
// N % W != 0 (row starts fall at every alignment): each input row of the tile is read as the
// TC / W + 1 aligned vectors that cover its TC elements (so no access is misaligned),
// shifted by the row's own alignment into a scalar tile with an odd row stride. Each output
// row piece is written as aligned vectors, except the one or two vectors at its ends that the
// piece only partly owns, which are written element by element. Every load is issued before
// any shared store. Each thread visits its vector's elements in an order rotated by its row's
// alignment, which keeps both shared-memory phases free of bank conflicts for every N (see
// the branch). The barrier is outside every guard.
template <int W>
struct __align__(4 * W) VecF {
  float v[W];
};

// Vector loads and stores of W floats at a W-aligned address. CS marks the access
// "streaming" (ld.global.cs / st.global.cs: evict-first in L1 and L2).
template <int W, bool CS = false>
__device__ __forceinline__ VecF<W> load_vec(const float* p) {
  VecF<W> r;
#ifdef __CUDA_ARCH__
  if constexpr (CS && W == 4) {
    asm volatile(
        "{ .reg .u64 g; cvta.to.global.u64 g, %4; ld.global.cs.v4.f32 {%0, %1, %2, %3}, [g]; }"
        : "=f"(r.v[0]), "=f"(r.v[1]), "=f"(r.v[2]), "=f"(r.v[3])
        : "l"(p));
    return r;
  }
#endif
  if constexpr (W == 4) {
    const float4 a = *reinterpret_cast<const float4*>(p);
    r.v[0] = a.x;
    r.v[1] = a.y;
    r.v[2] = a.z;
    r.v[3] = a.w;
  } else {
    const float2 a = *reinterpret_cast<const float2*>(p);
    r.v[0] = a.x;
    r.v[1] = a.y;
  }
  return r;
}

// The store is inline PTX: with a plain float4 store beside the element-by-element stores of
// the partial vectors, the compiler merged the two into four scalar stores (seen in the PTX),
// which quadrupled the store sectors of the ragged path.
template <int W, bool CS = false>
__device__ __forceinline__ void store_vec(float* p, const VecF<W>& y) {
#ifdef __CUDA_ARCH__
  if constexpr (CS && W == 4) {
    asm("{ .reg .u64 g; cvta.to.global.u64 g, %0; st.global.cs.v4.f32 [g], {%1, %2, %3, %4}; }"
        :
        : "l"(p), "f"(y.v[0]), "f"(y.v[1]), "f"(y.v[2]), "f"(y.v[3])
        : "memory");
  } else if constexpr (W == 4) {
    asm("{ .reg .u64 g; cvta.to.global.u64 g, %0; st.global.v4.f32 [g], {%1, %2, %3, %4}; }"
        :
        : "l"(p), "f"(y.v[0]), "f"(y.v[1]), "f"(y.v[2]), "f"(y.v[3])
        : "memory");
  } else {
    asm("{ .reg .u64 g; cvta.to.global.u64 g, %0; st.global.v2.f32 [g], {%1, %2}; }"
        :
        : "l"(p), "f"(y.v[0]), "f"(y.v[1])
        : "memory");
  }
#else  // a host build of this file (a CPU emulation of the kernels)
  for (int t = 0; t < W; ++t) p[t] = y.v[t];
#endif
}

// A 16-byte copy from global to shared memory that does not pass through registers
// (cp.async, sm_80+; both addresses 16-byte aligned), and the wait for all of this thread's.
__device__ __forceinline__ void copy_async16(float* dst, const float* src) {
#ifdef __CUDA_ARCH__
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16;" ::"r"(d), "l"(src) : "memory");
#else
  for (int t = 0; t < 4; ++t) dst[t] = src[t];
#endif
}

__device__ __forceinline__ void copy_async_wait() {
#ifdef __CUDA_ARCH__
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// r.v[u] = a.v[(u + s) % W] for a run-time s in [0, W), without indexing registers at run time.
template <int W>
__device__ __forceinline__ VecF<W> rotate_vec(const VecF<W>& a, int s) {
  VecF<W> r = a;
  if (s & 1) {
    VecF<W> t;
#pragma unroll
    for (int u = 0; u < W; ++u) t.v[u] = r.v[(u + 1) % W];
    r = t;
  }
  if (W == 4 && (s & 2)) {
    VecF<W> t;
#pragma unroll
    for (int u = 0; u < W; ++u) t.v[u] = r.v[(u + 2) % W];
    r = t;
  }
  return r;
}

// Main task b of the ragged path -> (row of the tile, vector m): each warp instruction
// covers W rows and 32 / W consecutive vectors of each (MV vectors per row).
template <int W, int MV>
__device__ __forceinline__ void ragged_task(int b, int& row, int& m) {
  constexpr int LPR = 32 / W;
  constexpr int CH = MV / LPR;
  static_assert(MV % LPR == 0, "a row's vectors fill whole warp chunks");
  const int lane = b & 31;
  const int wi = b >> 5;
  row = (wi / CH) * W + lane / LPR;
  m = (wi % CH) * LPR + lane % LPR;
}

template <int G>
__device__ __forceinline__ void tile_coords(int& bx, int& by) {
  const int gx = gridDim.x;
  const int gy = gridDim.y;
  const int linear = blockIdx.y * gx + blockIdx.x;
  if (G == -1) {  // column-major: consecutive blocks walk down a column of tiles
    by = linear % gy;
    bx = linear / gy;
    return;
  }
  if (G == -2) {  // diagonal: consecutive blocks walk a wrapped diagonal (square grids)
    by = blockIdx.x;
    bx = (blockIdx.x + blockIdx.y) % gx;
    return;
  }
  if (G <= 1) {
    bx = blockIdx.x;
    by = blockIdx.y;
    return;
  }
  const int per_group = G * gx;
  const int group = linear / per_group;
  const int first = group * G;
  const int rows = min(gy - first, G);
  const int k = linear - group * per_group;
  by = first + k % rows;
  bx = k / rows;
}

// The aligned path (N % W == 0) for the TR x TC tile at input row r0, column c0, through
// `smem` (at least TR * TC floats, 16-byte aligned). CS: streaming cache hints on every
// global access.
template <int TR, int TC, int W, int THREADS, bool CS = false>
__device__ __forceinline__ void reg_aligned_tile(float* __restrict__ output,
                                                 const float* __restrict__ input, int n, int r0,
                                                 int c0, float* smem) {
  using V = VecF<W>;
  const int tid = threadIdx.x;
  constexpr int VR = TC / W;  // vectors across an input row of the tile
  constexpr int QR = TR / W;  // vectors across an output row of the tile
  constexpr int SW = 32 / W;  // lanes per shared-memory wavefront
  constexpr int PER = QR * VR / THREADS;
  static_assert(QR * VR % THREADS == 0, "register blocks divide among the threads");
  V* s = reinterpret_cast<V*>(smem);  // [TC][QR]
  V x[PER][W];
#pragma unroll
  for (int p = 0; p < PER; ++p) {
    const int b = tid + p * THREADS;
    const int q = b / VR;
    const int v = b % VR;
    const int c = c0 + v * W;
#pragma unroll
    for (int w = 0; w < W; ++w) {
      const int r = r0 + q * W + w;
      // n and c are multiples of W, so c < n means the whole vector is inside.
      if (r < n && c < n) {
        x[p][w] = load_vec<W, CS>(input + static_cast<size_t>(r) * n + c);
      } else {
#pragma unroll
        for (int t = 0; t < W; ++t) x[p][w].v[t] = 0.f;
      }
    }
  }
#pragma unroll
  for (int p = 0; p < PER; ++p) {
    const int b = tid + p * THREADS;
    const int q = b / VR;
    const int v = b % VR;
#pragma unroll
    for (int t = 0; t < W; ++t) {
      V y;
#pragma unroll
      for (int w = 0; w < W; ++w) y.v[w] = x[p][w].v[t];
      s[(v * W + t) * QR + (q ^ (v % SW))] = y;
    }
  }
  __syncthreads();
  // TC x QR vectors leave the tile: W per register block, so PER * W per thread.
#pragma unroll
  for (int p = 0; p < PER * W; ++p) {
    const int b = tid + p * THREADS;
    const int j = b / QR;
    const int q = b % QR;
    const V y = s[j * QR + (q ^ ((j / W) % SW))];
    const int orow = c0 + j;
    const int ocol = r0 + q * W;
    if (orow < n && ocol < n) {
      store_vec<W, CS>(output + static_cast<size_t>(orow) * n + ocol, y);
    }
  }
}

// The ragged path's store phase with ownership: the TC output row pieces of the tile at
// (r0, c0), read from `tile` (row i, column jl at tile[i * STR + jl]; rows TR .. TR + OA - 2
// are the halo), jmax valid columns. Output row pieces are owned in aligned units of OA
// floats (OA = W: 16-byte vectors; OA = 8: 32-byte sectors): this block writes the aligned
// vectors of output row c0 + jl from its first OA-aligned column at or after r0, up to the
// unit that starts before r0 + TR, reading up to OA - 1 halo rows past its tile, so no unit
// is split between two blocks. Only the head of a row (before its first aligned unit,
// written by the first column band) and the end of a row are written element by element.
template <int TR, int TC, int W, int THREADS, int STR, int OA = W>
__device__ __forceinline__ void own_store_phase(float* __restrict__ output, const float* tile,
                                                int n, int r0, int c0, int jmax) {
  using V = VecF<W>;
  constexpr int MQ = TR / W;  // main vectors per output row of the tile
  constexpr int MPER = TC * MQ / THREADS;
  static_assert(TC * MQ % THREADS == 0, "main tasks divide among the threads");
  static_assert(TC <= THREADS, "one extra task per thread at most");
  static_assert(OA % W == 0, "units of whole vectors");
  const int tid = threadIdx.x;
#pragma unroll
  for (int p = 0; p <= MPER; ++p) {
    int jl = tid;  // p == MPER: the head of output row tid
    int m = MQ;
    bool mine = tid < TC;
    if (p < MPER) {
      ragged_task<W, MQ>(tid + p * THREADS, jl, m);
      mine = true;
    }
    if (mine && jl < jmax) {
      const size_t lin = static_cast<size_t>(c0 + jl) * n + r0;
      const int s = static_cast<int>(lin % W);
      const int e = static_cast<int>((OA - lin % OA) % OA);  // first aligned unit; -s mod W
      const int ilim = n - r0;  // tile rows i with column r0 + i < n
      if (p < MPER) {
        const int ilo = e + m * W;
        if (ilo < ilim) {
          const size_t a = lin + ilo;
          V g;  // g.v[u] holds element (u + s) % W of the output vector
#pragma unroll
          for (int u = 0; u < W; ++u) {
            const int i = ilo + (u + s) % W;
            g.v[u] = i < ilim ? tile[i * STR + jl] : 0.f;
          }
          const V y = rotate_vec<W>(g, (W - s) % W);
          if (ilo + W <= ilim) {
            store_vec<W>(output + a, y);
          } else {
#pragma unroll
            for (int t = 0; t < W; ++t) {
              if (ilo + t < ilim) output[a + t] = y.v[t];
            }
          }
        }
      } else if (r0 == 0) {
#pragma unroll
        for (int t = 0; t < OA - 1; ++t) {
          if (t < e && t < ilim) output[lin + t] = tile[t * STR + jl];
        }
      }
    }
  }
}

template <int TR, int TC, int W, int THREADS, int G, int OA = 0, bool CS = false>
__device__ __forceinline__ void transpose_reg(float* __restrict__ output,
                                              const float* __restrict__ input, int n) {
  static_assert(W == 2 || W == 4, "vector width");
  static_assert(TR % 32 == 0 && TC % 32 == 0, "tile sides are multiples of 32");
  using V = VecF<W>;
  // Shared by the two paths; ownership in units of OA floats (OA > 0) adds OA halo rows to
  // the ragged tile.
  constexpr bool OWN = OA > 0;
  __shared__ __align__(16) float smem[(TR + OA) * (TC + 1)];
  int bx, by;
  tile_coords<G>(bx, by);
  const int r0 = by * TR;
  const int c0 = bx * TC;
  const int tid = threadIdx.x;

  if (n % W == 0) {
    reg_aligned_tile<TR, TC, W, THREADS, CS>(output, input, n, r0, c0, smem);
  } else {
    // Tasks: (tile row, aligned vector m). The main tasks (m < TC / W) put W rows of 32 / W
    // lanes in each warp instruction; the one extra vector per row that a skew needs
    // (m = TC / W) is a task of its own. Each thread moves its vector's elements through
    // shared memory starting at the element whose column is congruent to the row's skew, so
    // that the W rows of a warp instruction land in W different bank classes (mod W) and the
    // 32 / W lanes of a row in distinct banks of that class: no bank conflicts, whatever N.
    constexpr int STR = TC + 1;   // odd row stride of the scalar tile
    constexpr int MV = TC / W;    // main vectors per input row of the tile
    constexpr int MQ = TR / W;    // main vectors per output row of the tile
    constexpr int MAIN = TR * MV; // = TC * MQ: the main store tasks
    constexpr int MPER = MAIN / THREADS;
    constexpr int TRH = TR + OA;  // tile rows loaded
    constexpr int LMAIN = TRH * MV;          // main load tasks
    constexpr int LPER = (LMAIN + THREADS - 1) / THREADS;
    static_assert(MAIN % THREADS == 0, "main tasks divide among the threads");
    static_assert(TRH <= THREADS && TC <= THREADS, "one extra task per thread at most");
    float* tile = smem;  // [TRH][STR]
    const size_t total = static_cast<size_t>(n) * n;
    const int jmax = min(TC, n - c0);   // valid tile columns
    const int imax = min(TRH, n - r0);  // valid tile rows
    V vals[LPER + 1];
#pragma unroll
    for (int p = 0; p <= LPER; ++p) {
      int rl = tid;  // p == LPER: the extra vector of row tid
      int m = MV;
      bool mine = tid < TRH;
      if (p < LPER) {
        const int b = tid + p * THREADS;
        ragged_task<W, MV>(b, rl, m);
        mine = b < LMAIN;
      }
#pragma unroll
      for (int t = 0; t < W; ++t) vals[p].v[t] = 0.f;
      if (mine && rl < imax) {
        const size_t lin = static_cast<size_t>(r0 + rl) * n + c0;
        const int s = static_cast<int>(lin % W);
        if (m * W - s < jmax) {
          const size_t a = lin - s + static_cast<size_t>(m) * W;
          if (a + W <= total) {
            vals[p] = load_vec<W>(input + a);
          } else {
#pragma unroll
            for (int t = 0; t < W; ++t) {
              if (a + t < total) vals[p].v[t] = input[a + t];
            }
          }
        }
      }
    }
#pragma unroll
    for (int p = 0; p <= LPER; ++p) {
      int rl = tid;  // p == LPER: the extra vector of row tid
      int m = MV;
      bool mine = tid < TRH;
      if (p < LPER) {
        const int b = tid + p * THREADS;
        ragged_task<W, MV>(b, rl, m);
        mine = b < LMAIN;
      }
      if (mine && rl < imax) {
        const size_t lin = static_cast<size_t>(r0 + rl) * n + c0;
        const int s = static_cast<int>(lin % W);
        const V r = rotate_vec<W>(vals[p], s);  // r.v[u] = vals[p].v[(u + s) % W]
#pragma unroll
        for (int u = 0; u < W; ++u) {
          const int j = m * W + (u + s) % W - s;
          if (j >= 0 && j < jmax) tile[rl * STR + j] = r.v[u];
        }
      }
    }
    __syncthreads();
    if constexpr (OWN) {
      own_store_phase<TR, TC, W, THREADS, STR, OA>(output, tile, n, r0, c0, jmax);
    } else {
#pragma unroll
      for (int p = 0; p <= MPER; ++p) {
        int jl = tid;  // p == MPER: the extra vector of row tid
        int m = MQ;
        bool mine = tid < TC;
        if (p < MPER) {
          ragged_task<W, MQ>(tid + p * THREADS, jl, m);
          mine = true;
        }
        if (mine && jl < jmax) {
          const size_t lin = static_cast<size_t>(c0 + jl) * n + r0;
          const int s = static_cast<int>(lin % W);
          const int ilo = m * W - s;
          if (ilo < imax) {
            const size_t a = lin - s + static_cast<size_t>(m) * W;
            V g;  // g.v[u] holds element (u + s) % W of the output vector
#pragma unroll
            for (int u = 0; u < W; ++u) {
              const int i = ilo + (u + s) % W;
              g.v[u] = (i >= 0 && i < imax) ? tile[i * STR + jl] : 0.f;
            }
            const V y = rotate_vec<W>(g, (W - s) % W);
            if (ilo >= 0 && ilo + W <= imax) {
              store_vec<W>(output + a, y);
            } else {
#pragma unroll
              for (int t = 0; t < W; ++t) {
                const int i = ilo + t;
                if (i >= 0 && i < imax) output[a + t] = y.v[t];
              }
            }
          }
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------
// Strips (issue 6, third set; predictions in notes/transpose-fast.md): a block walks K
// TR x TC tiles of one strip of input rows from left to right, so each input sector is read
// once. Block (bx, by) covers input rows [TR by, TR (by + 1)) and columns [C0, C0 + K TC),
// C0 = K TC bx.
//
// N % 4 == 0: the K tiles one after another through the aligned path of the family.
//
// N % 4 != 0: a row's loads are the aligned 16-byte vectors that start at or after its first
// whole 32-byte sector (column e of the strip, e < 8): iteration k loads the TC / 4 vectors
// at columns e + k TC + 4 m, so every warp request covers whole sectors and no sector is read
// by two iterations. The columns a vector carries past its tile (up to e) are the head of the
// next tile: shared memory is a circular buffer of 2 TC columns per row, so they are simply
// stored where the next tile will read them. Before the first tile each row also loads the
// up to e columns before its first whole sector (the only sector a strip shares with its
// left neighbour). Iteration k+1's loads are issued before iteration k's stores. The store
// side is the ownership path (own_store_phase) with OA halo rows. Bank conflicts: a warp's
// main loads cover 4 consecutive rows (row stride 2 TC + 1, one bank apart) and 8 consecutive
// vectors of each; each thread visits its elements rotated so that its column at step u is
// congruent to u mod 4, as in transpose_reg. The head loads (once per strip, a lane per row)
// are not conflict-free: at 8193 ncu counted 0.54 M shared store bank conflicts in 2.9 M
// store wavefronts for strip64_k2 (evidence/2026-11-30-fast3/explore-3).
//
// Measured on the H200: no strip beat the single-tile kernels (notes/transpose-fast.md, #13,
// #14, #19, #22); they are kept as the record of that experiment.
template <int TR, int TC, int K, int THREADS, int OA = 4>
struct Strip {
  static constexpr int W = 4;
  static constexpr int A = 8;              // floats per 32-byte sector
  static constexpr int CB = 2 * TC;        // circular buffer columns per row
  static constexpr int STR = CB + 1;       // odd row stride
  static constexpr int TRH = TR + OA;      // tile rows and halo rows (ownership unit OA)
  static constexpr int MV = TC / W;        // vectors per row per tile
  static constexpr int LMAIN = TRH * MV;   // load tasks per tile
  static constexpr int LPER = (LMAIN + THREADS - 1) / THREADS;
  static constexpr int HEADS = TRH * (A / W);
  static_assert(TR % 32 == 0 && TC % 32 == 0, "tile sides are multiples of 32");
  static_assert(TR * TC <= TRH * STR, "the aligned path's tile fits the buffer");
  static_assert(LMAIN % 32 == 0, "load tasks fill whole warps");

  // Load task p of this thread: the row of the strip and the vector index within the tile.
  static __device__ __forceinline__ bool task(int p, int& rl, int& m) {
    const int b = threadIdx.x + p * THREADS;
    ragged_task<W, MV>(b, rl, m);
    return b < LMAIN;
  }

  // Strip column of the first whole 32-byte sector of row rl (lin: the row's flat index at C0).
  static __device__ __forceinline__ int first_sector(size_t lin) {
    return static_cast<int>((A - lin % A) % A);
  }

  static __device__ __forceinline__ void load(VecF<W> (&vals)[LPER], const float* input, int n,
                                              size_t total, int r0, int c0s, int k, int jend,
                                              int imax) {
#pragma unroll
    for (int p = 0; p < LPER; ++p) {
      int rl, m;
      const bool mine = task(p, rl, m);
#pragma unroll
      for (int t = 0; t < W; ++t) vals[p].v[t] = 0.f;
      if (mine && rl < imax) {
        const size_t lin = static_cast<size_t>(r0 + rl) * n + c0s;
        const int j = first_sector(lin) + k * TC + m * W;
        if (j < jend) {
          const size_t a = lin + j;
          if (a + W <= total) {
            vals[p] = load_vec<W>(input + a);
          } else {
#pragma unroll
            for (int t = 0; t < W; ++t) {
              if (a + t < total) vals[p].v[t] = input[a + t];
            }
          }
        }
      }
    }
  }

  static __device__ __forceinline__ void put(const VecF<W> (&vals)[LPER], float* tile, int n,
                                             int r0, int c0s, int k, int jend, int imax) {
#pragma unroll
    for (int p = 0; p < LPER; ++p) {
      int rl, m;
      const bool mine = task(p, rl, m);
      if (mine && rl < imax) {
        const size_t lin = static_cast<size_t>(r0 + rl) * n + c0s;
        const int j = first_sector(lin) + k * TC + m * W;  // congruent to -lin mod 4
        const int s = static_cast<int>(lin % W);
        const VecF<W> r = rotate_vec<W>(vals[p], s);  // r.v[u]: element (u + s) % W
#pragma unroll
        for (int u = 0; u < W; ++u) {
          const int c = j + (u + s) % W;  // congruent to u mod 4
          if (c < jend) tile[rl * STR + (c & (CB - 1))] = r.v[u];
        }
      }
    }
  }

  static __device__ __forceinline__ void run(float* __restrict__ output,
                                             const float* __restrict__ input, int n) {
    __shared__ __align__(16) float smem[TRH * STR];
    const int r0 = blockIdx.y * TR;
    const int c0s = blockIdx.x * (K * TC);
    if (n % W == 0) {
      for (int k = 0; k < K && c0s + k * TC < n; ++k) {
        if (k > 0) __syncthreads();  // the previous tile's shared reads are done
        reg_aligned_tile<TR, TC, W, THREADS>(output, input, n, r0, c0s + k * TC, smem);
      }
      return;
    }
    const size_t total = static_cast<size_t>(n) * n;
    const int jend = min(K * TC, n - c0s);  // valid columns of the strip
    const int imax = min(TRH, n - r0);      // valid rows, halo included
    // The columns before each row's first whole sector: the A / W aligned vectors ending
    // there, loaded whole (elements before the row start are read and dropped).
    for (int h = threadIdx.x; h < HEADS; h += THREADS) {
      const int rl = h % TRH;
      if (rl < imax) {
        const size_t lin = static_cast<size_t>(r0 + rl) * n + c0s;
        const int e = first_sector(lin);
        const int back = A - (h / TRH) * W;  // the vector starts this many columns before e
        const int j = e - back;
        // j + W > 0 implies lin > 0, so lin + e is a positive multiple of A and a >= 0.
        if (j + W > 0) {
          const size_t a = lin + e - back;
          VecF<W> v;
          if (a + W <= total) {
            v = load_vec<W>(input + a);
          } else {
#pragma unroll
            for (int t = 0; t < W; ++t) v.v[t] = a + t < total ? input[a + t] : 0.f;
          }
#pragma unroll
          for (int t = 0; t < W; ++t) {
            const int c = j + t;
            if (c >= 0 && c < jend) tile_at(smem, rl, c) = v.v[t];
          }
        }
      }
    }
    VecF<W> vals[LPER];
    load(vals, input, n, total, r0, c0s, 0, jend, imax);
    for (int k = 0; k < K && k * TC < jend; ++k) {
      put(vals, smem, n, r0, c0s, k, jend, imax);
      __syncthreads();
      if (k + 1 < K && (k + 1) * TC < jend) {
        load(vals, input, n, total, r0, c0s, k + 1, jend, imax);
      }
      own_store_phase<TR, TC, W, THREADS, STR, OA>(output, smem + ((k * TC) & (CB - 1)), n, r0,
                                                   c0s + k * TC, min(TC, jend - k * TC));
      __syncthreads();  // the next put overwrites the columns this tile just read
    }
  }

  static __device__ __forceinline__ float& tile_at(float* smem, int rl, int c) {
    return smem[rl * STR + (c & (CB - 1))];
  }
};

// ---------------------------------------------------------------------------------------
// Lean ragged path (issue 6, fourth set; predictions in notes/transpose-fast.md). own8_64_o5
// writes the copy's store sectors at 8193 but its ragged path runs about 1,100 SASS
// instructions per thread per tile (the SM issued 74% of the time) and its warp requests
// cover 4 rows x 128 bytes on both sides, so each touches about 7 cache lines where a copy's
// touches 4. Lean keeps own8's 32-byte output ownership (OA = 8, 7 halo rows) and changes
// how the tile moves:
//
// Loads: each input row of the tile is read as the MV + 1 aligned 16-byte vectors that cover
// its TC elements (slot q at A_i + 4 q, A_i = L_i - s_i, L_i the flat index of the row's
// first element and s_i = L_i mod 4), a warp request covering 2 rows x 256 bytes (TC = 64)
// or one row's 512 bytes (TC = 128); the extra slot MV, needed when s_i > 0, is one request
// with a lane per row. Each vector goes to shared memory whole (one 16-byte store): the
// element of tile column j sits at position x = s_i + j of its row, so nothing is rotated
// or split on the way in.
//
// Shared layout: slot q < MV of row i at vector (q + i / 4) mod MV of a row of MV vectors;
// slot MV of every row in a separate column, row i at vector 8 (i / 8) + f(i), f(i) =
// (i / 4 + 2 (i mod 4)) mod 8. The 8 lanes of a 16-byte store phase write 8 consecutive
// slots of one row, or slot MV of 8 consecutive rows: 8 distinct bank groups either way.
//
// Stores: output row j of the tile owns the aligned 32-byte units that start at tile rows
// e_j + 8 k < TR (e_j: the first row at which the output is sector-aligned), so MQ = TR / 4
// output vectors per row, vector m holding tile rows e_j + 4 m + u. A warp request covers SR
// output rows x 32 / SR vectors (SR = 4: 4 x 128 bytes; SR = 2: 2 x 256 bytes). Each lane
// reads its vector's 4 elements with 4 scalar shared loads, in the order that makes the
// element's column residue x mod 4 equal to (t + lane / 8) mod 4 at load t, then puts them
// back in order with selects: the 8 lanes of one residue read 8 distinct bank groups
// (group = const + m mod 8 in the rows, const + m in the extra column), so the loads are
// conflict-free for odd N. For even N the order is a plain rotation; with SR = 4 the four
// rows of a request then differ in residue, so those loads are conflict-free too (with
// SR = 2 at N % 4 == 0, 2-way). Correctness does not depend on the order; the bank counts
// come from the CPU emulation (fast_emu --banks, tests/emulate.rs).
//
// Tiles whose rows (with halo) and columns all lie inside the matrix take a path with no
// bounds checks; the others check every access. ASYNC: the loads are cp.async copies
// straight into shared memory (no registers, no shared store instructions; the vector that
// passes the end of the matrix, if any, element by element), so a taller or wider tile costs
// no registers. The first tile row of each output row piece
// (before its first aligned unit) is written element by element by the first row band.
// N % 4 == 0: reg4_64's aligned path, unless ALL: then this path for every N (with N % 8 == 0
// no halo rows are read, every row piece is whole lines, and the loads hold no registers).
template <int TR, int TC, int THREADS, int SR, bool ASYNC = false, bool ALL = false>
struct Lean {
  static constexpr int W = 4;
  static constexpr int OA = 8;                    // ownership unit: a 32-byte sector
  static constexpr int TRN = TR + OA - 1;         // rows read: the tile and 7 halo rows
  static constexpr int TRH = TR + OA;             // rows allocated (blocks of 8)
  static constexpr int MV = TC / W;               // main slots per row
  static constexpr int S = W * MV;                // row stride in floats (slots 0 .. MV - 1)
  static constexpr int XS = TRH * S;              // the extra column (slot MV of each row)
  static constexpr int MQ = TR / W;               // output vectors per output row piece
  static constexpr int NW = THREADS / 32;         // warps
  static constexpr int LPR = MV < 32 ? MV : 32;   // load lanes per row
  static constexpr int LRW = 32 / LPR;            // rows per load request
  static constexpr int LCH = MV / LPR;            // load requests per row
  static constexpr int LREQ = TRH * LCH / LRW;    // main load requests per tile
  static constexpr int LPER = (LREQ + NW - 1) / NW;
  static constexpr int SPR = 32 / SR;             // store lanes per output row
  static constexpr int SCH = MQ / SPR;            // store requests per output row
  static constexpr int SPJ = TC / SR / NW;        // output row groups per warp
  static constexpr int SMEM = XS + W * TRH > TR * TC ? XS + W * TRH : TR * TC;
  static_assert(MV == 16 || MV == 32, "slot rotation modulo a power of two");
  static_assert(TRH % 8 == 0, "the extra column is permuted in blocks of 8 rows");
  static_assert(SR == 2 || SR == 4, "2 or 4 output rows per store request");
  static_assert(TC % (SR * NW) == 0 && MQ % SPR == 0, "store requests divide among warps");
  static_assert(TRH * LCH % LRW == 0, "load requests cover whole rows");
  static_assert(TRH <= THREADS && TC <= THREADS, "one extra load and one head per thread");

  // Shared offset (floats) of slot q of tile row i.
  static __device__ __forceinline__ int slot(int i, int q) {
    if (q < MV) return i * S + W * ((q + (i >> 2)) & (MV - 1));
    return XS + W * ((i & ~7) | (((i >> 2) + 2 * (i & 3)) & 7));
  }
  // Skew of tile row i: (flat index of its first element) mod 4; l0 = that of row 0.
  static __device__ __forceinline__ int skew(unsigned l0, int i, int n) {
    return static_cast<int>((l0 + static_cast<unsigned>(i) * static_cast<unsigned>(n)) & 3u);
  }

  template <bool GUARD>
  static __device__ __forceinline__ void load(float* sm, const float* __restrict__ input, int n,
                                              int r0, int c0, int jmax, int imax, int trn) {
    using V = VecF<W>;
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const unsigned l0 = static_cast<unsigned>(r0) * static_cast<unsigned>(n) +
                        static_cast<unsigned>(c0);
    const size_t total = static_cast<size_t>(n) * n;
    V v[LPER + 1];
    int off[LPER + 1];
    bool on[LPER + 1];
#pragma unroll
    for (int p = 0; p <= LPER; ++p) {
      int i = threadIdx.x;  // p == LPER: slot MV of row tid
      int q = MV;
      bool mine = threadIdx.x < TRH;
      if (p < LPER) {
        const int wi = w + NW * p;
        i = (wi / LCH) * LRW + lane / LPR;
        q = (wi % LCH) * LPR + lane % LPR;
        mine = wi < LREQ;
      }
      const int s = skew(l0, i, n);
      on[p] = mine && (GUARD ? (i < imax && W * q < s + jmax)
                             : (i < trn && (p < LPER || s != 0)));
      off[p] = slot(i, q);
#pragma unroll
      for (int t = 0; t < W; ++t) v[p].v[t] = 0.f;
      if (on[p]) {
        const size_t a = static_cast<size_t>(r0 + i) * n + c0 - s + W * q;
        if (ASYNC) {
          if (!GUARD || a + W <= total) {
            KLAB_SHARED_ACCESS(sm + off[p], 16);
            copy_async16(sm + off[p], input + a);
          } else {
#pragma unroll
            for (int t = 0; t < W; ++t) {
              if (a + t < total) sm[off[p] + t] = input[a + t];
            }
          }
          on[p] = false;  // nothing left to store from registers
        } else if (!GUARD || a + W <= total) {
          v[p] = load_vec<W>(input + a);
        } else {
#pragma unroll
          for (int t = 0; t < W; ++t) {
            if (a + t < total) v[p].v[t] = input[a + t];
          }
        }
      }
    }
#pragma unroll
    for (int p = 0; p <= LPER; ++p) {
      if (on[p]) {
        KLAB_SHARED_ACCESS(sm + off[p], 16);
        *reinterpret_cast<V*>(sm + off[p]) = v[p];
      }
    }
  }

  template <bool GUARD>
  static __device__ __forceinline__ void store(float* __restrict__ output, const float* sm,
                                               int n, int r0, int c0, int jmax, int ilim) {
    using V = VecF<W>;
    const int lane = threadIdx.x & 31;
    const int w = threadIdx.x >> 5;
    const unsigned l0 = static_cast<unsigned>(r0) * static_cast<unsigned>(n) +
                        static_cast<unsigned>(c0);
    const int rsel = (lane >> 3) & 3;
    const bool odd = (n & 1) != 0;
    const int nn = odd ? (n & 3) : 1;
#pragma unroll
    for (int pj = 0; pj < SPJ; ++pj) {
      const int j = (w + NW * pj) * SR + lane / SPR;
      if (GUARD && j >= jmax) continue;
      const unsigned oj = static_cast<unsigned>(c0 + j) * static_cast<unsigned>(n) +
                          static_cast<unsigned>(r0);
      const int e = static_cast<int>((0u - oj) & 7u);  // first sector-aligned tile row
      // Load t reads element u_t = (k + t nn) mod 4 (tile row e + 4 m + u_t), whose column
      // residue is (t + rsel) mod 4 when N is odd.
      const int base = (skew(l0, e, n) + j) & 3;
      const int k = odd ? (((rsel - base) * n) & 3) : rsel;
      int row[W], col[W];
#pragma unroll
      for (int t = 0; t < W; ++t) {
        const int i = e + ((k + t * nn) & 3);
        const int x = skew(l0, i, n) + j;
        row[t] = i;
        col[t] = x;
      }
      float* const out = output + static_cast<size_t>(c0 + j) * n + r0 + e;
#pragma unroll
      for (int h = 0; h < SCH; ++h) {
        const int m = h * SPR + lane % SPR;
        const int ilo = e + W * m;
        if (GUARD && ilo >= ilim) continue;
        V g;
#pragma unroll
        for (int t = 0; t < W; ++t) {
          const int i = row[t] + W * m;
          const int q = col[t] >> 2;
          g.v[t] = (!GUARD || i < ilim) ? KLAB_LDS(sm, slot(i, q) + (col[t] & 3)) : 0.f;
        }
        if (nn == 3) {  // g.v[t] holds element (k - t) mod 4: reflect to (k + t) mod 4
          const float a = g.v[1];
          g.v[1] = g.v[3];
          g.v[3] = a;
        }
        const V y = rotate_vec<W>(g, (W - k) & 3);  // y.v[u] = element u
        if (!GUARD || ilo + W <= ilim) {
          store_vec<W>(out + W * m, y);
        } else {
#pragma unroll
          for (int u = 0; u < W; ++u) {
            if (ilo + u < ilim) out[W * m + u] = y.v[u];
          }
        }
      }
    }
  }

  // The first band writes each output row's head: tile rows before its first aligned unit.
  static __device__ __forceinline__ void head(float* __restrict__ output, const float* sm, int n,
                                              int c0, int jmax, int ilim) {
    const int j = threadIdx.x;
    if (j >= jmax) return;
    const unsigned oj = static_cast<unsigned>(c0 + j) * static_cast<unsigned>(n);
    const int e = static_cast<int>((0u - oj) & 7u);
    const unsigned l0 = static_cast<unsigned>(c0);
    float* const out = output + static_cast<size_t>(c0 + j) * n;
#pragma unroll
    for (int i = 0; i < OA - 1; ++i) {
      if (i < e && i < ilim) {
        const int x = skew(l0, i, n) + j;
        out[i] = sm[slot(i, x >> 2) + (x & 3)];
      }
    }
  }

  template <int G = 1>
  static __device__ __forceinline__ void run(float* __restrict__ output,
                                             const float* __restrict__ input, int n) {
    __shared__ __align__(16) float sm[SMEM];
    int bx, by;
    tile_coords<G>(bx, by);
    const int r0 = by * TR;
    const int c0 = bx * TC;
    if (!ALL && n % W == 0) {
      reg_aligned_tile<TR, TC, W, THREADS>(output, input, n, r0, c0, sm);
      return;
    }
    // Rows read: with N % 8 == 0 every output row piece starts sector-aligned (no halo).
    const int trn = n % OA == 0 ? TR : TRN;
    const int jmax = min(TC, n - c0);
    const int ilim = n - r0;
    const int imax = min(trn, ilim);
    // Every row read (and the next, so no vector passes the end of the matrix) and every
    // column inside: no checks needed.
    const bool inside = r0 + trn < n && c0 + TC <= n;
    if (inside) {
      load<false>(sm, input, n, r0, c0, jmax, imax, trn);
    } else {
      load<true>(sm, input, n, r0, c0, jmax, imax, trn);
    }
    if (ASYNC) copy_async_wait();
    __syncthreads();
    if (inside) {
      store<false>(output, sm, n, r0, c0, jmax, ilim);
    } else {
      store<true>(output, sm, n, r0, c0, jmax, ilim);
    }
    if (r0 == 0) head(output, sm, n, c0, jmax, ilim);
  }
};

// 64 x 64 tiles, 16-byte vectors, 256 threads (one 4 x 4 register block each).
extern "C" __global__ void __launch_bounds__(256) transpose_reg4_64(float* output,
                                                                    const float* input, int n) {
  transpose_reg<64, 64, 4, 256, 1>(output, input, n);
}

// reg4_64 with 8-byte vectors (2 x 2 register blocks, four per thread).
extern "C" __global__ void __launch_bounds__(256) transpose_reg2_64(float* output,
                                                                    const float* input, int n) {
  transpose_reg<64, 64, 2, 256, 1>(output, input, n);
}

// reg4_64 with 128 threads: two register blocks (eight 16-byte loads) per thread.
extern "C" __global__ void __launch_bounds__(128) transpose_reg4_64_e2(float* output,
                                                                       const float* input, int n) {
  transpose_reg<64, 64, 4, 128, 1>(output, input, n);
}

// reg4_64 with a tile twice as tall: 128 input rows x 64 columns, 512 threads, so each
// output row piece is 512 bytes.
extern "C" __global__ void __launch_bounds__(512) transpose_reg4_128x64(float* output,
                                                                        const float* input, int n) {
  transpose_reg<128, 64, 4, 512, 1>(output, input, n);
}

// reg4_64 with the blocks walked in groups of 32 tile rows.
extern "C" __global__ void __launch_bounds__(256) transpose_reg4_64_g32(float* output,
                                                                        const float* input, int n) {
  transpose_reg<64, 64, 4, 256, 32>(output, input, n);
}

// reg4_64 with a tile twice as wide: 64 input rows x 128 columns, 512 threads, so each input
// row piece is 512 bytes.
extern "C" __global__ void __launch_bounds__(512) transpose_reg4_64x128(float* output,
                                                                        const float* input, int n) {
  transpose_reg<64, 128, 4, 512, 1>(output, input, n);
}

// reg4_64 and reg4_128x64 with whole-vector ownership in the ragged path (OA = 4): each block
// writes only aligned 16-byte vectors it owns entirely, reading three halo rows, so the
// partial vectors at the ends of every output row piece disappear. The aligned path is
// unchanged.
extern "C" __global__ void __launch_bounds__(256) transpose_own4_64(float* output,
                                                                    const float* input, int n) {
  transpose_reg<64, 64, 4, 256, 1, 4>(output, input, n);
}

extern "C" __global__ void __launch_bounds__(512) transpose_own4_128x64(float* output,
                                                                        const float* input, int n) {
  transpose_reg<128, 64, 4, 512, 1, 4>(output, input, n);
}

// reg4_64 with streaming cache hints (ld.global.cs, st.global.cs) on the aligned path: the
// input is read once and the output written once, so both are marked evict-first. The ragged
// path is reg4_64's.
extern "C" __global__ void __launch_bounds__(256) transpose_reg4_64_cs(float* output,
                                                                       const float* input, int n) {
  transpose_reg<64, 64, 4, 256, 1, 0, true>(output, input, n);
}

// Strips of K 64 x 64 tiles (256 threads), and of 8 128 x 32 tiles.
extern "C" __global__ void __launch_bounds__(256, 4) transpose_strip64_k2(float* output,
                                                                       const float* input, int n) {
  Strip<64, 64, 2, 256>::run(output, input, n);
}

extern "C" __global__ void __launch_bounds__(256, 4) transpose_strip64_k4(float* output,
                                                                       const float* input, int n) {
  Strip<64, 64, 4, 256>::run(output, input, n);
}

extern "C" __global__ void __launch_bounds__(256, 4) transpose_strip64_k8(float* output,
                                                                       const float* input, int n) {
  Strip<64, 64, 8, 256>::run(output, input, n);
}

extern "C" __global__ void __launch_bounds__(256, 4) transpose_strip128x32_k8(float* output,
                                                                           const float* input,
                                                                           int n) {
  Strip<128, 32, 8, 256>::run(output, input, n);
}

// own4_64 capped at 48 registers (launch bounds 256 x 5, no spills): 5 blocks per SM instead
// of 4.
extern "C" __global__ void __launch_bounds__(256, 5) transpose_own4_64_o5(float* output,
                                                                       const float* input, int n) {
  transpose_reg<64, 64, 4, 256, 1, 4>(output, input, n);
}

// own4_64_o5 with the output owned in 32-byte sectors (OA = 8, 7 halo rows, 8 loaded): no
// sector of the output is written by two blocks.
extern "C" __global__ void __launch_bounds__(256, 5) transpose_own8_64_o5(float* output,
                                                                       const float* input, int n) {
  transpose_reg<64, 64, 4, 256, 1, 8>(output, input, n);
}

// own8_64_o5's 32-byte ownership with 128-row tiles (512 threads): half the halo per tile.
extern "C" __global__ void __launch_bounds__(512, 2) transpose_own8_128x64(float* output,
                                                                         const float* input,
                                                                         int n) {
  transpose_reg<128, 64, 4, 512, 1, 8>(output, input, n);
}

// strip64_k2 with the output owned in 32-byte sectors (8 halo rows).
extern "C" __global__ void __launch_bounds__(256, 4) transpose_strip8_64_k2(float* output,
                                                                          const float* input,
                                                                          int n) {
  Strip<64, 64, 2, 256, 8>::run(output, input, n);
}

// Lean ragged path (fourth set): 64 x 64 tiles with 4 x 128-byte store requests, and the same
// with 2 x 256-byte store requests.
extern "C" __global__ void __launch_bounds__(256, 5) transpose_lean_64(float* output,
                                                                     const float* input, int n) {
  Lean<64, 64, 256, 4>::run(output, input, n);
}

extern "C" __global__ void __launch_bounds__(256, 5) transpose_lean_64_r2(float* output,
                                                                        const float* input,
                                                                        int n) {
  Lean<64, 64, 256, 2>::run(output, input, n);
}

// reg4_64 with column-major and diagonal block orders (aligned-path probes).
extern "C" __global__ void __launch_bounds__(256) transpose_reg4_64_cm(float* output,
                                                                       const float* input, int n) {
  transpose_reg<64, 64, 4, 256, -1>(output, input, n);
}

extern "C" __global__ void __launch_bounds__(256) transpose_reg4_64_dg(float* output,
                                                                       const float* input, int n) {
  transpose_reg<64, 64, 4, 256, -2>(output, input, n);
}

// Lean with cp.async loads: 64 x 64 tiles, 128-row tiles (7 halo rows per 128), and
// 128-column tiles (a skewed 512-byte row piece spans 17 sectors instead of 9 per 256 bytes).
extern "C" __global__ void __launch_bounds__(256, 5) transpose_leana_64(float* output,
                                                                      const float* input, int n) {
  Lean<64, 64, 256, 2, true>::run(output, input, n);
}

extern "C" __global__ void __launch_bounds__(256, 4) transpose_leana_128x64(float* output,
                                                                          const float* input,
                                                                          int n) {
  Lean<128, 64, 256, 2, true>::run(output, input, n);
}

extern "C" __global__ void __launch_bounds__(256, 4) transpose_leana_64x128(float* output,
                                                                          const float* input,
                                                                          int n) {
  Lean<64, 128, 256, 2, true>::run(output, input, n);
}

// lean_64_r2 with column-major block order (both paths).
extern "C" __global__ void __launch_bounds__(256, 5) transpose_lean_64_cm(float* output,
                                                                        const float* input,
                                                                        int n) {
  Lean<64, 64, 256, 2>::run<-1>(output, input, n);
}

// reg4_64_cm with 128-row and 128-column tiles (512 threads).
extern "C" __global__ void __launch_bounds__(512) transpose_reg4_128x64_cm(float* output,
                                                                           const float* input,
                                                                           int n) {
  transpose_reg<128, 64, 4, 512, -1>(output, input, n);
}

extern "C" __global__ void __launch_bounds__(512) transpose_reg4_64x128_cm(float* output,
                                                                           const float* input,
                                                                           int n) {
  transpose_reg<64, 128, 4, 512, -1>(output, input, n);
}

// Lean for every N (ALL: no separate aligned path, so no register transposes), cp.async
// loads, column-major block order, 4 x 128-byte store requests (at N % 4 == 0 every row j's
// column residue is j mod 4 whatever the load order, so only 4 rows per request keep the
// shared loads conflict-free; the pieces are then whole lines): 64 x 64 tiles at 6 blocks
// per SM, and 128-row tiles.
extern "C" __global__ void __launch_bounds__(256, 6) transpose_leanu_64_cm(float* output,
                                                                         const float* input,
                                                                         int n) {
  Lean<64, 64, 256, 4, true, true>::run<-1>(output, input, n);
}

extern "C" __global__ void __launch_bounds__(256, 4) transpose_leanu_128x64_cm(float* output,
                                                                             const float* input,
                                                                             int n) {
  Lean<128, 64, 256, 4, true, true>::run<-1>(output, input, n);
}

// leanu_128x64_cm with 512 threads (3 blocks per SM, 48 resident warps instead of 32).
extern "C" __global__ void __launch_bounds__(512, 3) transpose_leanu_128x64_cm_t512(
    float* output, const float* input, int n) {
  Lean<128, 64, 512, 4, true, true>::run<-1>(output, input, n);
}
