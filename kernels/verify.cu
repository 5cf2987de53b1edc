// klab's device checker and device input generator (not a lab kernel: klab compiles this
// file itself, once per device architecture, and keeps it in the NVRTC cache).
//
// The checker judges an output `got` against its expected values element by element under
// the comparison rules of klab's CPU oracle (crates/klab-core/src/rule.rs, which states the
// semantics), and returns only a summary: the failure count, the largest absolute and
// relative error and ulp distance (reductions), and the first K failing indices in index
// order with both values (a scan-based compaction). Every floating-point operation is the
// correctly rounded one the CPU oracle performs, in the same order (the _rn intrinsics: no
// contraction into an FMA), so the two agree bit for bit; klab cross-checks them.
//
// Expected values come from a buffer (a reference output uploaded once, or the input of a
// copy) or from the input through the transpose map: got[r][c] against src[c][r].
//
// Parameters live in a small device array of 64-bit words (VP_* below); the summary in
// another (VO_*). Launch order (crates/klab-cuda/src/gpu.rs, tests/emulate/verify_emu.cpp):
// klab_verify_reduce on a grid of B blocks, each owning one contiguous chunk of
// ceil(n / B) elements; when failures were found, klab_verify_compact on the same grid.
//
// KLAB_VERIFY_MUTANT (defined only by the mutation audit) builds a wrong checker:
// 1 reports no failures, 2 skips the last element, 3 takes -0.0 for +0.0.

#ifndef KLAB_EMULATED
typedef unsigned long long u64;
typedef long long i64;
#endif

#ifndef KLAB_VERIFY_MUTANT
#define KLAB_VERIFY_MUTANT 0
#endif

// Parameter words.
#define VP_N 0
#define VP_DTYPE 1
#define VP_RULE 2
#define VP_NAN 3
#define VP_ATOL 4     // f64 bits
#define VP_RTOL 5     // f64 bits
#define VP_FACTOR 6   // f64 bits: scaled-sum's 4 eps sqrt(k)
#define VP_ULP_MAX 7
#define VP_MAP 8      // 0: want[i]; 1: src[(i % cols) * rows + i / cols]
#define VP_ROWS 9
#define VP_COLS 10
#define VP_CHUNK 11   // elements per block
#define VP_K 12       // failing indices wanted
#define VP_WORDS 13

// Summary words: [0] failures, [1] max abs (f64 bits), [2] max rel (f64 bits), [3] max
// ulp, then K triples (index, got bits, want bits).
#define VO_FAILS 0
#define VO_MAX_ABS 1
#define VO_MAX_REL 2
#define VO_MAX_ULP 3
#define VO_FIRST 4

// Dtype codes (crates/klab-core/src/verify.rs: DeviceDtype).
#define DT_U8 0
#define DT_I8 1
#define DT_U16 2
#define DT_I16 3
#define DT_U32 4
#define DT_I32 5
#define DT_U64 6
#define DT_I64 7
#define DT_F16 8
#define DT_BF16 9
#define DT_F32 10
#define DT_F64 11

#define RULE_BITWISE 0
#define RULE_EXACT 1
#define RULE_ULP 2
#define RULE_ALLCLOSE 3
#define RULE_SCALED 4

#define NAN_EQUAL 0
#define NAN_ANY 1
#define NAN_FAILS 2

#define VERIFY_THREADS 256
// The transpose map's tile: 16 output rows (a band's granule: crates/klab-core/src/verify.rs
// grid) by 64 output columns.
#define TILE_ROWS 16
#define TILE_COLS 64

__device__ __forceinline__ int dt_size(int dt) {
  switch (dt) {
    case DT_U8: case DT_I8: return 1;
    case DT_U16: case DT_I16: case DT_F16: case DT_BF16: return 2;
    case DT_U32: case DT_I32: case DT_F32: return 4;
    default: return 8;
  }
}

__device__ __forceinline__ bool dt_float(int dt) { return dt >= DT_F16; }
__device__ __forceinline__ bool dt_signed(int dt) {
  return dt == DT_I8 || dt == DT_I16 || dt == DT_I32 || dt == DT_I64;
}
__device__ __forceinline__ int dt_bits(int dt) { return 8 * dt_size(dt); }

