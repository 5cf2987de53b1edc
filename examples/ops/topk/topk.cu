// Per-row top-k of f32 values: the k largest of each row of cols values, largest first,
// with their column indices. The order is IEEE 754's totalOrder on the bits (-NaN < -inf <
// ... < -0 < +0 < ... < +inf < +NaN), ties to the lowest column. Positions past a row's
// length (k > cols) hold index -1 and value -inf. One thread per row; pick j is the first
// element, in that order, strictly after pick j - 1, so nothing needs to be marked taken.
// topk is correct; topk_float_compare and topk_skips_last each carry one labelled bug.

__device__ __forceinline__ int order_key(float v) {
    int b = __float_as_int(v);
    return b >= 0 ? b : b ^ 0x7fffffff;
}

// Whether (ka, ia) comes before (kb, ib): the larger key, then the lower column.
__device__ __forceinline__ bool before(int ka, int ia, int kb, int ib) {
    return ka > kb || (ka == kb && ia < ib);
}

extern "C" __global__ void topk(const float *x, float *values, int *indices, int rows,
                                int cols, int k) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float *row = x + (size_t)r * cols;
    int prev_key = 0, prev_idx = -1;  // nothing picked yet
    for (int j = 0; j < k; j++) {
        int best = -1, best_key = 0;
        for (int c = 0; c < cols; c++) {
            int key = order_key(row[c]);
            bool after_prev = prev_idx < 0 || before(prev_key, prev_idx, key, c);
            if (after_prev && (best < 0 || before(key, c, best_key, best))) {
                best = c;
                best_key = key;
            }
        }
        size_t o = (size_t)r * k + j;
        values[o] = best < 0 ? __int_as_float(0xff800000) : row[best];
        indices[o] = best;
        if (best >= 0) {
            prev_key = best_key;
            prev_idx = best;
        }
    }
}

// Bug: values are compared as floats, not by their total order: -0 and +0 tie and go to the
// lower column, and a NaN never compares larger, so rows holding NaN or signed zeros come
// out in another order.
extern "C" __global__ void topk_float_compare(const float *x, float *values, int *indices,
                                              int rows, int cols, int k) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float *row = x + (size_t)r * cols;
    float prev = 0.0f;
    int prev_idx = -1;
    for (int j = 0; j < k; j++) {
        int best = -1;
        float best_v = 0.0f;
        for (int c = 0; c < cols; c++) {
            float v = row[c];
            bool after_prev = prev_idx < 0 || prev > v || (prev == v && prev_idx < c);
            if (after_prev && (best < 0 || v > best_v || (v == best_v && c < best))) {
                best = c;
                best_v = v;
            }
        }
        size_t o = (size_t)r * k + j;
        values[o] = best < 0 ? __int_as_float(0xff800000) : row[best];
        indices[o] = best;
        if (best >= 0) {
            prev = best_v;
            prev_idx = best;
        }
    }
}

// Bug: the scan stops at cols - 1, so the last column is never picked.
extern "C" __global__ void topk_skips_last(const float *x, float *values, int *indices,
                                           int rows, int cols, int k) {
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    const float *row = x + (size_t)r * cols;
    int prev_key = 0, prev_idx = -1;
    for (int j = 0; j < k; j++) {
        int best = -1, best_key = 0;
        for (int c = 0; c < cols - 1; c++) {
            int key = order_key(row[c]);
            bool after_prev = prev_idx < 0 || before(prev_key, prev_idx, key, c);
            if (after_prev && (best < 0 || before(key, c, best_key, best))) {
                best = c;
                best_key = key;
            }
        }
        size_t o = (size_t)r * k + j;
        values[o] = best < 0 ? __int_as_float(0xff800000) : row[best];
        indices[o] = best;
        if (best >= 0) {
            prev_key = best_key;
            prev_idx = best;
        }
    }
}
