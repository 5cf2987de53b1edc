/* The CPU oracle for layernorm.cu: the same parameters as the kernels, in double. */
#include <math.h>
#include <stdint.h>

void layernorm_ref(const float *x, float *y, int32_t rows, int32_t cols, float eps) {
    for (int32_t r = 0; r < rows; r++) {
        const float *xr = x + (int64_t)r * cols;
        float *yr = y + (int64_t)r * cols;
        double mean = 0.0, var = 0.0;
        for (int32_t c = 0; c < cols; c++) mean += xr[c];
        mean /= cols;
        for (int32_t c = 0; c < cols; c++) var += (xr[c] - mean) * (xr[c] - mean);
        var /= cols;
        double inv = 1.0 / sqrt(var + (double)eps);
        for (int32_t c = 0; c < cols; c++) yr[c] = (float)((xr[c] - mean) * inv);
    }
}
