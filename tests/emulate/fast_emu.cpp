// A CPU emulation of kernels/fast.cu (tests/emulate.rs builds and runs it): every CUDA thread
// of a block is a fiber (cuda_emu.h), __syncthreads a switch, blocks run one at a time, and
// each buffer is an exact-size heap allocation, so AddressSanitizer reports any access past
// the matrix. The device-only code paths (inline PTX) compile to their host fallbacks.
//
//   fast_emu [--only=PREFIX[,PREFIX...]] N...   runs every kernel below (or those whose names
//                   start with one of the PREFIXes) at each N and prints one line per run;
//                   exit 0 when every output matches the oracle bit for bit.
//   fast_emu --owners=UNIT [--only=PREFIX] N...   instead counts, per kernel and N, the
//                   aligned output units of UNIT floats that more than one block writes
//                   (units spanning two output rows left out).
//   fast_emu --banks [--only=PREFIX] N...   also counts the shared-memory bank conflicts of
//                   the accesses the kernels log (KLAB_SHARED_ACCESS, KLAB_LDS: the lean path),
//                   from their own addresses: the k-th logged access of every lane of a warp
//                   is one request; a 4-byte request takes as many wavefronts as the most
//                   distinct words one of the 32 banks holds, a 16-byte request one per
//                   quarter-warp times the most distinct 16-byte slots one of the 8 bank
//                   groups holds. Warps whose lanes log different numbers of accesses (bounds
//                   checks that skip some) are left out and counted.
#include <algorithm>
#include <map>
#include <set>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda_emu.h"

// The shared-access log (--banks): every lane's accesses of one block, in program order.
struct Access {
  int lane;  // thread index in the block
  int k;     // the lane's k-th logged access
  uintptr_t addr;
  int bytes;
};
static bool trace_on = false;
static std::vector<Access> trace_log;
static std::vector<int> trace_count;  // per lane, cleared as each block starts
void klab_emu_shared_access(const void* p, int bytes) {
  if (!trace_on) return;
  const int lane = threadIdx.y * blockDim.x + threadIdx.x;
  const int k = trace_count[lane]++;
  trace_log.push_back({lane, k, reinterpret_cast<uintptr_t>(p), bytes});
}
#define KLAB_EMU_TRACE 1

#include "fast.cu"

struct BankCount {
  size_t requests = 0, extra = 0, skipped_warps = 0;
};
static BankCount bank_count;

// Adds one block's logged accesses to bank_count and clears the log.
static void count_banks(int threads) {
  std::map<int, std::vector<std::vector<Access>>> warps;  // warp -> lane -> accesses
  for (const Access& a : trace_log) {
    auto& lanes = warps[a.lane / 32];
    lanes.resize(32);
    lanes[a.lane % 32].push_back(a);
  }
  trace_log.clear();
  for (auto& [w, lanes] : warps) {
    const int width = std::min(32, threads - 32 * w);
    bool uniform = width == 32;
    for (auto& l : lanes) {
      std::sort(l.begin(), l.end(), [](const Access& x, const Access& y) { return x.k < y.k; });
      uniform = uniform && l.size() == lanes[0].size();
    }
    if (!uniform) {
      ++bank_count.skipped_warps;
      continue;
    }
    for (size_t k = 0; k < lanes[0].size(); ++k) {
      const int bytes = lanes[0][k].bytes;
      size_t wavefronts = 0, ideal = 0;
      if (bytes == 4) {
        std::map<uintptr_t, std::set<uintptr_t>> bank;  // bank -> distinct words
        for (auto& l : lanes) bank[(l[k].addr >> 2) & 31].insert(l[k].addr >> 2);
        for (auto& [b, words] : bank) wavefronts = std::max(wavefronts, words.size());
        ideal = 1;
      } else {
        for (int q = 0; q < 4; ++q) {
          std::map<uintptr_t, std::set<uintptr_t>> group;  // 16-byte bank group -> slots
          for (int l = 8 * q; l < 8 * q + 8; ++l) {
            group[(lanes[l][k].addr >> 4) & 7].insert(lanes[l][k].addr >> 4);
          }
          size_t most = 0;
          for (auto& [g, slots] : group) most = std::max(most, slots.size());
          wavefronts += most;
        }
        ideal = 4;
      }
      ++bank_count.requests;
      bank_count.extra += wavefronts - ideal;
    }
  }
}

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
    {"lean_64", transpose_lean_64, 256, 1, 64, 64, false},
    {"lean_64_r2", transpose_lean_64_r2, 256, 1, 64, 64, false},
    {"reg4_64_cm", transpose_reg4_64_cm, 256, 1, 64, 64, false},
    {"reg4_128x64_cm", transpose_reg4_128x64_cm, 512, 1, 64, 128, false},
    {"reg4_64x128_cm", transpose_reg4_64x128_cm, 512, 1, 128, 64, false},
    {"leana_64", transpose_leana_64, 256, 1, 64, 64, false},
    {"leana_128x64", transpose_leana_128x64, 256, 1, 64, 128, false},
    {"leana_64x128", transpose_leana_64x128, 256, 1, 128, 64, false},
    {"lean_64_cm", transpose_lean_64_cm, 256, 1, 64, 64, false},
    {"leanu_64_cm", transpose_leanu_64_cm, 256, 1, 64, 64, false},
    {"leanu_128x64_cm", transpose_leanu_128x64_cm, 256, 1, 64, 128, false},
    {"leanu_128x64_cm_t512", transpose_leanu_128x64_cm_t512, 512, 1, 64, 128, false},
    {"reg4_64_dg", transpose_reg4_64_dg, 256, 1, 64, 64, false},
    {"strip64_k2", transpose_strip64_k2, 256, 1, 128, 64, false},
    {"strip64_k4", transpose_strip64_k4, 256, 1, 256, 64, false},
    {"strip64_k8", transpose_strip64_k8, 256, 1, 512, 64, false},
    {"strip128x32_k8", transpose_strip128x32_k8, 256, 1, 256, 128, false},
};

