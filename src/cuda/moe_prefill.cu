// moe_prefill.cu: the MoE block for a chunk of T tokens, all on the GPU in one stream with no host
// synchronisation (spec §2.5):
//   1. router logits: qgemm (8-bit router), bf16-rounded like the decode GEMV;
//   2. route: one warp per token: fp32 softmax over all experts, top-k (ties: lower id),
//      renormalise, bf16 weights (the decode router's arithmetic, same order), histogram by atomics;
//   3. scan: one block: exclusive scans of the counts (row offsets of each expert's group) and of
//      their tile counts for the chosen tile height (the block map of the grouped GEMM);
//   4. scatter: each (token, slot) takes a place in its expert's group (order inside a group is
//      free: every output row depends on its own input row only);
//   5. grouped GEMMs: gate|up fused with SiLU(gate)*up (rows gathered from xn), then down with the
//      routing weight applied, each row written to its (token, slot) place: no atomics on outputs.
//      Where the gate|up GEMM takes the wide tile's tensor-map loads (moe_pf_gathers), the rows are
//      first copied into expert order (into yk, free until the down GEMM writes it), since a
//      tensor map cannot gather;
//   6. shared expert: dense gate|up GLU and down GEMMs, the 1-row sigmoid gate as a warp dot;
//   7. combine: per token, fp32 sum of its top-k rows + gate * shared row, one rounding, + residual.
// Ablations (moe_pf_scratch's host / sep): steps 2-4 on the CPU (moe_pf_route_host), and the dense
// products (router, shared expert) with separate dequantisation (qgemm_sep.cu); the grouped expert
// products stay fused in both.
// Tile heights: one per call, from the average rows per expert (qgemm_pick_tile), or forced.
#include "prefill.cuh"

#include "moe.cuh" // router_topk: the decode path's routing, so both route a token alike

// One warp per token: the decode path's softmax + top-k (ids and weights of the same bits), then each
// selected expert's row count.
__global__ void route_kernel(const float *logits, int T, int E, int K, int norm, int *ids_out,
                             float *wts_out, int *counts) {
    const int lane = threadIdx.x & 31;
    const int tok = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (tok >= T) return;
    int *ids = ids_out + (long)tok * K;
    router_topk(logits + (long)tok * E, E, K, norm, ids, wts_out + (long)tok * K, false);
    if (lane < K) atomicAdd(counts + ids[lane], 1); // written by this lane just now
}

// One block of >= E threads (E <= 1024): row offsets and tile offsets of each expert group; with
// tails (moe_pf_tails_on), the 128-row tiles over each group's first c - tail rows, where its tail
// starts (grp_mid) and the tail launch's tile offsets; and the merged map's tile offsets
// (moe_pf_merged_tiles, lily_moe_tails 2 and 3); and the plain map of 128-row tiles over whole groups
// (qgemm_rw.cu's grouped calls).
__global__ void scan_kernel(const int *counts, int E, int tile_m, int tails, int *grp_off, int *tile_off,
                            int *cursor, int *grp_mid, int *tile_off_b, int *tile_off_m, int *tile_off_p, int *tile_off_q) {
    __shared__ int sr[1024], st[1024], sb[1024], sm[1024], sp[1024], sq[1024];
    const int e = threadIdx.x;
    const bool split = moe_pf_tails_on(tails, tile_m);
    const int c = e < E ? counts[e] : 0, tail = split ? moe_pf_tail_rows(c) : 0;
    sr[e] = c;
    st[e] = (c - tail + tile_m - 1) / tile_m;
    sb[e] = tail > 0;
    sm[e] = moe_pf_merged_tiles(c);
    sp[e] = (c + 127) / 128;
    sq[e] = moe_pf_fold_tiles(c);
    __syncthreads();
    for (int o = 1; o < blockDim.x; o <<= 1) { // Hillis-Steele inclusive scan
        int a = e >= o ? sr[e - o] : 0, b = e >= o ? st[e - o] : 0, d = e >= o ? sb[e - o] : 0;
        int f = e >= o ? sm[e - o] : 0, q = e >= o ? sp[e - o] : 0, u = e >= o ? sq[e - o] : 0;
        __syncthreads();
        sr[e] += a, st[e] += b, sb[e] += d, sm[e] += f, sp[e] += q, sq[e] += u;
        __syncthreads();
    }
    if (e < E) {
        grp_off[e + 1] = sr[e];
        tile_off[e + 1] = st[e];
        tile_off_b[e + 1] = sb[e];
        tile_off_m[e + 1] = sm[e];
        tile_off_p[e + 1] = sp[e];
        tile_off_q[e + 1] = sq[e];
        grp_mid[e] = sr[e] - tail;
        cursor[e] = 0;
    }
    if (e == 0) grp_off[0] = 0, tile_off[0] = 0, tile_off_b[0] = 0, tile_off_m[0] = 0, tile_off_p[0] = 0, tile_off_q[0] = 0;
}

