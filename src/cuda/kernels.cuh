// kernels.cuh: launch wrappers of the decode kernels, one family per file (gemv.cu, moe.cu, gdn.cu,
// attn.cu, norm_rope.cu, sample.cu). forward_cuda.cu chains them into a step; tests/gpu/ checks each
// against a CPU reference. All take a stream and return nothing: errors surface at the next check.
#pragma once

// ---- gemv.cu: y = W x for one activation row, several matrices sharing x in one launch ---------
enum { GV_STORE = 0, GV_RESID = 1, GV_LOGITS = 2 };   // epilogues
enum { PRO_PLAIN = 0, PRO_RMSNORM = 1, PRO_GATED = 2 }; // prologues (how x is prepared)
#define GV_MAX_SEG 4
struct gv_seg {
    dq_mat m;
    float *y;          // output (rows); GV_LOGITS: may be NULL (argmax only)
    const float *res;  // GV_RESID: y = round(res + round(W x)); may alias y
    int tiles;         // filled by gemv_launch
    int lpr;           // lanes per row (filled by gemv_launch)
    int ks;            // gemv2: warps sharing a 16-row tile's columns; 0 = lane path (filled by gemv_launch)
};
struct gv_args {
    gv_seg seg[GV_MAX_SEG];
    int nseg, cols;
    const float *x;      // input (cols), fp32
    int pro;
    const float *norm_w; // PRO_RMSNORM gain (cols) / PRO_GATED gain (ghd)
    float eps;
    const float *gz;     // PRO_GATED: z (cols); x is per-head normed over ghd values
    int ghd;
    float *x_out;        // if set, block 0 stores the prepared input (cols) here
    int epi;
    float2 *amax;        // GV_LOGITS: per block (best value, best row as int bits)
    float temp;          // GV_LOGITS: 0 = greedy, else Gumbel-max sampling at this temperature
    unsigned seed;
    const int *pos;      // GV_LOGITS: position (device), mixed into the sampling noise
    int *nan_flag;       // GV_LOGITS: set to 1 when a logit is NaN or infinite (may be NULL)
    int pro_regs;        // filled by gemv_launch from lily_cuda_gv_pro
    int bulk;            // filled by gemv_launch from lily_cuda_gv2_bulk
    // The MoE's fixed-point sum (cuda_common.cuh mf_fold; LILY_CUDA_MOE_ACC): acc[0, H) and the flag acc[H].
    const unsigned long long *acc_x; // PRO_RMSNORM: if set, x[c] is folded with acc_x[c] (cols == H)
    float *x_res_out;                // PRO_RMSNORM: if set, block 0 stores the folded x (before the norm) here
    unsigned long long *acc_res;     // GV_RESID, one segment of H rows: if set, res[row] is folded with
                                     // acc_res[row], which is then zeroed (the flag stays)
};
// Launch; returns the grid size used (GV_LOGITS needs it to size amax). max_blocks 0 = default.
int gemv_launch(gv_args a, int max_blocks, cudaStream_t st);
// What gemv_launch decides before launching: each segment's lpr, ks and tiles (as above), pro_regs
// and bulk from the switches, the launch's tile count into *total_tiles; returns gemv2's group size
// (0: the launch runs the first kernel). moe_fused's front phases plan with it, so each row's sum
// is split as a separate gemv2 launch splits it (the same bits).
int gemv_plan(gv_args &a, int *total_tiles);
// The device's SM count (asked once; 132 when the runtime does not say).
int cuda_sm_count(void);
int gemv_max_blocks(void);
// 1 = gemv_launch uses gemv2_kernel (tensor-core 4-bit path) where a segment allows it (default 0;
// forward_cuda.cu sets it per step from LILY_CUDA_OPT_GEMV2, the tests set it directly).
extern int lily_cuda_gemv2;
// 1 = gemv2's prologue loads x (and gain, z) into registers in one round trip where the shape
// allows (default; LILY_CUDA_GV_PRO), 0 = the per-pass loops (the first kernel always uses those).
extern int lily_cuda_gv_pro;
// 1 = gemv2 requests each block's first tiles into shared memory (cp.async.bulk) before waiting for
// the previous kernel (LILY_CUDA_GV2_BULK; same results bitwise).
extern int lily_cuda_gv2_bulk;
// attn.cu: 1 = several positions per warp pass (loads in flight) on the D = 256 bf16 path (default).
extern int lily_cuda_attn_multi;
// attn.cu: the split-KV combine's loads: 0 serial, 1 in batches of 8, 2 all at once (default; LILY_CUDA_ATTN_COMB;
// same results).
extern int lily_cuda_attn_comb;

