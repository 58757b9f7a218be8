// sample.cu: the end of a decode step. The lm_head GEMV (gemv.cu, GV_LOGITS) leaves one (value, row)
// pair per block, already perturbed by Gumbel noise when sampling; one warp picks the best, writes it
// as the next step's input token (and into the generated-ids buffer), and advances the position, so
// consecutive steps chain on the GPU with no host round trip.
#include "cuda_common.cuh"

LILY_CUDA_MODE_SETTER(sample)

__global__ void sample_finish_kernel(const float2 *amax, int n, int *tok, int *ids_out, int *step,
                                     int *pos) {
    const int lane = threadIdx.x;
    pdl_wait();
    pdl_trigger();
    float best = -INFINITY;
    int bi = 0x7fffffff;
    for (int i = lane; i < n; i += 32) {
        float2 v = amax[i];
        int r = __float_as_int(v.y);
        if (v.x > best || (v.x == best && r < bi)) best = v.x, bi = r;
    }
    for (int o = 16; o > 0; o >>= 1) {
        float ob = __shfl_xor_sync(0xffffffffu, best, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (ob > best || (ob == best && oi < bi)) best = ob, bi = oi;
    }
    if (lane == 0) {
        if (bi == 0x7fffffff) bi = 0; // all logits NaN: keep a valid id, the caller checks logits
        *tok = bi;
        if (ids_out) ids_out[*step] = bi;
        *step += 1;
        *pos += 1;
    }
}

void sample_finish(const float2 *amax, int nblocks, int *tok, int *ids_out, int *step, int *pos,
                   cudaStream_t st) {
    launch_k(sample_finish_kernel, 1, 32, 0, st, amax, nblocks, tok, ids_out, step, pos);
}
