// GELU on bf16, element-wise: y = x * Phi(x) = 0.5 x erfc(-x / sqrt 2), computed in f32
// and rounded to the nearest bf16 (erfc, not 1 + erf: for x < -4 the sum cancels to 0 in
// f32 while the result is a tiny negative number bf16 holds). Two elements per thread through __nv_bfloat162.
// gelu and gelu_strided (one element at a time, grid-strided) are correct;
// gelu_bf16_math and gelu_pair_overread each carry one labelled bug.
#include <cuda_bf16.h>

__device__ float gelu_f32(float x) {
    return 0.5f * x * erfcf(-x * 0.70710678118654752f);
}

extern "C" __global__ void gelu(const __nv_bfloat16 *x, __nv_bfloat16 *y, int n) {
    long long i = 2 * ((long long)blockIdx.x * blockDim.x + threadIdx.x);
    if (i + 1 < n) {
        __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162 *>(x + i);
        float2 f = __bfloat1622float2(v);
        *reinterpret_cast<__nv_bfloat162 *>(y + i) =
            __floats2bfloat162_rn(gelu_f32(f.x), gelu_f32(f.y));
    } else if (i < n) {
        // The odd last element alone: a pair load here would read past the end.
        y[i] = __float2bfloat16_rn(gelu_f32(__bfloat162float(x[i])));
    }
}

// The same result one element at a time: the launch gives half as many threads as
// elements, so each thread takes two, a grid's width apart (both loads coalesced).
extern "C" __global__ void gelu_strided(const __nv_bfloat16 *x, __nv_bfloat16 *y, int n) {
    long long stride = (long long)gridDim.x * blockDim.x;
    for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        y[i] = __float2bfloat16_rn(gelu_f32(__bfloat162float(x[i])));
}

// Bug: the textbook 0.5 x (1 + erf) in bf16 (8 significant bits) instead of f32: every
// intermediate rounds, and the sum cancels to 0 for negative x.
extern "C" __global__ void gelu_bf16_math(const __nv_bfloat16 *x, __nv_bfloat16 *y, int n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (long long j = 2 * i; j < 2 * i + 2 && j < n; j++) {
        __nv_bfloat16 h = x[j];
        __nv_bfloat16 half_x = __hmul(h, __float2bfloat16_rn(0.5f));
        __nv_bfloat16 e = __float2bfloat16_rn(erff(__bfloat162float(__hmul(h, __float2bfloat16_rn(0.70710678f)))));
        y[j] = __hmul(half_x, __hadd(__float2bfloat16_rn(1.0f), e));
    }
}

// Bug: an odd n's last element is loaded as a pair too, reading one element past the
// end of x (the result is right: the extra value is thrown away; only memcheck sees it).
extern "C" __global__ void gelu_pair_overread(const __nv_bfloat16 *x, __nv_bfloat16 *y, int n) {
    long long i = 2 * ((long long)blockIdx.x * blockDim.x + threadIdx.x);
    if (i < n) {
        __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162 *>(x + i);
        float2 f = __bfloat1622float2(v);
        y[i] = __float2bfloat16_rn(gelu_f32(f.x));
        if (i + 1 < n) y[i + 1] = __float2bfloat16_rn(gelu_f32(f.y));
    }
}
