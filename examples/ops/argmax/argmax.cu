// Per-row argmax, f32 in, i32 index out: idx[r] = the column of row r's largest value.
// Ties go to the lowest column; a NaN counts as larger than every number (the first NaN
// wins), as NumPy's argmax does. One block of 256 threads per row: each thread scans a
// strided slice, then a tree reduction in shared memory picks the winner.
// argmax is correct; argmax_ties and argmax_signed_offset each carry one labelled bug.

#define THREADS 256

// Whether (a at ia) beats (b at ib).
__device__ bool beats(float a, int ia, float b, int ib) {
    bool na = a != a, nb = b != b;
    if (na || nb) return na && (!nb || ia < ib);
    return a > b || (a == b && ia < ib);
}

__device__ int block_argmax(float v, int i, float *vals, int *idx) {
    vals[threadIdx.x] = v;
    idx[threadIdx.x] = i;
    __syncthreads();
    for (int k = THREADS / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k) {
            int o = threadIdx.x + k;
            if (beats(vals[o], idx[o], vals[threadIdx.x], idx[threadIdx.x])) {
                vals[threadIdx.x] = vals[o];
                idx[threadIdx.x] = idx[o];
            }
        }
        __syncthreads();
    }
    return idx[0];
}

extern "C" __global__ void argmax(const float *x, int *out, int rows, int cols) {
    __shared__ float vals[THREADS];
    __shared__ int idx[THREADS];
    int row = blockIdx.x;
    const float *xr = x + (size_t)row * cols;
    // A thread with no column holds (-inf, cols): it beats nothing real.
    float best = -__int_as_float(0x7f800000);  // -inf
    int at = cols;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        if (beats(xr[c], c, best, at)) {
            best = xr[c];
            at = c;
        }
    }
    int winner = block_argmax(best, at, vals, idx);
    if (threadIdx.x == 0) out[row] = winner;
}

// Bug: the strided scan takes a later equal value (>= instead of a tie rule), so a tie
// goes to the highest column a thread saw, and which thread wins a tie is arbitrary.
extern "C" __global__ void argmax_ties(const float *x, int *out, int rows, int cols) {
    __shared__ float vals[THREADS];
    __shared__ int idx[THREADS];
    int row = blockIdx.x;
    const float *xr = x + (size_t)row * cols;
    float best = -__int_as_float(0x7f800000);  // -inf
    int at = cols;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        if (xr[c] >= best || xr[c] != xr[c]) {
            best = xr[c];
            at = c;
        }
    }
    int winner = block_argmax(best, at, vals, idx);
    if (threadIdx.x == 0) out[row] = winner;
}

// Bug: the row offset is computed in 32-bit int (row * cols), which wraps once a row
// starts past element 2^31: every row from there on reads another row's values.
extern "C" __global__ void argmax_signed_offset(const float *x, int *out, int rows, int cols) {
    __shared__ float vals[THREADS];
    __shared__ int idx[THREADS];
    int row = blockIdx.x;
    const float *xr = x + row * cols;
    float best = -__int_as_float(0x7f800000);  // -inf
    int at = cols;
    for (int c = threadIdx.x; c < cols; c += THREADS) {
        if (beats(xr[c], c, best, at)) {
            best = xr[c];
            at = c;
        }
    }
    int winner = block_argmax(best, at, vals, idx);
    if (threadIdx.x == 0) out[row] = winner;
}
