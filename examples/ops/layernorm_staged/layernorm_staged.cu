// Row layer norm in three launches, f32, as training code computes it: the row means, then
// the row rstds (1 / sqrt(var + eps)), then the normalised rows. The means and rstds are
// outputs too (the backward pass reads them). klab checks, sanitizes and times the three
// launches as one unit. The reductions run one block of bs threads per row (bs a power
// of two, dynamic shared memory of bs floats); the normalisation one thread per element.
// row_mean, row_rstd and normalise make the correct sequence; normalise_wrong_row and
// row_mean_overread each put one labelled bug into it.

__device__ float block_sum(float v, float *red) {
    red[threadIdx.x] = v;
    __syncthreads();
    for (int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) red[threadIdx.x] += red[threadIdx.x + k];
        __syncthreads();
    }
    return red[0];
}

extern "C" __global__ void row_mean(const float *x, float *mean, int rows, int cols) {
    extern __shared__ float red[];
    int row = blockIdx.x;
    if (row >= rows) return;
    const float *xr = x + (size_t)row * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
    s = block_sum(s, red);
    if (threadIdx.x == 0) mean[row] = s / cols;
}

extern "C" __global__ void row_rstd(const float *x, const float *mean, float *rstd, int rows,
                                    int cols, float eps) {
    extern __shared__ float red[];
    int row = blockIdx.x;
    if (row >= rows) return;
    const float *xr = x + (size_t)row * cols;
    float m = mean[row];
    float v = 0.0f;
    for (int c = threadIdx.x; c < cols; c += blockDim.x) {
        float d = xr[c] - m;
        v += d * d;
    }
    v = block_sum(v, red);
    if (threadIdx.x == 0) rstd[row] = rsqrtf(v / cols + eps);
}

extern "C" __global__ void normalise(const float *x, const float *mean, const float *rstd,
                                     float *y, int rows, int cols) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    size_t row = i / cols;
    y[i] = (x[i] - mean[row]) * rstd[row];
}

// Bug: the row of element i is taken as i / rows, which is right only when rows == cols
// (and reads past the statistics when cols > rows).
extern "C" __global__ void normalise_wrong_row(const float *x, const float *mean,
                                               const float *rstd, float *y, int rows, int cols) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)rows * cols) return;
    size_t row = i / rows;
    y[i] = (x[i] - mean[row]) * rstd[row];
}

// Bug: the loop runs to c <= cols, adding the next row's first element to every mean (and
// reading one element past x on the last row).
extern "C" __global__ void row_mean_overread(const float *x, float *mean, int rows, int cols) {
    extern __shared__ float red[];
    int row = blockIdx.x;
    if (row >= rows) return;
    const float *xr = x + (size_t)row * cols;
    float s = 0.0f;
    for (int c = threadIdx.x; c <= cols; c += blockDim.x) s += xr[c];
    s = block_sum(s, red);
    if (threadIdx.x == 0) mean[row] = s / cols;
}