// ---- moe.cu ------------------------------------------------------------------------------------
struct moe_w {
    dq_mat gate, up, down;     // stacked over experts: (E*I, H), (E*I, H), (E*H, I)
    int n_experts, topk, inter, hidden, norm_topk;
    // down again, slice-major for moe_fused (LILY_CUDA_MOE_DSL; NULL without): slice j (columns 32 j ..
    // 32 j + 31) of expert e is H 16-byte code chunks at dsl_codes + (e * I / 32 + j) * H, and the scale
    // word of each row's group at dsl_sb + (e * I / 32 + j) * H (moe_dsl_build).
    const uint4 *dsl_codes;
    const uint32_t *dsl_sb;
};
// Router softmax + top-k on the GPU, then h[k] = silu(gate_e x) * (up_e x) for the k selected
// experts. Writes ids (topk) and weights (topk) for moe_down.
void moe_gate_up(const moe_w &w, const float *router_logits, const float *x, float *h, int *ids,
                 float *wts, cudaStream_t st);
// out = res + sum_k wts[k] down_{ids[k]} h[k] + sigmoid(*sh_score) * sh_down (silu(sg) * su).
// sh_down may have rows 0 (no shared expert).
// moe_down's split of each row's chunks over 1, 2 or 4 warps (LILY_CUDA_MOE_KS; default 4).
extern int lily_cuda_moe_ks;
// 1 = moe_gate_up prefetches the selected experts' down matrices into L2 (LILY_CUDA_MOE_PF).
extern int lily_cuda_moe_pf;
// 1 = the latency variants: top-k by warp integer reductions, moe_down's first weight loads and
// residual read before its inputs are staged (LILY_CUDA_MOE_LAT; same results bitwise).
extern int lily_cuda_moe_lat;
void moe_down(const moe_w &w, const float *h, const int *ids, const float *wts, dq_mat sh_down,
              const float *sg, const float *su, const float *sh_score, const float *res, float *out,
              cudaStream_t st);
// moe_fused.cu: moe_gate_up + moe_down in one launch (LILY_CUDA_MOE_FUSED): a block per (selected
// expert, 32 of its intermediate values), split-K partial outputs added after a grid barrier; the
// same out (and ids, wts). part: moe_fused_part_floats(w) floats of scratch; bar: 2 counters, zero
// before the first launch (each launch leaves the first zero). moe_fused_takes: the shapes and
// formats it takes (4-bit, one group size, rows of whole 128-column steps, a grid of at most one
// block an SM); moe_fused does nothing for others.
// front (nfront <= MF_MAX_FRONT GEMV launches, as they would be passed to gemv_launch): run by the
// same launch before the MoE, in order, each ending at a grid barrier (LILY_CUDA_MOE_FRONT: the
// layer's out_proj or o_proj, then the norm + router + shared gate/up). Their outputs are written as
// the separate launches write them, bitwise; the MoE's input is then the last phase's prepared x
// (x is not read). Taken when each runs on gemv2 with the experts' group size, the register
// prologue and no logits epilogue, and the last one has `hidden` columns.
#define MF_MAX_FRONT 2
bool moe_fused_takes(const moe_w &w, const dq_mat &sh_down, const gv_args *front, int nfront);
size_t moe_fused_part_floats(const moe_w &w);
// 1 = moe_fused's down slice comes by tensor-map copies (default; LILY_CUDA_MOE_FUSED_TMA; same results
// bitwise as 0, 16-byte loads into registers).
extern int lily_cuda_moe_fused_tma;
extern int lily_cuda_dev_mf_fixed; // LILY_CUDA_DEV_MF_FIXED: a diagnostic (moe_fused.cu mf_shape.fixed)
// The slice-major copy of w.down (moe_w.dsl_*) in one new allocation (*mem, for cudaFree), built on the
// device from w.down; false (w unchanged, nothing allocated) where moe_fused does not take w's shapes
// or the copy would leave less than keep_free bytes of GPU memory free.
bool moe_dsl_build(moe_w *w, void **mem, size_t keep_free, cudaStream_t st);
void moe_fused(const moe_w &w, const gv_args *front, int nfront, const float *router_logits, const float *x, int *ids,
               float *wts, dq_mat sh_down, const float *sg, const float *su, const float *sh_score, const float *res,
               float *out, float *part, unsigned *bar, cudaStream_t st, unsigned long long *acc = nullptr,
               unsigned long long *zero = nullptr);
