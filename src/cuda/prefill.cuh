// prefill.cuh: launch wrappers of the prefill kernels (many tokens per call): the fused-dequant GEMM
// on the tensor cores (qgemm.cu), GPU routing and the grouped expert GEMMs (moe_prefill.cu), and the
// Gated DeltaNet scan over a chunk (gdn_prefill.cu). Activations between prefill kernels are bf16
// rows (uint16_t bit patterns); the residual stream stays fp32 holding bf16 values, as in decode.
// Weights are the decode backend's upload (dq_mat, cuda_common.cuh) unchanged: no second copy.
#pragma once

#include "cuda_common.cuh"

// Prefill profiling (lily_cuda_profile_prefill): while set, called after each phase of a chunk with
// the phase's name, to record an event on the stream; NULL otherwise (one load per phase).
extern void (*lily_pf_prof_hook)(const char *name);
#define PF_MARK(name) do { if (lily_pf_prof_hook) lily_pf_prof_hook(name); } while (0)

// ---- side streams (prefill_cuda.cu, moe_prefill.cu): stream `to` waits for the work enqueued on
// `from` so far through event e (reusable once waited on): pf_record on from, then pf_await on to.
static inline int pf_record(cudaEvent_t e, cudaStream_t from) {
    CU_TRY(cudaEventRecord(e, from));
    return 0;
}
static inline int pf_await(cudaStream_t to, cudaEvent_t e) {
    CU_TRY(cudaStreamWaitEvent(to, e, 0));
    return 0;
}
static inline int pf_wait(cudaStream_t to, cudaStream_t from, cudaEvent_t e) {
    int rc = pf_record(e, from);
    return rc ? rc : pf_await(to, e);
}

// ---- qgemm.cu: Y[M,N] = X[M,K] . W[N,K]^T, W quantised (4 or 8 bits, group 32/64/128) ----------
// Epilogues (what is written for output element (row, col) with fp32 accumulator acc):
enum {
    QG_BF16 = 0,       // bf16(acc)
    QG_F32 = 1,        // fp32 rb(acc) (a bf16 value, like the decode GEMV's GV_STORE)
    QG_F32_RAW = 2,    // fp32 acc, unrounded
    QG_RESID = 3,      // fp32 rb(res + rb(acc)); res may alias y
    QG_GLU = 4,        // bf16 rb(rb(silu(rb(gate))) * rb(up)); gate from w, up from w2 (same shape)
    QG_SCALE_BF16 = 5  // bf16 rb(scale[out_row] * rb(acc)) (routing weight of an expert row)
};
struct qg_args {
    const uint16_t *x;  // A: bf16 rows of K values, row stride ldx elements
    int ldx;
    const int *x_rows;  // gather: sorted row p reads x row x_rows[p] (NULL: row p)
    dq_mat w, w2;       // B: w rows = n_groups * N (grouped) or N; w2 = up matrix for QG_GLU
    int M, N, K;        // M: rows (dense); N: output columns; K % 64 == 0
    const int *grp_off;  // grouped mode: [n_groups + 1] first sorted row of each group (NULL: dense)
    const int *tile_off; // grouped mode: [n_groups + 1] first tile of each group (tiles of tile_m rows)
    const int *grp_end;  // grouped mode: [n_groups] end of each group's rows in this launch (NULL:
                         // grp_off[g + 1]); the MoE's tail tiles run as a launch of their own (moe_pf_tails)
    int n_groups;
    int epi;
    void *y;            // output, row stride ldy elements
    int ldy;
    const int *y_rows;  // scatter: sorted row p is written to output row y_rows[p] (NULL: row p)
    const float *scale; // QG_SCALE_BF16: per output row
    const float *res;   // QG_RESID
    int raster;         // wgmma kernels: 1 = launched as (column tiles, row tiles), so that the blocks of one
                        // row tile run side by side and its X rows come from L2 (set by the launcher,
                        // lily_qg_raster; qgemm_wg.cu)
    float *part;        // dense calls: scratch of part_cap floats for split-K partial sums (qgemm_splitk;
    long part_cap;      // NULL: the call never splits); a stream's calls may share it (one at a time)
    long split_off;     // set by qgemm_launch on a split call's parts: floats between two parts' outputs
    int tile_rest;      // grouped mode, tile_m 192 (the wgmma kernel of 3 warpgroups): a group's tiles start
                        // every 128 rows and its last tile takes every row left, up to 192 (the MoE's
                        // merged tails, moe_pf_merged_tiles); set by qgemm_launch
};
// QG_GLU's element: rb(silu(rb(gate))) * rb(up), before the output's bf16 rounding (every qgemm path).
__device__ __forceinline__ float qg_glu(float gate, float up) { return rb(silu_f(rb(gate))) * rb(up); }

