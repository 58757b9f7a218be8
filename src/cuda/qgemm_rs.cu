// qgemm_rs.cu: the prefill GEMM on bf16-rounded 4-bit weights with the operands swapped: the
// weights are the wgmma's A operand, dequantised straight into registers, and the activations its
// B operand from shared memory (Y^T = W X^T). Same arguments, row mapping (dense, grouped, gather,
// scatter) and epilogues as qgemm_wg.cu's bf16-weight mode, and the same weights rb(s q + b), so
// the same products up to the summation order.
//
// Why: qgemm_wg.cu turns each stage's codes into a bf16 B tile in shared memory, then the MMA reads
// it back; per stage that is a store pass, a proxy fence and two block barriers on the critical path,
// and shared memory traffic (A and B reads of m64n136 per warpgroup, the B tile writes, the copies)
// above what the MMAs need. ncu (2026-11-30) puts a quarter of its stall samples on the MMA issue
// waiting at those barriers and another quarter on the dequantisation's shared loads. Here the
// weights never touch shared memory as bf16: a lane needs byte t (lane % 4) of each code word of its
// two rows (nibbles k = 2t, 2t+1 of an 8-k word: exactly its A fragment's pairs), a byte permute
// and two bf16x2 FMAs make a fragment register, and the MMA reads it from registers. One block
// barrier per stage remains (the copy ring).
//
// Block: 2 warpgroups (256 threads), 128 weight rows (output columns; QG_GLU: 64 columns as gate
// and up rows interleaved by 8, so a lane holds gate and up of one column) x NT activation rows (64
// or 128: the tile height the caller picked). Warp w owns weight rows 16w..16w+15. Per 64-k stage
// a 4-slot cp.async ring holds the NT x 64 activation tile (the canonical no-swizzle K-major layout
// of qgemm_wg.cu's A tile: 8x8 core matrices of 128 bytes, LBO 128 B along K, SBO 1024 B along
// rows), the code rows (32 bytes, at a 48-byte stride: the eight rows a warp's lanes read at once
// fall in distinct banks) and the scale words. Copies run three stages ahead; while a stage's MMAs
// run, the next stage's fragments are built; a slot is refilled once the MMAs that read it are
// retired (wgmma.wait_group 0 at the end of each stage, then the next stage's barrier).
//
// The A fragment registers are read by the MMA asynchronously: each stage's set is kept live (an
// empty asm that uses them) until the wait that retires its MMAs, so the compiler cannot give
// their registers to the next set early; two sets alternate (the k loop is unrolled by two so the
// set is static).
//
// Switch: LILY_CUDA_QG_RS (option LILY_CUDA_OPT_QG_RS, bench flag "qg_rs"); only with the
// bf16-weight mode (the exact mode needs the per-group fold on the other operand).
#include "qgemm_wg.cuh"

#define RS_STAGES 4
#define RS_CODE_LD 48   // bytes per code row in shared memory (32 used)

int lily_qg_rs = 0;
// Timing-only ablations (dev; results are wrong): bit 1 = no fragment build (constant fragments),
// 2 = no activation copies, 4 = no code/scale copies, 8 = no MMAs; LILY_QG_RS_ABL (read once) = 1,
// 2, 7 or 8 (the instantiated ones; any other value runs the real kernel). docs/PERF.md has what
// they measured.
static int rs_abl = -1;
// Warpgroups per block (64 weight rows each): 2 (default) or 4 (LILY_QG_RS_WGS=4, dev). Every block
// copies the whole activation tile, and at 2 warpgroups those copies from L2 bound the kernel (ncu:
// L2 72 % busy, DRAM 3 %; timing-only ablation without them: 1.7x faster). 4 warpgroups halve the
// copies but measured no faster (216 vs 226 TFLOP/s at 4096 x 8192 x 2048): with one block an SM
// the copies, the fragment build and the MMAs no longer overlap (their ablation times add up).
static int rs_wgs = -1;

template <int NT, int WGS> struct rs_cfg {
    static constexpr int ROWS = 64 * WGS, THREADS = 128 * WGS;
    static constexpr int X_BYTES = NT * WG_BK * 2;
    static constexpr int C_BYTES = ROWS * RS_CODE_LD;
    static constexpr int S_BYTES = ROWS * 4;
    static constexpr int STAGE = X_BYTES + C_BYTES + S_BYTES;
    static constexpr int SMEM = RS_STAGES * STAGE + NT * 4;
    static constexpr int NACC = NT / 2; // accumulator floats per thread (m64nNT)
};

