// Token plus position embedding, f32: out[b, t, :] = wte[ids[b, t], :] + wpe[t, :], the
// encoder of a GPT-2 style model. ids holds B * T token ids, each a row of the V x C table
// wte; wpe holds one row per position. One thread per output element.
// embedding is correct; embedding_last_row and embedding_flat_position each carry one
// labelled bug.

extern "C" __global__ void embedding(float *out, const int *ids, const float *wte,
                                     const float *wpe, int B, int T, int C, int V) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t n = (size_t)B * T * C;
    if (i >= n) return;
    size_t bt = i / C;
    int c = (int)(i % C);
    int t = (int)(bt % T);
    int id = ids[bt];
    out[i] = wte[(size_t)id * C + c] + wpe[(size_t)t * C + c];
}

// Bug: a bounds guard written `id < V - 1` drops the table's last row, so a token with the
// largest id leaves its output unwritten.
extern "C" __global__ void embedding_last_row(float *out, const int *ids, const float *wte,
                                              const float *wpe, int B, int T, int C, int V) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t n = (size_t)B * T * C;
    if (i >= n) return;
    size_t bt = i / C;
    int c = (int)(i % C);
    int t = (int)(bt % T);
    int id = ids[bt];
    if (id < V - 1) out[i] = wte[(size_t)id * C + c] + wpe[(size_t)t * C + c];
}

// Bug: the position row is taken from the flattened token index b * T + t instead of t, so
// every sequence after the first reads past the position table.
extern "C" __global__ void embedding_flat_position(float *out, const int *ids, const float *wte,
                                                   const float *wpe, int B, int T, int C, int V) {
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t n = (size_t)B * T * C;
    if (i >= n) return;
    size_t bt = i / C;
    int c = (int)(i % C);
    int id = ids[bt];
    out[i] = wte[(size_t)id * C + c] + wpe[bt * C + c];
}