// The epilogue of one output element: row p of the product (sorted row in grouped mode), column n,
// fp32 accumulator acc (gate for QG_GLU) and acc2 (up, QG_GLU only). Shared by every qgemm path that
// finishes one element at a time (the generic kernel, the separate-dequantisation ablation).
__device__ __forceinline__ void qg_store(const qg_args &a, int p, int n, float acc, float acc2) {
    const int orow = a.y_rows ? a.y_rows[p] : p;
    const long at = (long)orow * a.ldy + n;
    switch (a.epi) {
    case QG_BF16: ((uint16_t *)a.y)[at] = lily_f32_to_bf16(acc); break;
    case QG_F32: ((float *)a.y)[at] = rb(acc); break;
    case QG_F32_RAW: ((float *)a.y)[at] = acc; break;
    case QG_RESID: ((float *)a.y)[at] = rb(a.res[at] + rb(acc)); break;
    case QG_GLU: ((uint16_t *)a.y)[at] = lily_f32_to_bf16(qg_glu(acc, acc2)); break;
    case QG_SCALE_BF16: ((uint16_t *)a.y)[at] = lily_f32_to_bf16(a.scale[orow] * rb(acc)); break;
    }
}
// tile_m: 16, 32, 64 or 128 rows per block (0 = chosen from M / n_groups). max_tiles: grouped mode
// only, an upper bound of tile_off[n_groups] (blocks past the real count exit at once).
// Returns 0, or LILY_EINVAL for shapes it does not take (K % 64, bits, group, N odd).
int qgemm_launch(const qg_args &a, int tile_m, int max_tiles, cudaStream_t st);
int qgemm_pick_tile(int rows_per_group);
// The MoE's grouped GEMMs on 128-row tiles, with each expert group's tail of 1..64 rows past its last
// whole 128 rows on a 64-row tile, in a second launch (moe_prefill.cu): at 4K tokens a group holds
// ~128 +- 11 rows, so every other one ended in a 128-row tile of a few rows. lily_moe_tails: 1 = on
// (LILY_CUDA_MOE_TAILS, option LILY_CUDA_OPT_MOE_TAILS, flag moe_tails; this variable's own 0 is
// what kernel tests start from); 2 (the engine's default) = the gate|up GEMM's tails merged into the
// group's last 128-row tile (one launch of 192-row tiles of 3 warpgroups: a tail's weights are
// dequantised once with the rows before it, not again by a tile of its own), the down GEMM's on their
// own launch; 3 = both merged (the down GEMM's 192-row tiles, one block an SM, measured slower).
extern int lily_moe_tails;
// Tiles of a group of c rows in the merged map (lily_moe_tails 2, 3): 128-row tiles, the last one
// taking the tail of 1..64 rows as well (65..192 rows), or one tile for a group of 1..64.
LILY_HD int moe_pf_merged_tiles(int c) {
    const int r = c & 127, tail = r >= 1 && r <= 64 ? r : 0;
    return c <= 0 ? 0 : c - tail <= 0 ? 1 : (c - tail + 127) / 128;
}
// How many times the MoE block's shared expert was enqueued (tests: once per block, whichever stream;
// a join that fell through to the in-line branch once ran it twice, docs/PERF.md eleventh session).
extern unsigned long lily_moe_pf_shared_runs;
LILY_HD bool moe_pf_tails_on(int tails, int tile_m) { return tails && tile_m == 128; }
// Tiles of a group of c rows in the folded map (qgemm_rw.cu, lily_qg_rw bit 32): every 128 rows, a last
// remainder of 1..16 rows after a full tile folded into it (a last tile of up to 144 rows).
LILY_HD int moe_pf_fold_tiles(int c) {
    const int r = c & 127, tail = c > 128 && r >= 1 && r <= 16 ? r : 0;
    return c <= 0 ? 0 : (c - tail + 127) / 128;
}
// Rows of a group of c rows that go to the 64-row tail tile (0: none; the 128-row tiles take the rest).
LILY_HD int moe_pf_tail_rows(int c) {
    const int r = c & 127;
    return r >= 1 && r <= 64 ? r : 0;
}
// A dense call's tile height: bm, lowered to 64 while 128-column blocks would fill under half the SMs
// (lily_qg_fill 0: off; option LILY_CUDA_OPT_QG_FILL, LILY_CUDA_QG_FILL, flag qg_fill; default 1, and
// this variable's own 1 is what kernel tests run). qgemm_launch applies it when it picks the height
// itself (tile_m 0).
extern int lily_qg_fill;
int qgemm_fill_tile(int M, int N, int bm);
// A tile height every pick returns (16/32/64/128; 0 = none; -1 = not read yet: LILY_CUDA_QG_TILE).
extern int lily_qg_tile_force;
// Split-K for thin dense calls (qgemm.cu): with lily_qg_splitk set (option LILY_CUDA_OPT_QG_SPLITK,
// LILY_CUDA_QG_SPLITK, flag qg_splitk; engine default 1; this variable's own 0 is what kernel tests
// start from), a dense call of at most 512 columns given a.part, with a plain epilogue (bf16, fp32,
// raw, residual), whose tiles would leave SMs idle, runs as qgemm_splitk_parts(...) blocks a tile, each
// over a range of whole 64-k stages into fp32 partial sums, then one pass adds the parts in order and
// applies the epilogue. Returns the number of parts (1 = not split) for a call; 2 forces a split of
// every call that qualifies by shape (tests). A split call multiplies by the exact weights (the
// mma.sync kernel's per-group fold), where the unsplit 4-bit call may take the bf16-rounded ones
// (lily_qg_bf16w): both within the fixtures' tolerances.
extern int lily_qg_splitk;
int qgemm_splitk_parts(const qg_args &a, int *bm);
// Floats of partial sums a stream's split calls need at most (the caller's a.part; the same for every
// chunk size, so the chunk never changes a call's part count or bits).
long qgemm_splitk_cap(void);