#define RS_F4(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3])
#define RS_D32 RS_F4(0), RS_F4(4), RS_F4(8), RS_F4(12), RS_F4(16), RS_F4(20), RS_F4(24), RS_F4(28)
#define RS_D64                                                                                                \
    RS_F4(0), RS_F4(4), RS_F4(8), RS_F4(12), RS_F4(16), RS_F4(20), RS_F4(24), RS_F4(28), RS_F4(32), RS_F4(36), \
        RS_F4(40), RS_F4(44), RS_F4(48), RS_F4(52), RS_F4(56), RS_F4(60)

// d (64 x NT per warpgroup, fp32) = (acc ? d : 0) + A (64 x 16, registers) . B (16 x NT, shared).
template <int NT> __device__ __forceinline__ void rs_mma(float *d, const uint32_t *f, uint64_t db, int acc);
template <> __device__ __forceinline__ void rs_mma<64>(float *d, const uint32_t *f, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
                 "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
                 : RS_D32
                 : "r"(f[0]), "r"(f[1]), "r"(f[2]), "r"(f[3]), "l"(db), "r"(acc));
}
template <> __device__ __forceinline__ void rs_mma<128>(float *d, const uint32_t *f, uint64_t db, int acc) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, "
                 "%19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, "
                 "%37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, "
                 "%55, %56, %57, %58, %59, %60, %61, %62, %63}, "
                 "{%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
                 : RS_D64
                 : "r"(f[0]), "r"(f[1]), "r"(f[2]), "r"(f[3]), "l"(db), "r"(acc));
}
// Accumulator fences: wgmma.fence before the first MMA of a stage, commit after its last, and the
// wait; each names the accumulators so the compiler keeps them in place around the async MMAs.
template <int NT> struct rs_acc;
template <> struct rs_acc<64> {
    static __device__ __forceinline__ void fence(float *d) { asm volatile("wgmma.fence.sync.aligned;\n" : RS_D32 ::"memory"); }
    static __device__ __forceinline__ void commit(float *d) { asm volatile("wgmma.commit_group.sync.aligned;\n" : RS_D32 ::"memory"); }
    static __device__ __forceinline__ void wait0(float *d) { asm volatile("wgmma.wait_group.sync.aligned 0;\n" : RS_D32 ::"memory"); }
};
template <> struct rs_acc<128> {
    static __device__ __forceinline__ void fence(float *d) { asm volatile("wgmma.fence.sync.aligned;\n" : RS_D64 ::"memory"); }
    static __device__ __forceinline__ void commit(float *d) { asm volatile("wgmma.commit_group.sync.aligned;\n" : RS_D64 ::"memory"); }
    static __device__ __forceinline__ void wait0(float *d) { asm volatile("wgmma.wait_group.sync.aligned 0;\n" : RS_D64 ::"memory"); }
};

// Byte t of code word w (codes k = 2t, 2t+1) as bf16 (s q + b) pair: exact q, then one rounding of
// s q + b (as qgemm_wg.cu's bf16-weight dequantisation).
__device__ __forceinline__ uint32_t rs_pair(uint32_t w, int t, uint32_t s2, uint32_t b2) {
    return wg_bf2_fma(wg_code_pair(w, w >> 4, t), s2, b2);
}