__device__ __forceinline__ u64 load_bits(const void* base, u64 i, int size) {
  switch (size) {
    case 1: return ((const unsigned char*)base)[i];
    case 2: return ((const unsigned short*)base)[i];
    case 4: return ((const unsigned int*)base)[i];
    default: return ((const u64*)base)[i];
  }
}

__device__ __forceinline__ double f64_of(u64 bits) { return __longlong_as_double((i64)bits); }
__device__ __forceinline__ u64 bits_of(double v) { return (u64)__double_as_longlong(v); }

// (exponent bits, mantissa bits) of a float dtype.
__device__ __forceinline__ int dt_mant(int dt) {
  return dt == DT_F16 ? 10 : dt == DT_BF16 ? 7 : dt == DT_F32 ? 23 : 52;
}
__device__ __forceinline__ int dt_exp(int dt) {
  return dt == DT_F16 ? 5 : dt == DT_F64 ? 11 : 8;
}

__device__ __forceinline__ bool is_nan_bits(int dt, u64 b) {
  const int m = dt_mant(dt), e = dt_exp(dt);
  const u64 exp_mask = (1ull << e) - 1;
  return ((b >> m) & exp_mask) == exp_mask && (b & ((1ull << m) - 1)) != 0;
}

// The exact value of a non-NaN float's bits (dtype.rs decode_narrow: built from the
// fields, so no conversion instruction can flush a subnormal).
__device__ __forceinline__ double decode(int dt, u64 b) {
  if (dt == DT_F64) return f64_of(b);
  const int e = dt_exp(dt), m = dt_mant(dt);
  const u64 sign = (b >> (e + m)) & 1, exp = (b >> m) & ((1ull << e) - 1), man = b & ((1ull << m) - 1);
  const int bias = (1 << (e - 1)) - 1;
  double v;
  if (exp == (1ull << e) - 1) {
    v = f64_of(0x7ff0000000000000ull);  // infinity (NaNs never get here)
  } else if (exp == 0) {
    // man x 2^(1 - bias - m), exact.
    v = __dmul_rn((double)man, f64_of((u64)(1 - bias - m + 1023) << 52));
  } else {
    v = f64_of(((u64)((int)exp - bias + 1023) << 52) | (man << (52 - m)));
  }
  return sign ? -v : v;
}

__device__ __forceinline__ i64 int_value(int dt, u64 b) {
  switch (dt) {
    case DT_I8: return (i64)(signed char)(unsigned char)b;
    case DT_I16: return (i64)(short)(unsigned short)b;
    case DT_I32: return (i64)(int)(unsigned int)b;
    default: return (i64)b;
  }
}

// |a - b| in units in the last place, through the sign-magnitude to ordered map.
__device__ __forceinline__ u64 ulp_distance(int dt, u64 a, u64 b) {
  const int w = dt_bits(dt);
  const u64 mag = (w == 64) ? 0x7fffffffffffffffull : ((1ull << (w - 1)) - 1);
  const u64 ma = a & mag, mb = b & mag;
  const bool sa = (a >> (w - 1)) & 1, sb = (b >> (w - 1)) & 1;
  if (sa == sb) return ma > mb ? ma - mb : mb - ma;
  return ma + mb;
}

__device__ __forceinline__ double rel_of(double abs, double want) {
  return abs == 0.0 ? 0.0 : __ddiv_rn(abs, fabs(want));
}

struct Judged {
  bool pass;
  bool has_error;  // both sides finite: abs, rel (and ulp for floats) are defined
  double abs, rel;
  u64 ulp;
};

