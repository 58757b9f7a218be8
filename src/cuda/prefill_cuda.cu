// prefill_cuda.cu: the CUDA backend's prompt path. forward(tokens, n > 1) runs the prompt in chunks
// of up to LILY_CUDA_CHUNK tokens (default 16384) through the prefill kernels (prefill.cuh: fused-dequant
// GEMMs, the chunked GDN, flash attention, grouped MoE with GPU routing), all layers of one chunk
// enqueued on the context's stream with no host synchronisation, and leaves the state exactly where
// T decode steps would. The scratch is one allocation per context, sized by the chunk, never by the
// prompt. Also the prefill profiler (lily-gpu-test pfprof).
#include <algorithm>

#include "backend_cuda.cuh"

bool prefill_usable(cuda_ctx *cx, cuda_state *s) {
    const lily_config *c = &cx->c;
    // bf16 activations only (the prefill kernels' inputs are bf16 rows); the GDN scan holds Dk / 4
    // state values per thread in float4 slices.
    return cx->opt[LILY_CUDA_OPT_PREFILL] && !s->kv_f32 && c->lin_k_dim % 4 == 0 && c->n_experts <= 512;
}

static moe_pf_w layer_moe(const cuda_ctx *cx, const dev_layer *d) {
    const lily_config *c = &cx->c;
    moe_pf_w w;
    memset(&w, 0, sizeof w);
    w.router = d->router, w.gate = d->moe.gate, w.up = d->moe.up, w.down = d->moe.down;
    w.sh_gate = d->sh_gate, w.sh_up = d->sh_up, w.sh_down = d->sh_down, w.sh_score = d->sh_score;
    w.E = c->n_experts, w.topk = c->n_experts_tok, w.I = c->moe_inter, w.H = c->hidden;
    w.Is = d->sh_gate.rows, w.norm_topk = c->norm_topk;
    return w;
}

// Prefill scratch for chunks of C tokens: the buffers' sizes in pf_bufs order (PF_NBUF of them; the
// last two are the split-K partial sums of the main and the side stream, qgemm_splitk_cap floats each).
#define PF_NBUF 17
static size_t pf_sizes(cuda_ctx *cx, size_t C, size_t *sizes) {
    const lily_config *c = &cx->c;
    const size_t T = C, H = c->hidden, conv = lily_conv_dim(c), vd = (size_t)c->lin_v_heads * c->lin_v_dim;
    const size_t ad = (size_t)c->n_heads * c->head_dim, kd = (size_t)c->n_kv_heads * c->head_dim;
    const gdn_dims gd = {c->lin_k_heads, c->lin_v_heads, c->lin_k_dim, c->lin_v_dim, c->conv_kernel};
    size_t moe = 0;
    for (int l = 0; l < c->n_layers; l++) {
        size_t b = moe_pf_scratch_bytes(layer_moe(cx, &cx->L[l]), (int)C);
        moe = b > moe ? b : moe;
    }
    // qkv's buffer holds the stacked in_proj's b and a columns too (conv + 2 Hv a row).
    const size_t sz[] = {T * 4, T * H * 4, T * H * 2, T * (conv + 2 * (size_t)c->lin_v_heads) * 2, T * vd * 2,
                         T * c->lin_v_heads * 2, T * c->lin_v_heads * 2, T * (vd > ad ? vd : ad) * 2, T * vd * 2, T * 2 * ad * 4,
                         T * kd * 4, T * kd * 4, T * ad * 4, moe, gdn_pf_chunked_scratch(gd, (int)C),
                         (size_t)qgemm_splitk_cap() * 4, (size_t)qgemm_splitk_cap() * 4};
    static_assert(sizeof sz / sizeof sz[0] == PF_NBUF, "pf_bufs");
    size_t total = 0;
    for (int i = 0; i < PF_NBUF; i++) sizes[i] = sz[i], total += (sz[i] + 255) & ~(size_t)255;
    return total;
}

