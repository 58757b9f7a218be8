// gdn_prefill.cu: the Gated DeltaNet core for a chunk of T tokens (spec §2.4, §4), token-sequential
// with the fp32 state held in registers for the whole chunk.
//
// Grid (Hv, nsplit): a block owns Dv/nsplit value columns of one head (columns are independent given
// q, k, beta, gamma). Thread (column j, slice sl) keeps S[sl*Dk/4 .. +Dk/4][j] in registers; the four
// slices of a column sit in adjacent lanes and reduce with two shuffles. Tokens go in sub-chunks of
// GP_TS: first every thread works on the sub-chunk's inputs in parallel (causal conv over the raw
// projections and the ring of earlier raw inputs, SiLU, L2 norms, beta, gamma, k.q) into shared
// memory; then the scan walks the tokens with no block barrier. The arithmetic per token is the
// decode step's (gdn.cu): a = S.k and b = S.q on the old state, delta = beta (v - gamma a),
// o = gamma b + delta (k.q), S = gamma S + k delta. The ring (K, C) is updated afterwards by its
// own kernel, so no block reads a slot another block has already overwritten.
#include "prefill.cuh"
#include "gdn_pf.cuh"

#define GP_TS 16     // tokens per sub-chunk
#define GP_KPT 32    // state values per thread (Dk / 4 <= 32)