// ---- qgemm_wg.cu: the same products on the warpgroup MMA (wgmma) for 4-bit weights, group % 64 == 0,
// tiles of 64 or 128 rows; qgemm_launch sends every call it takes there while lily_qg_wgmma is set
// (LILY_CUDA_OPT_WGMMA, bench flag "wgmma"; default on). lily_qg_wg_desc_swap (tests only) swaps the
// two byte offsets of the shared-memory descriptors.
extern int lily_qg_wgmma, lily_qg_wg_desc_swap;
// 1 = the wgmma kernel multiplies by the weights rounded once to bf16, rb(s q + b) (what the HF
// reference holds for a 4-bit checkpoint), accumulated over all of K with no per-group fold; 0 = the
// exact weights (LILY_CUDA_QG_BF16W; option LILY_CUDA_OPT_QG_BF16W; the engine sets it from the
// option, default 1; this variable's own initial value 0 is what kernel tests start from).
extern int lily_qg_bf16w;
// The wide tile (256 columns a block, one block an SM) for bf16-weight calls on 128-row tiles: 0 =
// never, 1 = where it measured faster (qgemm_wide_takes: a wave of blocks at least), 2 = always
// (tests). Option LILY_CUDA_OPT_QG_WIDE (LILY_CUDA_QG_WIDE, flag qg_wide; engine default 1); this
// variable's own initial value 0 is what kernel tests start from.
extern int lily_qg_wide;
bool qgemm_wide_takes(const qg_args &a, int grid_x);
// 1 = the MoE gate|up rows are copied into expert order first where that GEMM takes tensor-map loads
// (moe_prefill.cu; LILY_CUDA_MOE_GATHER, option LILY_CUDA_OPT_MOE_GATHER, flag moe_gather; engine
// default 1; this variable's own 0 is what kernel tests start from).
extern int lily_moe_gather;
// 1 = the wide tile loads X and the codes of dense calls by tensor-map copies (TMA); 0 = cp.async
// (LILY_CUDA_QG_TMA; option LILY_CUDA_OPT_QG_TMA; flag qg_tma; default 1).
extern int lily_qg_tma;
// 1 = the 128-column bf16-weight tiles (128 and 64 rows) load by tensor map as well, where the call
// fits the maps; 2 = the 128-row tiles only (LILY_CUDA_QG_TMA128; option LILY_CUDA_OPT_QG_TMA128; flag
// qg_tma128; engine default 1; this variable's own 0 is what kernel tests start from). The 128-row
// tiles: prefill 4K +3.4 %, 512 +11 % (docs/PERF.md).
extern int lily_qg_tma128;
// The order of the wgmma GEMM's blocks (qgemm_wg.cu): 1 = a row tile's column tiles one after another
// (launched as (column tiles, row tiles): they run side by side and read their X tile from L2 once
// it is there), 0 = a column tile's row tiles (the grid as (row tiles, column tiles)), 2 = rastered
// for grouped calls only, 3 = dense only. Same tiles, same bits. LILY_CUDA_QG_RASTER, option
// LILY_CUDA_OPT_QG_RASTER, flag qg_raster; engine default 1, this variable's own 0 is what kernel
// tests start from.
extern int lily_qg_raster;
// 1 = the wide tile's dense and in-order calls (128 rows, tensor maps) on the warp-specialised kernel
// (qgemm_wsw.cu: a producer warpgroup dequantises, two consumer warpgroups multiply; the same bits).
// LILY_CUDA_QG_WSW, option LILY_CUDA_OPT_QG_WSW, flag qg_wsw; this variable's own 0 is what kernel
// tests start from.
extern int lily_qg_wsw;
// The weights as the MMA's register operand (qgemm_rw.cu: 256 weight rows x 128 tokens a block, a producer
// thread issuing every copy by tensor map, two consumer warpgroups building their A fragments from the
// codes), a bit mask: 1 = those dense calls, where they fit; 2 = the MoE gate|up, 4 = the MoE down
// projection (grouped, on the plain map, a tile's tokens padded to 16); 16 = dense calls on 128-row
// tiles too few for the wide tile's rule; 32 = the MoE GEMMs on the folded map (a group's last 1..16 rows
// in its last full tile, up to 144 tokens a block). (8, the gate|up gathering its own rows, lost; branch
// s24-knobs.) LILY_CUDA_QG_RW, option LILY_CUDA_OPT_QG_RW, flag qg_rw; engine
// default 35; this variable's own 0 is what kernel tests start from.
extern int lily_qg_rw;
extern long lily_qg_rw_launches; // qgemm_rw.cu's launches so far (tests)
// A grouped call (a.tile_off: a plain map of 128-row tiles, max_tiles its bound) on qgemm_rw.cu, where its bit
// of lily_qg_rw is set (2 the MoE gate|up, QG_GLU; 4 the down projection) and it fits; false otherwise.
bool qgemm_rw_grouped_launch(const qg_args &a, int max_tiles, cudaStream_t st);
// The MoE's grouped GEMMs on the merged map (192-row tiles) on the persistent warp-specialised kernel
// (qgemm_wsp.cu), a bit mask: 1 = the down projection (which then takes the merged map too, whatever
// lily_moe_tails >= 2 says), 2 = the gate|up. LILY_CUDA_QG_WSP, option LILY_CUDA_OPT_QG_WSP, flag
// qg_wsp; engine default 1; this variable's own 0 is what kernel tests start from.
extern int lily_qg_wsp;
// Whether a grouped call goes to that kernel: its bit is set and its groups average at most 256 rows
// (chunks up to 8K tokens at top-8 of 256 experts). With more, qgemm_wg.cu's 128-row tiles are as fast
// or faster: the down projection of a 16K-token chunk 43.82 -> 44.27 ms, of 8K 23.95 -> 22.21, of 4K
// 13.78 -> 11.73 (pfprof, docs/PERF.md, sixteenth session).
static inline bool qgemm_wsp_takes(const qg_args &a) {
    return (lily_qg_wsp & (a.epi == QG_GLU ? 2 : 1)) && a.tile_off && (long)a.M <= 256L * a.n_groups;
}
bool qgemm_wg_takes(const qg_args &a, int bm);
void qgemm_wg_launch(const qg_args &a, int bm, int grid_x, cudaStream_t st);
// qgemm_rs.cu: the bf16-weight calls with the operands swapped (weights dequantised into the MMA's
// register operand, activations from shared memory); taken first when qgemm_rs_on(): lily_qg_rs
// (LILY_CUDA_QG_RS, option LILY_CUDA_OPT_QG_RS) and lily_qg_bf16w both set.
extern int lily_qg_rs;
bool qgemm_rs_on(void);
void qgemm_rs_launch(const qg_args &a, int bm, int grid_x, cudaStream_t st);
// qgemm_gt.cu: the MoE's grouped down projection with the tokens on the MMA's N side (groups padded
// to 16 rows, not 64) and each group's X resident in shared memory (K <= 512, rows in group order,
// bf16 weights, QG_SCALE_BF16 scattered by y_rows). lily_qg_gt: 0 = off (this variable's own value,
// what kernel tests start from), 1 = the engine's default: the wide form where the groups average at
// least 48 rows (chunks of 1.5K tokens and up), the narrow form (pieces of at most 64 rows, two blocks an
// SM) from 16 rows, none below; 2 = always, the wide form (tests); LILY_CUDA_QG_GT, option
// LILY_CUDA_OPT_QG_GT, flag qg_gt. lily_qg_gt_parts / _nmax / _narrow (tests; 0 = the default): column
// parts a group, rows a piece at most, the narrow form always (LILY_QG_GT_NARROW); _async: 0 the default
// (a stage of MMAs kept in flight while the next one's fragments are built; LILY_QG_GT_ASYNC=0 turns it
// off), 1 on, 2 off (each stage retired before the next).
extern int lily_qg_gt, lily_qg_gt_parts, lily_qg_gt_nmax, lily_qg_gt_narrow, lily_qg_gt_async;
bool qgemm_gt_takes(const qg_args &a);
int qgemm_gt_launch(const qg_args &a, cudaStream_t st);
// qgemm_ws.cu: the same calls in warp-specialised form (a producer warp pair, one or two consumer
// warpgroups, mbarriers); taken instead of qgemm_wg_launch when qgemm_ws_on() (lily_qg_ws; -1 =
// read LILY_CUDA_QG_WS at the first call; default 0: not yet run on a GPU).
extern int lily_qg_ws;
bool qgemm_ws_on(void);
void qgemm_ws_launch(const qg_args &a, int bm, int grid_x, cudaStream_t st);