// The chunk the scratch is made for: the option, within 1 .. 16384.
static int pf_chunk_wanted(cuda_ctx *cx) {
    const int want = cx->opt[LILY_CUDA_OPT_CHUNK];
    return want < 1 ? 1 : want > 16384 ? 16384 : want;
}

size_t pf_scratch_pending(cuda_ctx *cx) {
    if (cx->pf.mem || cx->pf.C < 0) return 0;
    size_t sizes[PF_NBUF];
    return pf_sizes(cx, pf_chunk_wanted(cx), sizes);
}

// The prefill scratch, allocated at the first prompt (and again when the chunk option changes).
// When the asked chunk does not fit in the free GPU memory, halve it down to 64 tokens with one
// warning: slower, but the prompt runs; only when even that fails is it LILY_ENOMEM, and
// forward_cuda then runs the prompt token by token (no scratch). Scratch never grows with the prompt.
int pf_alloc(cuda_ctx *cx) {
    const int want = pf_chunk_wanted(cx);
    const size_t cap = (size_t)(cx->opt[LILY_CUDA_OPT_PF_CAP_KB] > 0 ? cx->opt[LILY_CUDA_OPT_PF_CAP_KB] : 0) << 10;
    if (cx->pf.want == want && cx->pf.cap == cap) {
        if (cx->pf.mem) return 0;
        if (cx->pf.C < 0) return LILY_ENOMEM; // failed before with the same request
    }
    CU_TRY(cudaStreamSynchronize(cx->st));
    for (cudaStream_t q : cx->side) CU_TRY(cudaStreamSynchronize(q)); // a chunk that failed may leave side work
    cudaFree(cx->pf.mem);
    memset(&cx->pf, 0, sizeof cx->pf);
    cx->pf.cap = cap, cx->pf.want = want;
    size_t sizes[PF_NBUF], total = 0, total0 = pf_sizes(cx, want, sizes);
    int C = want;
    for (;; C /= 2) {
        total = pf_sizes(cx, C, sizes);
        if ((!cap || total <= cap) && cudaMalloc(&cx->pf.mem, total) == cudaSuccess) break;
        cudaGetLastError();
        cx->pf.mem = NULL;
        if (C <= 64) {
            cx->pf.C = -1;
            return lily_err_set(LILY_ENOMEM, "cuda backend: out of GPU memory for the prefill scratch "
                                "(%.2f GB for chunks of %d tokens, %.2f GB for %d)", total0 / 1e9, want,
                                total / 1e9, C);
        }
    }
    if (C < want)
        fprintf(stderr, "lily: cuda: the prefill scratch for chunks of %d tokens (%.2f GB) does not fit in "
                "the free GPU memory; using chunks of %d (%.2f GB)\n", want, total0 / 1e9, C, total / 1e9);
    char *p = (char *)cx->pf.mem;
    void *ptr[PF_NBUF];
    for (int i = 0; i < PF_NBUF; i++) ptr[i] = p, p += (sizes[i] + 255) & ~(size_t)255;
    pf_bufs *b = &cx->pf;
    b->toks = (int *)ptr[0], b->x = (float *)ptr[1], b->xn = (uint16_t *)ptr[2], b->qkv = (uint16_t *)ptr[3];
    b->z = (uint16_t *)ptr[4], b->b = (uint16_t *)ptr[5], b->a = (uint16_t *)ptr[6], b->o = (uint16_t *)ptr[7];
    b->g = (uint16_t *)ptr[8], b->qg = (float *)ptr[9], b->k = (float *)ptr[10], b->v = (float *)ptr[11];
    b->qr = (float *)ptr[12];
    moe_pf_scratch_init(&b->moe, ptr[13], layer_moe(cx, &cx->L[0]), C);
    b->gdn = (float *)ptr[14];
    b->part[0] = (float *)ptr[15], b->part[1] = (float *)ptr[16];
    b->moe.part = b->part[0], b->moe.part_cap = qgemm_splitk_cap(); // the router runs on the main stream
    b->C = C;
    note_mem(cx);
    return 0;
}