__global__ void scatter_kernel(const int *ids, int n_pairs, int K, const int *grp_off, int *cursor,
                               int *sorted_tok, int *sorted_pair) {
    int p = blockIdx.x * blockDim.x + threadIdx.x;
    if (p >= n_pairs) return;
    int e = ids[p];
    int at = grp_off[e] + atomicAdd(cursor + e, 1);
    sorted_tok[at] = p / K;
    sorted_pair[at] = p;
}

// Shared-expert gate: one quantised row (1, H) . xn[t] per token, one warp per token, rounded.
__global__ void row_dot_kernel(dq_mat m, const uint16_t *x, int T, int H, float *out) {
    const int lane = threadIdx.x & 31;
    const int tok = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (tok >= T) return;
    float acc = 0.0f;
    for (int c = lane; c < H; c += 32) // dq_get: quantised or dense (the HF test fixtures)
        acc += dq_get(m, 0, c) * __uint_as_float((uint32_t)x[(long)tok * H + c] << 16);
    acc = warp_sum(acc);
    if (lane == 0) out[tok] = rb(acc);
}

// xg[p] = x[rows[p]] (H bf16 a row, R rows; 16-byte pieces when H % 8 == 0).
// A warp per row, 8 rows a block (a block per row: 32,768 blocks of one 16-byte copy a thread at 4K
// tokens, bound by block scheduling). With H % 8 == 0 and H <= GR_MAX16 * 256 a lane issues all of
// its 16-byte loads before its stores.
#define GR_ROWS 8
#define GR_MAX16 16
__global__ void gather_rows_kernel(const uint16_t *x, int H, int R, const int *rows, uint16_t *xg) {
    const int lane = threadIdx.x & 31, r = blockIdx.x * GR_ROWS + (threadIdx.x >> 5);
    if (r >= R) return;
    const long src = (long)__ldg(rows + r) * H, dst = (long)r * H;
    if ((H & 7) == 0 && H / 8 <= GR_MAX16 * 32) {
        const uint4 *s4 = (const uint4 *)(x + src);
        uint4 *d4 = (uint4 *)(xg + dst);
        uint4 v[GR_MAX16];
#pragma unroll
        for (int j = 0; j < GR_MAX16; j++)
            if (lane + 32 * j < H / 8) v[j] = s4[lane + 32 * j];
#pragma unroll
        for (int j = 0; j < GR_MAX16; j++)
            if (lane + 32 * j < H / 8) d4[lane + 32 * j] = v[j];
    } else {
        for (int i = lane; i < H; i += 32) xg[dst + i] = x[src + i];
    }
}

int lily_moe_gather = 0;

// The gate|up GEMM's rows are gathered into expert order first when its launch will load them by
// tensor map (128-row tiles, bf16 weights, the wide tile or the 128-column one with tensor maps on):
// measured in docs/PERF.md.
static bool moe_pf_gathers(const moe_pf_w &w, const moe_pf_scratch *s, int tile_m) {
    return lily_moe_gather && !s->sep && tile_m == 128 && lily_qg_wgmma && lily_qg_bf16w && lily_qg_tma &&
           (lily_qg_wide || lily_qg_tma128 || (lily_qg_rw & 2)) && (w.H % 8) == 0;
}

#define RN_MAXPT 16 // values a thread keeps in registers (rows up to 4096 at 256 threads)

