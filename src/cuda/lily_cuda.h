// lily_cuda.h: CUDA-only entry points beyond struct lily_backend (forward_cuda.cu): generation and
// measurement loops that stay on the GPU, the ablation switches, and bench helpers. C linkage.
#ifndef LILY_CUDA_H
#define LILY_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

// Ablation switches; also read from the environment at init (LILY_CUDA_GRAPH, LILY_CUDA_ATTN_SPLIT,
// LILY_CUDA_GQA, LILY_CUDA_GDN_SPLIT, LILY_CUDA_F32ACT, LILY_CUDA_PREFILL, LILY_CUDA_CHUNK,
// LILY_CUDA_FA, LILY_CUDA_GEMV2, LILY_CUDA_GDN_CHUNKED, LILY_CUDA_ATTN_MULTI, LILY_CUDA_HOST_ROUTE,
// LILY_CUDA_SEP_DEQUANT, LILY_CUDA_WGMMA, LILY_CUDA_MOE_KS). Setting one drops captured graphs. The same
// switches are reachable by name through the backend's set_flag hook (`lily bench --ablate NAME`):
// graph, split_kv, gqa, gdn_split, pdl, bf16act (off = fp32 activations), prefill, flash, gemv2,
// gdn_chunked, attn_multi (on = the newer kernel: `--ablate flash` / `--ablate gdn_chunked` measure the older
// one; gemv2 is off by default, so `--ablate gemv2` with LILY_CUDA_GEMV2=1 measures the first GEMV),
// gpu_route (off = prefill routing on the host), fused_dequant (off = separate dequantisation),
// wgmma (off = the prefill GEMMs on mma.sync only), moe_split (off = one warp per expert down row pair).
enum lily_cuda_opt {
    LILY_CUDA_OPT_GRAPH = 0,      // 1 = the whole step as one CUDA graph (default), 0 = plain launches
    LILY_CUDA_OPT_ATTN_SPLIT = 1, // split-KV blocks per KV head (1 = no split); 0 = automatic (32, or 64 packed)
    LILY_CUDA_OPT_GQA = 2,        // 1 = one KV load serves all query heads of its group, 0 = never; -1 (default) =
                                  // from LILY_CUDA_ATTN_LONG positions on (40K; measured, docs/PERF.md)
    LILY_CUDA_OPT_GDN_SPLIT = 3,  // blocks per GDN value head (default 8)
    LILY_CUDA_OPT_F32ACT = 4,     // 1 = fp32 activations and fp32 KV cache (debug: the CPU backend's
                                  // function to ~1e-5); states keep the mode they were made in
    LILY_CUDA_OPT_PDL = 5,        // 1 = programmatic dependent launch + L2 weight prefetch (default)
    LILY_CUDA_OPT_PREFILL = 6,    // 1 = prompts of n > 1 tokens go through the prefill kernels in chunks
                                  // (bf16 activations only; default), 0 = the decode step token by token
    LILY_CUDA_OPT_CHUNK = 7,      // prefill chunk (tokens per pass; default 16384, LILY_CUDA_CHUNK)
    LILY_CUDA_OPT_FA = 8,         // 1 = prefill attention flash-tiled on the tensor cores (attn_flash.cu;
                                  // default), 0 = one warp per query, position by position (attn_prefill.cu)
    LILY_CUDA_OPT_GEMV2 = 9,      // 1 = 4-bit GEMVs on the tensor-core kernel gemv2 (LILY_CUDA_GEMV2;
                                  // default 1: +2 % at 4K and 32K, docs/PERF.md), 0 = the first GEMV kernel
    LILY_CUDA_OPT_GDN_CHUNKED = 10, // 1 = prefill GDN in the chunked tensor-core form for chunks of
                                   // >= 64 tokens (gdn_chunked.cu; default), 0 = the token-sequential scan
    LILY_CUDA_OPT_ATTN_MULTI = 11,  // 1 = decode attention takes 4 positions per warp pass (loads in
                                    // flight; default, LILY_CUDA_ATTN_MULTI), 0 = one position per pass
    LILY_CUDA_OPT_PF_CAP_KB = 12,   // fault injection (tests): a prefill scratch above this many KB
                                    // counts as out of GPU memory (LILY_CUDA_PF_MAX_KB; 0 = no cap)
    LILY_CUDA_OPT_HOST_ROUTE = 13,  // ablation: 1 = prefill MoE routing (softmax, top-k, offsets, sort)
                                    // on the CPU from the router logits, with a stream sync per layer
                                    // (LILY_CUDA_HOST_ROUTE; default 0 = on the GPU; flag gpu_route)
    LILY_CUDA_OPT_SEP_DEQUANT = 14, // ablation: 1 = the prefill's dense GEMMs dequantise W to bf16 in
                                    // device memory, then cuBLAS, then the epilogue (needs cuBLAS at
                                    // run time; grouped expert GEMMs stay fused) (LILY_CUDA_SEP_DEQUANT;
                                    // default 0 = fused; flag fused_dequant)
    LILY_CUDA_OPT_WGMMA = 15,       // 1 = prefill GEMMs with 4-bit weights (group % 64 == 0) on tiles of
                                    // 64/128 rows run on the warpgroup-MMA kernel (qgemm_wg.cu; default;
                                    // LILY_CUDA_WGMMA; flag wgmma), 0 = the mma.sync kernel (qgemm.cu)
    LILY_CUDA_OPT_MOE_KS = 16,      // decode: warps that split each row of the expert down products
                                    // (1, 2 or 4; default 4; LILY_CUDA_MOE_KS; flag moe_split: off = 1)
    LILY_CUDA_OPT_PDL_EARLY = 17,   // decode: 1 = each kernel lets the next launch as soon as its own
                                    // wait is over (pdl_wait_early, cuda_common.cuh), so the next one's
                                    // weight prefetch overlaps its whole run; 2 = the same, prefetching
                                    // only the first tile (LILY_CUDA_PDL_EARLY; flag pdl_early); 0 =
                                    // after the main loops
    LILY_CUDA_OPT_MOE_PF = 18,      // decode: 1 = the expert gate/up kernel prefetches the selected
                                    // experts' down matrices into L2 for the next launch
                                    // (LILY_CUDA_MOE_PF; flag moe_prefetch)
    LILY_CUDA_OPT_GV_PRO = 19,      // decode: 1 = gemv2's prologue loads x (and gain, z) into registers
                                    // in one round trip (default; LILY_CUDA_GV_PRO; flag gemv_pro_regs),
                                    // 0 = a loop per pass / per head
    LILY_CUDA_OPT_MOE_LAT = 20,     // decode: 1 = the MoE kernels' latency variants (top-k by warp
                                    // integer reductions; expert down: weights and residual requested
                                    // before its inputs are staged), same results bitwise
                                    // (LILY_CUDA_MOE_LAT; flag moe_lat; default 1)
    LILY_CUDA_OPT_GDN_LAT = 21,     // decode: 1 = the GDN step requests its conv weights, ring and first
                                    // state batch before waiting for the in_proj (same results
                                    // bitwise; LILY_CUDA_GDN_LAT; flag gdn_lat; default 1)
    LILY_CUDA_OPT_GV2_BULK = 22,    // decode: 1 = gemv2 requests each block's first tiles into shared
                                    // memory (cp.async.bulk) before waiting for the previous kernel
                                    // (same results bitwise; LILY_CUDA_GV2_BULK; flag gemv2_bulk)
    LILY_CUDA_OPT_ATTN_COMB = 23,   // decode: the split-KV combine's loads, 0 one after another, 1 in
                                    // batches of 8, 2 all of a dim's at once (default; same results
                                    // bitwise; LILY_CUDA_ATTN_COMB; flag attn_comb)
    LILY_CUDA_OPT_QG_BF16W = 24,    // prefill: 1 = the wgmma GEMM uses the weights rounded once to bf16,
                                    // rb(s q + b), as HF's bf16 model holds them, with no per-group fold
                                    // (default; LILY_CUDA_QG_BF16W; flag qg_bf16w); 0 = exact weights
                                    // (s q + b, folded per group of 64)
    LILY_CUDA_OPT_QG_RS = 25,       // prefill: 1 = the bf16-weight GEMM with the operands swapped
                                    // (qgemm_rs.cu: weights dequantised into the MMA's registers;
                                    // LILY_CUDA_QG_RS; flag qg_rs; default 0)
    LILY_CUDA_OPT_QG_WIDE = 26,     // prefill: bf16-weight GEMMs on 128-row tiles take 256 weight rows
                                    // a block (qgemm_wg.cu's wide tile): 1 = where it is faster
                                    // (default), 2 = always, 0 = never (LILY_CUDA_QG_WIDE; flag qg_wide)
    LILY_CUDA_OPT_QG_TMA = 27,      // prefill: 1 = the wide tile loads dense X rows and weight codes by
                                    // tensor-map copies (default; LILY_CUDA_QG_TMA; flag qg_tma)
    LILY_CUDA_OPT_MOE_GATHER = 28,  // prefill: 1 = the MoE gate|up rows copied into expert order so that
                                    // GEMM takes tensor-map loads (default; LILY_CUDA_MOE_GATHER; flag
                                    // moe_gather)
    LILY_CUDA_OPT_QG_TMA128 = 29,   // prefill: 1 = the 128-column bf16-weight tiles (128 and 64 rows) load
                                    // by tensor-map copies too, where the call fits the maps (default;
                                    // LILY_CUDA_QG_TMA128; flag qg_tma128), 2 = the 128-row ones only
    LILY_CUDA_OPT_MOE_FUSED = 30,   // decode: 1 = the routed experts and the shared expert's down
                                    // projection in one launch (moe_fused.cu; LILY_CUDA_MOE_FUSED;
                                    // flag moe_fused; default 1)
    LILY_CUDA_OPT_MOE_FRONT = 31,   // decode: 1 = the layer's out_proj (o_proj) and the norm + router +
                                    // shared gate/up run inside moe_fused's launch, each ending at a
                                    // grid barrier; 2 = the router only (LILY_CUDA_MOE_FRONT; flag
                                    // moe_front; same bits; default 0: measured slower, docs/PERF.md)
    LILY_CUDA_OPT_MOE_TAILS = 32,   // prefill: 1 = each MoE expert group's tail of 1..64 rows on a 64-row
                                    // tile of its own launch instead of a 128-row tile; 2 = the gate|up
                                    // GEMM's tails merged into 192-row tiles, 3 = both GEMMs' (moe_prefill.cu,
                                    // lily_moe_tails; LILY_CUDA_MOE_TAILS; flag moe_tails: 0 / 2;
                                    // default 2, measured in docs/PERF.md, twelfth session)
    LILY_CUDA_OPT_QG_FILL = 33,     // prefill: 1 = dense GEMMs on 64-row tiles where 128-row ones fill
                                    // under half the SMs (qgemm_fill_tile; LILY_CUDA_QG_FILL; flag
                                    // qg_fill; default 1)
    LILY_CUDA_OPT_FA_WG = 34,       // prefill: the flash attention at head_dim 256 on wgmma
                                    // (attn_flash_wg.cu): 0 = off (mma.sync), 1 = V transposed in
                                    // shared memory, 2 = V as an MN-major operand (LILY_CUDA_FA_WG;
                                    // flag fa_wg; default 2)
    LILY_CUDA_OPT_SNAP_DEV = 35,    // server: 1 = the prefix cache's snapshots in device memory where it
                                    // has room (default; LILY_CUDA_SNAP_DEV; flag snap_dev), 0 = in
                                    // host memory
    LILY_CUDA_OPT_PF_SIDE = 36,     // prefill: GEMMs that do not depend on the main chain run on a side
                                    // stream beside it (the GDN's z, b, a; the attention's k, v; the
                                    // shared expert), joined where their outputs are read: 1 = side
                                    // stream at a lower priority than the main one (default), 2 = the
                                    // same priority, 0 = all in line (LILY_CUDA_PF_SIDE; flag pf_side;
                                    // same bits in every mode)
    LILY_CUDA_OPT_QG_RASTER = 37,   // prefill: the order of the wgmma GEMM's blocks: 1 = a row tile's
                                    // column tiles side by side, so that X is read from memory once
                                    // (qgemm_wg.cu), 0 = a column tile's row tiles, 2 = 1 for grouped
                                    // calls only, 3 = dense only (LILY_CUDA_QG_RASTER; flag qg_raster;
                                    // default 1; same bits in every mode)
    LILY_CUDA_OPT_ATTN_TC = 38,     // decode: 1 = the GQA-packed attention on the tensor cores
                                    // (attn_tc.cu), packed at every context (attn_plan); 0 = the
                                    // CUDA-core kernels, packed from LILY_CUDA_ATTN_LONG positions on
                                    // (LILY_CUDA_ATTN_TC; flag attn_tc; default 1)
    LILY_CUDA_OPT_QG_WSW = 39,      // prefill: 1 = the wide tile's calls on the warp-specialised kernel
                                    // (qgemm_wsw.cu; same bits); 0 = qgemm_wg.cu's (LILY_CUDA_QG_WSW;
                                    // flag qg_wsw; default 1)
    LILY_CUDA_OPT_QG_WSP = 40,      // prefill: the MoE's grouped GEMMs on the persistent warp-specialised
                                    // kernel (qgemm_wsp.cu), a bit mask: 1 = the down projection (then
                                    // on the merged map: 192-row tiles), 2 = the gate|up
                                    // (LILY_CUDA_QG_WSP; flag qg_wsp; default 1)
    LILY_CUDA_OPT_QG_SPLITK = 41,   // prefill: 1 = dense GEMMs of at most 512 columns whose tiles would
                                    // leave SMs idle split K over several blocks (qgemm.cu, qgemm_splitk:
                                    // the router, GDN b and a, attention k and v of short prompts); 0 =
                                    // one block a tile walks all of K (LILY_CUDA_QG_SPLITK; flag
                                    // qg_splitk; default 1)
    LILY_CUDA_OPT_QG_GT = 42,       // prefill: 1 = the MoE down projection with the tokens on the MMA's
                                    // N side, each group's X resident in shared memory (qgemm_gt.cu),
                                    // where the groups average at least 16 rows (a narrow form below
                                    // 48); 2 = always; 0 = the tokens-as-M kernels (LILY_CUDA_QG_GT;
                                    // flag qg_gt; default 1)
    LILY_CUDA_OPT_GDN_WG = 43,      // prefill: 1 = the chunked GDN's phase B on the warpgroup MMA
                                    // (gdn_scan_wg.cu) where it takes the shape (Dk 128, 32 value
                                    // columns a block); 0 = on mma.sync (gdn_chunked.cu)
                                    // (LILY_CUDA_GDN_WG; flag gdn_wg; default 1)
    LILY_CUDA_OPT_QG_RW = 44,       // prefill: the weights as the MMA's register operand (qgemm_rw.cu)
                                    // where the call fits, a bit mask: 1 = the wide tile's dense calls
                                    // (else qgemm_wsw.cu), 2 = the MoE gate|up (else qgemm_wsp.cu), 4 =
                                    // the MoE down projection (else qgemm_gt.cu), 16 = dense calls too
                                    // few for the wide tile's rule, 32 = the grouped calls on the
                                    // folded map (a group's last 1..16 rows in its last full tile)
                                    // (LILY_CUDA_QG_RW; flag qg_rw; default 35; the same bits)
    LILY_CUDA_OPT_GDN_INPROJ = 45,  // prefill: 1 = the GDN in_proj's qkv, b and a rows as one GEMM over
                                    // their stacked weights (uploaded so where the three share a
                                    // format and the option is on at load; the scan reads b and a
                                    // beside qkv), 0 = three GEMMs, b and a on the side stream
                                    // (LILY_CUDA_GDN_INPROJ, which at 0 also uploads them apart; flag
                                    // gdn_inproj; default 1)
    LILY_CUDA_OPT_MOE_ACC = 46,     // decode: 1 = moe_fused adds the experts' outputs into a fixed-point
                                    // sum by integer atomics and ends there (no grid barrier, no
                                    // sums); the next layer's in_proj and out_proj (o_proj), or
                                    // lm_head, fold it into the residual (cuda_common.cuh mf_fold);
                                    // off with moe_front or LILY_CUDA_DUMP (LILY_CUDA_MOE_ACC; flag
                                    // moe_acc; default 1)
    LILY_CUDA_OPT_GDN_OUT = 47,     // decode, with MOE_ACC: 1 = the GDN layer's gated norm and out_proj in
                                    // gdn_step's launch (out_proj split over the heads, its rows added as
                                    // fixed-point sums that the router folds in), where gdn_out_takes;
                                    // 0 = out_proj a GEMV launch (LILY_CUDA_GDN_OUT; flag gdn_out;
                                    // default 0: within noise in a graph-replayed step)
    LILY_CUDA_OPT_ATTN_QK = 48,     // decode: 1 = the attention layer's q/k RMSNorm, RoPE and KV append inside
                                    // the tensor-core attention kernel (attn_tc.cu) where attn_qk_takes,
                                    // one launch fewer a layer; 0 = qk_norm_rope_append's own launch
                                    // (LILY_CUDA_ATTN_QK; flag attn_qk; default 1)
    LILY_CUDA_OPT_MOE_DSL = 49,     // decode: 1 = moe_fused reads its down slice from the slice-major copy of
                                    // the experts' down projections (two bulk copies, not ~4K tensor-map
                                    // rows), where it was built at load; 0 = from the row-major weights
                                    // (LILY_CUDA_MOE_DSL, which at 0 also builds none; flag moe_dsl; default 1)
    LILY_CUDA_OPT_GDN_FRONT = 50,   // decode: 1 = a GDN layer's in_proj and its step (conv, norms, delta rule) in
                                    // one launch, a group of blocks a k head meeting at a head barrier
                                    // (gdn_front.cu), where gdn_front_takes and gdn_out is off; 0 = two
                                    // launches (LILY_CUDA_GDN_FRONT; flag gdn_front; default 0: the
                                    // fused launch took 24 us against 14 + 6, decode -7 %, docs/PERF.md)
    LILY_CUDA_OPT_COUNT
};
int lily_cuda_set_opt(void *ctx, int opt, int value);
int lily_cuda_get_opt(void *ctx, int opt);
// Prefill scratch: bytes it takes for chunks of `chunk` tokens; the chunk capacity allocated now (0:
// none yet or none fits). When the asked chunk does not fit the free GPU memory it is halved down
// to 64 tokens; below that, prompts run token by token.
size_t lily_cuda_prefill_scratch_bytes(void *ctx, int chunk);
int lily_cuda_prefill_chunk(void *ctx);

