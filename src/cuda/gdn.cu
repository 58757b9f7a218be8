// gdn.cu: one decode step of a Gated DeltaNet layer (spec §2.4), fused: causal conv over the ring of
// raw inputs + SiLU, L2 norms of q and k, the gates, the delta-rule update of the fp32 state and the
// read-out. Grid = (v heads, nsplit): the Dv columns of a head are independent given q and k, so a
// head's state is split over nsplit blocks (more SMs streaming the 4 MB of state per layer); each
// block recomputes its k head's q/k (256 channels, cheap). The gated RMSNorm needs whole heads, so
// it runs in the out_proj GEMV's prologue (gemv.cu, PRO_GATED), or, with OUT below, after a barrier
// of the head's blocks, with out_proj, in this launch.
//
// State layout (Hv, Dv, Dk): one column (fixed v index) is contiguous over k, so a warp reads it
// coalesced. Conv ring (K, C): slot p % K holds the raw input of position p; the step reads the K-1
// previous slots and writes its own, so no block reads what another writes.
#include "gdn_step.cuh"
#include "qgemm_wg.cuh" // cp.async wrappers

LILY_CUDA_MODE_SETTER(gdn)
LILY_TRACE_SETTER(gdn)

#define GDN_THREADS 128

// OUT (LILY_CUDA_GDN_OUT, off by default): the layer's gated RMSNorm and out_proj in the same launch, so
// that out_proj is no launch of its own. Measured (docs/PERF.md, twenty-ninth session): with plain
// launches the two kernels' 21.5 us a layer became 16.6, but in the step's graph, where PDL hides most
// of out_proj's launch, decode was within noise (+0.4 %). Block (h, split)
// requests its share of out_proj before the wait: rows split * rps .. +rps of head h's Dv columns
// (16-byte chunks of 32 columns, rows padded by one chunk so that a lane's chunk reads hit distinct
// banks; a scale word per chunk). After its columns of o are written, the head's nsplit blocks meet at
// a barrier (blocks_sync: every block of the grid is resident, checked on the host), and each takes
// the head's gated norm as out_proj's register prologue does (gemv.cuh, the same bits: o, z and the
// gain, 8 values a lane, the sum of squares by shuffles over Dv / 8 lanes), then its rows' dot products
// with it, which it adds into oa.acc as fixed-point sums (cuda_common.cuh mf_acc_add): out_proj split
// over the heads, summed exactly, and folded into the residual by the router's prologue. Each block
// also writes its share of the residual with the last MoE's sum folded in (oa.x_out), so the router
// folds one sum, not two (each fold costs a GEMV ~1.3-1.8 us: every block reads the 16 KB of sums).
#define GDN_OUT_CH 4 // 32-column chunks of a head at most (Dv <= 128)

