// topk.cu: the k largest logits of a decode step (k <= LILY_TOPK_MAX), in descending order with ties
// by lower id, for the engine's sampled requests (lily_backend.step_topk): the host then draws from
// k candidates (sampler_sample_top) instead of copying and scanning all 248,320 logits every token.
// Exact and deterministic: the same set and order as the sampler's own selection on the host
// (sampler_top_candidates), which tests/gpu checks on random logits with ties, -0 and NaN.
//
// Two launches. Each block of the first takes a contiguous slice of the vocabulary (at most
// TK_SLICE logits) and leaves its k largest, sorted; one block of the second selects the k largest
// of those candidates. Inside a block the k-th largest key is found by a radix select (four 8-bit
// histogram passes over the keys in shared memory); every key above it is taken, and of the keys
// equal to it those at the lowest positions, which is the lowest ids (positions follow ids in a
// slice, and the candidates of the second launch are in slice order, each slice's sorted by id
// among equal keys). A rank sort orders the k winners.
//
// With a temperature (inv_t > 0) the same pass also gives the softmax's mass relative to the largest
// logit, sum of exp((l - max) / T) over the vocabulary (top-p and min-p requests,
// sampler_sample_mass): each slice block its own max and its sum relative to it (fp32), the final
// block merges them in double (sum_b e^((max_b - max) / T)) in slice order, so the result is
// deterministic. NaN and -inf count 0, as in the sampler's softmax.
//
// Keys: a float's bits mapped so that unsigned order is float order (-0 as +0: they compare equal
// on the host, and the id breaks the tie); NaN maps to 0, below every number, and a winner of key 0
// is dropped (the host's selection never lets NaN pass a full list).
#include "backend.h" // LILY_TOPK_MAX
#include "cuda_common.cuh"
#include "kernels.cuh"

#define TK_THREADS 512
#define TK_SLICE 4096 // logits a first-launch block takes at most

__device__ __forceinline__ uint32_t tk_key(float f) {
    if (f != f) return 0u;
    const uint32_t u = __float_as_uint(f == 0.0f ? 0.0f : f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The k (<= n) largest of key[0..n) (ids in id[]), sorted descending with ties by lower id, into
// okey / oid; returns how many have a key above 0. Called by all TK_THREADS threads of the block.
__device__ int tk_block_select(const uint32_t *key, const int *id, int n, int k, uint32_t *okey, int *oid) {
    __shared__ int hist[256], wsum[TK_THREADS / 32];
    __shared__ uint32_t s_prefix;
    __shared__ int s_need, s_gt;
    __shared__ uint32_t wkey[LILY_TOPK_MAX];
    __shared__ int wid[LILY_TOPK_MAX];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    if (k > n) k = n;
    if (tid == 0) s_prefix = 0, s_need = k, s_gt = 0;
    // 1. The k-th largest key, 8 bits at a time from the top.
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = tid; i < 256; i += TK_THREADS) hist[i] = 0;
        __syncthreads();
        const uint32_t hi = shift == 24 ? 0u : 0xffffffffu << (shift + 8), pre = s_prefix;
        for (int i = tid; i < n; i += TK_THREADS)
            if ((key[i] & hi) == (pre & hi)) atomicAdd(&hist[(key[i] >> shift) & 255], 1);
        __syncthreads();
        if (warp == 0) {
            // Lane l holds bins 255-8l .. 248-8l (the top bins first); the bin where the count from
            // the top reaches `need` is the k-th key's byte.
            const int need = s_need;
            __syncwarp(); // every lane has read s_need before one lane rewrites it below
            int s = 0;
            for (int j = 0; j < 8; j++) s += hist[255 - 8 * lane - j];
            int incl = s;
            for (int o = 1; o < 32; o <<= 1) {
                const int v = __shfl_up_sync(0xffffffffu, incl, o);
                if (lane >= o) incl += v;
            }
            const int excl = incl - s;
            if (excl < need && need <= incl) {
                int c = excl;
                for (int j = 0; j < 8; j++) {
                    const int b = 255 - 8 * lane - j;
                    if (c + hist[b] >= need) {
                        s_prefix = pre | ((uint32_t)b << shift);
                        s_need = need - c;
                        break;
                    }
                    c += hist[b];
                }
            }
        }
        __syncthreads();
    }
    const uint32_t kth = s_prefix;
    const int need = s_need; // keys equal to kth to take; k - need keys lie above it
    // 2. The winners: every key above kth, and the first `need` equal to it by position. Thread t
    // scans positions [t*per, (t+1)*per) so that a block scan of its equal count ranks them.
    const int per = (n + TK_THREADS - 1) / TK_THREADS, i0 = tid * per, i1 = min(n, i0 + per);
    int eq = 0;
    for (int i = i0; i < i1; i++) eq += key[i] == kth;
    int incl = eq;
    for (int o = 1; o < 32; o <<= 1) {
        const int v = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += v;
    }
    if (lane == 31) wsum[warp] = incl;
    __syncthreads();
    int before = incl - eq;
    for (int w = 0; w < warp; w++) before += wsum[w];
    for (int i = i0; i < i1; i++) {
        const uint32_t kv = key[i];
        int slot = -1;
        if (kv > kth) slot = atomicAdd(&s_gt, 1);
        else if (kv == kth && before < need) slot = k - need + before++;
        else if (kv == kth) before++;
        if (slot >= 0) wkey[slot] = kv, wid[slot] = id[i];
    }
    __syncthreads();
    // 3. Rank sort of the k winners: descending key, ascending id.
    uint32_t mk = 0;
    int mi = 0, rank = 0;
    if (tid < k) {
        mk = wkey[tid], mi = wid[tid];
        for (int j = 0; j < k; j++) rank += wkey[j] > mk || (wkey[j] == mk && wid[j] < mi);
    }
    __syncthreads();
    if (tid < k) okey[rank] = mk, oid[rank] = mi;
    int valid = 0;
    for (int j = 0; j < k; j++) valid += wkey[j] > 0u;
    return valid;
}

