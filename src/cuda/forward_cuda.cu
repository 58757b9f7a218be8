// forward_cuda.cu: the CUDA backend (struct lily_backend lily_backend_cuda) and the only C surface of
// src/cuda/: the decode step and the backend's entry points. A decode step is a fixed chain of kernels
// (kernels.cuh) that reads the token and position from device memory and leaves the next token there,
// so it is captured once per state as a CUDA graph and replayed. Prompts (n > 1 tokens) go to the
// chunked prefill path (prefill_cuda.cu), bf16 activations only, unless the "prefill" switch is off
// (LILY_CUDA_PREFILL=0) or LILY_CUDA_F32ACT is set: then they run as the decode step token by token.
// The context (weights, options, scratch) is made in upload_cuda.cu, states and snapshots live in
// state_cuda.cu.
#include <limits.h>
#include <math.h>

#include <vector>

#include "backend_cuda.cuh"

int lily_cuda_pdl = 1; // cuda_common.cuh: launch_k() adds the PDL attribute; set per step from the option

// ---------------------------------------------------------------------------------------------
// One decode step, enqueued on cx->st. logits: device buffer to fill, or NULL.
void prof_mark(cuda_ctx *cx, const char *name) {
    if (!cx->prof) return;
    cudaEvent_t e;
    cudaEventCreate(&e);
    cudaEventRecord(e, cx->st);
    cx->prof_ev.push_back(e);
    cx->prof_name.push_back(name);
}

