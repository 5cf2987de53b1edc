// Block sort of u32 keys: each block of 512 threads sorts one tile of 1024 consecutive
// keys ascending in shared memory (a bitonic network); the last tile may be partial and is
// padded with the largest key, which sorts to its end and is never written.
// sort_tiles is correct; sort_pad_zero and sort_signed each carry one labelled bug.

#define TILE 1024
#define THREADS 512

template <bool SIGNED>
__device__ bool greater(unsigned a, unsigned b) {
    return SIGNED ? (int)a > (int)b : a > b;
}

template <bool SIGNED>
__device__ void bitonic(unsigned *s) {
    for (int size = 2; size <= TILE; size <<= 1) {
        for (int stride = size >> 1; stride > 0; stride >>= 1) {
            __syncthreads();
            for (int t = threadIdx.x; t < TILE / 2; t += THREADS) {
                int lo = 2 * t - (t & (stride - 1));
                int hi = lo + stride;
                bool up = (lo & size) == 0;
                if (greater<SIGNED>(s[lo], s[hi]) == up) {
                    unsigned x = s[lo];
                    s[lo] = s[hi];
                    s[hi] = x;
                }
            }
        }
    }
    __syncthreads();
}

template <bool SIGNED, unsigned PAD>
__device__ void sort_tile(const unsigned *keys, unsigned *out, int n) {
    __shared__ unsigned s[TILE];
    long long base = (long long)blockIdx.x * TILE;
    for (int i = threadIdx.x; i < TILE; i += THREADS)
        s[i] = base + i < n ? keys[base + i] : PAD;
    bitonic<SIGNED>(s);
    for (int i = threadIdx.x; i < TILE; i += THREADS)
        if (base + i < n) out[base + i] = s[i];
}

extern "C" __global__ void sort_tiles(const unsigned *keys, unsigned *out, int n) {
    sort_tile<false, 0xffffffffu>(keys, out, n);
}

// Bug: the partial last tile is padded with 0, the smallest key: the padding sorts to the
// front, the tile's largest keys are pushed past n and lost, and zeros take their place.
extern "C" __global__ void sort_pad_zero(const unsigned *keys, unsigned *out, int n) {
    sort_tile<false, 0u>(keys, out, n);
}

// Bug: keys are compared as signed ints, so keys of 2^31 and above sort before the small
// ones (invisible on small keys; the extreme values of u32 show it).
extern "C" __global__ void sort_signed(const unsigned *keys, unsigned *out, int n) {
    sort_tile<true, 0xffffffffu>(keys, out, n);
}