__global__ void __launch_bounds__(128) gdn_pf_kernel(gdn_dims d, int T, int pos, gdn_in in,
                                                     const float *conv_w, const float *dt_bias,
                                                     const float *A, const float *ring, float *state,
                                                     uint16_t *o, int ncols) {
    extern __shared__ float sm[];
    const int h = blockIdx.x, j0 = blockIdx.y * ncols, tid = threadIdx.x, nt = blockDim.x;
    const int lane = tid & 31, warp = tid >> 5;
    const int C = 2 * d.hk * d.dk + d.hv * d.dv, K = d.kconv, Dk = d.dk, kper = Dk / 4;
    const int kh = h / (d.hv / d.hk);
    // Padded slice stride (bank spread), a multiple of 4 floats for the float4 reads; the pad past
    // kper is zeroed once below (nothing writes it), so Dk not a multiple of 16 reads zeros there.
    const int kst = ((kper + 3) & ~3) + 4;
    const int row = 4 * kst;              // floats per token of q or k
    float *qs = sm, *ks = qs + GP_TS * row, *vs = ks + GP_TS * row;
    float *bet = vs + GP_TS * ncols, *gam = bet + GP_TS, *kqs = gam + GP_TS;
    float *os = kqs + GP_TS;              // GP_TS * ncols outputs
    const int j = warp * 8 + (lane >> 2), sl = lane & 3;
    const bool live = j < ncols;
    const int nin = 2 * Dk + ncols;       // conv channels this block needs
    const float a_h = A[h], dtb = dt_bias[h];

    for (int i = tid; i < 2 * GP_TS * row; i += nt) qs[i] = 0.0f;
    __syncthreads();
    float S[GP_KPT];
    float *Sg = state + ((long)h * d.dv + j0 + (live ? j : 0)) * Dk + sl * kper;
#pragma unroll
    for (int i = 0; i < GP_KPT; i++) S[i] = (live && i < kper) ? Sg[i] : 0.0f;

    for (int t0 = 0; t0 < T; t0 += GP_TS) {
        const int nts = min(GP_TS, T - t0);
        // Conv + SiLU of this block's channels for the sub-chunk.
        for (int w = tid; w < nts * nin; w += nt) {
            int tt = w / nin, ci = w % nin;
            int c = ci < Dk ? kh * Dk + ci
                    : ci < 2 * Dk ? d.hk * Dk + kh * Dk + (ci - Dk)
                    : 2 * d.hk * Dk + h * d.dv + j0 + (ci - 2 * Dk);
            float y = gdn_pf_conv(in.qkv, in.ldq, ring, conv_w, C, K, pos, t0 + tt, c);
            if (ci < 2 * Dk) {
                int i = ci % Dk;
                (ci < Dk ? qs : ks)[tt * row + (i / kper) * kst + i % kper] = y;
            } else {
                vs[tt * ncols + ci - 2 * Dk] = y;
            }
        }
        if (tid < nts) {
            int t = t0 + tid;
            bet[tid] = gdn_pf_beta(in.b[(long)t * in.ldg + h]);
            gam[tid] = expf(gdn_pf_logdecay(in.a[(long)t * in.ldg + h], dtb, a_h));
        }
        __syncthreads();
        // L2 norms (eps inside the sqrt), q scaled by Dk^-1/2, and k.q: one warp per token.
        for (int tt = warp; tt < nts; tt += nt / 32) {
            float *q = qs + tt * row, *k = ks + tt * row;
            float sq = 0.0f, sk = 0.0f;
            for (int i = lane; i < Dk; i += 32) {
                int at = (i / kper) * kst + i % kper;
                sq += q[at] * q[at], sk += k[at] * k[at];
            }
            sq = warp_sum(sq), sk = warp_sum(sk);
            float kq = 0.0f;
            for (int i = lane; i < Dk; i += 32) {
                int at = (i / kper) * kst + i % kper;
                float qv = q[at] / sqrtf(sq + 1e-6f) * rsqrtf((float)Dk), kv = k[at] / sqrtf(sk + 1e-6f);
                q[at] = qv, k[at] = kv;
                kq += qv * kv;
            }
            kq = warp_sum(kq);
            if (lane == 0) kqs[tt] = kq;
        }
        __syncthreads();
        // The scan: no barrier inside.
        for (int tt = 0; tt < nts; tt++) {
            const float4 *k4 = (const float4 *)(ks + tt * row + sl * kst);
            const float4 *q4 = (const float4 *)(qs + tt * row + sl * kst);
            float kr[GP_KPT];
            float ac = 0.0f, bc = 0.0f;
#pragma unroll
            for (int i4 = 0; i4 < GP_KPT / 4; i4++) {
                if (4 * i4 < kper) {
                    float4 kv = k4[i4], qv = q4[i4];
                    kr[4 * i4] = kv.x, kr[4 * i4 + 1] = kv.y, kr[4 * i4 + 2] = kv.z, kr[4 * i4 + 3] = kv.w;
                    ac += S[4 * i4] * kv.x + S[4 * i4 + 1] * kv.y + S[4 * i4 + 2] * kv.z + S[4 * i4 + 3] * kv.w;
                    bc += S[4 * i4] * qv.x + S[4 * i4 + 1] * qv.y + S[4 * i4 + 2] * qv.z + S[4 * i4 + 3] * qv.w;
                } else {
                    kr[4 * i4] = kr[4 * i4 + 1] = kr[4 * i4 + 2] = kr[4 * i4 + 3] = 0.0f;
                }
            }
            ac += __shfl_xor_sync(0xffffffffu, ac, 1);
            bc += __shfl_xor_sync(0xffffffffu, bc, 1);
            ac += __shfl_xor_sync(0xffffffffu, ac, 2);
            bc += __shfl_xor_sync(0xffffffffu, bc, 2);
            const float gm = gam[tt], v = live ? vs[tt * ncols + j] : 0.0f;
            const float delta = bet[tt] * (v - gm * ac);
#pragma unroll
            for (int i = 0; i < GP_KPT; i++) S[i] = gm * S[i] + kr[i] * delta;
            if (sl == 0 && live) os[tt * ncols + j] = gm * bc + delta * kqs[tt];
        }
        __syncthreads();
        for (int w = tid; w < nts * ncols; w += nt) {
            int tt = w / ncols, jj = w % ncols;
            o[(long)(t0 + tt) * d.hv * d.dv + h * d.dv + j0 + jj] = lily_f32_to_bf16(os[w]);
        }
        // (the next sub-chunk's first barrier orders these reads before os is rewritten)
    }
    if (live)
#pragma unroll
        for (int i = 0; i < GP_KPT; i++)
            if (i < kper) Sg[i] = S[i];
}