// LILY_CUDA_DUMP=1 (debug, plain launches only): the residual stream's RMS and a checksum after each
// layer, and the routed experts, on stderr; `lily-gpu-test compare` and docs/PERF.md use it to see
// where two runs part and how the stream grows with depth.
void dump_rows(cuda_ctx *cx, const float *dx, const int *dids, int l) {
    const int H = cx->c.hidden, k = cx->c.n_experts_tok;
    std::vector<float> x(H);
    std::vector<int> ids(k);
    cudaMemcpyAsync(x.data(), dx, (size_t)H * 4, cudaMemcpyDeviceToHost, cx->st);
    cudaMemcpyAsync(ids.data(), dids, (size_t)k * 4, cudaMemcpyDeviceToHost, cx->st);
    cudaStreamSynchronize(cx->st);
    double ss = 0, sum = 0;
    for (float v : x) ss += (double)v * v, sum += v;
    fprintf(stderr, "lily: cuda: layer %2d rms %.6e sum %.6e experts", l, sqrt(ss / H), sum);
    for (int i = 0; i < k; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

// The decode step's stream (the prefill path dumps the last row of each chunk the same way).
static void dump_layer(cuda_ctx *cx, int l) { dump_rows(cx, cx->x, cx->ids, l); }

// The step's attention layout: split count and GQA packing. Automatic (options 0 / -1): below
// attn_long_from positions no packing at 32 splits (each K/V row read by the 8 query heads' blocks,
// mostly from L2: 512 blocks); from there on packing at 64 splits (every K/V row read once, 128
// blocks): 48K 295 -> 300 tok/s, 128K 207 -> 225, but 32K 329 -> 323 and 4K 392 -> 370
// (docs/PERF.md). The graph is captured per side of the threshold (run_step), so the layout follows
// the context.
// Where the tensor-core kernel takes the shapes (LILY_CUDA_ATTN_TC, attn_tc.cu), packing at every
// context at 32 splits (64 blocks of one an SM): against 64 splits +0.8 % at 4K, +1.8 % at 32K,
// +1.5 % at 128K; 66 and 128 splits slower (docs/PERF.md, thirteenth session).
static void attn_plan(cuda_ctx *cx, attn_dims ad, int *nsplit, int *gqa) {
    const int v = cx->opt[LILY_CUDA_OPT_ATTN_SPLIT], g = cx->opt[LILY_CUDA_OPT_GQA];
    const bool tc = attn_tc_takes(ad);
    *gqa = g >= 0 ? g : tc ? 1 : cx->step_long;
    *nsplit = v > 0 ? (v > ATTN_MAX_SPLIT ? ATTN_MAX_SPLIT : v) : (*gqa && !tc) ? 64 : 32;
}

static void enqueue_step(cuda_ctx *cx, cuda_state *s, float *logits, int *ids_out) {
    const lily_config *c = &cx->c;
    cudaStream_t st = cx->st;
    const float eps = c->norm_eps;
    lily_cuda_pdl = cx->opt[LILY_CUDA_OPT_PDL] && !cx->prof; // profiling times kernels one by one
    lily_cuda_gemv2 = cx->opt[LILY_CUDA_OPT_GEMV2];
    lily_cuda_attn_multi = cx->opt[LILY_CUDA_OPT_ATTN_MULTI];
    lily_cuda_moe_ks = cx->opt[LILY_CUDA_OPT_MOE_KS];
    lily_cuda_moe_pf = cx->opt[LILY_CUDA_OPT_MOE_PF];
    lily_cuda_gv_pro = cx->opt[LILY_CUDA_OPT_GV_PRO];
    lily_cuda_moe_lat = cx->opt[LILY_CUDA_OPT_MOE_LAT];
    lily_cuda_gdn_lat = cx->opt[LILY_CUDA_OPT_GDN_LAT];
    lily_cuda_gv2_bulk = cx->opt[LILY_CUDA_OPT_GV2_BULK];
    lily_cuda_attn_comb = cx->opt[LILY_CUDA_OPT_ATTN_COMB];
    lily_cuda_attn_tc = cx->opt[LILY_CUDA_OPT_ATTN_TC];
    // The residual stream and the fixed-point sums (cuda_common.cuh mf_fold):
    // - LILY_CUDA_MOE_ACC: a layer's moe_fused leaves its output in am (then `pend` points at it): the
    //   next layer's in_proj, and its out_proj (o_proj), or lm_head, fold it into the residual they
    //   read. out_proj (o_proj) writes the residual with it folded in, and zeroes it for the layer's MoE.
    // - LILY_CUDA_GDN_OUT (with the above): the GDN layer's out_proj runs in gdn_step's launch and leaves
    //   its rows in ao; that launch also writes the residual with pend folded in to X2 (and zeroes pend);
    //   the router reads X2 with ao folded in, and its block 0 writes the result back to X; the MoE
    //   zeroes ao.
    // Not with the front (its launch keeps the sums) or the per-layer dump (which reads x between launches).
    const bool acc_on = cx->opt[LILY_CUDA_OPT_MOE_ACC] && !cx->opt[LILY_CUDA_OPT_MOE_FRONT] && !cx->dump;
    const size_t aw = (size_t)c->hidden + 1; // words of one sum (+ its flag)
    unsigned long long *am = cx->mf_acc, *ao = cx->mf_acc + aw, *pend = NULL;
    float *const X = cx->x, *const X2 = cx->x2; // the residual stream (with pend folded in); X2: the router's input
    prof_mark(cx, "start");
    embed_row(cx->embed_q, cx->embed_dense, cx->embed_dt, c->hidden, s->d_tok, cx->x, st, acc_on ? cx->mf_acc : NULL,
              acc_on ? 2 * aw : 0);
    prof_mark(cx, "embed");
    attn_dims ad = {c->n_heads, c->n_kv_heads, c->head_dim, c->rope_dim, s->max_ctx, c->rope_theta, eps, s->kv_f32};
    gdn_dims gd = {c->lin_k_heads, c->lin_v_heads, c->lin_k_dim, c->lin_v_dim, c->conv_kernel};
    for (int l = 0; l < c->n_layers; l++) {
        const dev_layer *d = &cx->L[l];
        gv_args g, go; // go: the layer's out_proj (GDN) or o_proj (attention)
        memset(&g, 0, sizeof g);
        g.cols = c->hidden, g.x = X, g.pro = PRO_RMSNORM, g.norm_w = d->in_norm, g.eps = eps;
        g.acc_x = pend;
        const bool fused = cx->opt[LILY_CUDA_OPT_MOE_FUSED] && moe_fused_takes(d->moe, d->sh_down, NULL, 0);
        const bool gout = acc_on && fused && !d->full && cx->opt[LILY_CUDA_OPT_GDN_OUT] &&
                          gdn_out_takes(gd, cx->opt[LILY_CUDA_OPT_GDN_SPLIT], d->out, c->hidden, c->lin_v_dim);
        memset(&go, 0, sizeof go);
        if (!d->full) {
            g.nseg = 4;
            g.seg[0].m = d->qkv, g.seg[0].y = cx->qkv;
            g.seg[1].m = d->z, g.seg[1].y = cx->z;
            g.seg[2].m = d->b, g.seg[2].y = cx->b;
            g.seg[3].m = d->a, g.seg[3].y = cx->a;
            // LILY_CUDA_GDN_FRONT: in_proj and the step in one launch (its head barriers share gdn_out's
            // words: never both in a step).
            const int gsplit = cx->opt[LILY_CUDA_OPT_GDN_SPLIT];
            if (!gout && cx->opt[LILY_CUDA_OPT_GDN_FRONT] && gdn_front_takes(g, gd)) {
                const gdn_front_args fa = {gd, d->conv, d->dt_bias, d->A, s->ring[l], s->S[l], cx->o, s->d_pos, cx->gdn_hbar};
                gdn_front(g, fa, st);
                prof_mark(cx, "gdn in_proj+conv+delta rule");
            } else {
                gemv_launch(g, 0, st);
                prof_mark(cx, "gdn in_proj (norm+qkv/z/b/a)");
                gdn_out_args oa;
                memset(&oa, 0, sizeof oa);
                if (gout) {
                    oa.z = cx->z, oa.gnorm = d->gnorm, oa.eps = eps, oa.wo = d->out, oa.acc = ao, oa.hbar = cx->gdn_hbar;
                    oa.H = c->hidden, oa.x = X, oa.pend = pend, oa.x_out = X2;
                }
                gdn_step(gd, cx->qkv, cx->b, cx->a, d->conv, d->dt_bias, d->A, s->ring[l], s->S[l], cx->o, s->d_pos,
                         gsplit, st, gout ? &oa : NULL);
                prof_mark(cx, gout ? "gdn conv+delta rule+gated norm+out_proj" : "gdn conv+delta rule");
            }
            go.nseg = 1, go.cols = c->lin_v_heads * c->lin_v_dim, go.x = cx->o, go.pro = PRO_GATED;
            go.norm_w = d->gnorm, go.eps = eps, go.gz = cx->z, go.ghd = c->lin_v_dim, go.epi = GV_RESID;
            go.seg[0].m = d->out, go.seg[0].y = X, go.seg[0].res = X;
        } else {
            g.nseg = 3;
            g.seg[0].m = d->q, g.seg[0].y = cx->qg;
            g.seg[1].m = d->k, g.seg[1].y = cx->kk;
            g.seg[2].m = d->v, g.seg[2].y = cx->vv;
            gemv_launch(g, 0, st);
            prof_mark(cx, "attn in_proj (norm+q/k/v)");
            int nsplit, gqa;
            attn_plan(cx, ad, &nsplit, &gqa);
            // LILY_CUDA_ATTN_QK: the q/k norm, RoPE and KV append inside the tensor-core attention kernel.
            const attn_qk_in qk = {cx->qg, cx->kk, cx->vv, d->q_norm, d->k_norm};
            if (!(cx->opt[LILY_CUDA_OPT_ATTN_QK] && gqa && !cx->dump &&
                  attn_decode_qk(ad, qk, s->kc[l], s->vc[l], cx->part, cx->o, s->d_pos, nsplit, st))) {
                qk_norm_rope_append(ad, cx->qg, cx->kk, cx->vv, d->q_norm, d->k_norm, cx->qr, s->kc[l],
                                    s->vc[l], s->d_pos, st);
                prof_mark(cx, "attn qk norm+rope+append");
                attn_decode(ad, cx->qr, s->kc[l], s->vc[l], cx->qg, cx->part, cx->o, s->d_pos, nsplit, gqa, st);
            }
            prof_mark(cx, "attn decode+combine");
            go.nseg = 1, go.cols = c->n_heads * c->head_dim, go.x = cx->o, go.pro = PRO_PLAIN, go.epi = GV_RESID;
            go.seg[0].m = d->o, go.seg[0].y = X, go.seg[0].res = X;
        }
        go.acc_res = pend;
        memset(&g, 0, sizeof g);
        g.cols = c->hidden, g.x = X, g.pro = PRO_RMSNORM, g.norm_w = d->post_norm, g.eps = eps;
        g.x_out = cx->xn;
        if (gout) g.x = X2, g.acc_x = ao, g.x_res_out = X; // gdn_step left X2 = X with pend folded in
        g.seg[0].m = d->router, g.seg[0].y = cx->rl;
        g.nseg = 1;
        if (d->sh_gate.rows) {
            g.seg[1].m = d->sh_gate, g.seg[1].y = cx->sg;
            g.seg[2].m = d->sh_up, g.seg[2].y = cx->su;
            g.seg[3].m = d->sh_score, g.seg[3].y = cx->ss;
            g.nseg = d->sh_score.rows ? 4 : 3;
        }
        // The layer's tail: out_proj (o_proj), the norm + router + shared gate/up, the experts. With
        // the front on, the first two run inside the MoE's launch (moe_fused.cu), else as launches.
        // Front 2: the router phase only (out_proj its own launch).
        moe_w mw = d->moe; // LILY_CUDA_MOE_DSL off: the down slice from the row-major weights
        if (!cx->opt[LILY_CUDA_OPT_MOE_DSL]) mw.dsl_codes = NULL, mw.dsl_sb = NULL;
        const gv_args front[2] = {go, g};
        const int fo = cx->opt[LILY_CUDA_OPT_MOE_FRONT] == 2, nf = 2 - fo;
        if (fused && cx->opt[LILY_CUDA_OPT_MOE_FRONT] && moe_fused_takes(d->moe, d->sh_down, front + fo, nf)) {
            if (fo) {
                gemv_launch(go, 0, st);
                prof_mark(cx, d->full ? "attn o_proj" : "gdn gated norm+out_proj");
            }
            moe_fused(mw, front + fo, nf, cx->rl, NULL, cx->ids, cx->wts, d->sh_down, cx->sg, cx->su, cx->ss, X, X,
                      cx->mf_part, cx->mf_bar, st);
            prof_mark(cx, fo ? "moe router+experts (fused)" : "moe out_proj+router+experts (fused)");
            if (cx->dump) dump_layer(cx, l);
            continue;
        }
        if (!gout) {
            gemv_launch(go, 0, st); // with pend folded into its residual, then zeroed
            prof_mark(cx, d->full ? "attn o_proj" : "gdn gated norm+out_proj");
        }
        gemv_launch(g, 0, st);
        prof_mark(cx, "moe norm+router+shared gate/up");
        unsigned long long *z1 = gout ? ao : NULL; // read by the router: zeroed by the MoE (gdn_step zeroed pend)
        pend = NULL;
        if (fused) {
            moe_fused(mw, NULL, 0, cx->rl, cx->xn, cx->ids, cx->wts, d->sh_down, cx->sg, cx->su, cx->ss, X, X,
                      cx->mf_part, cx->mf_bar, st, acc_on ? am : NULL, z1);
            if (acc_on) pend = am;
            prof_mark(cx, "moe experts gate/up+down (fused)");
        } else {
            moe_gate_up(d->moe, cx->rl, cx->xn, cx->h, cx->ids, cx->wts, st);
            prof_mark(cx, "moe experts gate/up");
            moe_down(d->moe, cx->h, cx->ids, cx->wts, d->sh_down, cx->sg, cx->su, cx->ss, X, X, st);
            prof_mark(cx, "moe experts down+shared");
        }
        if (cx->dump) dump_layer(cx, l);
    }
    gv_args g;
    memset(&g, 0, sizeof g);
    g.nseg = 1, g.cols = c->hidden, g.x = X, g.pro = PRO_RMSNORM, g.norm_w = cx->final_norm, g.eps = eps;
    g.acc_x = pend;
    g.epi = GV_LOGITS, g.amax = cx->amax, g.temp = s->temp, g.seed = s->seed, g.pos = s->d_pos;
    g.nan_flag = cx->nan_flag;
    g.seg[0].m = cx->lm_head, g.seg[0].y = logits;
    int nb = gemv_launch(g, cx->amax_n, st);
    prof_mark(cx, "lm_head (norm+gemv+argmax)");
    sample_finish(cx->amax, nb, s->d_tok, ids_out, s->d_step, s->d_pos, st);
    prof_mark(cx, "token select");
}

// Run one step at position pos (graph replay when enabled). The token is already in s->d_tok.
static int run_step(cuda_ctx *cx, cuda_state *s, int want_logits, int *ids_out, int pos) {
    float *lg = want_logits ? cx->logits : NULL;
    cx->step_long = pos >= cx->attn_long_from;
    if (!cx->opt[LILY_CUDA_OPT_GRAPH] || ids_out || cx->dump) {
        enqueue_step(cx, s, lg, ids_out);
        CU_TRY(cudaGetLastError());
        return 0;
    }
    const int gi = want_logits ? 1 : 0, gl = cx->step_long;
    if (!s->graph[gl][gi] || s->graph_gen[gl][gi] != cx->opt_gen) {
        if (s->graph[gl][gi]) cudaGraphExecDestroy(s->graph[gl][gi]), s->graph[gl][gi] = NULL;
        cudaGraph_t gr;
        CU_TRY(cudaStreamBeginCapture(cx->st, cudaStreamCaptureModeThreadLocal));
        enqueue_step(cx, s, lg, NULL);
        CU_TRY(cudaStreamEndCapture(cx->st, &gr));
        CU_TRY(cudaGraphInstantiate(&s->graph[gl][gi], gr, 0));
        cudaGraphDestroy(gr);
        s->graph_gen[gl][gi] = cx->opt_gen;
    }
    CU_TRY(cudaGraphLaunch(s->graph[gl][gi], cx->st));
    return 0;
}

// The rounding mode and the early PDL trigger live in constant memory (one copy per .cu file,
// process-wide); set them to the state's mode and the context's option before running that state.
// A state keeps the rounding mode it was made in (its KV dtype).
int apply_precision(cuda_ctx *cx, cuda_state *s) {
    static int current = -1, current_early = -1;
    if (s->kv_f32 != (cx->opt[LILY_CUDA_OPT_F32ACT] != 0))
        return lily_err_set(LILY_EINVAL, "cuda backend: state made with %s activations, context now "
                            "set to %s", s->kv_f32 ? "fp32" : "bf16", s->kv_f32 ? "bf16" : "fp32");
    const int early = cx->opt[LILY_CUDA_OPT_PDL_EARLY];
    if (current != s->kv_f32 || current_early != early) {
        const int f = s->kv_f32;
        CU_TRY(cudaStreamSynchronize(cx->st));
        gemv_set_modes(f, early), moe_set_modes(f, early), moe_fused_set_modes(f, early), gdn_set_modes(f, early);
        gdn_front_set_modes(f, early);
        attn_set_modes(f, early), norm_rope_set_modes(f, early), sample_set_modes(f, early);
        CU_TRY(cudaDeviceSynchronize());
        current = f, current_early = early;
    }
    return 0;
}

static int forward_cuda(void *ctx, void *p, const int *tokens, int n, float *logits, int all_logits) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    const int V = cx->c.vocab_size;
    int prc = apply_precision(cx, s);
    if (prc) return prc;
    if (n < 0 || s->pos + n > s->max_ctx)
        return lily_err_set(LILY_ERANGE, "cuda backend: %d tokens at position %d exceed the context of %d",
                            n, s->pos, s->max_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return lily_err_set(LILY_ERANGE, "cuda backend: token id %d out of range [0, %d)", tokens[i], V);
    if (s->temp != 0.0f) s->temp = 0.0f, drop_graphs(s);
    if (n > 1 && prefill_usable(cx, s)) {
        int rc = pf_alloc(cx);
        if (rc == 0) return forward_chunks(cx, s, tokens, n, logits, all_logits);
        if (rc != LILY_ENOMEM) return rc;
        // Not even 64-token chunks fit: the decode step below needs no scratch (slow, but it runs).
        if (!cx->pf_warned)
            fprintf(stderr, "lily: cuda: %s; prompts run token by token\n", lily_err_msg()), cx->pf_warned = 1;
    }
    for (int i = 0; i < n; i++) {
        int want = logits && (all_logits || i == n - 1);
        CU_TRY(cudaStreamSynchronize(cx->st)); // h_tok is reused
        *s->h_tok = tokens[i];
        CU_TRY(cudaMemcpyAsync(s->d_tok, s->h_tok, 4, cudaMemcpyHostToDevice, cx->st));
        int rc = run_step(cx, s, want, NULL, s->pos);
        if (rc) return rc;
        s->pos++;
        if (want) {
            CU_TRY(cudaMemcpyAsync(s->h_log, cx->logits, (size_t)V * 4, cudaMemcpyDeviceToHost, cx->st));
            CU_TRY(cudaStreamSynchronize(cx->st));
            memcpy(logits + (all_logits ? (size_t)i * V : 0), s->h_log, (size_t)V * 4);
        }
    }
    CU_TRY(cudaStreamSynchronize(cx->st));
    return 0;
}

// The engine's single steps (step_greedy / step_sample / step_topk) begin alike: the checks forward()
// makes for one token, the graphs' temperature and seed, and the token's upload into d_tok.
static int step_begin(cuda_ctx *cx, cuda_state *s, int token, float temperature, unsigned seed) {
    const int V = cx->c.vocab_size;
    int rc = apply_precision(cx, s);
    if (rc) return rc;
    if (s->pos + 1 > s->max_ctx)
        return lily_err_set(LILY_ERANGE, "cuda backend: 1 token at position %d exceeds the context of %d", s->pos,
                            s->max_ctx);
    if (token < 0 || token >= V)
        return lily_err_set(LILY_ERANGE, "cuda backend: token id %d out of range [0, %d)", token, V);
    if (s->temp != temperature || (temperature > 0.0f && s->seed != seed))
        s->temp = temperature, s->seed = seed, drop_graphs(s);
    CU_TRY(cudaStreamSynchronize(cx->st)); // h_tok is reused
    *s->h_tok = token;
    CU_TRY(cudaMemcpyAsync(s->d_tok, s->h_tok, 4, cudaMemcpyHostToDevice, cx->st));
    return 0;
}

// One decode step whose last kernel (sample_finish) leaves the next token in d_tok: the largest
// logit at temperature 0 (lowest id among equals), else a draw by Gumbel-max, the lm_head's epilogue
// adding noise of (seed, position, id) to logits / temperature as in lily_cuda_generate. Only its 4
// bytes come back, with one synchronisation. The graphs hold the temperature and seed (a sampled
// request captures its own once).
static int step_token(cuda_ctx *cx, cuda_state *s, int token, float temperature, unsigned seed, int *next) {
    int rc = step_begin(cx, s, token, temperature, seed);
    if (rc || (rc = run_step(cx, s, 0, NULL, s->pos))) return rc;
    s->pos++;
    CU_TRY(cudaMemcpyAsync(s->h_tok, s->d_tok, 4, cudaMemcpyDeviceToHost, cx->st));
    CU_TRY(cudaStreamSynchronize(cx->st));
    *next = *s->h_tok;
    return 0;
}

// The engine's greedy step (lily_backend.step_greedy): the next token without the logits.
static int step_greedy_cuda(void *ctx, void *p, int token, int *next) {
    return step_token((cuda_ctx *)ctx, (cuda_state *)p, token, 0.0f, 0, next);
}

// The engine's sampling step (lily_backend.step_sample): a draw from softmax(logits / temperature).
static int step_sample_cuda(void *ctx, void *p, int token, float temperature, unsigned seed, int *next) {
    if (!(temperature > 0.0f) || !isfinite(temperature))
        return lily_err_set(LILY_EINVAL, "cuda backend: sampling step at temperature %g", temperature);
    return step_token((cuda_ctx *)ctx, (cuda_state *)p, token, temperature, seed, next);
}

// The engine's top-k step (lily_backend.step_topk): one decode step whose logits stay on the device,
// then the k largest of them (topk.cu), with the softmax's mass when asked; only those come back.
static int step_topk_cuda(void *ctx, void *p, int token, int k, float temperature, const struct sampler_edit *edits,
                          int n_edits, int n_bias, float *vals, int *ids, int *n, double *mass) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    const int V = cx->c.vocab_size;
    if (k < 1 || k > LILY_TOPK_MAX) return lily_err_set(LILY_EINVAL, "cuda backend: top-k step of %d", k);
    if (mass && (!(temperature > 0.0f) || !isfinite(temperature)))
        return lily_err_set(LILY_EINVAL, "cuda backend: top-k step's mass at temperature %g", temperature);
    if (n_edits < 0 || n_bias < 0 || n_bias > n_edits)
        return lily_err_set(LILY_EINVAL, "cuda backend: %d logit edits (%d of bias)", n_edits, n_bias);
    for (int i = 0; i < n_edits; i++)
        if (edits[i].id < 0 || edits[i].id >= V)
            return lily_err_set(LILY_ERANGE, "cuda backend: logit edit of id %d", edits[i].id);
    if (n_edits > cx->ed_cap) { // grown in powers of two; freed with the context
        int cap = 256;
        while (cap < n_edits) cap *= 2;
        CU_TRY(cudaStreamSynchronize(cx->st)); // an earlier upload may still read the old buffer
        cudaFree(cx->ed_dev);
        if (cx->ed_host) cudaFreeHost(cx->ed_host);
        cx->ed_dev = NULL, cx->ed_host = NULL, cx->ed_cap = 0;
        if (cudaMalloc(&cx->ed_dev, (size_t)cap * sizeof *edits) != cudaSuccess ||
            cudaHostAlloc(&cx->ed_host, (size_t)cap * sizeof *edits, 0) != cudaSuccess) {
            cudaGetLastError();
            return lily_err_set(LILY_ENOMEM, "cuda backend: out of memory for %d logit edits", n_edits);
        }
        cx->ed_cap = cap;
    }
    const size_t scratch = topk_scratch_bytes(V);
    if (!cx->tk_mem && cudaMalloc(&cx->tk_mem, scratch + 8 * LILY_TOPK_MAX + 16) != cudaSuccess) {
        cudaGetLastError();
        return lily_err_set(LILY_ENOMEM, "cuda backend: out of GPU memory for the top-k step");
    }
    int rc = step_begin(cx, s, token, 0.0f, 0);
    if (rc || (rc = run_step(cx, s, 1, NULL, s->pos))) return rc;
    s->pos++;
    if (n_edits > 0) { // the previous step synchronised: ed_host is free to refill
        memcpy(cx->ed_host, edits, (size_t)n_edits * sizeof *edits);
        CU_TRY(cudaMemcpyAsync(cx->ed_dev, cx->ed_host, (size_t)n_edits * sizeof *edits, cudaMemcpyHostToDevice, cx->st));
        if ((rc = logit_edits_launch(cx->logits, cx->ed_dev, n_edits, n_bias, cx->st))) return rc;
    }
    char *out = cx->tk_mem + scratch;
    if ((rc = topk_launch(cx->logits, V, k, cx->tk_mem, out, cx->st, mass ? temperature : 0.0f))) return rc;
    // k values, k ids, the count, a pad word, the mass (h_log may hold fewer than 2k + 4 words)
    uint32_t got[2 * LILY_TOPK_MAX + 4];
    CU_TRY(cudaMemcpyAsync(got, out, 8 * (size_t)k + (mass ? 16 : 4), cudaMemcpyDeviceToHost, cx->st));
    CU_TRY(cudaStreamSynchronize(cx->st));
    *n = (int)got[2 * k];
    memcpy(vals, got, (size_t)*n * 4);
    memcpy(ids, got + k, (size_t)*n * 4);
    if (mass) memcpy(mass, got + 2 * k + 2, 8);
    return 0;
}

// The logits of the step step_topk just took (lily_backend.logits_last): still in cx->logits.
static int logits_last_cuda(void *ctx, void *p, float *logits) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    const size_t bytes = (size_t)cx->c.vocab_size * 4;
    CU_TRY(cudaMemcpyAsync(s->h_log, cx->logits, bytes, cudaMemcpyDeviceToHost, cx->st));
    CU_TRY(cudaStreamSynchronize(cx->st));
    memcpy(logits, s->h_log, bytes);
    return 0;
}