// ---- qgemm_sep.cu: the same dense products with separate dequantisation (ablation) ------------
// LILY_CUDA_OPT_SEP_DEQUANT (bench flag "fused_dequant" off): W is first dequantised to a bf16 copy in
// device memory (w = s*q + b rounded to bf16), then multiplied through cuBLAS (bf16 in, fp32
// accumulate) into an fp32 buffer, then an element-wise kernel applies the epilogue. Dense calls only:
// grouped (MoE expert) and gathered calls go to qgemm_launch unchanged (dequantising all experts of a
// layer separately is out of scope). Scratch is allocated on first use and grows; none when unused.
struct qg_sep {
    void *blas;          // cublasHandle_t, made at the first call
    uint16_t *w;         // bf16 weights (QG_GLU: gate rows then up rows)
    float *y;            // fp32 products (QG_GLU: gate columns then up columns per row)
    size_t w_cap, y_cap; // elements allocated
};
// Make sure the handle exists and the scratch holds w_elems weights and y_elems products (frees and
// reallocates after a stream sync when it must grow). LILY_EBACKEND when cuBLAS cannot be loaded.
int qgemm_sep_reserve(qg_sep *s, size_t w_elems, size_t y_elems, cudaStream_t st);
int qgemm_sep(qg_sep *s, const qg_args &a, cudaStream_t st);
void qgemm_sep_free(qg_sep *s);

