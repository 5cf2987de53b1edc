/* The CPU oracle for argmax.cu: the first column of the row's largest value, a NaN
 * counting as larger than every number (the first NaN wins). */
#include <stdint.h>

void argmax_ref(const float *x, int32_t *out, int32_t rows, int32_t cols) {
    for (int32_t r = 0; r < rows; r++) {
        const float *xr = x + (int64_t)r * cols;
        int32_t at = 0;
        for (int32_t c = 1; c < cols; c++) {
            float a = xr[c], b = xr[at];
            if (b != b) break;               /* a NaN at `at`: nothing later beats it */
            if (a != a || a > b) at = c;     /* strictly larger (or the first NaN) */
        }
        out[r] = at;
    }
}
