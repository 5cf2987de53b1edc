// A 5 x 5 weighted stencil over an H x W f32 image, row-major, with clamp-to-edge borders:
// out[y][x] = sum over dy, dx in [-2, 2] of w[dy + 2][dx + 2] * in[clamp(y + dy)][clamp(x + dx)].
// Each block stages a 16 x 16 tile and its two-element halo (20 x 20) in shared memory.
// H and W need not be multiples of 16. stencil is correct; stencil_halo_unclamped and
// stencil_int_offset each carry one labelled bug.

#define T 16
#define R 2
#define S (T + 2 * R)

__device__ __forceinline__ int clampi(int v, int hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

extern "C" __global__ void stencil(const float *in, const float *w, float *out, int H, int W) {
    __shared__ float tile[S][S];
    int x0 = blockIdx.x * T - R, y0 = blockIdx.y * T - R;
    for (int i = threadIdx.y * T + threadIdx.x; i < S * S; i += T * T) {
        int y = clampi(y0 + i / S, H - 1), x = clampi(x0 + i % S, W - 1);
        tile[i / S][i % S] = in[(size_t)y * W + x];
    }
    __syncthreads();
    int x = blockIdx.x * T + threadIdx.x, y = blockIdx.y * T + threadIdx.y;
    if (x >= W || y >= H) return;
    float acc = 0.0f;
    for (int dy = 0; dy <= 2 * R; dy++)
        for (int dx = 0; dx <= 2 * R; dx++)
            acc += w[dy * (2 * R + 1) + dx] * tile[threadIdx.y + dy][threadIdx.x + dx];
    out[(size_t)y * W + x] = acc;
}

// Bug: the halo is clamped at the image's top and left edges but not at the bottom and
// right, so a tile on the last row or column of tiles reads past the row's end (into the
// next row) and past the last row (out of bounds).
extern "C" __global__ void stencil_halo_unclamped(const float *in, const float *w, float *out, int H, int W) {
    __shared__ float tile[S][S];
    int x0 = blockIdx.x * T - R, y0 = blockIdx.y * T - R;
    for (int i = threadIdx.y * T + threadIdx.x; i < S * S; i += T * T) {
        int y = max(y0 + i / S, 0), x = max(x0 + i % S, 0);
        tile[i / S][i % S] = in[(size_t)y * W + x];
    }
    __syncthreads();
    int x = blockIdx.x * T + threadIdx.x, y = blockIdx.y * T + threadIdx.y;
    if (x >= W || y >= H) return;
    float acc = 0.0f;
    for (int dy = 0; dy <= 2 * R; dy++)
        for (int dx = 0; dx <= 2 * R; dx++)
            acc += w[dy * (2 * R + 1) + dx] * tile[threadIdx.y + dy][threadIdx.x + dx];
    out[(size_t)y * W + x] = acc;
}

// Bug: the element offset y * W + x is computed in 32-bit int: past 2^31 elements it
// wraps negative. Every shape of the ladder is far smaller; only the index-overflow case
// reaches it.
extern "C" __global__ void stencil_int_offset(const float *in, const float *w, float *out, int H, int W) {
    __shared__ float tile[S][S];
    int x0 = blockIdx.x * T - R, y0 = blockIdx.y * T - R;
    for (int i = threadIdx.y * T + threadIdx.x; i < S * S; i += T * T) {
        int y = clampi(y0 + i / S, H - 1), x = clampi(x0 + i % S, W - 1);
        tile[i / S][i % S] = in[y * W + x];
    }
    __syncthreads();
    int x = blockIdx.x * T + threadIdx.x, y = blockIdx.y * T + threadIdx.y;
    if (x >= W || y >= H) return;
    float acc = 0.0f;
    for (int dy = 0; dy <= 2 * R; dy++)
        for (int dx = 0; dx <= 2 * R; dx++)
            acc += w[dy * (2 * R + 1) + dx] * tile[threadIdx.y + dy][threadIdx.x + dx];
    out[y * W + x] = acc;
}