// ---- moe_prefill.cu: the MoE block for T tokens ------------------------------------------------
struct moe_pf_w {
    dq_mat router;                   // (E, H), 8-bit in the community checkpoints
    dq_mat gate, up, down;           // stacked over experts: (E*I, H), (E*I, H), (E*H, I)
    dq_mat sh_gate, sh_up, sh_down;  // (Is, H), (Is, H), (H, Is); rows 0 = no shared expert
    dq_mat sh_score;                 // (1, H) or rows 0
    int E, topk, I, H, Is, norm_topk;
};
// Device scratch for up to t_max tokens (carved from one allocation by moe_pf_scratch_init).
struct moe_pf_scratch {
    float *logits;      // (t_max, E) router logits, bf16-rounded fp32
    int *ids;           // (t_max, topk) selected experts
    float *wts;         // (t_max, topk) routing weights (bf16-rounded)
    int *counts;        // (E) rows per expert
    int *cursor;        // (E) scatter cursors
    int *grp_off;       // (E + 1) sorted-row offsets
    int *tile_off;      // (E + 1) tile offsets for the chosen tile height (of the 128-row launch when
                        // moe_pf_tails: over each group's first grp_mid[e] - grp_off[e] rows)
    int *grp_mid;       // (E) moe_pf_tails: where each group's tail of 1..64 rows starts (else its end)
    int *tile_off_b;    // (E + 1) moe_pf_tails: tile offsets of the tails' 64-row launch (0 or 1 a group)
    int *tile_off_m;    // (E + 1) tile offsets of the merged map (moe_pf_merged_tiles a group)
    int *tile_off_p;    // (E + 1) tile offsets of the plain map: 128-row tiles over whole groups (qgemm_rw.cu)
    int *tile_off_q;    // (E + 1) tile offsets of the folded map (moe_pf_fold_tiles a group; qgemm_rw.cu)
    int *sorted_tok;    // (t_max*topk) token of each sorted row
    int *sorted_pair;   // (t_max*topk) token*topk + slot of each sorted row
    uint16_t *h;        // (t_max*topk, I) bf16 expert hidden rows, sorted order
    uint16_t *yk;       // (t_max*topk, H) bf16 weighted expert outputs, (token, slot) order
    uint16_t *sh_h;     // (t_max, Is) bf16 shared expert hidden
    float *sh_y;        // (t_max, H) fp32 shared expert output (raw)
    float *sh_s;        // (t_max) shared gate logit (rb)
    int t_max;
    // Ablations, NULL (set by moe_pf_scratch_init) for the default path; the caller owns both:
    struct moe_pf_host *host; // LILY_CUDA_OPT_HOST_ROUTE: routing on the host (moe_pf_route_host)
    qg_sep *sep;              // LILY_CUDA_OPT_SEP_DEQUANT: router and shared expert via qgemm_sep
    // Side stream (LILY_CUDA_OPT_PF_SIDE; NULL = in line): moe_pf_forward runs the shared expert on it,
    // beside the router, the routing and the routed GEMMs, and joins before the combine. The caller
    // owns the stream and both events (ev[0] fork, ev[1] join).
    cudaStream_t side;
    cudaEvent_t ev[2];
    // Split-K scratch for the router's GEMM (qgemm_splitk_parts; the main stream's, set by the caller;
    // NULL = never split).
    float *part;
    long part_cap;
    // The next layer's input norm, fused into the combine (NULL = not): with next_norm set, the
    // combine also writes next_xn = rmsnorm(out) * next_norm (bf16, pf_rmsnorm_rows' bits), so the
    // caller skips that launch. next_xn may be the xn this call read: the combine runs after its last
    // reader (the GEMMs and the side stream's shared expert, joined before it).
    const float *next_norm;
    float next_eps;
    uint16_t *next_xn;
};
// Host routing staging: pinned memory, made at the first use and grown as needed.
struct moe_pf_host {
    void *pin;
    size_t cap;
};
size_t moe_pf_scratch_bytes(const moe_pf_w &w, int t_max);
void moe_pf_scratch_init(moe_pf_scratch *s, void *base, const moe_pf_w &w, int t_max);
// Routing only (router logits already in s->logits): softmax + top-k + renormalise per token, the
// per-expert histogram, exclusive scans (rows and tiles of tile_m), the scatter into expert groups.
void moe_pf_route(const moe_pf_w &w, int T, int tile_m, moe_pf_scratch *s, cudaStream_t st);
// The same on the CPU (ablation "gpu_route" off): logits down (stream sync), the route kernels'
// arithmetic in their order, ids, weights, counts, offsets and the sorted rows back up. Returns 0 or
// a negative LILY_E* code.
int moe_pf_route_host(const moe_pf_w &w, int T, int tile_m, moe_pf_scratch *s, cudaStream_t st);
// The whole block: out = res + routed experts + sigmoid-gated shared expert, for T <= t_max tokens of
// xn (bf16, already post-attention-normed). tile_m 0 = chosen from the average rows per expert.
// out may alias res. Returns 0 or a negative LILY_E* code.
int moe_pf_forward(const moe_pf_w &w, const uint16_t *xn, int T, const float *res, float *out,
                   moe_pf_scratch *s, int tile_m, cudaStream_t st);
