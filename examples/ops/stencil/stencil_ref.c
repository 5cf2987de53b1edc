/* The CPU oracle for stencil.cu: the 5 x 5 clamp-to-edge stencil accumulated in double.
 * No slice of the image is computed on its own (every row reads the two rows on either
 * side), so the index-overflow case runs this on the whole image: the rows are spread over
 * the cores with OpenMP (klab compiles references with -fopenmp where the compiler has it;
 * without it the pragma is ignored and the result is the same). */
#include <stdint.h>

static int64_t clamp64(int64_t v, int64_t hi) { return v < 0 ? 0 : (v > hi ? hi : v); }

void stencil_ref(const float *in, const float *w, float *out, int32_t H, int32_t W) {
    #pragma omp parallel for schedule(static)
    for (int64_t y = 0; y < H; y++) {
        for (int64_t x = 0; x < W; x++) {
            double acc = 0.0;
            for (int dy = -2; dy <= 2; dy++) {
                const float *row = in + clamp64(y + dy, H - 1) * W;
                for (int dx = -2; dx <= 2; dx++)
                    acc += (double)w[(dy + 2) * 5 + dx + 2] * row[clamp64(x + dx, W - 1)];
            }
            out[y * W + x] = (float)acc;
        }
    }
}
