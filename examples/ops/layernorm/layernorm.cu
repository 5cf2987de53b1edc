// Row layer norm, f32: y[r][c] = (x[r][c] - mean_r) / sqrt(var_r + eps), one block of 256
// threads per row, mean and variance each by a tree reduction in shared memory.
// layernorm is correct; layernorm_tail and layernorm_race each carry one labelled bug.

#define THREADS 256

__device__ float block_sum(float v, float *red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    float total = red[0];
    __syncthreads();  // every thread has read red[0] before the next use overwrites it
    return total;
}

extern "C" __global__ void layernorm(const float *x, float *y, int rows, int cols, float eps) {
    __shared__ float red[THREADS];
    int row = blockIdx.x;
    if (row >= rows) return;
    const float *xr = x + (size_t)row * cols;
    float *yr = y + (size_t)row * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) s += xr[c];
    float mean = block_sum(s, red) / cols;
    float v = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        float d = xr[c] - mean;
        v += d * d;
    }
    float inv = rsqrtf(block_sum(v, red) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += THREADS) yr[c] = (xr[c] - mean) * inv;
}

// Bug: the output loop stops at the last whole warp of columns, so a row whose length is
// not a multiple of 32 keeps its last columns unwritten.
extern "C" __global__ void layernorm_tail(const float *x, float *y, int rows, int cols, float eps) {
    __shared__ float red[THREADS];
    int row = blockIdx.x;
    if (row >= rows) return;
    const float *xr = x + (size_t)row * cols;
    float *yr = y + (size_t)row * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) s += xr[c];
    float mean = block_sum(s, red) / cols;
    float v = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        float d = xr[c] - mean;
        v += d * d;
    }
    float inv = rsqrtf(block_sum(v, red) / cols + eps);
    for (int c = threadIdx.x; c < cols / 32 * 32; c += THREADS) yr[c] = (xr[c] - mean) * inv;
}

// Bug: the mean is read from red[0] with no barrier before the variance overwrites the
// shared buffer, so a fast warp can clobber it while a slow one still reads: a race.
extern "C" __global__ void layernorm_race(const float *x, float *y, int rows, int cols, float eps) {
    __shared__ float red[THREADS];
    int row = blockIdx.x;
    if (row >= rows) return;
    const float *xr = x + (size_t)row * cols;
    float *yr = y + (size_t)row * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) s += xr[c];
    red[threadIdx.x] = s;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    float mean = red[0] / cols;  // no barrier after this read
    float v = 0.0f;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        float d = xr[c] - mean;
        v += d * d;
    }
    float inv = rsqrtf(block_sum(v, red) / cols + eps);
    for (int c = threadIdx.x; c < cols; c += THREADS) yr[c] = (xr[c] - mean) * inv;
}