// First launch: block b's slice [b*S, min(V, (b+1)*S)) -> its k largest at cand[b*k ..], padded with
// key 0 (below every winner of another slice that has one).
__global__ void __launch_bounds__(TK_THREADS) tk_slices_kernel(const float *logits, int V, int S, int k, uint32_t *ckey,
                                                               int *cid, float inv_t, float2 *mass) {
    __shared__ uint32_t key[TK_SLICE];
    __shared__ int id[TK_SLICE];
    __shared__ float red[TK_THREADS / 32];
    const int b = blockIdx.x, lo = b * S, n = max(0, min(V, lo + S) - lo);
    float mx = -INFINITY;
    for (int i = threadIdx.x; i < n; i += TK_THREADS) {
        const float l = logits[lo + i];
        key[i] = tk_key(l), id[i] = lo + i;
        mx = l > mx ? l : mx; // NaN never passes
    }
    __syncthreads();
    if (inv_t > 0.0f) { // the slice's max, then its sum relative to it
        const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
        if (lane == 0) red[warp] = mx;
        __syncthreads();
        mx = red[0];
        for (int w = 1; w < TK_THREADS / 32; w++) mx = fmaxf(mx, red[w]);
        __syncthreads(); // every thread has read red
        float sum = 0.0f;
        if (mx > -INFINITY)
            for (int i = threadIdx.x; i < n; i += TK_THREADS) {
                const float e = (logits[lo + i] - mx) * inv_t;
                sum += e > -87.0f ? expf(e) : 0.0f; // NaN and -inf: 0
            }
        for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
        if (lane == 0) red[warp] = sum;
        __syncthreads();
        if (threadIdx.x == 0) {
            float t = 0.0f;
            for (int w = 0; w < TK_THREADS / 32; w++) t += red[w];
            mass[b] = make_float2(mx, t);
        }
    }
    uint32_t *ok = ckey + (long)b * k;
    int *oi = cid + (long)b * k;
    tk_block_select(key, id, n, k, ok, oi);
    for (int j = min(k, n) + threadIdx.x; j < k; j += TK_THREADS) ok[j] = 0u, oi[j] = 0x7fffffff;
}