__device__ __forceinline__ Judged judge(const u64* p, u64 g, u64 w, double magnitude) {
  const int dt = (int)p[VP_DTYPE], rule = (int)p[VP_RULE], nan = (int)p[VP_NAN];
  const double atol = f64_of(p[VP_ATOL]), rtol = f64_of(p[VP_RTOL]);
  Judged j;
  j.ulp = 0;
  if (!dt_float(dt)) {
    u64 diff;
    double wv;
    if (dt_signed(dt)) {
      const i64 gi = int_value(dt, g), wi = int_value(dt, w);
      diff = gi >= wi ? (u64)gi - (u64)wi : (u64)wi - (u64)gi;
      wv = __ll2double_rn(wi);
    } else {
      diff = g >= w ? g - w : w - g;
      wv = __ull2double_rn(w);
    }
    j.abs = __ull2double_rn(diff);
    j.rel = rel_of(j.abs, wv);
    j.has_error = true;
    if (rule == RULE_ALLCLOSE) {
      j.pass = j.abs <= __dadd_rn(atol, __dmul_rn(rtol, fabs(wv)));
    } else {
      j.pass = g == w;
    }
    return j;
  }
  const bool gn = is_nan_bits(dt, g), wn = is_nan_bits(dt, w);
  if (gn || wn) {
    j.has_error = false;
    j.abs = j.rel = 0.0;
    j.pass = nan == NAN_EQUAL ? (gn && wn && g == w) : nan == NAN_ANY ? (gn && wn) : false;
    return j;
  }
  const double gv = decode(dt, g), wv = decode(dt, w);
  const bool finite = isfinite(gv) && isfinite(wv);
  if (rule == RULE_BITWISE) {
#if KLAB_VERIFY_MUTANT == 3
    j.pass = g == w || (gv == 0.0 && wv == 0.0);
#else
    j.pass = g == w;
#endif
  } else if (!finite) {
    j.pass = gv == wv;
  } else if (rule == RULE_ULP) {
    j.pass = ulp_distance(dt, g, w) <= p[VP_ULP_MAX];
  } else if (rule == RULE_ALLCLOSE) {
    j.pass = fabs(__dsub_rn(gv, wv)) <= __dadd_rn(atol, __dmul_rn(rtol, fabs(wv)));
  } else {  // scaled-sum (atol 0) and reference-error: factor * scale[i] + atol
    j.pass = fabs(__dsub_rn(gv, wv)) <= __dadd_rn(__dmul_rn(f64_of(p[VP_FACTOR]), magnitude), atol);
  }
  j.has_error = finite;
  if (finite) {
    j.abs = fabs(__dsub_rn(gv, wv));
    j.rel = rel_of(j.abs, wv);
    j.ulp = ulp_distance(dt, g, w);
  } else {
    j.abs = j.rel = 0.0;
  }
  return j;
}

// Identical bits pass under every rule with zero error, so they leave the maxima alone:
// the common case of a correct output costs a compare. Not a NaN under NAN_FAILS (which
// fails), and not scaled-sum (whose bound the magnitude sets, and a NaN magnitude fails).
__device__ __forceinline__ bool identical_pass(const u64* p, u64 g, u64 w) {
  if (g != w || (int)p[VP_RULE] == RULE_SCALED) return false;
  const int dt = (int)p[VP_DTYPE];
  return !(dt_float(dt) && (int)p[VP_NAN] == NAN_FAILS && is_nan_bits(dt, g));
}

__device__ __forceinline__ bool passes(const u64* p, u64 g, u64 w, double magnitude) {
  return identical_pass(p, g, w) || judge(p, g, w, magnitude).pass;
}

// Walks element indices [start, end) of a block's chunk, `step` apart, with the index of
// the expected value under the map kept incrementally (no 64-bit division per element).
struct Cursor {
  u64 i, r, c;
};

__device__ __forceinline__ Cursor cursor_at(const u64* p, u64 i) {
  Cursor k;
  k.i = i;
  if (p[VP_MAP] == 1) {
    k.r = i / p[VP_COLS];
    k.c = i % p[VP_COLS];
  } else {
    k.r = k.c = 0;
  }
  return k;
}

__device__ __forceinline__ u64 want_index(const u64* p, const Cursor& k) {
  return p[VP_MAP] == 1 ? k.c * p[VP_ROWS] + k.r : k.i;
}

__device__ __forceinline__ void advance(const u64* p, Cursor& k, u64 step) {
  k.i += step;
  if (p[VP_MAP] == 1) {
    const u64 cols = p[VP_COLS];
    k.c += step;
    if (k.c >= cols) {
      k.r += k.c / cols;
      k.c %= cols;
    }
  }
}

