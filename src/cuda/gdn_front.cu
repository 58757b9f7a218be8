// gdn_front.cu: a GDN layer's in_proj and its decode step in one launch (LILY_CUDA_GDN_FRONT).
//
// Everything from in_proj to the delta rule is local to a k head: its q and k rows, the v and z rows of
// its R = hv / hk v heads, their b and a rows, the conv channels, the norms and the state. So the launch
// is hk groups of GF_BLOCKS blocks (the model's 16 k heads: 128 blocks, one an SM, all resident), and a
// group needs no grid barrier, only its own (blocks_sync on a counter of the head):
//   1. before the wait, thread 0 requests the block's in_proj tiles (gemv2's 16-row tiles, one bulk copy
//      of codes and one of scale words each) into shared memory, and every thread its step's conv taps,
//      ring slots and first state columns (gdn_step.cuh gdn_pre_load): nothing this step computes
//      changes them, so their DRAM latency overlaps the previous kernel's tail;
//   2. after it, x as gemv2 prepares it (RMS norm, the MoE's pending sum folded in, the int8 digits),
//      the tiles on the integer MMA with their columns split over the 8 warps (ks = 8, as gemv_plan
//      plans these segments, so each row's sum is gemv2's: the same bits), the rows stored where gemv2
//      stores them (qkv, z, b, a: out_proj's gated prologue reads z);
//   3. the head's blocks meet; block r then runs gdn_step's arithmetic for v head r / S of the group and
//      column slice r % S (S = GF_BLOCKS / R splits a head), reading q, k, v, b, a through L2.
// The tiles of a k head (entry e): q's dk / 16, k's, the v rows of its heads (R dv / 16), z's, then
// the tile holding its heads' b rows and the one holding their a rows (R rows of 16, the others' rows
// computed and dropped). Block r takes entries r, r + GF_BLOCKS, ...
//
// Off by default: measured slower (docs/PERF.md, thirty-sixth session). In the real 4K step the launch took
// 24.0 us (ncu median) against 14.1 (in_proj's gemv2) + 6.1 (gdn_step) for the two it replaces, decode -7 %.
// Its parts, by leaving each out: the tile math 5.9 us (8 warps an SM run 7 tiles in turn, latency-bound;
// gemv2 runs the same tiles 24 warps an SM), the head barrier 2.1, the step 2.8, the step's preloads 1.1; the
// launch with the prologue alone 9.0.
#include "gemv.cuh"
#include "gdn_step.cuh"
#include "qgemm_wg.cuh" // bulk-copy and mbarrier wrappers

LILY_CUDA_MODE_SETTER(gdn_front)

#define GF_BLOCKS 8    // blocks a k head
#define GF_MAX_TILES 8 // in_proj tiles a block at most

struct gf_tile_t {
    int seg, tile, lo, hi; // segment, its 16-row tile; rows [lo, hi) of it are this head's
    int cb, bytes;         // its codes' bytes, and with its scale words (rows past the matrix not copied)
};

// Entry e of k head kh's tiles (see the top), without its sizes.
LILY_HD gf_tile_t gf_tile_at(const gdn_dims &d, int kh, int e) {
    const int R = d.hv / d.hk, nq = d.dk / 16, nv = R * d.dv / 16;
    gf_tile_t t = {0, 0, 0, 0, 0, 0};
    if (e < nq) t.tile = kh * nq + e;
    else if (e < 2 * nq) t.tile = (d.hk * d.dk) / 16 + kh * nq + e - nq;
    else if (e < 2 * nq + nv) t.tile = (2 * d.hk * d.dk) / 16 + kh * nv + e - 2 * nq;
    else if (e < 2 * nq + 2 * nv) t.seg = 1, t.tile = kh * nv + e - 2 * nq - nv;
    else {
        t.seg = e == 2 * nq + 2 * nv ? 2 : 3, t.tile = kh * R / 16;
        t.lo = kh * R, t.hi = kh * R + R;
        return t;
    }
    t.lo = 16 * t.tile, t.hi = t.lo + 16;
    return t;
}
// The same with its shared-memory sizes.
LILY_HD gf_tile_t gf_tile(const gv_args &a, const gdn_dims &d, int kh, int e) {
    gf_tile_t t = gf_tile_at(d, kh, e);
    const gv_seg &s = a.seg[t.seg];
    const int r0 = 16 * t.tile, nr = s.m.rows - r0 < 16 ? s.m.rows - r0 : 16;
    t.cb = (int)(nr * dq_row_bytes(s.m));
    t.bytes = t.cb + nr * (s.m.cols / s.m.group) * 4;
    return t;
}
LILY_HD int gf_ntiles(const gdn_dims &d) { return 2 * (d.dk / 16) + 2 * (d.hv / d.hk * d.dv / 16) + 2; }