// The parts of moe_pf_forward: the tile height it picks for T tokens, and everything after routing
// (grouped GEMMs, shared expert, combine); tile_m must be the one moe_pf_route used.
int moe_pf_tile(const moe_pf_w &w, int T);
int moe_pf_experts(const moe_pf_w &w, const uint16_t *xn, int T, const float *res, float *out,
                   moe_pf_scratch *s, int tile_m, cudaStream_t st);

// ---- gdn_prefill.cu: the Gated DeltaNet mixer core for a chunk of T tokens ---------------------
// What a chunk reads from the layer's in_proj, bf16: the raw conv inputs qkv (T, C) at row stride ldq
// and the beta and decay logits b, a (T, Hv) at row stride ldg. The engine's in_proj writes all three
// as one (T, C + 2 Hv) array (one GEMM over the stacked rows qkv|b|a): ldq = ldg = C + 2 Hv, b and a at
// columns C and C + Hv; apart, ldq = C and ldg = Hv.
struct gdn_in {
    const uint16_t *qkv, *b, *a;
    int ldq, ldg;
};
// conv_ring (K, C) fp32 raw inputs (slot p % K holds position p: the decode layout); state (Hv, Dv,
// Dk) fp32; pos = position of token 0. Writes o (T, Hv*Dv) bf16 (the delta-rule read-out) and
// advances ring and state exactly as T decode steps would. nsplit: blocks per v head (Dv columns
// split; 0 = default 4).
void gdn_pf_scan(gdn_dims d, int T, int pos, gdn_in in, const float *conv_w, const float *dt_bias, const float *A,
                 float *conv_ring, float *state, uint16_t *o, int nsplit, cudaStream_t st);