__device__ __forceinline__ u64 chunk_end(const u64* p) {
  u64 n = p[VP_N];
#if KLAB_VERIFY_MUTANT == 2
  n = n > 0 ? n - 1 : 0;
#endif
  const u64 end = (u64)(blockIdx.x + 1) * p[VP_CHUNK];
  return end < n ? end : n;
}

// Reductions and per-block failure counts. `counts[b]`: block b's failures.
extern "C" __global__ void klab_verify_reduce(const void* got, const void* want,
                                              const double* magnitude, const u64* p,
                                              u64* out, u64* counts) {
  __shared__ u64 s_fails[VERIFY_THREADS];
  __shared__ u64 s_abs[VERIFY_THREADS];
  __shared__ u64 s_rel[VERIFY_THREADS];
  __shared__ u64 s_ulp[VERIFY_THREADS];
  const int size = dt_size((int)p[VP_DTYPE]);
  const u64 start = (u64)blockIdx.x * p[VP_CHUNK];
  const u64 end = chunk_end(p);
  u64 fails = 0, max_ulp = 0;
  double max_abs = 0.0, max_rel = 0.0;
  // One element into the running reductions.
#define KLAB_TAKE(i, g, w)                                                   \
  do {                                                                       \
    if (identical_pass(p, g, w)) break;                                      \
    const Judged j = judge(p, g, w, magnitude ? magnitude[i] : 0.0);         \
    if (j.has_error) {                                                       \
      max_abs = fmax(max_abs, j.abs);                                        \
      max_rel = fmax(max_rel, j.rel);                                        \
      max_ulp = j.ulp > max_ulp ? j.ulp : max_ulp;                           \
    }                                                                        \
    if (!j.pass) {                                                           \
      ++fails;                                                               \
      /* A failure with a NaN or an infinity on either side has no finite error. */ \
      if (!j.has_error) max_abs = f64_of(0x7ff0000000000000ull);             \
    }                                                                        \
  } while (0)
  if (p[VP_MAP] == 1) {
    // Through the transpose map: the chunk is a band of whole output rows, walked in tiles
    // of 16 output rows x 64 output columns. The tile's expected values (a column of the
    // output is a row of the input) are read contiguously into shared memory, then the
    // output is read contiguously along its rows against them.
    __shared__ u64 s_want[TILE_COLS][TILE_ROWS + 1];
    const u64 cols = p[VP_COLS], rows = p[VP_ROWS];
    const u64 r_first = start / cols;
    const u64 r_end = (end + cols - 1) / cols;
    const int t = threadIdx.x;
    for (u64 r0 = r_first; r0 < r_end; r0 += TILE_ROWS) {
      for (u64 c0 = 0; c0 < cols; c0 += TILE_COLS) {
        // Expected values: output (r, c) is input (c, r), contiguous in r.
#pragma unroll
        for (int k = 0; k < TILE_ROWS * TILE_COLS / VERIFY_THREADS; ++k) {
          const int e = t + k * VERIFY_THREADS;
          const u64 r = r0 + e % TILE_ROWS, c = c0 + e / TILE_ROWS;
          if (r < rows && c < cols) {
            s_want[e / TILE_ROWS][e % TILE_ROWS] = load_bits(want, c * rows + r, size);
          }
        }
        __syncthreads();
#pragma unroll
        for (int k = 0; k < TILE_ROWS * TILE_COLS / VERIFY_THREADS; ++k) {
          const int e = t + k * VERIFY_THREADS;
          const u64 r = r0 + e / TILE_COLS, c = c0 + e % TILE_COLS;
          const u64 i = r * cols + c;
          if (r < rows && c < cols && i >= start && i < end) {
            const u64 g = load_bits(got, i, size);
            const u64 w = s_want[e % TILE_COLS][e / TILE_COLS];
            KLAB_TAKE(i, g, w);
          }
        }
        // The next tile overwrites s_want.
        __syncthreads();
      }
    }
  } else {
    // Directly: four elements a thread in flight at a time.
    const u64 T = blockDim.x;
    for (u64 i = start + threadIdx.x; i < end; i += 4 * T) {
      u64 g[4], w[4];
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const u64 e = i + u * T;
        g[u] = e < end ? load_bits(got, e, size) : 0;
        w[u] = e < end ? load_bits(want, e, size) : 0;
      }
#pragma unroll
      for (int u = 0; u < 4; ++u) {
        const u64 e = i + u * T;
        if (e < end) KLAB_TAKE(e, g[u], w[u]);
      }
    }
  }