// ---------------------------------------------------------------------------------------------
// Hooks for `lily bench` (backend.h).
static const struct {
    const char *name;
    int opt, off, on; // value of the option when the flag is switched off / on
} flag_names[] = {
    {"graph", LILY_CUDA_OPT_GRAPH, 0, 1},        {"split_kv", LILY_CUDA_OPT_ATTN_SPLIT, 1, 0},
    {"gqa", LILY_CUDA_OPT_GQA, 0, 1},            {"gdn_split", LILY_CUDA_OPT_GDN_SPLIT, 1, 8},
    {"bf16act", LILY_CUDA_OPT_F32ACT, 1, 0},   {"pdl", LILY_CUDA_OPT_PDL, 0, 1},
    {"prefill", LILY_CUDA_OPT_PREFILL, 0, 1},   {"flash", LILY_CUDA_OPT_FA, 0, 1},
    {"gemv2", LILY_CUDA_OPT_GEMV2, 0, 1},
    {"gdn_chunked", LILY_CUDA_OPT_GDN_CHUNKED, 0, 1}, {"attn_multi", LILY_CUDA_OPT_ATTN_MULTI, 0, 1},
    {"gpu_route", LILY_CUDA_OPT_HOST_ROUTE, 1, 0},    {"fused_dequant", LILY_CUDA_OPT_SEP_DEQUANT, 1, 0},
    {"wgmma", LILY_CUDA_OPT_WGMMA, 0, 1},       {"moe_split", LILY_CUDA_OPT_MOE_KS, 1, 4},
    {"pdl_early", LILY_CUDA_OPT_PDL_EARLY, 0, 1}, {"moe_prefetch", LILY_CUDA_OPT_MOE_PF, 0, 1},
    {"gemv_pro_regs", LILY_CUDA_OPT_GV_PRO, 0, 1}, {"moe_lat", LILY_CUDA_OPT_MOE_LAT, 0, 1},
    {"gdn_lat", LILY_CUDA_OPT_GDN_LAT, 0, 1}, {"gemv2_bulk", LILY_CUDA_OPT_GV2_BULK, 0, 1},
    {"attn_comb", LILY_CUDA_OPT_ATTN_COMB, 0, 2}, {"qg_bf16w", LILY_CUDA_OPT_QG_BF16W, 0, 1},
    {"qg_rs", LILY_CUDA_OPT_QG_RS, 0, 1},         {"qg_wide", LILY_CUDA_OPT_QG_WIDE, 0, 1},
    {"qg_tma", LILY_CUDA_OPT_QG_TMA, 0, 1},       {"moe_gather", LILY_CUDA_OPT_MOE_GATHER, 0, 1},
    {"qg_tma128", LILY_CUDA_OPT_QG_TMA128, 0, 1}, {"moe_fused", LILY_CUDA_OPT_MOE_FUSED, 0, 1},
    {"moe_front", LILY_CUDA_OPT_MOE_FRONT, 0, 1}, {"moe_tails", LILY_CUDA_OPT_MOE_TAILS, 0, 2},
    {"qg_fill", LILY_CUDA_OPT_QG_FILL, 0, 1},     {"fa_wg", LILY_CUDA_OPT_FA_WG, 0, 2},
    {"snap_dev", LILY_CUDA_OPT_SNAP_DEV, 0, 1},
    {"pf_side", LILY_CUDA_OPT_PF_SIDE, 0, 1},     {"qg_raster", LILY_CUDA_OPT_QG_RASTER, 0, 1},
    {"attn_tc", LILY_CUDA_OPT_ATTN_TC, 0, 1},       {"qg_wsw", LILY_CUDA_OPT_QG_WSW, 0, 1},
    {"qg_wsp", LILY_CUDA_OPT_QG_WSP, 0, 1},       {"qg_splitk", LILY_CUDA_OPT_QG_SPLITK, 0, 1},
    {"qg_gt", LILY_CUDA_OPT_QG_GT, 0, 1},         {"gdn_wg", LILY_CUDA_OPT_GDN_WG, 0, 1},
    {"qg_rw", LILY_CUDA_OPT_QG_RW, 0, 3},         {"gdn_inproj", LILY_CUDA_OPT_GDN_INPROJ, 0, 1},
    {"moe_acc", LILY_CUDA_OPT_MOE_ACC, 0, 1},      {"gdn_out", LILY_CUDA_OPT_GDN_OUT, 0, 1},
    {"attn_qk", LILY_CUDA_OPT_ATTN_QK, 0, 1},      {"moe_dsl", LILY_CUDA_OPT_MOE_DSL, 0, 1},
    {"gdn_front", LILY_CUDA_OPT_GDN_FRONT, 0, 1},
};