// out[t] = rb(res[t] + rb(sum_k yk[t, k] + rb(sigmoid(sh_s[t])) * sh_y[t])).
// Pairs of columns a thread (H even, K <= CB_MAXK): every load of the pair (the K expert outputs as
// bf16 pairs, the shared output and the residual as float2) issued before the sums, which add in the
// same order per column as the loop below.
#define CB_MAXK 8
__global__ void combine_kernel(const uint16_t *yk, int K, int H, const float *sh_y, const float *sh_s,
                               const float *res, float *out) {
    const int tok = blockIdx.y;
    const float coef = sh_y ? rb(sigmoid_f(sh_s[tok])) : 0.0f;
    if (!(H & 1) && K <= CB_MAXK) {
        const int c = 2 * (blockIdx.x * blockDim.x + threadIdx.x);
        if (c >= H) return;
        uint32_t y2[CB_MAXK];
#pragma unroll
        for (int k = 0; k < CB_MAXK; k++)
            y2[k] = k < K ? *(const uint32_t *)(yk + ((long)tok * K + k) * H + c) : 0u;
        const long at = (long)tok * H + c;
        const float2 sy = sh_y ? *(const float2 *)(sh_y + at) : make_float2(0.0f, 0.0f);
        const float2 rs = *(const float2 *)(res + at);
        float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
        for (int k = 0; k < CB_MAXK; k++)
            if (k < K) s0 += __uint_as_float(y2[k] << 16), s1 += __uint_as_float(y2[k] & 0xffff0000u);
        if (sh_y) s0 += coef * sy.x, s1 += coef * sy.y;
        *(float2 *)(out + at) = make_float2(rb(rs.x + rb(s0)), rb(rs.y + rb(s1)));
        return;
    }
    for (int c = blockIdx.x * blockDim.x + threadIdx.x; c < H; c += gridDim.x * blockDim.x) {
        float s = 0.0f;
        for (int k = 0; k < K; k++)
            s += __uint_as_float((uint32_t)yk[((long)tok * K + k) * H + c] << 16);
        if (sh_y) s += coef * sh_y[(long)tok * H + c];
        long at = (long)tok * H + c;
        out[at] = rb(res[at] + rb(s));
    }
}

__global__ void rmsnorm_rows_kernel(int n, const float *x, const float *w, float eps, uint16_t *y) {
    __shared__ float red[32];
    const float *xr = x + (long)blockIdx.x * n;
    float ss = 0.0f;
    if (n <= RN_MAXPT * (int)blockDim.x) {
        // The row read once, every load of the thread issued at once (the loops below read it twice,
        // one load in flight at a time). Same elements per thread, same order: the same bits.
        float v[RN_MAXPT];
#pragma unroll
        for (int j = 0; j < RN_MAXPT; j++) {
            const int c = threadIdx.x + j * blockDim.x;
            v[j] = c < n ? xr[c] : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < RN_MAXPT; j++)
            if (threadIdx.x + j * blockDim.x < n) ss += v[j] * v[j];
        const float r = rsqrtf(block_sum(ss, red) / n + eps);
#pragma unroll
        for (int j = 0; j < RN_MAXPT; j++) {
            const int c = threadIdx.x + j * blockDim.x;
            if (c < n) y[(long)blockIdx.x * n + c] = lily_f32_to_bf16(v[j] * r * w[c]);
        }
        return;
    }
    for (int c = threadIdx.x; c < n; c += blockDim.x) ss += xr[c] * xr[c];
    float r = rsqrtf(block_sum(ss, red) / n + eps);
    for (int c = threadIdx.x; c < n; c += blockDim.x)
        y[(long)blockIdx.x * n + c] = lily_f32_to_bf16(xr[c] * r * w[c]);
}

// The combine and the next layer's input norm in one pass (moe_pf_scratch.next_norm), a block a token:
// the combine 8 columns a thread (16-byte loads of the K expert rows, float4 of the shared row and the
// residual, every load issued before the sums, each column's sum in combine_kernel's order), the row
// kept in shared memory; then the norm with thread t taking columns t + 256 j as rmsnorm_rows_kernel
// does. So both outputs have the bits of combine_kernel then rmsnorm_rows_kernel, without the second
// launch reading the row back. H % 8 == 0, H <= RN_MAXPT * 256, K <= CB_MAXK.
__global__ void __launch_bounds__(256)
    combine_norm_kernel(const uint16_t *yk, int K, int H, const float *sh_y, const float *sh_s, const float *res,
                        float *out, const float *w, float eps, uint16_t *xn) {
    __shared__ float red[32];
    __shared__ __align__(16) float row[RN_MAXPT * 256];
    const int tok = blockIdx.x;
    const float coef = sh_y ? rb(sigmoid_f(sh_s[tok])) : 0.0f;
    for (int c8 = 8 * threadIdx.x; c8 < H; c8 += 8 * 256) {
        const long at = (long)tok * H + c8;
        uint4 y[CB_MAXK];
#pragma unroll
        for (int k = 0; k < CB_MAXK; k++)
            y[k] = k < K ? *(const uint4 *)(yk + ((long)tok * K + k) * H + c8) : make_uint4(0, 0, 0, 0);
        float4 sy[2] = {make_float4(0.0f, 0.0f, 0.0f, 0.0f), make_float4(0.0f, 0.0f, 0.0f, 0.0f)};
        if (sh_y) sy[0] = *(const float4 *)(sh_y + at), sy[1] = *(const float4 *)(sh_y + at + 4);
        const float4 rs[2] = {*(const float4 *)(res + at), *(const float4 *)(res + at + 4)};
        float v[8];
#pragma unroll
        for (int e = 0; e < 8; e++) {
            float s = 0.0f;
#pragma unroll
            for (int k = 0; k < CB_MAXK; k++) {
                const uint32_t u = e < 2 ? y[k].x : e < 4 ? y[k].y : e < 6 ? y[k].z : y[k].w;
                if (k < K) s += bf16_elem(u, e & 1);
            }
            const float4 &q = sy[e >> 2], &r4 = rs[e >> 2];
            const int i = e & 3;
            if (sh_y) s += coef * (i == 0 ? q.x : i == 1 ? q.y : i == 2 ? q.z : q.w);
            v[e] = rb((i == 0 ? r4.x : i == 1 ? r4.y : i == 2 ? r4.z : r4.w) + rb(s));
        }
        *(float4 *)(out + at) = make_float4(v[0], v[1], v[2], v[3]);
        *(float4 *)(out + at + 4) = make_float4(v[4], v[5], v[6], v[7]);
        *(float4 *)(row + c8) = make_float4(v[0], v[1], v[2], v[3]);
        *(float4 *)(row + c8 + 4) = make_float4(v[4], v[5], v[6], v[7]);
    }
    __syncthreads();
    float ss = 0.0f;
#pragma unroll
    for (int j = 0; j < RN_MAXPT; j++) {
        const int c = threadIdx.x + j * 256;
        if (c < H) ss += row[c] * row[c];
    }
    const float r = rsqrtf(block_sum(ss, red) / H + eps);
#pragma unroll
    for (int j = 0; j < RN_MAXPT; j++) {
        const int c = threadIdx.x + j * 256;
        if (c < H) xn[(long)tok * H + c] = lily_f32_to_bf16(row[c] * r * w[c]);
    }
}