#undef KLAB_TAKE
#if KLAB_VERIFY_MUTANT == 1
  fails = 0;
#endif
  const int t = threadIdx.x;
  s_fails[t] = fails;
  // Non-negative doubles order as their bit patterns.
  s_abs[t] = bits_of(max_abs);
  s_rel[t] = bits_of(max_rel);
  s_ulp[t] = max_ulp;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) {
      s_fails[t] += s_fails[t + half];
      s_abs[t] = s_abs[t] > s_abs[t + half] ? s_abs[t] : s_abs[t + half];
      s_rel[t] = s_rel[t] > s_rel[t + half] ? s_rel[t] : s_rel[t + half];
      s_ulp[t] = s_ulp[t] > s_ulp[t + half] ? s_ulp[t] : s_ulp[t + half];
    }
    __syncthreads();
  }
  if (t == 0) {
    counts[blockIdx.x] = s_fails[0];
    if (s_fails[0]) atomicAdd(&out[VO_FAILS], s_fails[0]);
    if (s_abs[0]) atomicMax(&out[VO_MAX_ABS], s_abs[0]);
    if (s_rel[0]) atomicMax(&out[VO_MAX_REL], s_rel[0]);
    if (s_ulp[0]) atomicMax(&out[VO_MAX_ULP], s_ulp[0]);
  }
}

// The first K failing indices in index order: block b starts writing at the failures of
// the blocks before it (a sum over `counts`), and within its chunk ranks each failing
// element by an exclusive scan of the failure flags of its tile of blockDim elements.
extern "C" __global__ void klab_verify_compact(const void* got, const void* want,
                                               const double* magnitude, const u64* p,
                                               u64* out, const u64* counts) {
  __shared__ u64 s_sum[VERIFY_THREADS];
  __shared__ unsigned int s_scan[VERIFY_THREADS];
  const int t = threadIdx.x;
  const u64 K = p[VP_K];
  u64 before = 0;
  for (u64 b = t; b < blockIdx.x; b += blockDim.x) before += counts[b];
  s_sum[t] = before;
  __syncthreads();
  for (int half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) s_sum[t] += s_sum[t + half];
    __syncthreads();
  }
  u64 written = s_sum[0];
  if (written >= K || counts[blockIdx.x] == 0) return;  // uniform over the block
  const int size = dt_size((int)p[VP_DTYPE]);
  const u64 start = (u64)blockIdx.x * p[VP_CHUNK];
  const u64 end = chunk_end(p);
  for (u64 tile = start; tile < end && written < K; tile += blockDim.x) {
    const u64 i = tile + t;
    u64 g = 0, w = 0;
    unsigned int flag = 0;
    if (i < end) {
      const Cursor k = cursor_at(p, i);
      g = load_bits(got, i, size);
      w = load_bits(want, want_index(p, k), size);
      flag = passes(p, g, w, magnitude ? magnitude[i] : 0.0) ? 0u : 1u;
    }
    // A tile without failures needs no scan (one barrier, which also orders this tile's
    // use of s_scan after the previous tile's).
    const unsigned int total = (unsigned int)__syncthreads_count(flag);
    if (total) {
      // Inclusive scan (Hillis-Steele) of the flags.
      s_scan[t] = flag;
      __syncthreads();
      for (int off = 1; off < (int)blockDim.x; off *= 2) {
        const unsigned int add = t >= off ? s_scan[t - off] : 0u;
        __syncthreads();
        s_scan[t] += add;
        __syncthreads();
      }
      const u64 rank = written + s_scan[t] - flag;
      if (flag && rank < K) {
        u64* slot = out + VO_FIRST + 3 * rank;
        slot[0] = i;
        slot[1] = g;
        slot[2] = w;
      }
    }
    written += total;
  }
}