// Run n decode steps starting from token `first` (at the state's position), each step's token
// chosen on the GPU (greedy when temp <= 0, else sampled at temperature temp with `seed`) and fed to
// the next step. out_ids[n] receives the chosen tokens; *nan_seen (if not NULL) is set when any
// logit of any step was NaN or infinite.
int lily_cuda_generate(void *ctx, void *state, int first, int n, float temp, unsigned seed,
                       int *out_ids, int *nan_seen);

// Bench helpers. Jump the state to position pos with random cache and state contents (so a decode
// step at context pos reads what it would after a real prefill).
int lily_cuda_state_fake_fill(void *ctx, void *state, int pos, unsigned seed);
// Seconds per decode step, the median of `reps` runs of `n` steps each.
double lily_cuda_time_steps(void *ctx, void *state, int n, int reps);
// Per-kernel-family time of one step (plain launches, an event after each): fills up to max names
// and times (microseconds); returns the number of families.
int lily_cuda_profile_step(void *ctx, void *state, const char **names, double *us, int max);
// Prefill of `tokens` from an empty state with an event after each phase: per-phase microseconds
// summed over chunks and layers into names/us (at most max), the plain pass's ms in *total_ms (timed
// after an untimed warm-up pass).
// Returns the number of phases or a negative error; the state is left reset.
int lily_cuda_profile_prefill(void *ctx, void *state, const int *tokens, int n, const char **names,
                              double *us, int max, double *total_ms);
// Device-to-device copy bandwidth (bytes read + written per second) over `bytes`.
double lily_cuda_copy_bandwidth(size_t bytes);
// Bytes of weights uploaded.
long lily_cuda_weight_bytes(void *ctx);
// The layers whose experts' down projections have a slice-major copy (LILY_CUDA_OPT_MOE_DSL).
int lily_cuda_dsl_layers(void *ctx);

#ifdef __cplusplus
}
#endif
#endif
