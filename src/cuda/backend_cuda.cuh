// backend_cuda.cuh: the CUDA backend's private state, shared by its files: the context's upload
// (upload_cuda.cu), states and snapshots (state_cuda.cu), the decode step and the backend table
// (forward_cuda.cu) and the chunked prefill (prefill_cuda.cu). Not a public interface: lily_cuda.h is
// the C surface.
#pragma once

#include <vector>

#include "prefill.cuh"

extern "C" {
#include "backend.h"
}
#include "lily_cuda.h"

// ---------------------------------------------------------------------------------------------
struct dev_layer {
    int full;
    const float *in_norm, *post_norm;
    dq_mat qkv, z, b, a, out;
    dq_mat qkvba; // qkv, b, a stacked (rows 0.., C.., C + Hv..; the three above are views of it), or rows 0
    const float *conv, *dt_bias, *A, *gnorm;
    dq_mat q, k, v, o;
    const float *q_norm, *k_norm;
    dq_mat router, sh_gate, sh_up, sh_down, sh_score;
    moe_w moe;
};

struct cuda_state;

// Prefill scratch for chunks of up to C tokens, one allocation per context (made at the first prefill,
// remade when the chunk option changes); its size does not depend on the prompt length.
struct pf_bufs {
    int C;                                 // chunk capacity allocated (may be below the asked one)
    int want;                              // the chunk asked for when it was allocated
    size_t cap;                            // the fault-injection cap it was allocated under (0 = none)
    void *mem;
    int *toks;
    float *x;                              // (C, H) residual stream (fp32 holding bf16 values)
    uint16_t *xn;                          // (C, H) normed input of the projections / the MoE
    uint16_t *qkv, *z, *b, *a, *o, *g;     // GDN projections, scan output, gated-norm output; o is
                                           // also the attention output
    float *qg, *k, *v, *qr;                // attention projections and the normed, rotated queries
    float *gdn;                            // gdn_pf_chunked's records and conv outputs (gdn_chunked.cu)
    float *part[2];                        // split-K partial sums of the main / side stream (qgemm.cu;
                                           // qgemm_splitk_cap() floats each)
    moe_pf_scratch moe;
};

struct cuda_ctx {
    const lily_model *m;
    lily_config c;
    std::vector<dev_layer> L;
    std::vector<void *> dsl_mem; // the layers' slice-major down copies (moe_dsl_build), for cudaFree
    dq_mat embed_q;
    const void *embed_dense;
    int embed_dt;
    const float *final_norm;
    dq_mat lm_head;
    char *arena;
    size_t arena_size, arena_used;
    // scratch activations (shared by all states: one stream serialises them)
    float *x, *x2, *xn, *qkv, *z, *b, *a, *o, *qg, *kk, *vv, *qr, *part, *rl, *sg, *su, *ss, *h, *wts,
        *logits;
    int *ids, *nan_flag;
    float *mf_part;   // moe_fused's partial outputs (topk * (moe_inter / 32) + 1 rows of hidden)
    unsigned *mf_bar; // and its grid barrier (2 counters)
    unsigned long long *mf_acc; // LILY_CUDA_OPT_MOE_ACC / GDN_OUT: two fixed-point sums of hidden + 1 words
                                // (the MoE's output, out_proj's; forward_cuda.cu enqueue_step)
    unsigned *gdn_hbar;         // gdn_step's head barriers (LILY_CUDA_OPT_GDN_OUT, 2 words a v head) or gdn_front's (2 a k head)
    float2 *amax;
    int amax_n;
    char *tk_mem; // step_topk's scratch, then its output (k values, k ids, the count); made at first use
    struct sampler_edit *ed_host, *ed_dev; // step_topk's logit edits (pinned, device), ed_cap of each
    int ed_cap;
    cudaStream_t st;       // the main stream (created at the highest priority)
    cudaStream_t side[2];  // prefill side streams (LILY_CUDA_OPT_PF_SIDE 1, 2): lowest priority, highest
    cudaEvent_t pf_ev[3];  // their fork / join events
    int opt[LILY_CUDA_OPT_COUNT];
    int opt_gen; // bumped when an option changes: graphs captured under older options are stale
    // Decode attention by context: from attn_long_from positions on (LILY_CUDA_ATTN_LONG, default
    // 40K) the step packs GQA at 64 splits (attn_plan); step_long says which the step being enqueued is.
    int attn_long_from, step_long;
    int dump;    // LILY_CUDA_DUMP=1: print per-layer residual-stream RMS to stderr (plain launches)
    size_t peak; // most device memory held at once (weights + scratch + states)
    // staging for uploads and host copies
    char *pin[2];
    cudaEvent_t pin_ev[2];
    int pin_i;
    size_t uploaded, upload_total, next_report;
    double t_start;
    // profiling (lily_cuda_profile_step)
    int prof;
    std::vector<cudaEvent_t> prof_ev;
    std::vector<const char *> prof_name;
    pf_bufs pf;
    int pf_warned; // the token-by-token fallback was announced
    // Prefill ablations, made at first use only while their switch is on, freed with the context:
    moe_pf_host host_route; // LILY_CUDA_OPT_HOST_ROUTE: pinned staging of the routing
    qg_sep sep;             // LILY_CUDA_OPT_SEP_DEQUANT: cuBLAS handle, bf16 weights, fp32 products
};