// Y (T, w.rows) = X (T, K) W^T with epilogue epi (prefill.cuh); res for QG_RESID (may alias y).
// sep: NULL = the fused kernel (default); else the separate-dequantisation ablation (qgemm_sep.cu).
// part: the split-K scratch of stream st (pf_bufs.part; qgemm_splitk_parts decides whether it is used).
static int pf_gemm(cudaStream_t st, qg_sep *sep, const uint16_t *x, int K, const dq_mat &w, int T, int epi,
                   void *y, const float *res, float *part) {
    qg_args g;
    memset(&g, 0, sizeof g);
    g.x = x, g.ldx = K, g.w = w, g.M = T, g.N = w.rows, g.K = K, g.epi = epi, g.y = y, g.ldy = w.rows;
    g.res = res, g.part = part, g.part_cap = qgemm_splitk_cap();
    return sep ? qgemm_sep(sep, g, st) : qgemm_launch(g, 0, 0, st);
}

// Separate-dequantisation ablation: the cuBLAS handle and scratch for the largest dense product of
// any layer (gate and up stacked for the shared expert's GLU) at chunks of C tokens, made before the
// first chunk so a missing cuBLAS is an error before the state moves, and nothing grows mid-prompt.
static int sep_reserve(cuda_ctx *cx, int C) {
    size_t wmax = 0, nmax = 0;
    for (const dev_layer &d : cx->L) {
        const dq_mat *ms[] = {&d.qkvba, &d.qkv, &d.z, &d.b, &d.a, &d.out, &d.q, &d.k, &d.v, &d.o, &d.router, &d.sh_down};
        for (const dq_mat *m : ms) {
            wmax = std::max(wmax, (size_t)m->rows * m->cols);
            nmax = std::max(nmax, (size_t)m->rows);
        }
        wmax = std::max(wmax, 2 * (size_t)d.sh_gate.rows * d.sh_gate.cols);
        nmax = std::max(nmax, 2 * (size_t)d.sh_gate.rows);
    }
    return qgemm_sep_reserve(&cx->sep, wmax, nmax * C, cx->st);
}

// The side stream of a chunk (LILY_CUDA_OPT_PF_SIDE), or NULL: none while profiling (pfprof's rows
// are per kernel, in stream order) or with the separate-dequantisation ablation (one cuBLAS scratch).
static cudaStream_t pf_side(cuda_ctx *cx) {
    const int m = cx->opt[LILY_CUDA_OPT_PF_SIDE];
    if (m <= 0 || cx->prof || cx->opt[LILY_CUDA_OPT_SEP_DEQUANT]) return NULL;
    return cx->side[m == 2 ? 1 : 0];
}