extern "C" int lily_cuda_set_opt(void *ctx, int opt, int value);

static int set_flag_cuda(void *ctx, const char *name, int on) {
    for (auto &f : flag_names)
        if (!strcmp(f.name, name)) return lily_cuda_set_opt(ctx, f.opt, on ? f.on : f.off);
    char known[1024] = ""; // the table's names, so the message cannot fall behind it
    for (auto &f : flag_names)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", known[0] ? ", " : "", f.name);
    return lily_err_set(LILY_EINVAL, "cuda backend: unknown flag '%s' (known: %s)", name, known);
}

static size_t peak_mem_cuda(void *ctx) {
    note_mem((cuda_ctx *)ctx);
    return ((cuda_ctx *)ctx)->peak;
}

extern "C" int lily_ceilings_cuda(void *ctx, struct lily_ceilings *out);

extern "C" const struct lily_backend lily_backend_cuda = {
    "cuda",
    16384, // prefill_piece: one chunk of the default size, ~0.5 s at the 35B model's prefill speed on an H200
    init_cuda, free_ctx, state_new_cuda, state_free_cuda, state_reset_cuda, state_pos_cuda,
    forward_cuda, save_size_cuda, save_cuda, load_cuda, lily_ceilings_cuda, peak_mem_cuda, set_flag_cuda,
    snap_save_cuda, snap_load_cuda, snap_free_cuda, step_greedy_cuda, step_topk_cuda, logits_last_cuda,
    step_sample_cuda,
};

