// Sparse matrix times dense vector, CSR, f32: y[r] = sum of val[j] * x[col[j]] over the
// entries j of row r, row_ptr[r] <= j < row_ptr[r + 1]. row_ptr holds rows + 1 offsets from
// 0 to nnz; col holds each entry's column, an index into x.
// spmv_csr (one thread per row) and spmv_csr_warp (one warp per row) are correct;
// spmv_csr_inclusive and spmv_csr_half_warp each carry one labelled bug.

extern "C" __global__ void spmv_csr(float *y, const int *row_ptr, const int *col,
                                    const float *val, const float *x, int rows, int cols,
                                    int nnz) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.0f;
    for (int j = row_ptr[r]; j < row_ptr[r + 1]; j++) acc += val[j] * x[col[j]];
    y[r] = acc;
}

// One warp per row: the lanes stride over the row's entries, then a shuffle reduction.
extern "C" __global__ void spmv_csr_warp(float *y, const int *row_ptr, const int *col,
                                         const float *val, const float *x, int rows, int cols,
                                         int nnz) {
    int r = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;  // whole warps leave together: blockDim.x is a multiple of 32
    float acc = 0.0f;
    for (int j = row_ptr[r] + lane; j < row_ptr[r + 1]; j += 32) acc += val[j] * x[col[j]];
    for (int off = 16; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) y[r] = acc;
}

// Bug: the row loop runs to j <= row_ptr[r + 1], so every row also adds the next row's first
// entry, and the last row reads one entry past the end of col and val.
extern "C" __global__ void spmv_csr_inclusive(float *y, const int *row_ptr, const int *col,
                                              const float *val, const float *x, int rows,
                                              int cols, int nnz) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    float acc = 0.0f;
    for (int j = row_ptr[r]; j <= row_ptr[r + 1]; j++) acc += val[j] * x[col[j]];
    y[r] = acc;
}

// Bug: the shuffle reduction starts at offset 8, not 16, so lanes 16 to 31 are never added:
// a row with more than 16 entries loses some of them.
extern "C" __global__ void spmv_csr_half_warp(float *y, const int *row_ptr, const int *col,
                                              const float *val, const float *x, int rows,
                                              int cols, int nnz) {
    int r = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (r >= rows) return;
    float acc = 0.0f;
    for (int j = row_ptr[r] + lane; j < row_ptr[r + 1]; j += 32) acc += val[j] * x[col[j]];
    for (int off = 8; off > 0; off /= 2) acc += __shfl_down_sync(0xffffffffu, acc, off);
    if (lane == 0) y[r] = acc;
}
