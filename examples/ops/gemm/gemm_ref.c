/* The CPU oracle for gemm.cu: C = A B with every dot product accumulated in double (the
 * loops run i, k, j so that B is read along its rows). */
#include <stdint.h>
#include <stdlib.h>

void gemm_ref(const float *A, const float *B, float *C, int32_t M, int32_t N, int32_t K) {
    double *acc = calloc(N > 0 ? (size_t)N : 1, sizeof(double));
    if (!acc) abort();
    for (int32_t i = 0; i < M; i++) {
        for (int32_t j = 0; j < N; j++) acc[j] = 0.0;
        for (int32_t k = 0; k < K; k++) {
            double a = A[(int64_t)i * K + k];
            const float *b = B + (int64_t)k * N;
            for (int32_t j = 0; j < N; j++) acc[j] += a * b[j];
        }
        for (int32_t j = 0; j < N; j++) C[(int64_t)i * N + j] = (float)acc[j];
    }
    free(acc);
}
