// C = A B in f32, row-major: A is M x K, B is K x N, C is M x N. 16 x 16 tiles of A and B
// in shared memory, one thread per element of C; M, N and K need not be multiples of 16.
// gemm is correct; gemm_k_unguarded and gemm_no_second_sync each carry one labelled bug.

#define T 16

extern "C" __global__ void gemm(const float *A, const float *B, float *C, int M, int N, int K) {
    __shared__ float a[T][T], b[T][T];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        a[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f;
        b[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < T; k++) acc += a[threadIdx.y][k] * b[k][threadIdx.x];
        __syncthreads();  // every thread is done with this tile before the next overwrites it
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

// Bug: the tile loads guard the rows of A and the columns of B but not K, so when K is not
// a multiple of 16 the last tile reads past the end of each row of A (into the next row)
// and past the last row of B.
extern "C" __global__ void gemm_k_unguarded(const float *A, const float *B, float *C, int M, int N, int K) {
    __shared__ float a[T][T], b[T][T];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        a[threadIdx.y][threadIdx.x] = row < M ? A[(size_t)row * K + ka] : 0.0f;
        b[threadIdx.y][threadIdx.x] = col < N ? B[(size_t)kb * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < T; k++) acc += a[threadIdx.y][k] * b[k][threadIdx.x];
        __syncthreads();
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}

// Bug: no barrier after the inner product, so a fast warp overwrites the tiles with the
// next K step while a slow one still reads them: a race on shared memory.
extern "C" __global__ void gemm_no_second_sync(const float *A, const float *B, float *C, int M, int N, int K) {
    __shared__ float a[T][T], b[T][T];
    int row = blockIdx.y * T + threadIdx.y, col = blockIdx.x * T + threadIdx.x;
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += T) {
        int ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        a[threadIdx.y][threadIdx.x] = (row < M && ka < K) ? A[(size_t)row * K + ka] : 0.0f;
        b[threadIdx.y][threadIdx.x] = (kb < K && col < N) ? B[(size_t)kb * N + col] : 0.0f;
        __syncthreads();
        for (int k = 0; k < T; k++) acc += a[threadIdx.y][k] * b[k][threadIdx.x];
    }
    if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