// One chunk of T tokens (already in pf.toks) at position s->pos: every layer, leaving the final
// residual stream in pf.x. Enqueued on cx->st, no host synchronisation. With a side stream, the
// GEMMs off the layer's critical chain run on it (the GDN's z, b and a beside qkv and the chunked
// scan, the attention's k and v beside q|gate, the shared expert beside the routed experts: their
// launches are small or latency-bound, and the main chain's kernels leave SMs idle); each output is
// joined before its first reader, and the side stream only writes buffers the main one does not
// touch until then. The kernels and their inputs are the same: the same bits.
long lily_pf_inproj_stacked; // GDN layers run on the stacked qkv|b|a GEMM (counted for the e2e test)
static int enqueue_chunk(cuda_ctx *cx, cuda_state *s, int T) {
    const lily_config *c = &cx->c;
    cudaStream_t st = cx->st;
    pf_bufs *b = &cx->pf;
    const float eps = c->norm_eps;
    const int H = c->hidden, pos0 = s->pos, vd = c->lin_v_heads * c->lin_v_dim;
    const int ad = c->n_heads * c->head_dim;
    attn_dims adm = {c->n_heads, c->n_kv_heads, c->head_dim, c->rope_dim, s->max_ctx, c->rope_theta, eps, s->kv_f32};
    gdn_dims gd = {c->lin_k_heads, c->lin_v_heads, c->lin_k_dim, c->lin_v_dim, c->conv_kernel};
    qg_sep *sep = cx->opt[LILY_CUDA_OPT_SEP_DEQUANT] ? &cx->sep : NULL; // ablation; NULL by default
    b->moe.sep = sep;
    b->moe.host = cx->opt[LILY_CUDA_OPT_HOST_ROUTE] ? &cx->host_route : NULL; // ablation; NULL by default
    cudaStream_t side = pf_side(cx);
    b->moe.side = side, b->moe.ev[0] = cx->pf_ev[0], b->moe.ev[1] = cx->pf_ev[1];
    cudaStream_t sst = side ? side : st; // where the side work goes
    // Split-K scratch of each stream (the side one's own while it runs beside the main chain).
    float *const mp = b->part[0], *const sp = b->part[side ? 1 : 0];
    int rc = 0;
    pf_embed(cx->embed_q, cx->embed_dense, cx->embed_dt, H, b->toks, T, b->x, st);
    PF_MARK("embed");
    b->moe.next_xn = b->xn, b->moe.next_eps = eps; // where the MoE combine writes the next layer's input norm
    for (int l = 0; l < c->n_layers && !rc; l++) {
        const dev_layer *d = &cx->L[l];
        if (l == 0) { // later layers' input norm comes with the previous layer's MoE combine
            pf_rmsnorm_rows(T, H, b->x, d->in_norm, eps, b->xn, st);
            PF_MARK("rmsnorm (input + post)");
        }
        if (!d->full) {
            // qkv, b and a as one GEMM over their stacked rows (b and a have 32 rows each: on their
            // own, a launch's fixed cost each; stacked, 64 more columns of a GEMM whose last wave was
            // not full). Apart (the ablation, or weights of different formats), each its own pfprof row
            // and with a side stream b, a there (joined before the scan). z on the side stream
            // (joined before the norm).
            const int C = lily_conv_dim(c), Hv = c->lin_v_heads;
            const bool stacked = d->qkvba.rows && cx->opt[LILY_CUDA_OPT_GDN_INPROJ];
            const gdn_in gi = stacked ? gdn_in{b->qkv, b->qkv + C, b->qkv + C + Hv, C + 2 * Hv, C + 2 * Hv}
                                      : gdn_in{b->qkv, b->b, b->a, C, Hv};
            lily_pf_inproj_stacked += stacked;
            if (side && (rc = pf_wait(side, st, cx->pf_ev[0]))) break;
            if ((rc = pf_gemm(st, sep, b->xn, H, stacked ? d->qkvba : d->qkv, T, QG_BF16, b->qkv, NULL, mp))) break;
            PF_MARK(stacked ? "gdn in_proj gemm qkv|b|a" : "gdn in_proj gemm qkv");
            if (!stacked) {
                if ((rc = pf_gemm(sst, sep, b->xn, H, d->b, T, QG_BF16, b->b, NULL, sp)) ||
                    (rc = pf_gemm(sst, sep, b->xn, H, d->a, T, QG_BF16, b->a, NULL, sp)))
                    break;
                PF_MARK("gdn in_proj gemms b, a");
                if (side && (rc = pf_wait(st, side, cx->pf_ev[1]))) break;
            }
            if ((rc = pf_gemm(sst, sep, b->xn, H, d->z, T, QG_BF16, b->z, NULL, sp))) break;
            PF_MARK("gdn in_proj gemm z");
            if (side && (rc = pf_record(cx->pf_ev[2], side))) break;
            // The chunked form only from one whole chunk of 64 up: below that it is one partial chunk,
            // with no tensor-core work to win over the scan.
            if (cx->opt[LILY_CUDA_OPT_GDN_CHUNKED] && T >= 64) {
                gdn_pf_chunked(gd, T, pos0, gi, d->conv, d->dt_bias, d->A, s->ring[l], s->S[l],
                               b->o, b->gdn, 0, st);
                PF_MARK("gdn conv ring update"); // phases A and B are marked inside
            } else {
                gdn_pf_scan(gd, T, pos0, gi, d->conv, d->dt_bias, d->A, s->ring[l], s->S[l],
                            b->o, 0, st);
                PF_MARK("gdn conv+delta rule (scan)");
            }
            if (side && (rc = pf_await(st, cx->pf_ev[2]))) break;
            gdn_pf_gated_norm(T, c->lin_v_heads, c->lin_v_dim, b->o, b->z, d->gnorm, eps, b->g, st);
            PF_MARK("gdn gated rmsnorm");
            if ((rc = pf_gemm(st, sep, b->g, vd, d->out, T, QG_RESID, b->x, b->x, mp))) break;
            PF_MARK("gdn out_proj gemm (+residual)");
        } else {
            if (side && (rc = pf_wait(side, st, cx->pf_ev[0]))) break;
            if ((rc = pf_gemm(st, sep, b->xn, H, d->q, T, QG_F32, b->qg, NULL, mp))) break;
            PF_MARK("attn q|gate gemm");
            if ((rc = pf_gemm(sst, sep, b->xn, H, d->k, T, QG_F32, b->k, NULL, sp)) ||
                (rc = pf_gemm(sst, sep, b->xn, H, d->v, T, QG_F32, b->v, NULL, sp)))
                break;
            PF_MARK("attn k, v gemms");
            if (side && (rc = pf_wait(st, side, cx->pf_ev[1]))) break;
            pf_qk_norm_rope_append(adm, T, pos0, b->qg, b->k, b->v, d->q_norm, d->k_norm, b->qr, s->kc[l],
                                   s->vc[l], st);
            PF_MARK("attn q/k norm + rope + kv append");
            if (cx->opt[LILY_CUDA_OPT_FA]) {
                pf_attention_flash(adm, T, pos0, b->qr, s->kc[l], s->vc[l], b->qg, b->o, st);
                PF_MARK("attn core (flash)");
            } else {
                pf_attention(adm, T, pos0, b->qr, s->kc[l], s->vc[l], b->qg, b->o, st);
                PF_MARK("attn core (per query)");
            }
            if ((rc = pf_gemm(st, sep, b->o, ad, d->o, T, QG_RESID, b->x, b->x, mp))) break;
            PF_MARK("attn o_proj gemm (+residual)");
        }
        pf_rmsnorm_rows(T, H, b->x, d->post_norm, eps, b->xn, st);
        PF_MARK("rmsnorm (input + post)");
        b->moe.next_norm = l + 1 < c->n_layers ? cx->L[l + 1].in_norm : NULL; // the next input norm, fused
        rc = moe_pf_forward(layer_moe(cx, d), b->xn, T, b->x, b->x, &b->moe, 0, st);
        if (cx->dump && !rc) dump_rows(cx, b->x + (size_t)(T - 1) * H, b->moe.ids + (size_t)(T - 1) * c->n_experts_tok, l);
    }
    if (rc) return rc;
    CU_TRY(cudaGetLastError());
    return 0;
}