template <int HPG, bool REGS>
__global__ void __launch_bounds__(GV_THREADS, 1) gdn_front_kernel(gv_args a, gdn_front_args f) {
    constexpr int G = 128 / HPG;
    extern __shared__ uint4 smem4[];
    __shared__ float red[64];
    __shared__ float part[GF_MAX_TILES][GV_WARPS][16];
    __shared__ float qs[128], ks[128], vs[128];
    __shared__ uint64_t bar[GF_MAX_TILES];
    const gdn_dims d = f.d;
    const int cols = a.cols, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int kh = blockIdx.x / GF_BLOCKS, r = blockIdx.x % GF_BLOCKS, R = d.hv / d.hk, S = GF_BLOCKS / R;
    const int mine = (gf_ntiles(d) - r + GF_BLOCKS - 1) / GF_BLOCKS; // entries r, r + GF_BLOCKS, ...
    uint4 *bsm = smem4, *zero4 = bsm + gv2_digit_vecs(cols); // gv2_xmem_bytes' layout
    float *xs = (float *)(zero4 + 1), *xsum = xs + xs_floats(cols), *xsg = xsum + cols / 16;
    char *wsm = (char *)(((uintptr_t)(xsg + cols / G * 4) + 127) & ~(uintptr_t)127);
    __shared__ int toff[GF_MAX_TILES]; // tile k's codes at wsm + toff[k] (read after the prologue's barrier)
    if (tid == 0) {
        for (int k = 0; k < mine; k++) mb_init(&bar[k], 1);
        mb_init_fence();
        for (int k = 0, off = 0; k < mine; k++) {
            const gf_tile_t t = gf_tile(a, d, kh, r + k * GF_BLOCKS);
            const gv_seg &s = a.seg[t.seg];
            toff[k] = off;
            mb_expect_tx(&bar[k], t.bytes);
            bulk_g2s(wsm + off, (const char *)s.m.codes + 16 * t.tile * dq_row_bytes(s.m), t.cb, &bar[k]);
            bulk_g2s(wsm + off + t.cb, s.m.sb + (long)16 * t.tile * (s.m.cols / s.m.group), t.bytes - t.cb, &bar[k]);
            off += t.bytes;
        }
    }
    // The step's (v head, slice) and what it reads that this step does not change.
    const int h = kh * R + r / S, split = r % S, dvs = d.dv / S, j0 = split * dvs;
    gdn_pre P;
    gdn_pre_load<GV_THREADS>(d, h, j0, dvs, f.conv_w, f.ring, f.state, f.dt_bias, f.A, P);
    pdl_wait_early();

    if (REGS) gv_prologue_regs(a, xs, xsum, red);
    else gv_prologue(a, xs, xsum, red, false);
    gv2_split_x<HPG>(cols, xs, bsm, zero4, xsg);
    __syncthreads();
    for (int k = 0; k < mine; k++) {
        const gf_tile_t t = gf_tile(a, d, kh, r + k * GF_BLOCKS);
        float acc0, acc1;
        mb_wait(&bar[k], 0);
        gv2_tile_bits<HPG, true>(a.seg[t.seg], t.tile, bsm, zero4, xsg, lane, warp, acc0, acc1,
                                 (const uint4 *)(wsm + toff[k]), (const uint32_t *)(wsm + toff[k] + t.cb));
        if ((lane & 3) == 0) part[k][warp][lane >> 2] = acc0, part[k][warp][(lane >> 2) + 8] = acc1;
    }
    __syncthreads();
    if (tid < 16 * mine) { // row tid % 16 of tile tid / 16: its 8 warps' partials in gv2_tile_out's order
        const int k = tid / 16, i = tid % 16;
        const gf_tile_t t = gf_tile_at(d, kh, r + k * GF_BLOCKS);
        const gv_seg &s = a.seg[t.seg];
        const int row = 16 * t.tile + i;
        float best = 0.0f;
        int best_row = 0;
        if (row >= t.lo && row < t.hi && row < s.m.rows) gv_out(a, s, row, gv2_part_sum(part[k], GV_WARPS, i), best, best_row);
    }
    blocks_sync(f.hbar + 2 * kh, GF_BLOCKS); // the head's rows are all stored

    float beta, xa;
    gdn_qk<GV_THREADS, true>(d, h, split, j0, dvs, *f.pos, a.seg[0].y, a.seg[2].y, a.seg[3].y, f.ring, P, qs, ks, vs,
                             red, beta, xa);
    gdn_update<GV_THREADS, true>(d, h, j0, dvs, f.state, qs, ks, vs, beta, xa, P.Ah, P.s0, f.o);
    pdl_trigger();
}