template <int NT, int WGS, int ABL>
__global__ void __launch_bounds__(128 * WGS, WGS == 2 ? 2 : 1) qgemm_rs_kernel(qg_args a, int swap) {
    using C = rs_cfg<NT, WGS>;
    constexpr int RS_ROWS = C::ROWS, THREADS = C::THREADS;
    extern __shared__ __align__(128) char smem[];
    int *a_row = (int *)(smem + RS_STAGES * C::STAGE);
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
    const int g = lane >> 2, t = lane & 3;
    const bool glu = a.epi == QG_GLU;
    const int n0 = wg_col_ix(a) * (glu ? RS_ROWS / 2 : RS_ROWS);

    int m0, rows, grp;
    if (!wg_block_rows(a, NT, &m0, &rows, &grp)) return;
    for (int r = tid; r < NT; r += THREADS) a_row[r] = r < rows ? (a.x_rows ? __ldg(a.x_rows + m0 + r) : m0 + r) : -1;
    __syncthreads();

    const long wrow0 = (long)grp * a.N, row_bytes = (long)a.K / 2;
    const int ng = a.K / a.w.group, KT = a.K / WG_BK, gshift = 31 - __clz(a.w.group);

    // Copy sources, fixed for the k loop. Activations: chunk i = tid + 256 it of the NT x 64 tile,
    // eight consecutive threads filling one core matrix (qgemm_wg.cu's A tile mapping).
    constexpr int XIT = NT * 8 / THREADS;
    const uint16_t *x_src[XIT];
    uint32_t x_ok = 0;
#pragma unroll
    for (int it = 0; it < XIT; it++) {
        const int i = tid + it * THREADS, r = (i >> 6) * 8 + (i & 7), c = (i >> 3) & 7, xr = a_row[r];
        x_src[it] = a.x + (xr >= 0 ? (long)xr * a.ldx + c * 8 : 0);
        x_ok |= (xr >= 0) << it;
    }
    const int x_dst = (tid >> 6) * 1024 + ((tid >> 3) & 7) * 128 + (tid & 7) * 16; // + it * THREADS * 16
    // Codes: row cr = tid / 2, 16-byte half tid % 2. Weight row cr of the block: column n0 + cr, or
    // (QG_GLU) gate (cr % 16 < 8) / up row of column n0 + 8 (cr / 16) + cr % 8.
    const int cr = tid >> 1, ch = tid & 1;
    const dq_mat &cm = (glu && (cr & 8)) ? a.w2 : a.w;
    const int cn = glu ? n0 + 8 * (cr >> 4) + (cr & 7) : n0 + cr;
    const bool c_ok = cn < a.N;
    const char *c_src = (const char *)cm.codes + (c_ok ? (wrow0 + cn) * row_bytes + ch * 16 : 0);
    const uint32_t *s_src = cm.sb + (c_ok ? (wrow0 + cn) * ng : 0); // read by threads with ch == 0

    auto load_stage = [&](int st, int kt) {
        char *xs = smem + st * C::STAGE, *cs = xs + C::X_BYTES;
        if (!(ABL & 2))
#pragma unroll
            for (int it = 0; it < XIT; it++) wg_cp16(xs + x_dst + it * THREADS * 16, x_src[it] + kt * WG_BK, (x_ok >> it) & 1);
        if (!(ABL & 4)) {
            wg_cp16(cs + cr * RS_CODE_LD + ch * 16, c_src + kt * 32, c_ok);
            if (!ch) wg_cp4(cs + C::C_BYTES + 4 * cr, s_src + ((kt * WG_BK) >> gshift), c_ok);
        }
    };
    // This thread's A fragments of one stage: weight rows R0 = 16 warp + g and R0 + 8, k16 step s:
    // f[4s + 0] = (R0, k 16s + 2t..+1) = byte t of word 2s of row R0; f[4s + 1] = the same of R0 + 8;
    // f[4s + 2], f[4s + 3]: word 2s + 1 (k + 8).
    const int R0 = 16 * warp + g;
    auto build = [&](int st, uint32_t (&f)[16]) {
        if (ABL & 1) {
#pragma unroll
            for (int i = 0; i < 16; i++) f[i] = 0x3F803F80u ^ (uint32_t)(st + i); // not foldable across stages
            return;
        }
        const char *cs = smem + st * C::STAGE + C::X_BYTES;
        const uint4 p0 = *(const uint4 *)(cs + R0 * RS_CODE_LD), p1 = *(const uint4 *)(cs + R0 * RS_CODE_LD + 16);
        const uint4 q0 = *(const uint4 *)(cs + (R0 + 8) * RS_CODE_LD), q1 = *(const uint4 *)(cs + (R0 + 8) * RS_CODE_LD + 16);
        uint32_t s0, b0, s1, b1;
        wg_sb_pairs(*(const uint32_t *)(cs + C::C_BYTES + 4 * R0), s0, b0);
        wg_sb_pairs(*(const uint32_t *)(cs + C::C_BYTES + 4 * (R0 + 8)), s1, b1);
        const uint32_t wa[8] = {p0.x, p0.y, p0.z, p0.w, p1.x, p1.y, p1.z, p1.w};
        const uint32_t wb[8] = {q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w};
#pragma unroll
        for (int s = 0; s < 4; s++) {
            f[4 * s + 0] = rs_pair(wa[2 * s], t, s0, b0);
            f[4 * s + 1] = rs_pair(wb[2 * s], t, s1, b1);
            f[4 * s + 2] = rs_pair(wa[2 * s + 1], t, s0, b0);
            f[4 * s + 3] = rs_pair(wb[2 * s + 1], t, s1, b1);
        }
    };

    float acc[C::NACC];
#pragma unroll
    for (int i = 0; i < C::NACC; i++) acc[i] = 0.0f;
    uint32_t fa[16], fb[16];
    const uint64_t dx0 = wg_desc(smem, 128, 1024, swap);

    // Stage kt's MMAs run while the next stage's copies are checked in, the copy three stages ahead
    // is issued and the next fragments are built; then they are retired (wait_group 0) before the
    // next stage's MMAs: an MMA issued while a stage whose inputs were just built is in flight would
    // make ptxas serialise them (C7513). Slots: kt (MMA), kt + 1 (built), kt + 2 and kt + 3 (copies).
#pragma unroll
    for (int s = 0; s < RS_STAGES - 1; s++) {
        if (s < KT) load_stage(s, s);
        wg_commit();
    }
    wg_cpwait<RS_STAGES - 2>();
    wg_fence_proxy();
    __syncthreads();
    build(0, fa);
    auto stage = [&](int kt, const uint32_t (&f)[16], uint32_t (&fn)[16]) {
        const int st = kt % RS_STAGES;
        rs_acc<NT>::fence(acc);
        if (!(ABL & 8))
#pragma unroll
            for (int s = 0; s < 4; s++)
                rs_mma<NT>(acc, f + 4 * s, dx0 + ((st * C::STAGE + s * 256) >> 4), kt > 0 || s > 0);
        rs_acc<NT>::commit(acc);
        if (kt + 1 < KT) {
            // Stage kt + 1 landed for every thread; every warpgroup has retired stage kt - 1, the
            // last reader of the slot the copy of stage kt + 3 refills.
            wg_cpwait<RS_STAGES - 3>();
            wg_fence_proxy();
            __syncthreads();
            if (kt + RS_STAGES - 1 < KT) load_stage((kt + RS_STAGES - 1) % RS_STAGES, kt + RS_STAGES - 1);
            wg_commit();
            build((kt + 1) % RS_STAGES, fn);
        }
        rs_acc<NT>::wait0(acc);
        wg_hold16(f);
    };
    for (int kt = 0; kt < KT; kt += 2) {
        stage(kt, fa, fb);
        if (kt + 1 < KT) stage(kt + 1, fb, fa);
    }
    wg_cpwait<0>();

    // Epilogue: acc[4j + 2h + e] = weight row R0 + 8h, activation row 8j + 2t + e of the tile.
#pragma unroll
    for (int j = 0; j < NT / 8; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            const int r = 8 * j + 2 * t + e;
            if (r >= rows) continue;
            if (glu) {
                const int col = n0 + 8 * warp + g;
                if (col < a.N) qg_store(a, m0 + r, col, acc[4 * j + e], acc[4 * j + 2 + e]);
            } else {
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    const int col = n0 + R0 + 8 * h;
                    if (col < a.N) qg_store(a, m0 + r, col, acc[4 * j + 2 * h + e], 0.0f);
                }
            }
        }
}

