/* The CPU oracle for spmv.cu: y[r] = sum of val[j] * x[col[j]] over row r's entries. Its
 * working type is KLAB_REAL (double for the expected values, float for rule
 * reference-error's second build). Offsets and columns outside their domains are klab's bug
 * (it checks them first), so the reference does not guard them. */
#include <stdint.h>

void spmv_ref(float *y, const int32_t *row_ptr, const int32_t *col, const float *val,
              const float *x, int32_t rows, int32_t cols, int32_t nnz) {
    (void)cols;
    (void)nnz;
    for (int64_t r = 0; r < rows; r++) {
        KLAB_REAL acc = 0;
        for (int64_t j = row_ptr[r]; j < row_ptr[r + 1]; j++)
            acc += (KLAB_REAL)val[j] * (KLAB_REAL)x[col[j]];
        y[r] = (float)acc;
    }
}