// ---------------------------------------------------------------------------------------
// The input generator: element i of an input from its index alone (a counter-based
// generator), bit-identical to crates/klab-core/src/general.rs's `fill`, which the CPU runs.
// ---------------------------------------------------------------------------------------

#define GP_N 0
#define GP_DTYPE 1
#define GP_CASE 2     // GEN_* below
#define GP_KEY 3      // the random stream's key (seed and input position)
#define GP_LO 4       // f64 bits
#define GP_HI 5       // f64 bits
#define GP_SCALE 6    // f64 bits (Large: 1000)
#define GP_K 7        // the input's position among the inputs
#define GP_ROTATE 8   // distinct f32: element i holds the pattern of (i + ROTATE) % n
#define GP_SPECIALS 9 // count of special patterns, which follow from word GP_WORDS
#define GP_WITHIN 10  // uniform in a float domain: a value rounded past an end steps back
#define GP_WORDS 16

#define GEN_STRUCTURAL 0
#define GEN_UNIFORM 1
#define GEN_CONSTANT 2
#define GEN_SPECIAL 3
#define GEN_DISTINCT_F32 4
#define GEN_DISTINCT 5

__device__ __forceinline__ u64 splitmix_at(u64 key, u64 i) {
  u64 z = key + (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Round to nearest, ties to even, of a double into a narrow float (dtype.rs encode_narrow).
__device__ __forceinline__ u64 encode_narrow(double v, int e, int m) {
  const u64 b = bits_of(v);
  const u64 sign = (b >> 63) << (e + m);
  const int exp64 = (int)((b >> 52) & 0x7ff);
  const u64 man64 = b & ((1ull << 52) - 1);
  const u64 max_exp = (1ull << e) - 1;
  const u64 inf = max_exp << m;
  if (exp64 == 0x7ff) {
    if (man64 == 0) return sign | inf;
    u64 payload = man64 >> (52 - m);
    if (payload == 0) payload = 1ull << (m - 1);
    return sign | inf | payload;
  }
  if (exp64 == 0) return sign;
  const int bias = (1 << (e - 1)) - 1;
  const int unbiased = exp64 - 1023;
  if (unbiased + bias >= (int)max_exp) return sign | inf;
  const u64 sig = (1ull << 52) | man64;
  int shift;
  u64 exp_field;
  if (unbiased >= 1 - bias) {
    shift = 52 - m;
    exp_field = (u64)(unbiased + bias);
  } else {
    shift = 52 - m + (1 - bias - unbiased);
    exp_field = 0;
  }
  u64 q;
  if (shift > 63) {
    q = 0;
  } else {
    q = sig >> shift;
    const u64 rem = sig & ((1ull << shift) - 1);
    const u64 half = 1ull << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) q += 1;
  }
  // A normal q carries the implicit bit, so adding (exp_field - 1) << m sums it into the
  // exponent: a round-up carry bumps the exponent (at the top, into the infinity pattern).
  u64 magnitude = exp_field == 0 ? q : ((exp_field - 1) << m) + q;
  if (magnitude > inf) magnitude = inf;
  return sign | magnitude;
}

// Saturating round-to-nearest-even of a double into an integer dtype's bits (NaN: 0).
__device__ __forceinline__ u64 encode_int(int dt, double v) {
  if (isnan(v)) return 0;
  const double r = rint(v);
  const int w = dt_bits(dt);
  if (dt_signed(dt)) {
    if (w == 64) {
      if (r >= 9223372036854775808.0) return 0x7fffffffffffffffull;
      if (r <= -9223372036854775808.0) return 0x8000000000000000ull;
      return (u64)(i64)r;
    }
    const double hi = (double)((1ll << (w - 1)) - 1), lo = -(double)(1ll << (w - 1));
    const i64 x = r >= hi ? (i64)hi : r <= lo ? (i64)lo : (i64)r;
    return (u64)x & ((1ull << w) - 1);
  }
  if (r <= 0.0) return 0;
  if (w == 64) return r >= 18446744073709551616.0 ? ~0ull : (u64)r;
  const double hi = (double)((1ull << w) - 1);
  return r >= hi ? (1ull << w) - 1 : (u64)r;
}

__device__ __forceinline__ u64 encode(int dt, double v) {
  switch (dt) {
    case DT_F64: return bits_of(v);
    case DT_F32: return encode_narrow(v, 8, 23);
    case DT_BF16: return encode_narrow(v, 8, 7);
    case DT_F16: return encode_narrow(v, 5, 10);
    default: return encode_int(dt, v);
  }
}

// v as float dtype dt inside [lo, hi]: rounded, then stepped one value inwards where the
// rounding left the range; a range with no value of the dtype keeps the nearest
// (dtype.rs bits_within).
__device__ __forceinline__ u64 encode_within(int dt, double v, double lo, double hi) {
  // As Rust's f64::clamp: a NaN stays NaN, and a value equal to an end (0.0 for -0.0) stays.
  const u64 bits = encode(dt, v < lo ? lo : (v > hi ? hi : v));
  const u64 sign = 1ull << (dt_bits(dt) - 1);
  const bool negative = (bits & sign) != 0, zero = (bits & ~sign) == 0;
  const u64 up = zero ? 1 : negative ? bits - 1 : bits + 1;
  const u64 down = zero ? (sign | 1) : negative ? bits + 1 : bits - 1;
  const double value = decode(dt, bits);
  const double up_v = decode(dt, up), down_v = decode(dt, down);
  if (value > hi && down_v >= lo && down_v <= hi) return down;
  if (value < lo && up_v >= lo && up_v <= hi) return up;
  return bits;
}

__device__ __forceinline__ void store_bits(void* base, u64 i, int size, u64 bits) {
  switch (size) {
    case 1: ((unsigned char*)base)[i] = (unsigned char)bits; break;
    case 2: ((unsigned short*)base)[i] = (unsigned short)bits; break;
    case 4: ((unsigned int*)base)[i] = (unsigned int)bits; break;
    default: ((u64*)base)[i] = bits; break;
  }
}

// The transpose lab's distinct patterns before their special-value patches (ops/transpose.rs).
__device__ __forceinline__ unsigned int distinct_word(u64 i) {
  const unsigned int MUL = 0x9e3779b1u;
  const unsigned int ADD = 0xffffffffu - MUL * 1000u;
  const unsigned int v = (unsigned int)i * MUL + ADD;
  if (v == 0xffffffffu) return 0x7fbfffffu;
  if (v == 0x7f7f7f7fu) return 0x7fbffffeu;
  return v;
}

__device__ __forceinline__ u64 generate(const u64* p, u64 i) {
  const int dt = (int)p[GP_DTYPE];
  const u64 k = p[GP_K];
  switch ((int)p[GP_CASE]) {
    case GEN_STRUCTURAL: {
      double v = (double)((i * 7 + 3 + 5 * k) % 17);
      if (dt_signed(dt) || dt_float(dt)) v = __dsub_rn(v, 8.0);
      return encode(dt, v);
    }
    case GEN_UNIFORM: {
      const double lo = f64_of(p[GP_LO]), hi = f64_of(p[GP_HI]);
      const double u = __dmul_rn((double)(splitmix_at(p[GP_KEY], i) >> 11),
                                 1.1102230246251565e-16);  // 2^-53
      double v = __dmul_rn(__dadd_rn(lo, __dmul_rn(__dsub_rn(hi, lo), u)), f64_of(p[GP_SCALE]));
      if (p[GP_WITHIN]) return encode_within(dt, v, lo, hi);
      if (!dt_float(dt)) v = floor(v);
      return encode(dt, v);
    }
    case GEN_CONSTANT: {
      const double lo = f64_of(p[GP_LO]), hi = f64_of(p[GP_HI]);
      double v = __dadd_rn(__dmul_rn(__dadd_rn(lo, hi), 0.5), 1.0);
      if (!dt_float(dt)) v = floor(v);
      return encode(dt, v);
    }
    case GEN_SPECIAL:
      return p[GP_WORDS + (i + k) % p[GP_SPECIALS]];
    case GEN_DISTINCT_F32: {
      const u64 n = p[GP_N];
      const u64 j = (i + p[GP_ROTATE]) % n;
      return n <= 4096ull * 4096ull ? (u64)__float_as_uint(__ull2float_rn(j)) : distinct_word(j);
    }
    default: {  // GEN_DISTINCT: the index, offset per input, wrapped to the exact integers
      const u64 cap = p[GP_LO];  // 2^bits, 2^53 for f64, 2^64 - 1 for 64-bit integers
      const u64 v = (i + k * 7919) % cap;
      return dt_float(dt) ? encode(dt, __ull2double_rn(v)) : v;
    }
  }
}

extern "C" __global__ void klab_generate(void* out, const u64* p) {
  const int size = dt_size((int)p[GP_DTYPE]);
  const u64 n = p[GP_N];
  const u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
    store_bits(out, i, size, generate(p, i));
  }
}