// acc (LILY_CUDA_MOE_ACC; no front): the launch adds the routed and shared experts' outputs into acc
// (hidden + 1 words, cuda_common.cuh mf_acc_add) with integer atomics and ends there: no grid barrier,
// res and out are not touched. acc must hold zeros (and the flag 0) before the launch; the next
// readers of the residual fold it in (gv_args acc_x, acc_res). zero (with acc; may be NULL): another
// sum of hidden + 1 words, set to zero after the launch's wait (its readers are done).

// ---- gdn.cu: one Gated DeltaNet step --------------------------------------------------------
struct gdn_dims { int hk, hv, dk, dv, kconv; };
// qkv (C), b (Hv), a (Hv): projections of this token. conv_ring: (K, C) raw inputs, slot p % K
// holds position p. state: (Hv, Dv, Dk) fp32. Writes o (Hv*Dv), the delta-rule read-out (bf16-rounded).
// out (LILY_CUDA_GDN_OUT; NULL: none): the gated RMSNorm and out_proj in the same launch, out_proj's rows
// added into out->acc as fixed-point sums (cuda_common.cuh mf_acc_add; acc must hold zeros), to be folded
// into the residual by the next reader (gv_args acc_x). o is written as without it. Taken where
// gdn_out_takes says (4-bit out_proj of H x Hv*Dv rows, Dv a multiple of 32 up to 128 with Dv / 8 a power
// of two, the gated norm's head Dv, groups of whole chunks, every block resident).
struct gdn_out_args {
    const float *z;           // (Hv * Dv) the z projection
    const float *gnorm;       // (Dv) the gated norm's gain
    float eps;
    dq_mat wo;                // out_proj (H x Hv * Dv)
    unsigned long long *acc;  // (H + 1) out_proj's fixed-point sums and flag
    unsigned *hbar;           // 2 words a v head, zero before the first launch (each launch leaves them so)
    int H;
    // The residual the layer's router will read (one sum to fold there, not two): x_out = x with pend
    // folded in (pend NULL: x), pend then zeroed; each block its share of the H rows.
    const float *x;
    unsigned long long *pend;
    float *x_out;
    int rps;                  // rows a split block takes (filled by gdn_step)
};
bool gdn_out_takes(gdn_dims d, int nsplit, const dq_mat &wo, int H, int ghd);
void gdn_step(gdn_dims d, const float *qkv, const float *b, const float *a, const float *conv_w,
              const float *dt_bias, const float *A, float *conv_ring, float *state, float *o,
              const int *pos, int nsplit, cudaStream_t st, const gdn_out_args *out = nullptr);
// gdn_front.cu (LILY_CUDA_GDN_FRONT): the layer's in_proj (a: gemv_launch's arguments for it, the segments
// qkv, z, b, a) and gdn_step at split GF_BLOCKS / (hv / hk) in one launch, a group of blocks a k head; the
// same outputs, bitwise (qkv, z, b, a stored; o, ring and state as gdn_step leaves them). Taken where
// gdn_front_takes: gemv2's 16-row tiles for every segment, head dims of whole tiles, every block resident.
struct gdn_front_args {
    gdn_dims d;
    const float *conv_w, *dt_bias, *A;
    float *ring, *state, *o;
    const int *pos;
    unsigned *hbar; // 2 words a k head, zero before the first launch (each launch leaves them so)
};
bool gdn_front_takes(gv_args a, const gdn_dims &d);
void gdn_front(gv_args a, const gdn_front_args &f, cudaStream_t st);

// 1 = the latency variant: weights, ring and the first state batch requested before the wait
// (LILY_CUDA_GDN_LAT; same results bitwise).
extern int lily_cuda_gdn_lat;

// ---- norm_rope.cu --------------------------------------------------------------------------
// Full-attention prologue: q heads (from q_proj's [q|gate] per head) normed + RoPE into q_out
// (Hq*D); k normed + RoPE and v appended to the caches at *pos (bf16, layout (Hkv, max_ctx, D)).
// kv_f32: cache elements are fp32 (LILY_CUDA_F32ACT mode) instead of bf16.
struct attn_dims { int hq, hkv, d, rope_dim, max_ctx; float theta, eps; int kv_f32; };
void qk_norm_rope_append(attn_dims d, const float *qg, const float *k, const float *v,
                         const float *q_norm, const float *k_norm, float *q_out, void *kc,
                         void *vc, const int *pos, cudaStream_t st);