// Logits of row t of the chunk's final stream (final norm + lm_head: the decode step's GEMV) into
// host memory `out`.
static int chunk_logits(cuda_ctx *cx, cuda_state *s, int t, float *out) {
    const lily_config *c = &cx->c;
    gv_args g;
    memset(&g, 0, sizeof g);
    g.nseg = 1, g.cols = c->hidden, g.x = cx->pf.x + (size_t)t * c->hidden, g.pro = PRO_RMSNORM;
    g.norm_w = cx->final_norm, g.eps = c->norm_eps;
    g.epi = GV_LOGITS, g.amax = cx->amax, g.temp = 0.0f, g.seed = s->seed, g.pos = s->d_pos;
    g.nan_flag = cx->nan_flag;
    g.seg[0].m = cx->lm_head, g.seg[0].y = cx->logits;
    lily_cuda_gemv2 = cx->opt[LILY_CUDA_OPT_GEMV2];
    gemv_launch(g, cx->amax_n, cx->st);
    PF_MARK("final norm + lm_head (one row)");
    CU_TRY(cudaGetLastError());
    CU_TRY(cudaMemcpyAsync(s->h_log, cx->logits, (size_t)c->vocab_size * 4, cudaMemcpyDeviceToHost, cx->st));
    CU_TRY(cudaStreamSynchronize(cx->st));
    memcpy(out, s->h_log, (size_t)c->vocab_size * 4);
    return 0;
}