static std::vector<float> test_input(size_t total) {
  std::vector<float> in(total);
  for (size_t i = 0; i < total; ++i) {
    const uint32_t u = static_cast<uint32_t>(i) * 2654435761u + 7u;  // every bit pattern kind
    std::memcpy(&in[i], &u, 4);
  }
  return in;
}

static void fill(std::vector<float>& v, uint32_t pattern) {
  for (float& x : v) std::memcpy(&x, &pattern, 4);
}

// Run block (bx, by) of kernel e over n x n.
static void run_block(const Entry& e, int n, int bx, int by, float* out, const float* in) {
  const int threads = e.bx * e.by;
  gridDim = {(n + e.ex - 1) / e.ex, (n + e.ey - 1) / e.ey, 1};
  blockDim = {e.bx, e.by, 1};
  blockIdx = {bx, by, 0};
  trace_count.assign(threads, 0);
  emu_team(threads).run([&e, out, in, n] { e.kernel(out, in, n); });
  if (trace_on) count_banks(threads);
}

static size_t run(const Entry& e, int n) {
  const size_t total = static_cast<size_t>(n) * n;
  const std::vector<float> in = test_input(total);
  std::vector<float> out(total);
  fill(out, 0xffffffffu);
  const int gx = (n + e.ex - 1) / e.ex, gy = (n + e.ey - 1) / e.ey;
  for (int by = 0; by < gy; ++by) {
    for (int bx = 0; bx < gx; ++bx) run_block(e, n, bx, by, out.data(), in.data());
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

// Output ownership: which block writes each output element (each block runs alone over an
// output poisoned with two different patterns; an element is its if either run changed it).
// Returns the number of aligned units of `unit` floats written by more than one block,
// leaving out units that span two output rows.
static size_t shared_units(const Entry& e, int n, int unit) {
  const size_t total = static_cast<size_t>(n) * n;
  const std::vector<float> in = test_input(total);
  std::vector<int> owner(total, -1);
  std::vector<char> many(total, 0);
  std::vector<float> out(total);
  const int gx = (n + e.ex - 1) / e.ex, gy = (n + e.ey - 1) / e.ey;
  for (int by = 0; by < gy; ++by) {
    for (int bx = 0; bx < gx; ++bx) {
      const int id = by * gx + bx;
      for (uint32_t pattern : {0xffffffffu, 0x7fc00001u}) {
        fill(out, pattern);
        run_block(e, n, bx, by, out.data(), in.data());
        for (size_t i = 0; i < total; ++i) {
          uint32_t v;
          std::memcpy(&v, &out[i], 4);
          if (v == pattern || owner[i] == id) continue;
          if (owner[i] >= 0) many[i] = 1;
          owner[i] = id;
        }
      }
    }
  }
  size_t shared = 0;
  for (size_t u = 0; u < total; u += unit) {
    const size_t end = std::min(total, u + unit);
    if (u / n != (end - 1) / n) continue;  // spans two rows
    int first = -1;
    bool two = false;
    for (size_t i = u; i < end; ++i) {
      two = two || many[i] || (first >= 0 && owner[i] != first);
      if (first < 0) first = owner[i];
    }
    shared += two;
  }
  return shared;
}

// Whether `name` starts with one of the comma-separated prefixes in `only` ("" selects all).
static bool selected(const char* name, const char* only) {
  if (*only == 0) return true;
  for (const char* p = only;;) {
    const char* end = std::strchr(p, ',');
    const size_t len = end ? static_cast<size_t>(end - p) : std::strlen(p);
    if (len > 0 && std::strncmp(name, p, len) == 0) return true;
    if (!end) return false;
    p = end + 1;
  }
}

int main(int argc, char** argv) {
  int failures = 0;
  const char* only = "";  // --only=PREFIX[,PREFIX...]: the kernels whose names start so
  int unit = 0;           // --owners=UNIT: count shared output units instead of checking
  for (int a = 1; a < argc; ++a) {
    if (std::strncmp(argv[a], "--only=", 7) == 0) {
      only = argv[a] + 7;
      continue;
    }
    if (std::strncmp(argv[a], "--owners=", 9) == 0) {
      unit = std::atoi(argv[a] + 9);
      continue;
    }
    if (std::strcmp(argv[a], "--banks") == 0) {
      trace_on = true;
      continue;
    }
    const int n = std::atoi(argv[a]);
    for (const Entry& e : kEntries) {
      if (!selected(e.name, only)) continue;
      if (unit > 0) {
        const size_t shared = shared_units(e, n, unit);
        std::printf("%s n=%d: %zu units of %d floats written by more than one block\n", e.name,
                    n, shared, unit);
        continue;
      }
      bank_count = BankCount{};
      const size_t bad = run(e, n);
      std::printf("%s n=%d: %zu mismatches\n", e.name, n, bad);
      failures += bad != 0;
      if (trace_on) {
        std::printf("%s n=%d: %zu shared requests, %zu extra wavefronts, %zu warps left out\n",
                    e.name, n, bank_count.requests, bank_count.extra, bank_count.skipped_warps);
      }
    }
  }
  if (unit == 0) std::printf("%d failing runs\n", failures);
  return failures != 0;
}