// x = embedding row of *tok (quantised or dense); acc, if set, acc_words zeroed (the step's fixed-point
// sums and their flags, forward_cuda.cu).
void embed_row(const dq_mat &qm, const void *dense, int dense_dt, int hidden, const int *tok,
               float *x, cudaStream_t st, unsigned long long *acc = nullptr, int acc_words = 0);

// ---- attn.cu --------------------------------------------------------------------------------
// Attention of the current query over cache positions 0..*pos (inclusive), split over nsplit blocks
// per KV head (flash-decoding); part holds nsplit partial results; the combine multiplies by
// sigmoid(gate) (gate taken from qg) and writes o (Hq*D). gqa_pack 0 = one query head per block.
void attn_decode(attn_dims d, const float *q, const void *kc, const void *vc,
                 const float *qg, float *part, float *o, const int *pos, int nsplit, int gqa_pack,
                 cudaStream_t st);
size_t attn_part_floats(attn_dims d, int nsplit);
// attn_tc.cu: the packed layout's partials on the tensor cores (attn_decode takes it when gqa_pack is
// set and attn_tc_takes; LILY_CUDA_ATTN_TC, lily_cuda_attn_tc).
extern int lily_cuda_attn_tc;
bool attn_tc_takes(attn_dims d);
// False (nothing launched) when the cache cannot be described by a tensor map. qk (may be NULL): see below.
struct attn_qk_in {
    const float *qg, *k, *v, *q_norm, *k_norm; // q_proj's [q | gate] per head, k_proj, v_proj, the two norms' gains
};
bool attn_tc_partials(attn_dims d, const float *q, const void *kc, const void *vc, float *part, const int *pos,
                      int nsplit, cudaStream_t st, const attn_qk_in *qk = nullptr);
// LILY_CUDA_ATTN_QK: qk_norm_rope_append's work inside the tensor-core kernel (q is then not read: the kernel
// prepares its heads from qk->qg; the new position's k and v rows are written to the caches there), where
// attn_qk_takes (attn_tc_takes, RoPE's rope_dim a multiple of 32 up to 128). attn_decode_qk: those partials
// and the combine, as attn_decode's; false (nothing launched) where it does not take the shapes.
bool attn_qk_takes(attn_dims d);
bool attn_decode_qk(attn_dims d, const attn_qk_in &qk, void *kc, void *vc, float *part, float *o, const int *pos,
                    int nsplit, cudaStream_t st);
// The most splits a step asks for: the partials are sized for it, and the parallel combine takes it.
#define ATTN_MAX_SPLIT 256

// ---- sample.cu ------------------------------------------------------------------------------
// Reduce the lm_head blocks' (value, row) pairs: *tok = best row; ids_out[*step] = it when ids_out;
// then advance *pos and *step.
void sample_finish(const float2 *amax, int nblocks, int *tok, int *ids_out, int *step, int *pos,
                   cudaStream_t st);

// ---- topk.cu --------------------------------------------------------------------------------
// The k largest logits (k <= LILY_TOPK_MAX), descending, ties by lower id (lily_backend.step_topk):
// into out (device: k floats, k ints, then their count: fewer than k only for NaN logits), through
// scratch of topk_scratch_bytes(V) device bytes. Two launches on st; no host synchronisation. With
// temperature > 0 also the softmax's mass relative to the largest logit (a double at out + 8 k + 8).
size_t topk_scratch_bytes(int V);
// A request's logit edits (sampler_edits: bias, penalties; device memory) applied to logits in place, in
// order: the first n_bias (sorted by id, repeats adjacent), then the rest (distinct ids); a thread for
// each id's run of entries. Two launches on st.
int logit_edits_launch(float *logits, const struct sampler_edit *edits, int n, int n_bias, cudaStream_t st);
int topk_launch(const float *logits, int V, int k, void *scratch, void *out, cudaStream_t st, float temperature = 0.0f);

// ---- mode setters (cuda_common.cuh, LILY_CUDA_MODE_SETTER), one per file of the decode step ------
void gemv_set_modes(int f32act, int pdl_early);
void moe_set_modes(int f32act, int pdl_early);
void moe_fused_set_modes(int f32act, int pdl_early);
void gdn_set_modes(int f32act, int pdl_early);
void gdn_front_set_modes(int f32act, int pdl_early);
void attn_set_modes(int f32act, int pdl_early);
void norm_rope_set_modes(int f32act, int pdl_early);
void sample_set_modes(int f32act, int pdl_early);

#ifdef LILY_TRACE
void gemv_set_trace(unsigned long long *p);
void moe_fused_set_trace(unsigned long long *p);
void moe_set_trace(unsigned long long *p);
void gdn_set_trace(unsigned long long *p);
#endif