int forward_chunks(cuda_ctx *cx, cuda_state *s, const int *tokens, int n, float *logits,
                          int all_logits) {
    const size_t V = cx->c.vocab_size;
    int rc = pf_alloc(cx);
    if (rc) return rc;
    lily_cuda_pdl = 0; // plain stream order for the chunk's kernels and the lm_head GEMV
    lily_qg_wgmma = cx->opt[LILY_CUDA_OPT_WGMMA] != 0; // which GEMM kernel qgemm_launch picks
    lily_qg_bf16w = cx->opt[LILY_CUDA_OPT_QG_BF16W] != 0; // and with which weights
    lily_qg_rs = cx->opt[LILY_CUDA_OPT_QG_RS] != 0;       // and which bf16-weight kernel
    lily_qg_wide = cx->opt[LILY_CUDA_OPT_QG_WIDE];        // and its tile width
    lily_qg_tma = cx->opt[LILY_CUDA_OPT_QG_TMA];          // and how the wide tile loads
    lily_qg_tma128 = cx->opt[LILY_CUDA_OPT_QG_TMA128];    // and the 128-column tile too
    lily_moe_gather = cx->opt[LILY_CUDA_OPT_MOE_GATHER];  // and whether MoE rows are gathered for it
    lily_moe_tails = cx->opt[LILY_CUDA_OPT_MOE_TAILS];    // and where group tails go (moe_prefill.cu)
    lily_qg_fill = cx->opt[LILY_CUDA_OPT_QG_FILL];        // and whether narrow dense GEMMs do
    lily_qg_raster = cx->opt[LILY_CUDA_OPT_QG_RASTER];    // and in which order their blocks run
    lily_qg_wsw = cx->opt[LILY_CUDA_OPT_QG_WSW];          // and whether the wide tile is warp-specialised
    lily_qg_rw = cx->opt[LILY_CUDA_OPT_QG_RW];            // and which calls take the weights in registers
    lily_qg_wsp = cx->opt[LILY_CUDA_OPT_QG_WSP];          // and whether the MoE's GEMMs are persistent
    lily_qg_splitk = cx->opt[LILY_CUDA_OPT_QG_SPLITK];    // and whether thin dense GEMMs split K
    lily_qg_gt = cx->opt[LILY_CUDA_OPT_QG_GT];            // and whether the MoE down takes the tokens as N
    lily_fa_wg = cx->opt[LILY_CUDA_OPT_FA_WG];            // and which flash attention kernel
    lily_gdn_wg = cx->opt[LILY_CUDA_OPT_GDN_WG];          // and which GDN phase B
    const int C = cx->pf.C;
    if (cx->opt[LILY_CUDA_OPT_SEP_DEQUANT] && (rc = sep_reserve(cx, C))) return rc;
    for (int i0 = 0; i0 < n; i0 += C) {
        const int T = n - i0 < C ? n - i0 : C;
        // Pageable source: staged by the runtime, ordered after the previous chunk's kernels.
        CU_TRY(cudaMemcpyAsync(cx->pf.toks, tokens + i0, (size_t)T * 4, cudaMemcpyHostToDevice, cx->st));
        if ((rc = enqueue_chunk(cx, s, T))) return rc;
        s->pos += T;
        if (logits && all_logits) {
            for (int t = 0; t < T; t++)
                if ((rc = chunk_logits(cx, s, t, logits + (size_t)(i0 + t) * V))) return rc;
        } else if (logits && i0 + T == n) {
            if ((rc = chunk_logits(cx, s, T - 1, logits))) return rc;
        }
    }
    // The decode step reads its position from device memory.
    CU_TRY(cudaStreamSynchronize(cx->st)); // h_tok is reused
    *s->h_tok = s->pos;
    CU_TRY(cudaMemcpyAsync(s->d_pos, s->h_tok, 4, cudaMemcpyHostToDevice, cx->st));
    CU_TRY(cudaStreamSynchronize(cx->st));
    return 0;
}