// The ring update alone (the last K raw inputs of the chunk into their slots), as gdn_pf_scan does it
// after its scan; the chunked form below uses it too.
void gdn_pf_ring(gdn_dims d, int T, int pos, const uint16_t *qkv, int ldq, float *conv_ring, cudaStream_t st);
// gdn_chunked.cu: the same function as gdn_pf_scan (same arguments, outputs, ring and state), in the
// chunked form of spec §4 (chunks of 64 tokens, products on the tensor cores in 3xTF32, see the
// file's comment): a conv pass over all channels, a parallel kernel over (chunk, v head) that
// writes each chunk's state-independent matrices to `scratch`, then a sequential kernel over the
// chunks that carries the state. scratch (records, then the T x C conv outputs in bf16): device
// memory of gdn_pf_chunked_scratch(d, T) bytes (0 for the shapes it does not take), no initial
// contents needed. nsplit: blocks per v head for the sequential kernel (<= 0: Dv / 32 rounded up;
// columns a block rounded up to 16, at most 64). Takes Dk <= 128 with Dk and the conv channels
// multiples of 8, and any Dv; other shapes go to gdn_pf_scan. Used by
// the prefill path for chunks of >= 64 tokens unless LILY_CUDA_GDN_CHUNKED=0
// (LILY_CUDA_OPT_GDN_CHUNKED, bench flag "gdn_chunked").
size_t gdn_pf_chunked_scratch(gdn_dims d, int T);
void gdn_pf_chunked(gdn_dims d, int T, int pos, gdn_in in, const float *conv_w, const float *dt_bias, const float *A,
                    float *conv_ring, float *state, uint16_t *o, float *scratch, int nsplit, cudaStream_t st);