void pf_rmsnorm_rows(int T, int n, const float *x, const float *w, float eps, uint16_t *y, cudaStream_t st) {
    if (T > 0) rmsnorm_rows_kernel<<<T, 256, 0, st>>>(n, x, w, eps, y);
}

// ---------------------------------------------------------------------------------------------
static size_t al(size_t n) { return (n + 255) & ~(size_t)255; }

size_t moe_pf_scratch_bytes(const moe_pf_w &w, int t_max) {
    size_t T = (size_t)t_max, R = T * w.topk;
    return al(T * w.E * 4) + al(R * 4) + al(R * 4) + 9 * al((size_t)(w.E + 1) * 4) + 2 * al(R * 4) +
           al(R * w.I * 2) + al(R * w.H * 2) + al(T * (w.Is ? w.Is : 1) * 2) + al(T * w.H * 4) + al(T * 4);
}

void moe_pf_scratch_init(moe_pf_scratch *s, void *base, const moe_pf_w &w, int t_max) {
    char *p = (char *)base;
    size_t T = (size_t)t_max, R = T * w.topk;
    auto take = [&](size_t n) { char *q = p; p += al(n); return (void *)q; };
    s->logits = (float *)take(T * w.E * 4);
    s->ids = (int *)take(R * 4);
    s->wts = (float *)take(R * 4);
    s->counts = (int *)take((size_t)(w.E + 1) * 4);
    s->cursor = (int *)take((size_t)(w.E + 1) * 4);
    s->grp_off = (int *)take((size_t)(w.E + 1) * 4);
    s->tile_off = (int *)take((size_t)(w.E + 1) * 4);
    s->grp_mid = (int *)take((size_t)(w.E + 1) * 4); // between ids and sorted_pair: the host route mirrors them
    s->tile_off_b = (int *)take((size_t)(w.E + 1) * 4);
    s->tile_off_m = (int *)take((size_t)(w.E + 1) * 4);
    s->tile_off_p = (int *)take((size_t)(w.E + 1) * 4);
    s->tile_off_q = (int *)take((size_t)(w.E + 1) * 4);
    s->sorted_tok = (int *)take(R * 4);
    s->sorted_pair = (int *)take(R * 4);
    s->h = (uint16_t *)take(R * w.I * 2);
    s->yk = (uint16_t *)take(R * w.H * 2);
    s->sh_h = (uint16_t *)take(T * (w.Is ? w.Is : 1) * 2);
    s->sh_y = (float *)take(T * w.H * 4);
    s->sh_s = (float *)take(T * 4);
    s->t_max = t_max;
    s->host = NULL, s->sep = NULL, s->side = NULL, s->part = NULL, s->part_cap = 0;
    s->next_norm = NULL, s->next_xn = NULL, s->next_eps = 0.0f;
}

