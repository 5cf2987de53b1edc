// The CUDA execution model on the CPU, shared by the emulators (fast_emu.cpp, verify_emu.cpp):
// every CUDA thread of a block is a std::thread, __syncthreads is a std::barrier, and blocks
// run one at a time. Intrinsics are their correctly rounded host operations (build with
// -ffp-contract=off, so that no multiply and add fuse where the device would not).
#pragma once
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#define KLAB_EMULATED 1
typedef unsigned long long u64;
typedef long long i64;

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
// The number of threads of the block whose `pred` is non-zero, after a barrier. Two counters
// alternate, so the one a call uses was cleared (by thread 0, after the previous call's last
// barrier) before any thread can reach it.
inline int __syncthreads_count(int pred) {
  static std::atomic<int> counters[2];
  thread_local int parity = 0;
  std::atomic<int>& c = counters[parity];
  parity ^= 1;
  if (pred) c.fetch_add(1);
  block_barrier->arrive_and_wait();
  const int v = c.load();
  block_barrier->arrive_and_wait();
  if (threadIdx.x == 0 && threadIdx.y == 0) c.store(0);
  return v;
}
using std::min;
struct float4 {
  float x, y, z, w;
};
struct float2 {
  float x, y;
};
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }
inline float2 make_float2(float a, float b) { return {a, b}; }


// Atomics: only one block runs at a time, but its threads do run concurrently.
inline u64 atomicAdd(u64* p, u64 v) { return std::atomic_ref<u64>(*p).fetch_add(v); }
inline u64 atomicMax(u64* p, u64 v) {
  std::atomic_ref<u64> a(*p);
  u64 old = a.load();
  while (old < v && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}

inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsub_rn(double a, double b) { return a - b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline double __ddiv_rn(double a, double b) { return a / b; }
inline double __ll2double_rn(long long v) { return static_cast<double>(v); }
inline double __ull2double_rn(unsigned long long v) { return static_cast<double>(v); }
inline float __ull2float_rn(unsigned long long v) { return static_cast<float>(v); }
inline double __longlong_as_double(long long v) {
  double d;
  std::memcpy(&d, &v, 8);
  return d;
}
inline long long __double_as_longlong(double d) {
  long long v;
  std::memcpy(&v, &d, 8);
  return v;
}
inline float __int_as_float(int v) {
  float f;
  std::memcpy(&f, &v, 4);
  return f;
}
inline unsigned int __float_as_uint(float f) {
  unsigned int v;
  std::memcpy(&v, &f, 4);
  return v;
}
using std::fabs;
using std::floor;
using std::fmax;
using std::isfinite;
using std::isnan;
using std::rint;

// A team of `n` threads, one per CUDA thread of a block, kept for every launch with that
// block size (creating threads for every block dominated the emulation's time).
struct EmuTeam {
  explicit EmuTeam(int n) : n(n), start(n + 1), done(n + 1), sync(n) {
    for (int t = 0; t < n; ++t) {
      threads.emplace_back([this, t] {
        threadIdx = {t, 0, 0};
        for (;;) {
          start.arrive_and_wait();
          if (stop) return;
          job();
          done.arrive_and_wait();
        }
      });
    }
  }
  ~EmuTeam() {
    stop = true;
    start.arrive_and_wait();
    for (auto& t : threads) t.join();
  }
  // Run `job` once on every thread of the team, as one block.
  void run(std::function<void()> f) {
    job = std::move(f);
    block_barrier = &sync;
    start.arrive_and_wait();
    done.arrive_and_wait();
  }
  int n;
  std::barrier<> start, done, sync;
  std::vector<std::thread> threads;
  std::function<void()> job;
  bool stop = false;
};

// Run `kernel(args...)` on a 1-D grid of `blocks` blocks of `threads` threads.
template <class... Args>
void emu_launch(void (*kernel)(Args...), int blocks, int threads, Args... args) {
  static std::map<int, std::unique_ptr<EmuTeam>> teams;
  auto& team = teams[threads];
  if (!team) team = std::make_unique<EmuTeam>(threads);
  gridDim = {blocks, 1, 1};
  blockDim = {threads, 1, 1};
  for (int b = 0; b < blocks; ++b) {
    blockIdx = {b, 0, 0};
    team->run([=] { kernel(args...); });
  }
}