// EARLY (LILY_CUDA_GDN_LAT, kconv <= KMAX): everything that does not depend on the previous kernel
// is requested before the wait (conv weights, all K ring slots, dt_bias, A, and the first batch of
// this block's state slice, which only this layer's kernel of the previous step wrote); after it,
// the position, this token's projections and the gates in one round trip. The arithmetic and its
// order are those of the default path (bitwise the same; the two norms share one block reduction).
template <bool EARLY, bool OUT>
__global__ void __launch_bounds__(GDN_THREADS)
    gdn_kernel(gdn_dims d, const float *qkv, const float *bb, const float *aa, const float *conv_w,
               const float *dt_bias, const float *A, float *ring, float *state, float *o,
               const int *posp, int nsplit, gdn_out_args oa) {
    trace_mark(0);
    __shared__ float qs[128], ks[128], red[64];
    extern __shared__ __align__(16) uint4 gdn_smem[]; // OUT: the out_proj slice's codes, then its scale words
    const int nch = d.dv / 32;
    if (OUT) { // before the wait: the weights depend on nothing this step computes
        const int h = blockIdx.x, rs0 = blockIdx.y * oa.rps, ng = oa.wo.cols / oa.wo.group, ncr = oa.wo.cols / 32;
        uint32_t *sw = (uint32_t *)(gdn_smem + oa.rps * (nch + 1));
        for (int i = threadIdx.x; i < oa.rps * nch; i += GDN_THREADS) {
            const int rr = i / nch, c = i % nch, r = rs0 + rr, col = h * d.dv + 32 * c;
            const bool ok = r < oa.H;
            wg_cp16(gdn_smem + rr * (nch + 1) + c, oa.wo.codes + (long)(ok ? r : 0) * ncr + col / 32, ok);
            wg_cp4(sw + i, oa.wo.sb + (long)(ok ? r : 0) * ng + col / oa.wo.group, ok);
        }
        wg_commit();
    }
    const int h = blockIdx.x, split = blockIdx.y, tid = threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int C = 2 * d.hk * d.dk + d.hv * d.dv, K = d.kconv;
    const int dvs = d.dv / nsplit, j0 = split * dvs;
    __shared__ float vs[128];
    gdn_pre P; // EARLY (gdn_step.cuh)
    if (EARLY) {
        gdn_pre_load<GDN_THREADS>(d, h, j0, dvs, conv_w, ring, state, dt_bias, A, P);
    } else {
        // This block's slice of the state was last written by this layer's kernel of the previous
        // step, long complete: stream it towards L2 while the in_proj GEMV finishes.
        prefetch_block(state + ((long)h * d.dv + j0) * d.dk, (long)dvs * d.dk * 4);
    }
    pdl_wait_early();
    trace_mark(1);
    const int p = *posp;
    float beta, xa, Ah;
    if (EARLY) {
        gdn_qk<GDN_THREADS, false>(d, h, split, j0, dvs, p, qkv, bb, aa, ring, P, qs, ks, vs, red, beta, xa);
        Ah = P.Ah;
    } else {
        const int slot = p % K;
        int cq, ck, cv;
        gdn_channels(d, h, j0, tid, cq, ck, cv);
        const bool hasq = tid < d.dk, hasv = tid < dvs;
        const bool qk_writer = (h % (d.hv / d.hk)) == 0 && split == 0;
        // Causal depthwise conv of channel c with the current raw value u, then SiLU (bf16 points).
        auto conv = [&](int c, bool write) {
            float u = qkv[c];
            float y = __fmul_rn(conv_w[(long)c * K + K - 1], u); // gdn_pf_conv's order and roundings (gdn_pf.cuh)
            for (int t = 1; t < K; t++) {
                const int s = ((p - t) % K + K) % K;
                y = __fmaf_rn(conv_w[(long)c * K + K - 1 - t], ring[(long)s * C + c], y);
            }
            if (write) ring[(long)slot * C + c] = u;
            return rb(silu_f(rb(y)));
        };
        float qv = 0.0f, kv = 0.0f;
        if (hasq) {
            qv = conv(cq, qk_writer);
            kv = conv(ck, qk_writer);
        }
        if (hasv) vs[tid] = conv(cv, true);
        // L2 norms in fp32, eps inside the sqrt; q also scaled by dk^-1/2.
        float sq = block_sum(qv * qv, red);
        float sk = block_sum(kv * kv, red);
        if (hasq) {
            qs[tid] = qv / sqrtf(sq + 1e-6f) * rsqrtf((float)d.dk);
            ks[tid] = kv / sqrtf(sk + 1e-6f);
        }
        beta = rb(sigmoid_f(bb[h])), xa = aa[h] + dt_bias[h], Ah = A[h];
        __syncthreads();
    }
    trace_mark(2);
    gdn_update<GDN_THREADS, EARLY>(d, h, j0, dvs, state, qs, ks, vs, beta, xa, Ah, P.s0, o);
    if (OUT) {
        __shared__ __align__(16) float gs[128];
        __shared__ float gsum[GDN_OUT_CH];
        blocks_sync(oa.hbar + 2 * h, nsplit); // the head's blocks
        // The head's gated norm (gated_norm8, as gv_prologue_regs' PRO_GATED): lane l < Dv / 8 owns values 8l..8l+7.
        const int gl = d.dv / 8;
        if (warp == 0) {
            float v[8], g[8], zz[8];
            const bool act = lane < gl;
#pragma unroll
            for (int k = 0; k < 8; k++) v[k] = g[k] = zz[k] = 0.0f;
            if (act) {
                const float *oh = o + h * d.dv + 8 * lane; // written by the head's other blocks: through L2
                const float4 o0 = __ldcg((const float4 *)oh), o1 = __ldcg((const float4 *)(oh + 4));
                const float4 w0 = *(const float4 *)(oa.gnorm + 8 * lane), w1 = *(const float4 *)(oa.gnorm + 8 * lane + 4);
                const float4 z0 = *(const float4 *)(oa.z + h * d.dv + 8 * lane), z1 = *(const float4 *)(oa.z + h * d.dv + 8 * lane + 4);
                v[0] = o0.x, v[1] = o0.y, v[2] = o0.z, v[3] = o0.w, v[4] = o1.x, v[5] = o1.y, v[6] = o1.z, v[7] = o1.w;
                g[0] = w0.x, g[1] = w0.y, g[2] = w0.z, g[3] = w0.w, g[4] = w1.x, g[5] = w1.y, g[6] = w1.z, g[7] = w1.w;
                zz[0] = z0.x, zz[1] = z0.y, zz[2] = z0.z, zz[3] = z0.w, zz[4] = z1.x, zz[5] = z1.y, zz[6] = z1.z, zz[7] = z1.w;
            }
            gated_norm8(v, g, zz, gl, d.dv, oa.eps);
            if (act)
#pragma unroll
                for (int k = 0; k < 8; k++) gs[8 * lane + k] = v[k];
        }
        __syncthreads();
        if (tid < nch) {
            float t = 0.0f;
            for (int k = 0; k < 32; k++) t += gs[32 * tid + k];
            gsum[tid] = t;
        }
        wg_cpwait<0>();
        __syncthreads();
        // This block's rows of out_proj over the head's columns, into the fixed-point sum.
        const uint32_t *sw = (const uint32_t *)(gdn_smem + oa.rps * (nch + 1));
        // Head h starts at row 8 h of the block's rows, so that the heads' atomics on a row come at
        // different times (the heads' blocks reach this point together).
        const int rot = (8 * h) % oa.rps;
        for (int i = tid; i < oa.rps; i += GDN_THREADS) {
            const int rr = i + rot < oa.rps ? i + rot : i + rot - oa.rps, r = split * oa.rps + rr;
            if (r >= oa.H) continue;
            float acc = 0.0f;
            for (int c = 0; c < nch; c++)
                acc += chunk_apply(chunk_dot<4>(gdn_smem[rr * (nch + 1) + c], gs + 32 * c), gsum[c], sw[rr * nch + c], 4);
            mf_acc_add(oa.acc, r, oa.H, acc);
        }
        // The residual with the previous layer's MoE folded in, for the router (its rows split over the blocks).
        const int nb = gridDim.x * gridDim.y, bl = blockIdx.y * gridDim.x + blockIdx.x, rpb = (oa.H + nb - 1) / nb;
        for (int r = bl * rpb + tid; r < min(oa.H, (bl + 1) * rpb) && tid < rpb; r += GDN_THREADS) {
            float v = oa.x[r];
            if (oa.pend) v = mf_fold(v, oa.pend[r], oa.pend[oa.H]), oa.pend[r] = 0ull;
            oa.x_out[r] = v;
        }
    }
    trace_mark(3);
    pdl_trigger();
}