// Writes `count` (index, bits) pairs over a generated input (the distinct f32 input's
// special-value patches, at most a few dozen).
extern "C" __global__ void klab_patch(void* out, const u64* pairs, u64 count, u64 size) {
  for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < count;
       j += (u64)gridDim.x * blockDim.x) {
    store_bits(out, pairs[2 * j], (int)size, pairs[2 * j + 1]);
  }
}

// The invalidation before a timed launch: every byte of `out` from the counter-based
// generator, 8-byte word w = splitmix_at(seed, w) little-endian, the tail from the next word
// (crates/klab-core/src/inputs.rs random_bytes writes the same bytes). Allocations are
// 256-byte aligned, so the words are aligned.
extern "C" __global__ void klab_scramble(unsigned char* out, u64 bytes, u64 seed) {
  const u64 words = bytes / 8;
  const u64 stride = (u64)gridDim.x * blockDim.x;
  for (u64 w = (u64)blockIdx.x * blockDim.x + threadIdx.x; w < words; w += stride) {
    reinterpret_cast<u64*>(out)[w] = splitmix_at(seed, w);
  }
  if (blockIdx.x == 0 && threadIdx.x < bytes % 8) {
    out[words * 8 + threadIdx.x] = (unsigned char)(splitmix_at(seed, words) >> (8 * threadIdx.x));
  }
}