void moe_pf_route(const moe_pf_w &w, int T, int tile_m, moe_pf_scratch *s, cudaStream_t st) {
    cudaMemsetAsync(s->counts, 0, (size_t)w.E * 4, st);
    route_kernel<<<(T + 7) / 8, 256, 0, st>>>(s->logits, T, w.E, w.topk, w.norm_topk, s->ids, s->wts, s->counts);
    int threads = 32;
    while (threads < w.E) threads *= 2;
    scan_kernel<<<1, threads, 0, st>>>(s->counts, w.E, tile_m, lily_moe_tails, s->grp_off, s->tile_off, s->cursor,
                                       s->grp_mid, s->tile_off_b, s->tile_off_m, s->tile_off_p,
                                       s->tile_off_q);
    int n = T * w.topk;
    scatter_kernel<<<(n + 255) / 256, 256, 0, st>>>(s->ids, n, w.topk, s->grp_off, s->cursor, s->sorted_tok,
                                                    s->sorted_pair);
}

// Host routing (ablation): the arithmetic of route_kernel, scan_kernel and scatter_kernel on the
// CPU. Routing decisions and weights are those of the GPU except where expf differs: the device's
// expf and the host's may differ in the last bit, which can move a bf16 weight across a rounding
// boundary or reorder two near-equal experts (rare); everything else (the warp's max, its butterfly
// sum order, tie-breaking to the lower id, the division, renormalisation, integer scans) is the same.
// Scatter order inside a group is free (moe_prefill.cu, step 4): here pairs in ascending order.
// The device scratch from ids to the end of sorted_pair is mirrored at the same offsets in pinned
// memory, so one copy uploads it all; the logits land after it.
int moe_pf_route_host(const moe_pf_w &w, int T, int tile_m, moe_pf_scratch *s, cudaStream_t st) {
    moe_pf_host *h = s->host;
    const int E = w.E, K = w.topk, R = T * K;
    char *d0 = (char *)s->ids;
    const size_t mirror = al((size_t)((char *)(s->sorted_pair + (size_t)s->t_max * K) - d0));
    const size_t need = mirror + (size_t)s->t_max * E * 4;
    if (need > h->cap) {
        CU_TRY(cudaStreamSynchronize(st)); // an earlier upload may still read the old buffer
        if (h->pin) cudaFreeHost(h->pin);
        h->pin = NULL, h->cap = 0;
        CU_TRY(cudaHostAlloc(&h->pin, need, 0));
        h->cap = need;
    }
    char *b0 = (char *)h->pin;
    auto at = [&](void *dev) { return b0 + ((char *)dev - d0); };
    int *ids = (int *)at(s->ids), *counts = (int *)at(s->counts), *cursor = (int *)at(s->cursor);
    int *grp_off = (int *)at(s->grp_off), *tile_off = (int *)at(s->tile_off);
    int *grp_mid = (int *)at(s->grp_mid), *tile_off_b = (int *)at(s->tile_off_b), *tile_off_m = (int *)at(s->tile_off_m);
    int *tile_off_p = (int *)at(s->tile_off_p), *tile_off_q = (int *)at(s->tile_off_q);
    int *sorted_tok = (int *)at(s->sorted_tok), *sorted_pair = (int *)at(s->sorted_pair);
    float *wts = (float *)at(s->wts), *lg_all = (float *)(b0 + mirror);
    CU_TRY(cudaMemcpyAsync(lg_all, s->logits, (size_t)T * E * 4, cudaMemcpyDeviceToHost, st));
    CU_TRY(cudaStreamSynchronize(st));
    memset(counts, 0, (size_t)E * 4);
    float v[32 * MAX_E_PER_LANE];
    for (int tok = 0; tok < T; tok++) {
        const float *lg = lg_all + (size_t)tok * E;
        float mx = -INFINITY;
        for (int e = 0; e < E; e++) mx = fmaxf(mx, lg[e]);
        float lane_sum[32];
        for (int l = 0; l < 32; l++) { // lane l sums its experts l, l + 32, ... in that order
            float sum = 0.0f;
            for (int e = l; e < E; e += 32) sum += v[e] = expf(lg[e] - mx);
            lane_sum[l] = sum;
        }
        for (int o = 16; o > 0; o >>= 1) { // warp_sum's butterfly: every lane ends with the same sum
            float nx[32];
            for (int l = 0; l < 32; l++) nx[l] = lane_sum[l] + lane_sum[l ^ o];
            memcpy(lane_sum, nx, sizeof nx);
        }
        const float sum = lane_sum[0];
        float pk[MAX_TOPK], tot = 0.0f;
        int ik[MAX_TOPK];
        for (int t = 0; t < K; t++) {
            float best = -2.0f;
            int bi = 0x7fffffff;
            for (int e = 0; e < E; e++) // strictly greater: ties go to the lower id, as on the GPU
                if (v[e] > best) best = v[e], bi = e;
            v[bi] = -1.0f;
            pk[t] = best / sum, ik[t] = bi;
            tot += pk[t];
        }
        for (int t = 0; t < K; t++) {
            ids[tok * K + t] = ik[t];
            wts[tok * K + t] = lily_round_bf16(w.norm_topk ? pk[t] / tot : pk[t]);
            counts[ik[t]]++;
        }
    }
    grp_off[0] = 0, tile_off[0] = 0, tile_off_b[0] = 0, tile_off_m[0] = 0, tile_off_p[0] = 0, tile_off_q[0] = 0;
    const bool split = moe_pf_tails_on(lily_moe_tails, tile_m);
    for (int e = 0; e < E; e++) {
        const int tail = split ? moe_pf_tail_rows(counts[e]) : 0;
        grp_off[e + 1] = grp_off[e] + counts[e];
        tile_off[e + 1] = tile_off[e] + (counts[e] - tail + tile_m - 1) / tile_m;
        tile_off_b[e + 1] = tile_off_b[e] + (tail > 0);
        tile_off_m[e + 1] = tile_off_m[e] + moe_pf_merged_tiles(counts[e]);
        tile_off_p[e + 1] = tile_off_p[e] + (counts[e] + 127) / 128;
        tile_off_q[e + 1] = tile_off_q[e] + moe_pf_fold_tiles(counts[e]);
        grp_mid[e] = grp_off[e + 1] - tail;
        cursor[e] = 0;
    }
    for (int p = 0; p < R; p++) {
        const int e = ids[p], a = grp_off[e] + cursor[e]++;
        sorted_tok[a] = p / K, sorted_pair[a] = p;
    }
    CU_TRY(cudaMemcpyAsync(s->ids, b0, (size_t)((char *)(s->sorted_pair + R) - d0), cudaMemcpyHostToDevice, st));
    return 0;
}