int lily_cuda_gdn_lat = 1; // from LILY_CUDA_OPT_GDN_LAT

static int gdn_nsplit(gdn_dims d, int nsplit) {
    while (nsplit > 1 && d.dv % nsplit) nsplit--;
    return nsplit < 1 ? 1 : nsplit;
}

static size_t gdn_out_smem(gdn_dims d, int rps) { return (size_t)rps * (d.dv / 32 + 1) * 16 + (size_t)rps * (d.dv / 32) * 4; }

template <bool EARLY> static void gdn_out_occ(int *blocks, size_t smem) {
    cudaFuncSetAttribute(gdn_kernel<EARLY, true>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(blocks, gdn_kernel<EARLY, true>, GDN_THREADS, smem) != cudaSuccess)
        *blocks = 0, cudaGetLastError();
}

bool gdn_out_takes(gdn_dims d, int nsplit, const dq_mat &wo, int H, int ghd) {
    nsplit = gdn_nsplit(d, nsplit);
    const int rps = (H + nsplit - 1) / nsplit;
    const size_t smem = gdn_out_smem(d, rps);
    if (wo.fmt != DQ_FAST || wo.bits != 4 || !wo.codes || !wo.sb || wo.rows != H || wo.cols != d.hv * d.dv ||
        d.dv % 32 || d.dv > 32 * GDN_OUT_CH || wo.group % 32 || ghd != d.dv || smem > 160 * 1024)
        return false;
    const int gl = d.dv / 8;
    if (gl & (gl - 1)) return false; // the register prologue's shuffles (gv_pro_fast)
    // Every block resident at once (the head barrier); the occupancy asked once per variant and size.
    static size_t asked[2] = {0, 0};
    static int blocks[2] = {0, 0};
    const int e = lily_cuda_gdn_lat && d.kconv <= KMAX;
    if (asked[e] != smem) {
        if (e) gdn_out_occ<true>(&blocks[e], smem);
        else gdn_out_occ<false>(&blocks[e], smem);
        asked[e] = smem;
    }
    return (long)blocks[e] * cuda_sm_count() >= (long)d.hv * nsplit;
}

void gdn_step(gdn_dims d, const float *qkv, const float *b, const float *a, const float *conv_w,
              const float *dt_bias, const float *A, float *conv_ring, float *state, float *o,
              const int *pos, int nsplit, cudaStream_t st, const gdn_out_args *out) {
    nsplit = gdn_nsplit(d, nsplit);
    gdn_out_args oa;
    memset(&oa, 0, sizeof oa);
    size_t smem = 0;
    if (out) {
        oa = *out;
        oa.rps = (oa.H + nsplit - 1) / nsplit;
        smem = gdn_out_smem(d, oa.rps);
    }
    const bool early = lily_cuda_gdn_lat && d.kconv <= KMAX;
    void (*k)(gdn_dims, const float *, const float *, const float *, const float *, const float *, const float *,
              float *, float *, float *, const int *, int, gdn_out_args) =
        early ? (out ? gdn_kernel<true, true> : gdn_kernel<true, false>) : (out ? gdn_kernel<false, true> : gdn_kernel<false, false>);
    if (out) cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    launch_k(k, dim3(d.hv, nsplit), GDN_THREADS, smem, st, d, qkv, b, a, conv_w, dt_bias, A, conv_ring, state, o, pos,
             nsplit, oa);
}