// The chunked form's conv pass alone (the tests' GDN references read its outputs): cv (T x C bf16
// bits) = conv + SiLU of every channel, the ring read and not advanced; the same bits as the scan's
// and the decode step's conv (gdn_pf.cuh).
void gdn_pf_conv_out(gdn_dims d, int T, int pos, gdn_in in, const float *conv_w, const float *conv_ring, uint16_t *cv,
                     cudaStream_t st);
// Whether the sequential kernel runs on the warpgroup MMA (gdn_scan_wg.cu) where it takes the shape
// (Dk 128, 32 value columns a block): LILY_CUDA_GDN_WG, option LILY_CUDA_OPT_GDN_WG, flag gdn_wg;
// default 1, this variable's too, so the kernel tests start from it.
extern int lily_gdn_wg;
// Gated RMSNorm per v head (spec §2.1b) of o with gate z, bf16 in, bf16 out (out_proj's input).
void gdn_pf_gated_norm(int T, int hv, int dv, const uint16_t *o, const uint16_t *z,
                       const float *gnorm, float eps, uint16_t *out, cudaStream_t st);

// ---- small row kernels (moe_prefill.cu) ------------------------------------------------------
// y (T, n) bf16 = rb(x * rsqrt(mean(x^2) + eps) * w) per row of fp32 x.
void pf_rmsnorm_rows(int T, int n, const float *x, const float *w, float eps, uint16_t *y,
                     cudaStream_t st);

// ---- attn_prefill.cu: embedding, attention prologue and causal attention for T tokens ----------
// x (T, hidden) fp32 = embedding rows of toks[0..T) (device ints).
void pf_embed(const dq_mat &qm, const void *dense, int dense_dt, int hidden, const int *toks, int T,
              float *x, cudaStream_t st);
// The decode prologue (kernels.cuh qk_norm_rope_append) for T tokens at positions pos0 + t: qg
// (T, hq*2D), k and v (T, hkv*D) fp32; q_out (T, hq*D); K/V appended to the caches.
void pf_qk_norm_rope_append(attn_dims d, int T, int pos0, const float *qg, const float *k,
                            const float *v, const float *q_norm, const float *k_norm, float *q_out,
                            void *kc, void *vc, cudaStream_t st);
// o (T, hq*D) bf16 = sigmoid(gate) * softmax(q k^T / sqrt(D)) v, query t over cache [0, pos0 + t].
void pf_attention(attn_dims d, int T, int pos0, const float *q, const void *kc, const void *vc,
                  const float *qg, uint16_t *o, cudaStream_t st);

// ---- attn_flash.cu: the same attention, flash-tiled on the tensor cores -----------------------
// Same arguments, semantics and rounding points as pf_attention except P, which enters the P.V MMA in
// bf16 (see the file's comment). Row tiles of (token, query head) of one KV group share each K/V tile.
// Takes the bf16 KV cache with D % 16 == 0 and D <= 256; anything else goes to pf_attention.
// Used by the prefill path when LILY_CUDA_FA=1 (LILY_CUDA_OPT_FA, bench flag "flash"; default on).
void pf_attention_flash(attn_dims d, int T, int pos0, const float *q, const void *kc, const void *vc,
                        const float *qg, uint16_t *o, cudaStream_t st);
// ---- attn_flash_wg.cu: the same at head_dim 256 on wgmma (sm_90a) -----------------------------
// pf_attention_flash takes it for the shapes pf_attention_wg_takes (bf16 cache, D = 256) while
// lily_fa_wg is not 0: 1 = V transposed in shared memory for P V, 2 = V read as an MN-major operand
// (option LILY_CUDA_OPT_FA_WG, LILY_CUDA_FA_WG, flag fa_wg; engine default 2; this variable's own 0
// is what kernel tests start from). Same rounding points as fa_kernel.
extern int lily_fa_wg;
bool pf_attention_wg_takes(attn_dims d);
// False when it could not take the call (no tensor-map encoder, unaligned cache): nothing launched.
bool pf_attention_wg(attn_dims d, int T, int pos0, const float *q, const void *kc, const void *vc, const float *qg,
                     uint16_t *o, cudaStream_t st);
