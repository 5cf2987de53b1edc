/* The CPU oracle for sort.cu: each tile of 1024 consecutive keys (the last one partial)
 * sorted ascending as unsigned 32-bit integers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int by_value(const void *a, const void *b) {
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

void sort_ref(const uint32_t *keys, uint32_t *out, int32_t n) {
    memcpy(out, keys, (size_t)(n > 0 ? n : 0) * sizeof(uint32_t));
    for (int64_t t = 0; t < n; t += 1024) {
        int64_t len = n - t < 1024 ? n - t : 1024;
        qsort(out + t, (size_t)len, sizeof(uint32_t), by_value);
    }
}
