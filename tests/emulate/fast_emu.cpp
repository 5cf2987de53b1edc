// A CPU emulation of kernels/fast.cu (tests/emulate.rs builds and runs it): every CUDA thread
// of a block is a std::thread, __syncthreads is a std::barrier, blocks run one at a time, and
// each buffer is an exact-size heap allocation, so AddressSanitizer reports any access past
// the matrix. The device-only code paths (inline PTX) compile to their host fallbacks.
//
//   fast_emu [--only=PREFIX] N...   runs every kernel below (or those whose names start with
//                   PREFIX) at each N and prints one line per run;
//                   exit 0 when every output matches the oracle bit for bit.
#include <algorithm>
#include <barrier>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

struct Dim {
  int x = 0, y = 0, z = 0;
};
thread_local Dim threadIdx;
static Dim blockIdx, gridDim, blockDim;
static std::barrier<>* block_barrier;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__
#define __align__(x) __attribute__((aligned(x)))
#define __launch_bounds__(...)
inline void __syncthreads() { block_barrier->arrive_and_wait(); }
using std::min;
struct float4 {
  float x, y, z, w;
};
struct float2 {
  float x, y;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float2 make_float2(float a, float b) { return {a, b}; }

#include "fast.cu"

typedef void (*Kernel)(float*, const float*, int);
struct Entry {
  const char* name;
  Kernel kernel;
  int bx, by;  // block shape
  int ex, ey;  // elements per block (columns, rows): the grid is ceil(N / e) per axis
  bool copy;
};

static const Entry kEntries[] = {
    {"copy_vec16", copy_vec16, 32, 8, 32, 32, true},
    {"vec4_t1", transpose_vec4_t1, 8, 32, 32, 32, false},
    {"vec4_t2", transpose_vec4_t2, 8, 32, 32, 64, false},
    {"vec4_t4", transpose_vec4_t4, 8, 32, 32, 128, false},
    {"reg4_64", transpose_reg4_64, 256, 1, 64, 64, false},
    {"reg2_64", transpose_reg2_64, 256, 1, 64, 64, false},
    {"reg4_64_e2", transpose_reg4_64_e2, 128, 1, 64, 64, false},
    {"reg4_128x64", transpose_reg4_128x64, 512, 1, 64, 128, false},
    {"reg4_64_g32", transpose_reg4_64_g32, 256, 1, 64, 64, false},
    {"reg4_64x128", transpose_reg4_64x128, 512, 1, 128, 64, false},
    {"own4_64", transpose_own4_64, 256, 1, 64, 64, false},
    {"own4_128x64", transpose_own4_128x64, 512, 1, 64, 128, false},
    {"reg4_64_cs", transpose_reg4_64_cs, 256, 1, 64, 64, false},
    {"own4_64_o5", transpose_own4_64_o5, 256, 1, 64, 64, false},
    {"own8_64_o5", transpose_own8_64_o5, 256, 1, 64, 64, false},
    {"own8_128x64", transpose_own8_128x64, 512, 1, 64, 128, false},
    {"strip8_64_k2", transpose_strip8_64_k2, 256, 1, 128, 64, false},
    {"strip64_k2", transpose_strip64_k2, 256, 1, 128, 64, false},
    {"strip64_k4", transpose_strip64_k4, 256, 1, 256, 64, false},
    {"strip64_k8", transpose_strip64_k8, 256, 1, 512, 64, false},
    {"strip128x32_k8", transpose_strip128x32_k8, 256, 1, 256, 128, false},
};

static size_t run(const Entry& e, int n) {
  const size_t total = static_cast<size_t>(n) * n;
  std::vector<float> in(total), out(total);
  for (size_t i = 0; i < total; ++i) {
    const uint32_t u = static_cast<uint32_t>(i) * 2654435761u + 7u;  // every bit pattern kind
    std::memcpy(&in[i], &u, 4);
  }
  std::memset(out.data(), 0xff, total * 4);
  const int threads = e.bx * e.by;
  gridDim = {(n + e.ex - 1) / e.ex, (n + e.ey - 1) / e.ey, 1};
  blockDim = {e.bx, e.by, 1};
  std::barrier<> barrier(threads);
  block_barrier = &barrier;
  for (int by = 0; by < gridDim.y; ++by) {
    for (int bx = 0; bx < gridDim.x; ++bx) {
      blockIdx = {bx, by, 0};
      std::vector<std::thread> team;
      for (int t = 0; t < threads; ++t) {
        team.emplace_back([&e, &out, &in, n, t] {
          threadIdx = {t % e.bx, t / e.bx, 0};
          e.kernel(out.data(), in.data(), n);
        });
      }
      for (auto& t : team) t.join();
    }
  }
  size_t bad = 0;
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < n; ++c) {
      const size_t want = e.copy ? static_cast<size_t>(r) * n + c : static_cast<size_t>(c) * n + r;
      if (std::memcmp(&out[static_cast<size_t>(r) * n + c], &in[want], 4) != 0) {
        if (bad == 0) std::printf("%s n=%d: first mismatch at (%d, %d)\n", e.name, n, r, c);
        ++bad;
      }
    }
  }
  return bad;
}

int main(int argc, char** argv) {
  int failures = 0;
  const char* only = "";  // --only=PREFIX: the kernels whose names start with PREFIX
  for (int a = 1; a < argc; ++a) {
    if (std::strncmp(argv[a], "--only=", 7) == 0) {
      only = argv[a] + 7;
      continue;
    }
    const int n = std::atoi(argv[a]);
    for (const Entry& e : kEntries) {
      if (std::strncmp(e.name, only, std::strlen(only)) != 0) continue;
      const size_t bad = run(e, n);
      std::printf("%s n=%d: %zu mismatches\n", e.name, n, bad);
      failures += bad != 0;
    }
  }
  std::printf("%d failing runs\n", failures);
  return failures != 0;
}