extern "C" size_t lily_cuda_prefill_scratch_bytes(void *ctx, int chunk) {
    size_t sizes[15];
    return pf_sizes((cuda_ctx *)ctx, chunk > 0 ? chunk : 1, sizes);
}

extern "C" int lily_cuda_prefill_chunk(void *ctx) {
    const cuda_ctx *cx = (const cuda_ctx *)ctx;
    return cx->pf.mem ? cx->pf.C : 0;
}

// Prefill profile: the state reset, one untimed pass (scratch allocation, warm caches), then the same
// prompt again with an event after each phase (PF_MARK), summed per phase name over chunks and layers.
// Events between kernels cost a little overlap; *total_ms gets the plain pass's wall time.
static cuda_ctx *g_prof_cx;
void (*lily_pf_prof_hook)(const char *name);
static void pf_prof_record(const char *name) { prof_mark(g_prof_cx, name); }

extern "C" int lily_cuda_profile_prefill(void *ctx, void *p, const int *tokens, int n, const char **names,
                                         double *us, int max, double *total_ms) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    int prc = apply_precision(cx, s);
    if (prc) return prc;
    if (n < 2 || n > s->max_ctx || !prefill_usable(cx, s))
        return lily_err_set(LILY_EINVAL, "profile_prefill: %d tokens need the prefill path and the context", n);
    std::vector<float> logits(cx->c.vocab_size);
    // An untimed pass first: the first prompt of a process pays the scratch allocation and the lazy
    // loading of every kernel it launches (the first length pfprof timed read 29.5 ms plain at 256
    // tokens against `lily bench`'s 21.3, docs/PERF.md, seventeenth session).
    state_reset_cuda(ctx, s);
    int rc = forward_chunks(cx, s, tokens, n, logits.data(), 0);
    if (rc) return rc;
    state_reset_cuda(ctx, s);
    double t0 = lily_time();
    rc = forward_chunks(cx, s, tokens, n, logits.data(), 0);
    if (rc) return rc;
    *total_ms = (lily_time() - t0) * 1e3;
    state_reset_cuda(ctx, s);
    for (cudaEvent_t e : cx->prof_ev) cudaEventDestroy(e);
    cx->prof_ev.clear(), cx->prof_name.clear();
    g_prof_cx = cx, cx->prof = 1, lily_pf_prof_hook = pf_prof_record;
    prof_mark(cx, "start");
    rc = forward_chunks(cx, s, tokens, n, logits.data(), 0);
    lily_pf_prof_hook = NULL, cx->prof = 0, g_prof_cx = NULL;
    if (rc) return rc;
    int nf = prof_collect(cx, names, us, max);
    for (cudaEvent_t e : cx->prof_ev) cudaEventDestroy(e);
    cx->prof_ev.clear(), cx->prof_name.clear();
    state_reset_cuda(ctx, s);
    return nf;
}