// ---------------------------------------------------------------------------------------------
// lily_cuda.h
extern "C" int lily_cuda_set_opt(void *ctx, int opt, int value) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    if (opt < 0 || opt >= LILY_CUDA_OPT_COUNT) return lily_err_set(LILY_EINVAL, "cuda: option %d", opt);
    cx->opt[opt] = value;
    cx->opt_gen++;
    return 0;
}

extern "C" int lily_cuda_get_opt(void *ctx, int opt) {
    return opt >= 0 && opt < LILY_CUDA_OPT_COUNT ? ((cuda_ctx *)ctx)->opt[opt] : -1;
}

extern "C" int lily_cuda_generate(void *ctx, void *p, int first, int n, float temp, unsigned seed,
                                  int *out_ids, int *nan_seen) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    if (s->pos + n > s->max_ctx || n > s->ids_cap)
        return lily_err_set(LILY_ERANGE, "cuda backend: %d steps at %d exceed the context", n, s->pos);
    if (s->temp != temp || s->seed != seed) s->temp = temp, s->seed = seed, drop_graphs(s);
    int prc = apply_precision(cx, s);
    if (prc) return prc;
    CU_TRY(cudaStreamSynchronize(cx->st));
    *s->h_tok = first;
    CU_TRY(cudaMemcpyAsync(s->d_tok, s->h_tok, 4, cudaMemcpyHostToDevice, cx->st));
    CU_TRY(cudaMemsetAsync(s->d_step, 0, 4, cx->st));
    CU_TRY(cudaMemsetAsync(cx->nan_flag, 0, 4, cx->st));
    // The graph has no ids output; copy each step's token from d_tok into d_ids after replay.
    for (int i = 0; i < n; i++) {
        int rc = run_step(cx, s, 0, NULL, s->pos + i);
        if (rc) return rc;
        CU_TRY(cudaMemcpyAsync(s->d_ids + i, s->d_tok, 4, cudaMemcpyDeviceToDevice, cx->st));
    }
    s->pos += n;
    CU_TRY(cudaMemcpyAsync(out_ids, s->d_ids, (size_t)n * 4, cudaMemcpyDeviceToHost, cx->st));
    int nf = 0;
    CU_TRY(cudaMemcpyAsync(&nf, cx->nan_flag, 4, cudaMemcpyDeviceToHost, cx->st));
    CU_TRY(cudaStreamSynchronize(cx->st));
    if (nan_seen) *nan_seen = nf;
    return 0;
}

