// The CUDA execution model on the CPU, shared by the emulators (fast_emu.cpp, verify_emu.cpp):
// every CUDA thread of a block is a fiber (a stack of its own, switched to in user space) run
// by one scheduler thread, __syncthreads switches to the next thread until all have reached
// it, and blocks run one at a time. A block whose threads split between a barrier and an exit
// is reported and aborts (on a GPU it hangs or is undefined). Intrinsics are their correctly
// rounded host operations (build with -ffp-contract=off, so that no multiply and add fuse
// where the device would not).
//
// Fibers rather than one OS thread per CUDA thread: a barrier of 256 OS threads on two cores
// cost about 0.4 ms, and the checker's emulation crosses hundreds of thousands of them. The
// switch is a few instructions on x86-64 (other machines fall back on ucontext), announced to
// AddressSanitizer so that it checks each fiber's stack as a stack.
#pragma once
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <vector>

#include <sys/mman.h>
// -DKLAB_EMU_UCONTEXT tries the fallback on x86-64 too.
#if defined(__x86_64__) && !defined(KLAB_EMU_UCONTEXT)
#define KLAB_EMU_ASM_SWITCH 1
#endif
#if !defined(KLAB_EMU_ASM_SWITCH)
#include <ucontext.h>
#endif
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#define KLAB_EMULATED 1
typedef unsigned long long u64;
typedef long long i64;

struct Dim {
  int x = 0, y = 0, z = 0;
};
// threadIdx is the running fiber's: the scheduler sets it before every switch to a fiber.
static Dim threadIdx, blockIdx, gridDim, blockDim;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __restrict__
#define __align__(x) __attribute__((aligned(x)))
#define __launch_bounds__(...)

#if defined(KLAB_EMU_ASM_SWITCH)
// Saves the callee-saved registers on the current stack, stores its pointer in *save, and
// resumes the stack at `to` (one that this function saved, or a fiber's first frame).
extern "C" void klab_emu_switch(void** save, void* to);
asm(R"(
  .text
  .globl klab_emu_switch
  .type klab_emu_switch, @function
klab_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size klab_emu_switch, .-klab_emu_switch
)");
#endif

// One block's threads as fibers, kept for every block of that size.
struct EmuTeam {
  static constexpr size_t kStack = 256 << 10;  // AddressSanitizer's -O0 frames are large
  static constexpr size_t kEntryFrames = 16 << 10;
  struct Fiber {
    char* stack;  // lowest address; a guard page below it
    bool done = false;
    Dim idx;
#if defined(KLAB_EMU_ASM_SWITCH)
    void* sp = nullptr;
#else
    ucontext_t ctx;
#endif
    void* fake_stack = nullptr;  // AddressSanitizer's, while switched away
  };

  explicit EmuTeam(int n) : fibers(n) {
    for (Fiber& f : fibers) {
      void* m = mmap(nullptr, kStack + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                     -1, 0);
      if (m == MAP_FAILED) {
        std::perror("emulator: mmap of a fiber stack");
        std::abort();
      }
      mprotect(m, 4096, PROT_NONE);
      f.stack = static_cast<char*>(m) + 4096;
    }
  }
  ~EmuTeam() {
    for (Fiber& f : fibers) munmap(f.stack - 4096, kStack + 4096);
  }

  // Runs `job` on every thread of one block of shape blockDim (blockIdx and gridDim set).
  void run(std::function<void()> f) {
    job = std::move(f);
    const int n = static_cast<int>(fibers.size());
    for (int t = 0; t < n; ++t) {
      start(t);
      fibers[t].idx = {t % blockDim.x, t / blockDim.x % blockDim.y, t / (blockDim.x * blockDim.y)};
    }
    for (int alive = n; alive > 0;) {
      int waiting = 0, exited = 0;
      for (int t = 0; t < n; ++t) {
        if (fibers[t].done) continue;
        resume(t);
        ++(fibers[t].done ? exited : waiting);
      }
      alive -= exited;
      if (waiting > 0 && exited > 0) {
        std::fprintf(stderr,
                     "emulator: block (%d, %d): %d threads wait at __syncthreads while %d "
                     "exited\n",
                     blockIdx.x, blockIdx.y, waiting, exited);
        std::abort();
      }
      count_result = count_pending;  // every waiting thread has arrived: release them
      count_pending = 0;
    }
  }

  // The team whose block is running (a barrier is only ever reached inside one).
  static EmuTeam& active() { return *running; }