// A timed launch's perturbed inputs: `count` elements of `size` bytes copied from `src` to
// `dst` (both `elements` long), element j's position splitmix_at(key, j) mod `elements`
// (crates/klab-core/src/inputs.rs drawn_position: the host picks the same ones).
extern "C" __global__ void klab_copy_elements(void* dst, const void* src, u64 elements, u64 size,
                                              u64 key, u64 count) {
  for (u64 j = (u64)blockIdx.x * blockDim.x + threadIdx.x; j < count;
       j += (u64)gridDim.x * blockDim.x) {
    const u64 at = splitmix_at(key, j) % elements;
    store_bits(dst, at, (int)size, load_bits(src, at, (int)size));
  }
}

#ifndef KLAB_EMULATED
// The L2 ceiling of the physical floor (crates/klab-core/src/floor.rs): `passes` reads of
// `words` 16-byte words, through L2 only (ld.global.cg), by a grid that fills the device.
// The buffer is a fraction of L2, so after the first pass every read hits L2. The sum is
// stored only when it takes a value it never does, so the loads cannot be removed.
extern "C" __global__ void klab_l2_read(const ulonglong2* in, u64 words, u64 passes, u64* sink) {
  u64 acc = 0;
  const u64 stride = (u64)gridDim.x * blockDim.x;
  const u64 first = (u64)blockIdx.x * blockDim.x + threadIdx.x;
  for (u64 p = 0; p < passes; ++p) {
    for (u64 i = first; i < words; i += stride) {
      const ulonglong2 v = __ldcg(in + i);
      acc += v.x ^ v.y;
    }
  }
  if (acc == 0x9e3779b97f4a7c15ull) {
    sink[0] = acc;
  }
}
#endif