// Dense products of the block (router, shared expert): fused unless the separate-dequantisation
// ablation is on.
static int dense_gemm(const moe_pf_scratch *s, const qg_args &g, cudaStream_t st) {
    return s->sep ? qgemm_sep(s->sep, g, st) : qgemm_launch(g, 0, 0, st);
}

// Whether a grouped GEMM of the block takes the merged map (lily_moe_tails 2: gate|up, 3: both; the down
// projection in mode 2 too where the persistent kernel takes it, qgemm_wsp_takes) on 192-row tiles
// (bf16 weights; not the ablations' other kernels).
static bool moe_pf_merged(const qg_args &g, int tile_m, bool down) {
    const int mode = down && lily_moe_tails == 2 && qgemm_wsp_takes(g) ? 3 : lily_moe_tails;
    return tile_m == 128 && mode >= (down ? 3 : 2) && lily_qg_wgmma && lily_qg_bf16w && !qgemm_rs_on() && !qgemm_ws_on() &&
           qgemm_wg_takes(g, 192);
}

// A grouped expert GEMM (g over the whole groups): one launch; or with tails (the map's split made
// by the routing) the 128-row tiles of each group's first rows, then its tail on a 64-row tile; or
// merged, one launch of the merged map; or first of all, where qgemm_rw.cu takes the call (lily_qg_rw),
// one launch of the plain map on it. names: pfprof's rows for {one launch, the 128-row launch, the
// tails, the merged launch, the register-operand launch}.
static int grouped_gemm(qg_args g, const moe_pf_scratch *s, int tile_m, int max_tiles, cudaStream_t st,
                        const char *const names[5]) {
    int rc;
    if (tile_m == 128 && lily_qg_wgmma) { // the weights as the register operand, one launch of the plain map (qgemm_rw.cu)
        qg_args p = g;
        p.tile_off = s->tile_off_p;
        if (lily_qg_rw & 32) p.tile_off = s->tile_off_q, p.tile_rest = 1; // the folded map (tiles up to 144 rows)
        if (qgemm_rw_grouped_launch(p, max_tiles, st)) {
            PF_MARK(names[4]);
            return 0;
        }
    }
    if (moe_pf_merged(g, tile_m, g.epi != QG_GLU)) {
        g.tile_off = s->tile_off_m;
        rc = qgemm_launch(g, 192, max_tiles, st);
        PF_MARK(names[3]);
        return rc;
    }
    if (!moe_pf_tails_on(lily_moe_tails, tile_m)) {
        rc = qgemm_launch(g, tile_m, max_tiles, st);
        PF_MARK(names[0]);
        return rc;
    }
    g.grp_end = s->grp_mid;
    if ((rc = qgemm_launch(g, 128, max_tiles, st))) return rc;
    PF_MARK(names[1]);
    g.grp_off = s->grp_mid, g.grp_end = s->grp_off + 1, g.tile_off = s->tile_off_b;
    rc = qgemm_launch(g, 64, g.n_groups, st);
    PF_MARK(names[2]);
    return rc;
}
static const char *const gu_names[5] = {"moe experts gate|up grouped gemm", "moe experts gate|up grouped gemm, 128-row tiles",
                                        "moe experts gate|up grouped gemm, tails", "moe experts gate|up grouped gemm, tails merged",
                                        "moe experts gate|up grouped gemm, weights in registers"};