// The last K raw inputs of the chunk into their ring slots (positions >= pos only).
__global__ void gdn_ring_kernel(int C, int ldq, int K, int T, int pos, const uint16_t *qkv, float *ring) {
    for (int w = blockIdx.x * blockDim.x + threadIdx.x; w < K * C; w += gridDim.x * blockDim.x) {
        int dd = w / C + 1, c = w % C, t = T - dd;
        if (t < 0) continue;
        ring[(long)((pos + t) % K) * C + c] = __uint_as_float((uint32_t)qkv[(long)t * ldq + c] << 16);
    }
}

void gdn_pf_scan(gdn_dims d, int T, int pos, gdn_in in, const float *conv_w, const float *dt_bias, const float *A,
                 float *conv_ring, float *state, uint16_t *o, int nsplit, cudaStream_t st) {
    if (T <= 0) return;
    if (nsplit <= 0) nsplit = 4;
    // ncols must leave whole warps (8 columns per warp) and at most 32 columns (128 threads).
    while (nsplit < d.dv && (d.dv % nsplit || d.dv / nsplit > 32)) nsplit++;
    const int ncols = d.dv / nsplit;
    const int threads = (ncols + 7) / 8 * 32;
    const int row = 4 * (((d.dk / 4 + 3) & ~3) + 4);
    size_t smem = (size_t)(2 * GP_TS * row + 2 * GP_TS * ncols + 3 * GP_TS) * sizeof(float);
    gdn_pf_kernel<<<dim3(d.hv, nsplit), threads, smem, st>>>(d, T, pos, in, conv_w, dt_bias, A, conv_ring, state,
                                                            o, ncols);
    gdn_pf_ring(d, T, pos, in.qkv, in.ldq, conv_ring, st);
}

void gdn_pf_ring(gdn_dims d, int T, int pos, const uint16_t *qkv, int ldq, float *conv_ring, cudaStream_t st) {
    const int C = 2 * d.hk * d.dk + d.hv * d.dv;
    gdn_ring_kernel<<<(d.kconv * C + 255) / 256, 256, 0, st>>>(C, ldq, d.kconv, T, pos, qkv, conv_ring);
}

