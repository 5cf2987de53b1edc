/* The CPU oracle for topk.cu: each row's k largest values by IEEE 754 totalOrder, ties to
 * the lowest column, largest first; index -1 and -inf past the row's length. Written as a
 * selection sort over (key, column) pairs, independent of the kernel's "strictly after the
 * previous pick" scan. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int32_t order_key(float v) {
    int32_t b;
    memcpy(&b, &v, sizeof b);
    return b >= 0 ? b : b ^ 0x7fffffff;
}

void topk_ref(const float *x, float *values, int32_t *indices, int32_t rows, int32_t cols,
              int32_t k) {
    char *taken = calloc(cols > 0 ? (size_t)cols : 1, 1);
    if (!taken) abort();
    for (int64_t r = 0; r < rows; r++) {
        const float *row = x + r * cols;
        memset(taken, 0, cols > 0 ? (size_t)cols : 1);
        for (int64_t j = 0; j < k; j++) {
            int64_t best = -1;
            for (int64_t c = 0; c < cols; c++) {
                if (taken[c]) continue;
                if (best < 0 || order_key(row[c]) > order_key(row[best])) best = c;
            }
            int64_t o = r * k + j;
            if (best < 0) {
                uint32_t ninf = 0xff800000u;
                memcpy(&values[o], &ninf, sizeof ninf);
                indices[o] = -1;
            } else {
                taken[best] = 1;
                values[o] = row[best];
                indices[o] = (int32_t)best;
            }
        }
    }
    free(taken);
}
