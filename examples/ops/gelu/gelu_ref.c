/* The CPU oracle for gelu.cu: GELU = 0.5 x erfc(-x / sqrt 2) in double, rounded to the
 * nearest bf16 (ties to even). bf16 elements are raw 16-bit patterns (the top half of an
 * f32). */
#include <math.h>
#include <stdint.h>
#include <string.h>

static double bf16_to_double(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t bf16_from_double(double d) {
    /* double -> f32 rounds once; f32 -> bf16 rounds again, which can differ from one
     * rounding only for values exactly halfway after the first: the ulp rule allows 1. */
    float f = (float)d;
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

void gelu_ref(const uint16_t *x, uint16_t *y, int32_t n) {
    for (int32_t i = 0; i < n; i++) {
        double v = bf16_to_double(x[i]);
        y[i] = bf16_from_double(0.5 * v * erfc(-v / sqrt(2.0)));
    }
}