__global__ void fill_random_bf16(uint16_t *p, size_t n, unsigned seed) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 0x9E3779B1u ^ seed * 0x85EBCA77u;
        h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 12;
        p[i] = lily_f32_to_bf16(((h >> 8) * (1.0f / 16777216.0f) - 0.5f) * 2.0f);
    }
}
__global__ void fill_random_f32(float *p, size_t n, unsigned seed, float scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h = (uint32_t)i * 0x9E3779B1u ^ seed * 0x85EBCA77u;
        h ^= h >> 15, h *= 0x2C1B3C6Du, h ^= h >> 12;
        p[i] = ((h >> 8) * (1.0f / 16777216.0f) - 0.5f) * scale;
    }
}

extern "C" int lily_cuda_state_fake_fill(void *ctx, void *p, int pos, unsigned seed) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    const lily_config *c = &cx->c;
    if (pos < 0 || pos >= s->max_ctx) return lily_err_set(LILY_ERANGE, "cuda: fake position %d", pos);
    for (int l = 0; l < c->n_layers; l++) {
        if (cx->L[l].full) {
            size_t n = (size_t)c->n_kv_heads * s->max_ctx * c->head_dim;
            if (s->kv_f32) {
                fill_random_f32<<<1024, 256, 0, cx->st>>>((float *)s->kc[l], n, seed + 2 * l, 2.0f);
                fill_random_f32<<<1024, 256, 0, cx->st>>>((float *)s->vc[l], n, seed + 2 * l + 1, 2.0f);
            } else {
                fill_random_bf16<<<1024, 256, 0, cx->st>>>((uint16_t *)s->kc[l], n, seed + 2 * l);
                fill_random_bf16<<<1024, 256, 0, cx->st>>>((uint16_t *)s->vc[l], n, seed + 2 * l + 1);
            }
        } else {
            fill_random_f32<<<1024, 256, 0, cx->st>>>(s->S[l], (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim, seed + l, 0.1f);
        }
    }
    CU_TRY(cudaMemcpyAsync(s->d_pos, &pos, 4, cudaMemcpyHostToDevice, cx->st));
    CU_TRY(cudaStreamSynchronize(cx->st));
    s->pos = pos;
    return 0;
}