  // The running fiber gives way at a barrier.
  void yield() {
    Fiber& f = fibers[current];
    to_scheduler(&f.fake_stack);
#if defined(KLAB_EMU_ASM_SWITCH)
    klab_emu_switch(&f.sp, scheduler_sp);
#else
    swapcontext(&f.ctx, &scheduler_ctx);
#endif
    arrived(f.fake_stack);
  }

  int count_pending = 0, count_result = 0;  // __syncthreads_count

 private:
  void start(int t) {
    Fiber& f = fibers[t];
    f.done = false;
    f.fake_stack = nullptr;
#if defined(__SANITIZE_ADDRESS__)
    // The last block's frames that never returned (the fiber's entry) may have left redzones.
    __asan_unpoison_memory_region(f.stack + kStack - kEntryFrames, kEntryFrames);
#endif
#if defined(KLAB_EMU_ASM_SWITCH)
    // The frame klab_emu_switch pops: six registers, then the entry as its return address,
    // then a return address the entry never uses (16-byte aligned as after a call).
    void** sp = reinterpret_cast<void**>(f.stack + kStack) - 8;
    for (int k = 0; k < 6; ++k) sp[k] = nullptr;
    sp[6] = reinterpret_cast<void*>(&EmuTeam::entry);
    sp[7] = nullptr;
    f.sp = sp;
#else
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack;
    f.ctx.uc_stack.ss_size = kStack;
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, &EmuTeam::entry, 0);
#endif
  }

  void resume(int t) {
    current = t;
    running = this;
    threadIdx = fibers[t].idx;
    void* fake = nullptr;
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_start_switch_fiber(&fake, fibers[t].stack, kStack);
#endif
#if defined(KLAB_EMU_ASM_SWITCH)
    klab_emu_switch(&scheduler_sp, fibers[t].sp);
#else
    swapcontext(&scheduler_ctx, &fibers[t].ctx);
#endif
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#endif
  }

  // Before a fiber switches to the scheduler: `save` keeps its fake stack (null: it ends).
  void to_scheduler(void** save) {
#if defined(__SANITIZE_ADDRESS__)
    __sanitizer_start_switch_fiber(save, scheduler_bottom, scheduler_size);
#else
    (void)save;
#endif
  }
  // After a switch into a fiber.
  void arrived(void* fake) {
#if defined(__SANITIZE_ADDRESS__)
    const void* bottom;
    size_t size;
    __sanitizer_finish_switch_fiber(fake, &bottom, &size);
    scheduler_bottom = bottom;
    scheduler_size = size;
#else
    (void)fake;
#endif
  }

  static void entry() {
    EmuTeam& team = *running;
    team.arrived(nullptr);
    team.job();
    Fiber& f = team.fibers[team.current];
    f.done = true;
    team.to_scheduler(nullptr);
#if defined(KLAB_EMU_ASM_SWITCH)
    klab_emu_switch(&f.sp, team.scheduler_sp);
#else
    setcontext(&team.scheduler_ctx);
#endif
    std::abort();  // a finished fiber is never resumed
  }

  std::vector<Fiber> fibers;
  std::function<void()> job;
  int current = 0;
#if defined(KLAB_EMU_ASM_SWITCH)
  void* scheduler_sp = nullptr;
#else
  ucontext_t scheduler_ctx;
#endif
  const void* scheduler_bottom = nullptr;
  size_t scheduler_size = 0;
  static inline EmuTeam* running = nullptr;
};

// The team for blocks of `threads` threads, made on first use.
inline EmuTeam& emu_team(int threads) {
  static std::map<int, std::unique_ptr<EmuTeam>> teams;
  auto& team = teams[threads];
  if (!team) team = std::make_unique<EmuTeam>(threads);
  return *team;
}

inline void __syncthreads() { EmuTeam::active().yield(); }
// The number of threads of the block whose `pred` is non-zero, after a barrier.
inline int __syncthreads_count(int pred) {
  EmuTeam& team = EmuTeam::active();
  team.count_pending += pred != 0;
  team.yield();
  return team.count_result;
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


// Atomics: one fiber runs at a time, so plain operations would do; atomic_ref keeps the intent.
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

// Run `kernel(args...)` on a 1-D grid of `blocks` blocks of `threads` threads.
template <class... Args>
void emu_launch(void (*kernel)(Args...), int blocks, int threads, Args... args) {
  EmuTeam& team = emu_team(threads);
  gridDim = {blocks, 1, 1};
  blockDim = {threads, 1, 1};
  for (int b = 0; b < blocks; ++b) {
    blockIdx = {b, 0, 0};
    team.run([=] { kernel(args...); });
  }
}