// Gated RMSNorm (spec §2.1b) per (token, v head): one warp each.
#define GN_MAXPL 8 // values a lane keeps in registers (head dims up to 256)
__global__ void gdn_gnorm_kernel(int T, int hv, int dv, const uint16_t *o, const uint16_t *z,
                                 const float *w, float eps, uint16_t *out) {
    const int lane = threadIdx.x & 31;
    const long task = (long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    if (task >= (long)T * hv) return;
    const long base = task * dv;
    float ss = 0.0f;
    if (dv <= 32 * GN_MAXPL && !(dv & 31)) {
        // Every load of the lane issued at once (o and z), values kept in registers: the loop below
        // read o twice, one 2-byte load in flight at a time. Same elements per lane, same order.
        float xv[GN_MAXPL], zv[GN_MAXPL];
#pragma unroll
        for (int j = 0; j < GN_MAXPL; j++) {
            const int i = lane + 32 * j;
            xv[j] = i < dv ? __uint_as_float((uint32_t)o[base + i] << 16) : 0.0f;
            zv[j] = i < dv ? __uint_as_float((uint32_t)z[base + i] << 16) : 0.0f;
        }
#pragma unroll
        for (int j = 0; j < GN_MAXPL; j++)
            if (lane + 32 * j < dv) ss += xv[j] * xv[j];
        const float r = rsqrtf(warp_sum(ss) / dv + eps);
#pragma unroll
        for (int j = 0; j < GN_MAXPL; j++) {
            const int i = lane + 32 * j;
            if (i < dv) out[base + i] = lily_f32_to_bf16(rb(w[i] * rb(xv[j] * r)) * silu_f(zv[j]));
        }
        return;
    }
    for (int i = lane; i < dv; i += 32) {
        float x = __uint_as_float((uint32_t)o[base + i] << 16);
        ss += x * x;
    }
    float r = rsqrtf(warp_sum(ss) / dv + eps);
    for (int i = lane; i < dv; i += 32) {
        float x = __uint_as_float((uint32_t)o[base + i] << 16);
        float zz = __uint_as_float((uint32_t)z[base + i] << 16);
        float t = rb(w[i] * rb(x * r));
        out[base + i] = lily_f32_to_bf16(t * silu_f(zz));
    }
}

// The same norm 8 values a lane (16-byte loads and stores; dv / 8 lanes a head, 32 / (dv / 8) heads a
// warp; dv in 8, 16, .., 256): the 2-byte loads of the form above moved 64 bytes a warp instruction.
// Each lane sums its 8 squares, then the head's lanes by shuffles: the sum's order differs from the
// warp-a-head form, so the bits may differ by a rounding of rsqrt's argument (the outputs' element
// formula is the same). LILY_CUDA_GN_VEC=0 (read once) keeps the form above.
__global__ void gdn_gnorm8_kernel(int T, int hv, int dv, const uint16_t *o, const uint16_t *z, const float *w,
                                  float eps, uint16_t *out) {
    const int L = dv / 8, lane = threadIdx.x & 31, sub = lane % L;
    const long task = ((long)blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5)) * (32 / L) + lane / L;
    const bool live = task < (long)T * hv;
    const long base = (live ? task : 0) * dv + sub * 8;
    const uint4 ov = live ? *(const uint4 *)(o + base) : make_uint4(0, 0, 0, 0);
    const uint4 zv = live ? *(const uint4 *)(z + base) : make_uint4(0, 0, 0, 0);
    const float4 w0 = *(const float4 *)(w + sub * 8), w1 = *(const float4 *)(w + sub * 8 + 4);
    const uint32_t ou[4] = {ov.x, ov.y, ov.z, ov.w}, zu[4] = {zv.x, zv.y, zv.z, zv.w};
    const float wv[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
    float xv[8], ss = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; e++) {
        xv[e] = bf16_elem(ou[e >> 1], e & 1);
        ss += xv[e] * xv[e];
    }
    for (int off = L / 2; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    const float r = rsqrtf(ss / dv + eps);
    uint32_t res[4];
#pragma unroll
    for (int p = 0; p < 4; p++) {
        uint32_t h[2];
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int i = 2 * p + e;
            const float zz = bf16_elem(zu[p], e);
            h[e] = lily_f32_to_bf16(rb(wv[i] * rb(xv[i] * r)) * silu_f(zz));
        }
        res[p] = h[0] | (h[1] << 16);
    }
    if (live) *(uint4 *)(out + base) = make_uint4(res[0], res[1], res[2], res[3]);
}

void gdn_pf_gated_norm(int T, int hv, int dv, const uint16_t *o, const uint16_t *z,
                       const float *gnorm, float eps, uint16_t *out, cudaStream_t st) {
    static int vec = -1;
    if (vec < 0) {
        const char *e = getenv("LILY_CUDA_GN_VEC");
        vec = e && *e ? atoi(e) != 0 : 1;
    }
    long tasks = (long)T * hv;
    if (tasks <= 0) return;
    if (vec && dv % 8 == 0 && dv <= 256 && 32 % (dv / 8) == 0) {
        const long per_warp = 32 / (dv / 8), warps = (tasks + per_warp - 1) / per_warp;
        gdn_gnorm8_kernel<<<(unsigned)((warps + 7) / 8), 256, 0, st>>>(T, hv, dv, o, z, gnorm, eps, out);
        return;
    }
    gdn_gnorm_kernel<<<(unsigned)((tasks + 7) / 8), 256, 0, st>>>(T, hv, dv, o, z, gnorm, eps, out);
}