template <int NT, int WGS, int ABL> static void rs_launch_t(const qg_args &a, int grid_x, cudaStream_t st) {
    using C = rs_cfg<NT, WGS>;
    static bool attr = false;
    if (!attr) {
        cudaFuncSetAttribute(qgemm_rs_kernel<NT, WGS, ABL>, cudaFuncAttributeMaxDynamicSharedMemorySize, C::SMEM);
        attr = true;
    }
    const int cols = a.epi == QG_GLU ? C::ROWS / 2 : C::ROWS;
    dim3 grid(grid_x, (a.N + cols - 1) / cols);
    qgemm_rs_kernel<NT, WGS, ABL><<<grid, C::THREADS, C::SMEM, st>>>(a, lily_qg_wg_desc_swap);
}
template <int NT, int WGS> static void rs_launch_abl(const qg_args &a, int grid_x, cudaStream_t st) {
    switch (rs_abl) {
    case 1: rs_launch_t<NT, WGS, 1>(a, grid_x, st); break;
    case 2: rs_launch_t<NT, WGS, 2>(a, grid_x, st); break;
    case 7: rs_launch_t<NT, WGS, 7>(a, grid_x, st); break;
    case 8: rs_launch_t<NT, WGS, 8>(a, grid_x, st); break;
    default: rs_launch_t<NT, WGS, 0>(a, grid_x, st);
    }
}

bool qgemm_rs_on(void) { return lily_qg_rs && lily_qg_bf16w; }

void qgemm_rs_launch(const qg_args &a, int bm, int grid_x, cudaStream_t st) {
    if (rs_abl < 0) {
        const char *e = getenv("LILY_QG_RS_ABL"), *w = getenv("LILY_QG_RS_WGS");
        rs_abl = e ? atoi(e) : 0;
        rs_wgs = w && atoi(w) == 4 ? 4 : 2;
    }
    if (rs_wgs == 4) {
        if (bm == 128) rs_launch_abl<128, 4>(a, grid_x, st);
        else rs_launch_abl<64, 4>(a, grid_x, st);
    } else {
        if (bm == 128) rs_launch_abl<128, 2>(a, grid_x, st);
        else rs_launch_abl<64, 2>(a, grid_x, st);
    }
}