static size_t gf_smem(const gv_args &a, const gdn_dims &d, int group) {
    int most = 0;
    for (int r = 0; r < GF_BLOCKS; r++) {
        int sum = 0;
        for (int e = r; e < gf_ntiles(d); e += GF_BLOCKS) sum += gf_tile(a, d, 0, e).bytes;
        most = sum > most ? sum : most;
    }
    return gv2_xmem_bytes(a.cols, group) + 128 + most;
}

template <int HPG, bool REGS> static int gf_occupancy(size_t smem) {
    cudaFuncSetAttribute(gdn_front_kernel<HPG, REGS>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, gdn_front_kernel<HPG, REGS>, GV_THREADS, smem) != cudaSuccess)
        blocks = 0, cudaGetLastError();
    return blocks;
}
template <int HPG> static int gf_occ(bool regs, size_t smem) {
    return regs ? gf_occupancy<HPG, true>(smem) : gf_occupancy<HPG, false>(smem);
}

bool gdn_front_takes(gv_args a, const gdn_dims &d) {
    int total;
    const int group = gemv_plan(a, &total);
    if (!group || a.nseg != 4 || a.epi != GV_STORE || d.hk <= 0 || d.hv % d.hk) return false;
    const int R = d.hv / d.hk;
    if (GF_BLOCKS % R || d.dv % (GF_BLOCKS / R) || 16 % R || d.dk % 16 || d.dk > 128 || (R * d.dv) % 16 ||
        d.dv > 128 || d.kconv > KMAX || d.kconv < 1)
        return false;
    const int rows[4] = {2 * d.hk * d.dk + d.hv * d.dv, d.hv * d.dv, d.hv, d.hv};
    for (int s = 0; s < 4; s++) {
        const gv_seg &g = a.seg[s];
        if (g.ks != GV_WARPS || g.m.rows != rows[s] || !g.y || g.m.group != group ||
            ((uintptr_t)g.m.codes | (uintptr_t)g.m.sb | (uintptr_t)dq_row_bytes(g.m) | (uintptr_t)(g.m.cols / g.m.group * 4)) & 15)
            return false;
    }
    if ((gf_ntiles(d) + GF_BLOCKS - 1) / GF_BLOCKS > GF_MAX_TILES) return false;
    const size_t smem = gf_smem(a, d, group);
    if (smem > 200 * 1024) return false;
    // Every block resident at once (the head barriers); asked once per shape.
    const bool regs = a.pro_regs && gv_pro_fast(a);
    static size_t asked = 0;
    static int key = 0, blocks = 0;
    const int k = group * 2 + regs;
    if (asked != smem || key != k) {
        blocks = group == 32 ? gf_occ<4>(regs, smem) : group == 64 ? gf_occ<2>(regs, smem) : gf_occ<1>(regs, smem);
        asked = smem, key = k;
    }
    return (long)blocks * cuda_sm_count() >= (long)d.hk * GF_BLOCKS;
}

void gdn_front(gv_args a, const gdn_front_args &f, cudaStream_t st) {
    int total;
    const int group = gemv_plan(a, &total);
    const size_t smem = gf_smem(a, f.d, group);
    const bool regs = a.pro_regs && gv_pro_fast(a);
    void (*k)(gv_args, gdn_front_args) =
        group == 32 ? (regs ? gdn_front_kernel<4, true> : gdn_front_kernel<4, false>)
        : group == 64 ? (regs ? gdn_front_kernel<2, true> : gdn_front_kernel<2, false>)
                      : (regs ? gdn_front_kernel<1, true> : gdn_front_kernel<1, false>);
    static size_t smem_set[6] = {0, 0, 0, 0, 0, 0}; // per instantiation: the attribute only when it grows
    const int ki = (group == 32 ? 0 : group == 64 ? 2 : 4) + regs;
    if (smem > smem_set[ki]) cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem), smem_set[ki] = smem;
    launch_k(k, dim3(f.d.hk * GF_BLOCKS), GV_THREADS, smem, st, a, f);
}
