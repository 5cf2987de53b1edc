/* The CPU oracle for embedding.cu: out[b, t, :] = wte[ids[b, t], :] + wpe[t, :], in f32 as
 * the kernel adds. An id outside the table is klab's bug (it checks the domain first), so
 * the reference does not guard it. */
#include <stdint.h>

void embedding_ref(float *out, const int32_t *ids, const float *wte, const float *wpe,
                   int32_t B, int32_t T, int32_t C, int32_t V) {
    (void)V;
    for (int64_t bt = 0; bt < (int64_t)B * T; bt++) {
        int64_t t = bt % T, id = ids[bt];
        for (int64_t c = 0; c < C; c++)
            out[bt * C + c] = wte[id * C + c] + wpe[t * C + c];
    }
}