static const char *const dn_names[5] = {"moe experts down grouped gemm", "moe experts down grouped gemm, 128-row tiles",
                                        "moe experts down grouped gemm, tails", "moe experts down grouped gemm, tails merged",
                                        "moe experts down grouped gemm, weights in registers"};

int lily_moe_tails = 0;

int moe_pf_tile(const moe_pf_w &w, int T) {
    return qgemm_pick_tile((T * w.topk + w.E - 1) / w.E);
}

// The shared expert of T tokens of xn: sh_y (raw fp32 output) and sh_s (its gate logit), for the
// combine. Nothing else reads or writes these buffers, so it may run on a side stream.
unsigned long lily_moe_pf_shared_runs = 0;
static int moe_pf_shared(const moe_pf_w &w, const uint16_t *xn, int T, moe_pf_scratch *s, cudaStream_t st) {
    lily_moe_pf_shared_runs++;
    qg_args g;
    memset(&g, 0, sizeof g);
    g.x = xn, g.ldx = w.H, g.w = w.sh_gate, g.w2 = w.sh_up, g.M = T, g.N = w.Is, g.K = w.H;
    g.epi = QG_GLU, g.y = s->sh_h, g.ldy = w.Is;
    int rc = dense_gemm(s, g, st);
    if (rc) return rc;
    memset(&g, 0, sizeof g);
    g.x = s->sh_h, g.ldx = w.Is, g.w = w.sh_down, g.M = T, g.N = w.H, g.K = w.Is;
    g.epi = QG_F32_RAW, g.y = s->sh_y, g.ldy = w.H;
    if ((rc = dense_gemm(s, g, st))) return rc;
    if (w.sh_score.rows)
        row_dot_kernel<<<(T + 7) / 8, 256, 0, st>>>(w.sh_score, xn, T, w.H, s->sh_s);
    else
        cudaMemsetAsync(s->sh_s, 0x7f, (size_t)T * 4, st); // +huge: sigmoid 1 (no gate)
    PF_MARK("moe shared expert (gemms + gate)");
    return 0;
}

static int moe_pf_routed(const moe_pf_w &w, const uint16_t *xn, int T, const float *res, float *out,
                         moe_pf_scratch *s, int tile_m, bool shared_done, cudaStream_t st);

int moe_pf_forward(const moe_pf_w &w, const uint16_t *xn, int T, const float *res, float *out,
                   moe_pf_scratch *s, int tile_m, cudaStream_t st) {
    if (T <= 0) return 0;
    if (T > s->t_max || w.E > 512 || w.topk > MAX_TOPK || w.topk > w.E)
        return lily_err_set(LILY_EINVAL, "moe prefill: %d tokens (max %d), %d experts top-%d", T,
                            s->t_max, w.E, w.topk);
    if (tile_m == 0) tile_m = moe_pf_tile(w, T);
    int rc;
    // The shared expert on the side stream, from here to the combine: its GEMMs fill the SMs that the
    // router (64 blocks at 4K), the routing and the gather leave idle (docs/PERF.md, tenth session).
    const bool side = s->side && s->side != st && !s->sep && w.Is > 0 && w.sh_gate.rows > 0;
    if (side) {
        if ((rc = pf_wait(s->side, st, s->ev[0])) || (rc = moe_pf_shared(w, xn, T, s, s->side)) ||
            (rc = pf_record(s->ev[1], s->side)))
            return rc;
    }
    qg_args g;
    memset(&g, 0, sizeof g);
    g.x = xn, g.ldx = w.H, g.w = w.router, g.M = T, g.N = w.E, g.K = w.H, g.epi = QG_F32;
    g.y = s->logits, g.ldy = w.E, g.part = s->part, g.part_cap = s->part_cap;
    if ((rc = dense_gemm(s, g, st))) return rc;
    PF_MARK("moe router gemm (8-bit)");
    if (s->host) {
        if ((rc = moe_pf_route_host(w, T, tile_m, s, st))) return rc;
        PF_MARK("moe routing on the host (ablation)");
    } else {
        moe_pf_route(w, T, tile_m, s, st);
        PF_MARK("moe routing (top-k, histogram, scan, scatter)");
    }
    return moe_pf_routed(w, xn, T, res, out, s, tile_m, side, st);
}