// Second launch: the k largest of the nb * k candidates -> vals / ids (the logits' own values), and
// how many are numbers in *n_out.
__global__ void __launch_bounds__(TK_THREADS) tk_final_kernel(const float *logits, const uint32_t *ckey, const int *cid,
                                                              int nc, int k, float *vals, int *ids, int *n_out,
                                                              float inv_t, const float2 *mass, int nb, double *total) {
    extern __shared__ uint32_t tk_smem[];
    uint32_t *key = tk_smem;
    int *id = (int *)(tk_smem + nc);
    __shared__ uint32_t okey[LILY_TOPK_MAX];
    __shared__ int oid[LILY_TOPK_MAX];
    for (int i = threadIdx.x; i < nc; i += TK_THREADS) key[i] = ckey[i], id[i] = cid[i];
    __syncthreads();
    const int m = tk_block_select(key, id, nc, k, okey, oid);
    __syncthreads();
    if (threadIdx.x < m) vals[threadIdx.x] = logits[oid[threadIdx.x]], ids[threadIdx.x] = oid[threadIdx.x];
    if (threadIdx.x == 0) *n_out = m;
    if (inv_t > 0.0f && threadIdx.x == 0) { // the slices' sums merged at the largest max
        float mx = -INFINITY;
        for (int b = 0; b < nb; b++) mx = fmaxf(mx, mass[b].x);
        double t = 0;
        if (mx > -INFINITY)
            for (int b = 0; b < nb; b++)
                if (mass[b].x > -INFINITY) t += (double)mass[b].y * exp(((double)mass[b].x - mx) * inv_t);
        *total = t;
    }
}

// ---------------------------------------------------------------------------------------------
// The request's logit edits (sampler_edits), with sampler_edits_apply's arithmetic. A logit is edited
// by its bias entries in order, then by its penalty entry; every id's edits run in one thread.
__device__ __forceinline__ float edit_one(float v, const sampler_edit &e) {
    if (e.flags & SAMPLER_EDIT_REP) v = v > 0 ? __fdiv_rn(v, e.rep) : __fmul_rn(v, e.rep);
    if (e.flags & SAMPLER_EDIT_ADD) v = __fadd_rn(v, e.add);
    return v;
}
// Entries with the same id are adjacent (sampler_edits sorts the bias; penalties are distinct): thread
// i takes the run of entries that starts at i, in order.
__global__ void edits_kernel(float *logits, const sampler_edit *e, int n) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n || (i > 0 && e[i - 1].id == e[i].id)) return;
    const int id = e[i].id;
    float v = logits[id];
    for (int j = i; j < n && e[j].id == id; j++) v = edit_one(v, e[j]);
    logits[id] = v;
}

int logit_edits_launch(float *logits, const sampler_edit *edits, int n, int n_bias, cudaStream_t st) {
    if (n_bias > 0) edits_kernel<<<(n_bias + 255) / 256, 256, 0, st>>>(logits, edits, n_bias);
    if (n > n_bias) edits_kernel<<<(n - n_bias + 255) / 256, 256, 0, st>>>(logits, edits + n_bias, n - n_bias);
    CU_TRY(cudaGetLastError());
    return 0;
}

size_t topk_scratch_bytes(int V) {
    const int nb = (V + TK_SLICE - 1) / TK_SLICE;
    return (size_t)nb * (LILY_TOPK_MAX * 8 + 8);
}

// The k largest of logits[0..V) into out (k floats, then k ints, then the count), all in device memory
// (scratch: topk_scratch_bytes(V) bytes, out: 8 k + 16 bytes). k in [1, LILY_TOPK_MAX]. With
// temperature > 0, the softmax's mass (a double) at out + 8 k + 8.
int topk_launch(const float *logits, int V, int k, void *scratch, void *out, cudaStream_t st, float temperature) {
    if (k < 1 || k > LILY_TOPK_MAX || V < 1) return lily_err_set(LILY_EINVAL, "cuda top-k: k %d of %d", k, V);
    const int nb = (V + TK_SLICE - 1) / TK_SLICE, S = (V + nb - 1) / nb, nc = nb * k;
    uint32_t *ckey = (uint32_t *)scratch;
    int *cid = (int *)(ckey + (size_t)nb * LILY_TOPK_MAX);
    float2 *mass = (float2 *)(cid + (size_t)nb * LILY_TOPK_MAX);
    const float inv_t = temperature > 0.0f ? 1.0f / temperature : 0.0f;
    const size_t smem = (size_t)nc * 8;
    static size_t attr = 0;
    if (smem > 48 * 1024 && smem > attr) {
        CU_TRY(cudaFuncSetAttribute(tk_final_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        attr = smem;
    }
    float *vals = (float *)out;
    int *ids = (int *)(vals + k), *n_out = ids + k;
    tk_slices_kernel<<<nb, TK_THREADS, 0, st>>>(logits, V, S, k, ckey, cid, inv_t, mass);
    tk_final_kernel<<<1, TK_THREADS, smem, st>>>(logits, ckey, cid, nc, k, vals, ids, n_out, inv_t, mass, nb,
                                                 (double *)((char *)out + 8 * (size_t)k + 8));
    CU_TRY(cudaGetLastError());
    return 0;
}