struct cuda_state {
    int max_ctx, pos;
    int kv_f32;                     // KV elements are fp32 (made under LILY_CUDA_OPT_F32ACT)
    std::vector<void *> kc, vc;     // per layer (NULL for GDN layers)
    std::vector<float *> ring, S;   // per layer (NULL for attention layers)
    int *d_tok, *d_pos, *d_step, *d_ids;
    int ids_cap;
    int *h_tok;   // pinned
    float *h_log; // pinned, V floats
    cudaGraphExec_t graph[2][2]; // [long context][0: argmax only, 1: also writes logits]
    int graph_gen[2][2];
    float temp;
    unsigned seed;
    std::vector<void *> allocs;
};

// upload_cuda.cu: the context (lily_backend.init / .free) and the peak-memory bookkeeping.
int init_cuda(const lily_model *m, void **out);
void free_ctx(void *p);
void note_mem(cuda_ctx *cx); // device memory in use now, kept as cx->peak

// state_cuda.cu: lily_backend's state and snapshot entries, and the state's captured graphs.
int state_new_cuda(void *ctx, int max_ctx, void **out);
void state_free_cuda(void *ctx, void *p);
void state_reset_cuda(void *ctx, void *p);
int state_pos_cuda(void *ctx, void *p);
size_t save_size_cuda(void *ctx, void *p);
int save_cuda(void *ctx, void *p, void *dst);
int load_cuda(void *ctx, void *p, const void *src, size_t n);
void *snap_save_cuda(void *ctx, void *p, size_t *bytes);
int snap_load_cuda(void *ctx, void *p, void *snap);
void snap_free_cuda(void *ctx, void *snap);
void drop_graphs(cuda_state *s); // destroy the state's captured step graphs (recaptured at next use)

// forward_cuda.cu, used by the prefill path too.
void prof_mark(cuda_ctx *cx, const char *name);            // an event on the stream when profiling
int prof_collect(cuda_ctx *cx, const char **names, double *us, int max); // events -> us per name
void dump_rows(cuda_ctx *cx, const float *dx, const int *dids, int l); // LILY_CUDA_DUMP line
int apply_precision(cuda_ctx *cx, cuda_state *s);

// prefill_cuda.cu
bool prefill_usable(cuda_ctx *cx, cuda_state *s); // can this state's prompts take the chunked path
int pf_alloc(cuda_ctx *cx);                       // the scratch (0, or LILY_ENOMEM when nothing fits)
size_t pf_scratch_pending(cuda_ctx *cx);          // bytes the scratch will take at the next prompt (0 if made)
int forward_chunks(cuda_ctx *cx, cuda_state *s, const int *tokens, int n, float *logits, int all_logits);
