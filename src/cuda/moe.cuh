// moe.cuh: the router softmax + top-k, one warp's work, shared by the MoE kernels: the batch-1 ones
// (moe.cu's gate/up + down pair, moe_fused.cu's single launch; every block redoes it from the 256
// logits) and the prefill's routing kernel (moe_prefill.cu, a warp per token), so a token is routed
// alike on both paths.
#pragma once

#include "cuda_common.cuh"

#define MAX_TOPK 16
#define MAX_E_PER_LANE 16 // n_experts <= 512

// Softmax over E logits, top-k by probability (ties: lower id), optional renormalisation; the
// weights are rounded to bf16 as the reference does. Run by one warp; NS slots a lane (E <= 32 NS):
// router_topk below picks the fewest that hold E, since every round of the selection scans them all
// (the same bits for any NS >= E / 32: absent slots take no part).
template <int NS>
static __device__ void router_topk_ns(const float *logits, int E, int k, int norm, int *ids, float *wts, bool redux) {
    int lane = threadIdx.x & 31;
    float v[NS];
    float mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < NS; j++) {
        int e = lane + 32 * j;
        v[j] = e < E ? __ldcg(logits + e) : -INFINITY; // L2: moe_fused's front writes them in the same launch
        mx = fmaxf(mx, v[j]);
    }
    mx = warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int j = 0; j < NS; j++) {
        int e = lane + 32 * j;
        v[j] = e < E ? expf(v[j] - mx) : -1.0f; // probabilities (unnormalised), -1 = absent
        if (e < E) sum += v[j];
    }
    sum = warp_sum(sum);
    // Round t's probability and id are kept by lane t (k <= 32), which divides them afterwards: the
    // rounds' chain holds only the selection, and the k divisions run side by side.
    float mine = 0.0f;
    int myid = 0;
    if (redux) {
        // The same selection with the warp's integer reductions (redux.sync) instead of ten shuffles
        // per round: key = probability bits + 1 (positive floats order as integers; a probability
        // that underflowed to 0 still beats an absent or taken expert, key 0); the round's winner is
        // the lowest id among the lanes whose best equals the maximum, as below.
        uint32_t key[NS];
#pragma unroll
        for (int j = 0; j < NS; j++) key[j] = v[j] >= 0.0f ? __float_as_uint(v[j]) + 1u : 0u;
        for (int t = 0; t < k; t++) {
            uint32_t b = 0;
            int bi = 0x7fffffff;
#pragma unroll
            for (int j = 0; j < NS; j++)
                if (key[j] > b) b = key[j], bi = lane + 32 * j;
            const uint32_t m = __reduce_max_sync(0xffffffffu, b);
            const int e = __reduce_min_sync(0xffffffffu, b == m ? bi : 0x7fffffff);
#pragma unroll
            for (int j = 0; j < NS; j++)
                if (lane + 32 * j == e) key[j] = 0u;
            if (lane == t) mine = __uint_as_float(m - 1u), myid = e;
        }
    } else
    for (int t = 0; t < k; t++) {
        float b = -2.0f;
        int bi = 0x7fffffff;
#pragma unroll
        for (int j = 0; j < NS; j++)
            if (v[j] > b) b = v[j], bi = lane + 32 * j;
        for (int o = 16; o > 0; o >>= 1) {
            float ob = __shfl_xor_sync(0xffffffffu, b, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (ob > b || (ob == b && oi < bi)) b = ob, bi = oi;
        }
#pragma unroll
        for (int j = 0; j < NS; j++)
            if (lane + 32 * j == bi) v[j] = -1.0f;
        if (lane == t) mine = b, myid = bi;
    }
    // p_t / sum, their total in the order t = 0, 1, ... (as the reference adds them), then each
    // weight renormalised by it.
    const float pk = mine / sum;
    float tot = 0.0f;
    for (int t = 0; t < k; t++) tot += __shfl_sync(0xffffffffu, pk, t);
    if (lane < k) ids[lane] = myid, wts[lane] = rb(norm ? pk / tot : pk);
}
static __device__ __forceinline__ void router_topk(const float *logits, int E, int k, int norm, int *ids, float *wts,
                                                   bool redux) {
    if (E <= 256) router_topk_ns<8>(logits, E, k, norm, ids, wts, redux);
    else router_topk_ns<MAX_E_PER_LANE>(logits, E, k, norm, ids, wts, redux);
}
