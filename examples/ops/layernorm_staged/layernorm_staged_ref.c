/* The CPU oracle for layernorm_staged.cu, in the operation's parameter order. Its working
 * type is KLAB_REAL: klab builds it in double for the expected values and in float to
 * measure how far a careful f32 implementation lands (rule reference-error). */
#include <math.h>
#include <stdint.h>

void layernorm_staged_ref(const float *x, float *y, float *mean, float *rstd, int32_t rows,
                          int32_t cols, float eps) {
    for (int32_t r = 0; r < rows; r++) {
        const float *xr = x + (int64_t)r * cols;
        float *yr = y + (int64_t)r * cols;
        KLAB_REAL m = 0, v = 0;
        for (int32_t c = 0; c < cols; c++) m += (KLAB_REAL)xr[c];
        m /= cols;
        for (int32_t c = 0; c < cols; c++) v += ((KLAB_REAL)xr[c] - m) * ((KLAB_REAL)xr[c] - m);
        v /= cols;
        KLAB_REAL inv = (KLAB_REAL)1 / sqrt(v + (KLAB_REAL)eps);
        mean[r] = (float)m;
        rstd[r] = (float)inv;
        for (int32_t c = 0; c < cols; c++) yr[c] = (float)(((KLAB_REAL)xr[c] - m) * inv);
    }
}