int moe_pf_experts(const moe_pf_w &w, const uint16_t *xn, int T, const float *res, float *out,
                   moe_pf_scratch *s, int tile_m, cudaStream_t st) {
    return moe_pf_routed(w, xn, T, res, out, s, tile_m, false, st);
}

// The routed experts (grouped gate|up, then down), the shared expert unless shared_done (then on
// the side stream: joined here), and the combine.
static int moe_pf_routed(const moe_pf_w &w, const uint16_t *xn, int T, const float *res, float *out,
                         moe_pf_scratch *s, int tile_m, bool shared_done, cudaStream_t st) {
    if (T <= 0) return 0;
    const int R = T * w.topk;
    const int max_tiles = (R + tile_m - 1) / tile_m + (w.E < R ? w.E : R);
    int rc;
    qg_args g;
    // 5. grouped gate|up, then down
    memset(&g, 0, sizeof g);
    g.x = xn, g.ldx = w.H, g.x_rows = s->sorted_tok, g.w = w.gate, g.w2 = w.up, g.M = R, g.N = w.I,
    g.K = w.H, g.grp_off = s->grp_off, g.tile_off = s->tile_off, g.n_groups = w.E, g.epi = QG_GLU;
    if (moe_pf_gathers(w, s, tile_m)) {
        gather_rows_kernel<<<(R + GR_ROWS - 1) / GR_ROWS, 32 * GR_ROWS, 0, st>>>(xn, w.H, R, s->sorted_tok, s->yk);
        g.x = s->yk, g.x_rows = NULL;
        PF_MARK("moe rows gathered into expert order");
    }
    g.y = s->h, g.ldy = w.I;
    if ((rc = grouped_gemm(g, s, tile_m, max_tiles, st, gu_names))) return rc;
    memset(&g, 0, sizeof g);
    g.x = s->h, g.ldx = w.I, g.w = w.down, g.M = R, g.N = w.H, g.K = w.I, g.grp_off = s->grp_off,
    g.tile_off = s->tile_off, g.n_groups = w.E, g.epi = QG_SCALE_BF16, g.y = s->yk, g.ldy = w.H;
    g.y_rows = s->sorted_pair, g.scale = s->wts;
    if (qgemm_gt_takes(g) && !(lily_qg_rw & 4)) { // tokens as N, each group's X resident (qgemm_gt.cu)
        if ((rc = qgemm_gt_launch(g, st))) return rc;
        PF_MARK("moe experts down grouped gemm, tokens as N");
    } else if ((rc = grouped_gemm(g, s, tile_m, max_tiles, st, dn_names))) {
        return rc;
    }
    // 6. shared expert
    const bool shared = w.Is > 0 && w.sh_gate.rows > 0;
    if (shared_done) {
        if ((rc = pf_await(st, s->ev[1]))) return rc;
    } else if (shared && (rc = moe_pf_shared(w, xn, T, s, st))) {
        return rc;
    }
    // 7. combine (with the next layer's input norm when the caller asks)
    if (s->next_norm && !(w.H & 7) && w.H <= RN_MAXPT * 256 && w.topk <= CB_MAXK) {
        combine_norm_kernel<<<T, 256, 0, st>>>(s->yk, w.topk, w.H, shared ? s->sh_y : NULL, s->sh_s, res, out,
                                               s->next_norm, s->next_eps, s->next_xn);
        PF_MARK("moe combine + next input norm");
        return 0;
    }
    const bool pairs = !(w.H & 1) && w.topk <= CB_MAXK; // combine_kernel's pair path: half the threads
    dim3 grid(((pairs ? w.H / 2 : w.H) + 255) / 256, T);
    combine_kernel<<<grid, 256, 0, st>>>(s->yk, w.topk, w.H, shared ? s->sh_y : NULL, s->sh_s, res, out);
    PF_MARK("moe combine");
    if (s->next_norm) { // shapes the fused kernel does not take: the norm as its own launch
        pf_rmsnorm_rows(T, w.H, out, s->next_norm, s->next_eps, s->next_xn, st);
        PF_MARK("rmsnorm (input + post)");
    }
    return 0;
}