// Steps at a fixed position: the position is put back before each run so the context stays put.
extern "C" double lily_cuda_time_steps(void *ctx, void *p, int n, int reps) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    int pos = s->pos;
    if (pos + n > s->max_ctx || apply_precision(cx, s)) return -1.0;
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    std::vector<double> t;
    for (int r = 0; r < reps + 1; r++) {
        cudaMemcpyAsync(s->d_pos, &pos, 4, cudaMemcpyHostToDevice, cx->st);
        cudaStreamSynchronize(cx->st);
        cudaEventRecord(e0, cx->st);
        for (int i = 0; i < n; i++)
            if (run_step(cx, s, 0, NULL, pos + i)) return -1.0;
        cudaEventRecord(e1, cx->st);
        if (cudaEventSynchronize(e1) != cudaSuccess) return -1.0;
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        if (r) t.push_back(ms / 1e3 / n); // the first run warms up (and captures the graph)
    }
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    cudaMemcpy(s->d_pos, &pos, 4, cudaMemcpyHostToDevice);
    for (size_t i = 1; i < t.size(); i++)
        for (size_t j = i; j > 0 && t[j] < t[j - 1]; j--) std::swap(t[j], t[j - 1]);
    return t[t.size() / 2];
}

// The recorded events as microseconds per name (the span up to each event goes to that event's
// name), at most max names; returns how many.
int prof_collect(cuda_ctx *cx, const char **names, double *us, int max) {
    int nf = 0;
    for (size_t i = 1; i < cx->prof_ev.size(); i++) {
        float ms = 0;
        cudaEventElapsedTime(&ms, cx->prof_ev[i - 1], cx->prof_ev[i]);
        int j = 0;
        while (j < nf && strcmp(names[j], cx->prof_name[i])) j++;
        if (j == nf) {
            if (nf == max) continue;
            names[nf] = cx->prof_name[i], us[nf] = 0, nf++;
        }
        us[j] += ms * 1e3;
    }
    return nf;
}

extern "C" int lily_cuda_profile_step(void *ctx, void *p, const char **names, double *us, int max) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    int pos = s->pos;
    int prc = apply_precision(cx, s);
    if (prc) return prc;
    for (int rep = 0; rep < 3; rep++) {
        cudaMemcpy(s->d_pos, &pos, 4, cudaMemcpyHostToDevice);
        for (cudaEvent_t e : cx->prof_ev) cudaEventDestroy(e);
        cx->prof_ev.clear(), cx->prof_name.clear();
        cx->prof = 1;
        cx->step_long = pos >= cx->attn_long_from;
        enqueue_step(cx, s, NULL, NULL);
        cx->prof = 0;
        CU_TRY(cudaStreamSynchronize(cx->st));
    }
    int nf = prof_collect(cx, names, us, max);
    cudaMemcpy(s->d_pos, &pos, 4, cudaMemcpyHostToDevice);
    return nf;
}

extern "C" double lily_cuda_copy_bandwidth(size_t bytes) {
    void *a = NULL, *b = NULL;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess) {
        cudaFree(a);
        cudaGetLastError();
        return -1.0;
    }
    cudaMemset(a, 1, bytes);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e0);
    for (int i = 0; i < 10; i++) cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaFree(a), cudaFree(b);
    cudaEventDestroy(e0), cudaEventDestroy(e1);
    return 2.0 * bytes * 10 / (ms / 1e3);
}

extern "C" long lily_cuda_weight_bytes(void *ctx) { return (long)((cuda_ctx *)ctx)->uploaded; }
extern "C" int lily_cuda_dsl_layers(void *ctx) { return (int)((cuda_ctx *)ctx)->dsl_mem.size(); }
