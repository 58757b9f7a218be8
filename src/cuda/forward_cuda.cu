// forward_cuda.cu: the CUDA backend (struct lily_backend lily_backend_cuda) and the only C surface of
// src/cuda/. Weights are uploaded once, 4-bit (or 8-bit) codes as they are, scales and biases repacked
// into one word per group, streamed through pinned buffers with a progress line. A decode step is a
// fixed chain of kernels (kernels.cuh) that reads the token and position from device memory and
// leaves the next token there, so it is captured once per state as a CUDA graph and replayed.
// Prompts (n > 1 tokens) go to the chunked prefill path (prefill_cuda.cu), bf16 activations only,
// unless the "prefill" switch is off (LILY_CUDA_PREFILL=0) or LILY_CUDA_F32ACT is set: then they run
// as the decode step token by token.
#include <limits.h>
#include <math.h>

#include <vector>

#include "backend_cuda.cuh"

#define PIN_BYTES (64u << 20)

int lily_cuda_pdl = 1; // cuda_common.cuh: launch_k() adds the PDL attribute; set per step from the option

// ---------------------------------------------------------------------------------------------
// Uploads.
static void *arena_take(cuda_ctx *cx, size_t n) {
    size_t at = (cx->arena_used + 255) & ~(size_t)255;
    CHECK(at + n <= cx->arena_size);
    cx->arena_used = at + n;
    return cx->arena + at;
}

static int upload(cuda_ctx *cx, void *dst, const void *src, size_t n) {
    const char *s = (const char *)src;
    while (n) {
        size_t k = n < PIN_BYTES ? n : PIN_BYTES;
        int i = cx->pin_i;
        CU_TRY(cudaEventSynchronize(cx->pin_ev[i]));
        memcpy(cx->pin[i], s, k);
        CU_TRY(cudaMemcpyAsync(dst, cx->pin[i], k, cudaMemcpyHostToDevice, cx->st));
        CU_TRY(cudaEventRecord(cx->pin_ev[i], cx->st));
        cx->pin_i ^= 1;
        dst = (char *)dst + k, s += k, n -= k;
        cx->uploaded += k;
        if (cx->uploaded >= cx->next_report) {
            double t = lily_time() - cx->t_start;
            fprintf(stderr, "\rlily: cuda: uploading weights %5.1f / %5.1f GB (%.1f GB/s)",
                    cx->uploaded / 1e9, cx->upload_total / 1e9, cx->uploaded / 1e9 / (t > 0 ? t : 1e-9));
            cx->next_report += 1ul << 30;
        }
    }
    return 0;
}

// Which GPU format a checkpoint matrix gets (cuda_common.cuh): DQ_FAST for 4/8-bit affine rows of a
// multiple of 16 bytes with group*bits a multiple of 128 (every matrix of the real model), DQ_GENERIC
// for other affine widths/shapes, DQ_DENSE for f32/f16/bf16. Scales are kept as bf16 on the GPU.
static int mat_format(const lily_mat *m, const char *what, int *fmt) {
    if (m->dtype == LILY_DT_F32 || m->dtype == LILY_DT_F16 || m->dtype == LILY_DT_BF16) {
        *fmt = DQ_DENSE;
        return 0;
    }
    if (m->dtype != LILY_DT_Q || !lily_q_supported(m->bits, m->group) || m->cols % m->group ||
        m->sdtype < LILY_DT_F32 || m->sdtype > LILY_DT_BF16)
        return lily_err_set(LILY_EUNSUPPORTED, "cuda backend: %s: dtype %d, %d-bit group %d not supported",
                            what, m->dtype, m->bits, m->group);
    bool fast = (m->bits == 4 || m->bits == 8) && ((long)m->cols * m->bits) % 128 == 0 &&
                (m->group * m->bits) % 128 == 0;
    *fmt = fast ? DQ_FAST : DQ_GENERIC;
    return 0;
}

static size_t mat_row_bytes(const lily_mat *m) {
    return m->dtype == LILY_DT_Q ? (size_t)m->cols * m->bits / 8 : (size_t)m->cols * lily_dtype_size(m->dtype);
}

static size_t q_bytes(const lily_mat *m) {
    size_t codes = (size_t)m->rows * mat_row_bytes(m);
    size_t sb = m->dtype == LILY_DT_Q ? (size_t)m->rows * (m->cols / m->group) * 4 : 0;
    return ((codes + 255) & ~(size_t)255) + ((sb + 255) & ~(size_t)255);
}

// Append matrix m's rows to a device matrix at row offset row0 (stacked experts use this).
static int upload_q_rows(cuda_ctx *cx, const lily_mat *m, dq_mat *d, long row0) {
    size_t rb_ = mat_row_bytes(m);
    int rc = upload(cx, (char *)d->codes + row0 * rb_, m->w, rb_ * m->rows);
    if (rc || m->dtype != LILY_DT_Q) return rc;
    long ng = m->cols / m->group;
    std::vector<uint32_t> sb((size_t)m->rows * ng);
    for (long i = 0; i < (long)m->rows * ng; i++) {
        uint16_t s = lily_f32_to_bf16(lily_load_f32(m->scales, m->sdtype, i));
        uint16_t b = lily_f32_to_bf16(lily_load_f32(m->biases, m->sdtype, i));
        sb[i] = (uint32_t)s | ((uint32_t)b << 16);
    }
    return upload(cx, (char *)d->sb + row0 * ng * 4, sb.data(), sb.size() * 4);
}

// A device matrix of `rows` rows in the format of checkpoint matrix m (stacked experts: rows = E x m's).
static void dq_alloc(cuda_ctx *cx, dq_mat *d, int rows, const lily_mat *m, int fmt) {
    memset(d, 0, sizeof *d);
    d->rows = rows, d->cols = m->cols, d->fmt = fmt;
    d->bits = m->dtype == LILY_DT_Q ? m->bits : 0, d->group = m->dtype == LILY_DT_Q ? m->group : 0;
    d->dt = m->dtype;
    d->codes = (const uint4 *)arena_take(cx, (size_t)rows * mat_row_bytes(m));
    if (m->dtype == LILY_DT_Q) d->sb = (const uint32_t *)arena_take(cx, (size_t)rows * (m->cols / m->group) * 4);
}

static int upload_q(cuda_ctx *cx, const lily_mat *m, dq_mat *d, const char *what) {
    memset(d, 0, sizeof *d);
    if (m->rows == 0) return 0;
    int fmt = 0, rc = mat_format(m, what, &fmt);
    if (rc) return rc;
    dq_alloc(cx, d, m->rows, m, fmt);
    return upload_q_rows(cx, m, d, 0);
}

// Rows r0.. of the stacked device matrix s, as a matrix of its own (no copy).
static dq_mat dq_view(const dq_mat &s, long r0, int rows) {
    dq_mat v = s;
    v.rows = rows;
    v.codes = (const uint4 *)((const char *)s.codes + r0 * dq_row_bytes(s));
    if (s.sb) v.sb = s.sb + r0 * (s.cols / s.group);
    return v;
}

// Three checkpoint matrices of one format and width (the GDN in_proj's qkv, b, a) stacked in one
// device matrix st, and va, vb, vc its views: the prefill runs the three as one GEMM
// (LILY_CUDA_OPT_GDN_INPROJ), decode reads the views. Where the formats differ, or a view would start
// off a 16-byte boundary, or the option is off at load (LILY_CUDA_GDN_INPROJ=0: the engine as before
// it), each is uploaded on its own and st has no rows.
static int upload_stacked(cuda_ctx *cx, const lily_mat *a, const lily_mat *b, const lily_mat *c, dq_mat *st,
                          dq_mat *va, dq_mat *vb, dq_mat *vc, const char *what) {
    memset(st, 0, sizeof *st);
    const lily_mat *ms[3] = {a, b, c};
    int fmt[3] = {0, 0, 0}, rc = 0;
    bool same = true;
    long r0[3] = {0, 0, 0}, rows = 0;
    for (int i = 0; i < 3; i++) {
        if ((rc = mat_format(ms[i], what, &fmt[i]))) return rc;
        r0[i] = rows, rows += ms[i]->rows;
        same = same && ms[i]->rows > 0 && ms[i]->dtype == a->dtype && ms[i]->cols == a->cols && fmt[i] == fmt[0] &&
               (a->dtype != LILY_DT_Q || (ms[i]->bits == a->bits && ms[i]->group == a->group)) &&
               !(r0[i] * mat_row_bytes(a) % 16) && (a->dtype != LILY_DT_Q || !(r0[i] * (a->cols / a->group) * 4 % 16));
    }
    if (!same || rows > INT_MAX || !cx->opt[LILY_CUDA_OPT_GDN_INPROJ]) {
        if ((rc = upload_q(cx, a, va, what)) || (rc = upload_q(cx, b, vb, what))) return rc;
        return upload_q(cx, c, vc, what);
    }
    dq_alloc(cx, st, (int)rows, a, fmt[0]);
    for (int i = 0; i < 3 && !rc; i++) rc = upload_q_rows(cx, ms[i], st, r0[i]);
    *va = dq_view(*st, r0[0], a->rows), *vb = dq_view(*st, r0[1], b->rows), *vc = dq_view(*st, r0[2], c->rows);
    return rc;
}

static int upload_f(cuda_ctx *cx, const float **dst, const float *src, size_t n) {
    *dst = NULL;
    if (!src || !n) return 0;
    float *p = (float *)arena_take(cx, n * 4);
    *dst = p;
    return upload(cx, p, src, n * 4);
}

// ---------------------------------------------------------------------------------------------
static int env_int(const char *name, int def) {
    const char *s = getenv(name);
    return s && *s ? atoi(s) : def;
}

static int check_config(const lily_config *c) {
    if (c->head_dim > 256 || c->n_heads % c->n_kv_heads || c->rope_dim > c->head_dim)
        return lily_err_set(LILY_EUNSUPPORTED, "cuda backend: head_dim %d / heads %d/%d not supported",
                            c->head_dim, c->n_heads, c->n_kv_heads);
    if (c->lin_k_dim > 128 || c->lin_v_dim > 128 || c->lin_v_heads % c->lin_k_heads)
        return lily_err_set(LILY_EUNSUPPORTED, "cuda backend: GDN dims %d/%d not supported",
                            c->lin_k_dim, c->lin_v_dim);
    if (c->n_experts > 512 || c->n_experts_tok > 16 || c->n_experts_tok > c->n_experts)
        return lily_err_set(LILY_EUNSUPPORTED, "cuda backend: %d experts top-%d not supported",
                            c->n_experts, c->n_experts_tok);
    return 0;
}

static size_t model_bytes(const lily_model *m) {
    const lily_config *c = &m->cfg;
    size_t n = 0;
    auto f = [&](size_t k) { n += ((k * 4 + 255) & ~(size_t)255); };
    auto q = [&](const lily_mat *x) { if (x->rows) n += q_bytes(x); };
    for (int l = 0; l < c->n_layers; l++) {
        const lily_layer *y = &m->w.layers[l];
        f(c->hidden), f(c->hidden);
        if (y->full) {
            q(&y->q), q(&y->k), q(&y->v), q(&y->o), f(c->head_dim), f(c->head_dim);
        } else {
            q(&y->qkv), q(&y->z), q(&y->b), q(&y->a), q(&y->out);
            f((size_t)lily_conv_dim(c) * c->conv_kernel), f(c->lin_v_heads), f(c->lin_v_heads), f(c->lin_v_dim);
        }
        q(&y->router), q(&y->sh_gate), q(&y->sh_up), q(&y->sh_down), q(&y->sh_score);
        for (int e = 0; e < c->n_experts; e++) q(&y->gate[e]), q(&y->up[e]), q(&y->down[e]);
        n += 3 * 256;
    }
    q(&m->w.embed);
    q(&m->w.lm_head);
    f(c->hidden);
    return n + (1 << 20);
}

static int upload_model(cuda_ctx *cx) {
    const lily_model *m = cx->m;
    const lily_config *c = &cx->c;
    int rc = 0;
    char what[96];
    cx->L.resize(c->n_layers);
    for (int l = 0; l < c->n_layers && !rc; l++) {
        const lily_layer *y = &m->w.layers[l];
        dev_layer *d = &cx->L[l];
        memset(d, 0, sizeof *d);
        d->full = y->full;
#define UQ(field) (snprintf(what, sizeof what, "layer %d " #field, l), upload_q(cx, &y->field, &d->field, what))
        if ((rc = upload_f(cx, &d->in_norm, y->in_norm, c->hidden))) break;
        if ((rc = upload_f(cx, &d->post_norm, y->post_norm, c->hidden))) break;
        if (y->full) {
            if ((rc = UQ(q)) || (rc = UQ(k)) || (rc = UQ(v)) || (rc = UQ(o))) break;
            if ((rc = upload_f(cx, &d->q_norm, y->q_norm, c->head_dim))) break;
            if ((rc = upload_f(cx, &d->k_norm, y->k_norm, c->head_dim))) break;
        } else {
            snprintf(what, sizeof what, "layer %d qkv, b, a", l);
            if ((rc = upload_stacked(cx, &y->qkv, &y->b, &y->a, &d->qkvba, &d->qkv, &d->b, &d->a, what))) break;
            if ((rc = UQ(z)) || (rc = UQ(out))) break;
            if ((rc = upload_f(cx, &d->conv, y->conv, (size_t)lily_conv_dim(c) * c->conv_kernel))) break;
            if ((rc = upload_f(cx, &d->dt_bias, y->dt_bias, c->lin_v_heads))) break;
            if ((rc = upload_f(cx, &d->A, y->A, c->lin_v_heads))) break;
            if ((rc = upload_f(cx, &d->gnorm, y->gnorm, c->lin_v_dim))) break;
        }
        if ((rc = UQ(router)) || (rc = UQ(sh_gate)) || (rc = UQ(sh_up)) || (rc = UQ(sh_down)) ||
            (rc = UQ(sh_score)))
            break;
#undef UQ
        // Routed experts, stacked: expert e's rows start at e * rows.
        moe_w *mw = &d->moe;
        mw->n_experts = c->n_experts, mw->topk = c->n_experts_tok, mw->inter = c->moe_inter;
        mw->hidden = c->hidden, mw->norm_topk = c->norm_topk;
        const lily_mat *g0 = &y->gate[0], *u0 = &y->up[0], *d0 = &y->down[0];
        snprintf(what, sizeof what, "layer %d experts", l);
        int fg = 0, fu = 0, fd = 0;
        if ((rc = mat_format(g0, what, &fg)) || (rc = mat_format(u0, what, &fu)) || (rc = mat_format(d0, what, &fd))) break;
        dq_alloc(cx, &mw->gate, c->n_experts * g0->rows, g0, fg);
        dq_alloc(cx, &mw->up, c->n_experts * u0->rows, u0, fu);
        dq_alloc(cx, &mw->down, c->n_experts * d0->rows, d0, fd);
        for (int e = 0; e < c->n_experts && !rc; e++) {
            const lily_mat *ms[3] = {&y->gate[e], &y->up[e], &y->down[e]};
            dq_mat *ds[3] = {&mw->gate, &mw->up, &mw->down};
            for (int j = 0; j < 3 && !rc; j++) {
                if (ms[j]->dtype != ds[j]->dt || (ms[j]->dtype == LILY_DT_Q && (ms[j]->bits != ds[j]->bits || ms[j]->group != ds[j]->group)) ||
                    ms[j]->rows * (long)c->n_experts != ds[j]->rows || ms[j]->cols != ds[j]->cols)
                    rc = lily_err_set(LILY_EUNSUPPORTED, "cuda backend: layer %d expert %d differs in format", l, e);
                else
                    rc = upload_q_rows(cx, ms[j], ds[j], (long)e * ms[j]->rows);
            }
        }
        if (!rc && (c->moe_inter != g0->rows || u0->rows != g0->rows || d0->rows != c->hidden))
            rc = lily_err_set(LILY_ESHAPE, "cuda backend: layer %d expert shapes", l);
    }
    if (rc) return rc;
    if ((rc = upload_q(cx, &m->w.embed, &cx->embed_q, "embed_tokens"))) return rc;
    if ((rc = upload_q(cx, &m->w.lm_head, &cx->lm_head, "lm_head"))) return rc;
    return upload_f(cx, &cx->final_norm, m->w.final_norm, c->hidden);
}

// LILY_CUDA_DEV_ALIAS (a diagnostic; the logits are wrong with it): every layer reads the weights of
// the first layer of its kind, so that they stay in L2 over the step: bit 1 the dense ones, bit 2 the
// routed experts. It bounds what reading weights from L2 instead of DRAM could give the decode step.
static void dev_alias(cuda_ctx *cx, int mode) {
    const int n = (int)cx->L.size();
    for (int l = 0; l < n; l++) {
        int f = 0;
        while (cx->L[f].full != cx->L[l].full) f++;
        if (f == l) continue;
        dev_layer *d = &cx->L[l];
        const dev_layer *s = &cx->L[f];
        if (mode & 1) {
            d->qkv = s->qkv, d->z = s->z, d->b = s->b, d->a = s->a, d->out = s->out, d->qkvba = s->qkvba;
            d->q = s->q, d->k = s->k, d->v = s->v, d->o = s->o;
            d->router = s->router, d->sh_gate = s->sh_gate, d->sh_up = s->sh_up, d->sh_down = s->sh_down;
            d->sh_score = s->sh_score;
        }
        if (mode & 2) d->moe.gate = s->moe.gate, d->moe.up = s->moe.up, d->moe.down = s->moe.down;
    }
    fprintf(stderr, "lily: cuda: LILY_CUDA_DEV_ALIAS=%d: layers share weights (a diagnostic; wrong logits)\n", mode);
}

static int scratch_alloc(cuda_ctx *cx) {
    const lily_config *c = &cx->c;
    int C = lily_conv_dim(c), maxsplit = ATTN_MAX_SPLIT;
    size_t big = (size_t)c->hidden;
    size_t cand[] = {(size_t)C, (size_t)c->lin_v_heads * c->lin_v_dim, (size_t)c->n_heads * 2 * c->head_dim,
                     (size_t)c->n_heads * c->head_dim};
    for (size_t v : cand) big = v > big ? v : big;
    float **bufs[] = {&cx->x, &cx->xn, &cx->qkv, &cx->z, &cx->b, &cx->a, &cx->o, &cx->qg, &cx->kk,
                      &cx->vv, &cx->qr, &cx->rl, &cx->sg, &cx->su, &cx->ss, &cx->wts};
    for (float **b : bufs) CU_TRY(cudaMalloc(b, (big + 1024) * sizeof(float)));
    attn_dims ad = {c->n_heads, c->n_kv_heads, c->head_dim, c->rope_dim, 0, c->rope_theta, c->norm_eps, 0};
    CU_TRY(cudaMalloc(&cx->part, attn_part_floats(ad, maxsplit) * sizeof(float)));
    CU_TRY(cudaMalloc(&cx->h, (size_t)c->n_experts_tok * c->moe_inter * sizeof(float)));
    // moe_fused's partial outputs (the model's expert shapes; moe_fused_part_floats of a layer's moe_w)
    CU_TRY(cudaMalloc(&cx->mf_part, ((size_t)c->n_experts_tok * (c->moe_inter / 32) + 1) * c->hidden * sizeof(float)));
    CU_TRY(cudaMalloc(&cx->mf_bar, 2 * sizeof(unsigned)));
    CU_TRY(cudaMemset(cx->mf_bar, 0, 2 * sizeof(unsigned)));
    CU_TRY(cudaMalloc(&cx->logits, (size_t)c->vocab_size * sizeof(float)));
    CU_TRY(cudaMalloc(&cx->ids, 64 * sizeof(int)));
    CU_TRY(cudaMalloc(&cx->nan_flag, sizeof(int)));
    CU_TRY(cudaMemset(cx->nan_flag, 0, sizeof(int)));
    cx->amax_n = gemv_max_blocks();
    CU_TRY(cudaMalloc(&cx->amax, cx->amax_n * sizeof(float2)));
    return 0;
}

static void free_ctx(void *p);

// Device memory in use now (all of the device's, as the driver reports it), kept as a peak.
void note_mem(cuda_ctx *cx) {
    size_t fb = 0, tb = 0;
    if (cudaMemGetInfo(&fb, &tb) == cudaSuccess && tb - fb > cx->peak) cx->peak = tb - fb;
}

static int init_cuda(const lily_model *m, void **out) {
    *out = NULL;
    int ndev = 0;
    cudaError_t e = cudaGetDeviceCount(&ndev);
    if (e != cudaSuccess || ndev == 0)
        return lily_err_set(LILY_EBACKEND, "cuda backend: no usable GPU (%s)",
                            e != cudaSuccess ? cudaGetErrorString(e) : "no device");
    int rc = check_config(&m->cfg);
    if (rc) return rc;
    cuda_ctx *cx = new cuda_ctx();
    cx->m = m, cx->c = m->cfg;
    cx->opt[LILY_CUDA_OPT_GRAPH] = env_int("LILY_CUDA_GRAPH", 1);
    cx->opt[LILY_CUDA_OPT_ATTN_SPLIT] = env_int("LILY_CUDA_ATTN_SPLIT", 0);
    cx->opt[LILY_CUDA_OPT_GQA] = env_int("LILY_CUDA_GQA", -1); // -1: by context (attn_plan)
    cx->attn_long_from = env_int("LILY_CUDA_ATTN_LONG", 40960);
    cx->opt[LILY_CUDA_OPT_GDN_SPLIT] = env_int("LILY_CUDA_GDN_SPLIT", 8);
    cx->opt[LILY_CUDA_OPT_F32ACT] = env_int("LILY_CUDA_F32ACT", 0) != 0;
    cx->opt[LILY_CUDA_OPT_PDL] = env_int("LILY_CUDA_PDL", 1) != 0;
    cx->opt[LILY_CUDA_OPT_PREFILL] = env_int("LILY_CUDA_PREFILL", 1) != 0;
    // 16384 tokens a pass: against 4096, +7 % at 8K-16K, +10 % at 32K, +5 % at 128K for 3.1 GB more
    // peak memory (bigger expert groups fill the MoE tiles; docs/PERF.md, 2026-11-30 eighth session).
    cx->opt[LILY_CUDA_OPT_CHUNK] = env_int("LILY_CUDA_CHUNK", 16384);
    cx->opt[LILY_CUDA_OPT_FA] = env_int("LILY_CUDA_FA", 1) != 0;
    cx->opt[LILY_CUDA_OPT_GEMV2] = env_int("LILY_CUDA_GEMV2", 1) != 0;
    cx->opt[LILY_CUDA_OPT_GDN_CHUNKED] = env_int("LILY_CUDA_GDN_CHUNKED", 1) != 0;
    cx->opt[LILY_CUDA_OPT_ATTN_MULTI] = env_int("LILY_CUDA_ATTN_MULTI", 1) != 0;
    cx->dump = env_int("LILY_CUDA_DUMP", 0);
    cx->opt[LILY_CUDA_OPT_PF_CAP_KB] = env_int("LILY_CUDA_PF_MAX_KB", 0);
    cx->opt[LILY_CUDA_OPT_HOST_ROUTE] = env_int("LILY_CUDA_HOST_ROUTE", 0) != 0;
    cx->opt[LILY_CUDA_OPT_SEP_DEQUANT] = env_int("LILY_CUDA_SEP_DEQUANT", 0) != 0;
    cx->opt[LILY_CUDA_OPT_WGMMA] = env_int("LILY_CUDA_WGMMA", 1) != 0;
    cx->opt[LILY_CUDA_OPT_MOE_KS] = env_int("LILY_CUDA_MOE_KS", 4);
    cx->opt[LILY_CUDA_OPT_PDL_EARLY] = env_int("LILY_CUDA_PDL_EARLY", 0);
    cx->opt[LILY_CUDA_OPT_MOE_PF] = env_int("LILY_CUDA_MOE_PF", 0) != 0;
    cx->opt[LILY_CUDA_OPT_GV_PRO] = env_int("LILY_CUDA_GV_PRO", 1) != 0;
    cx->opt[LILY_CUDA_OPT_MOE_LAT] = env_int("LILY_CUDA_MOE_LAT", 1) != 0;
    cx->opt[LILY_CUDA_OPT_GDN_LAT] = env_int("LILY_CUDA_GDN_LAT", 1) != 0;
    cx->opt[LILY_CUDA_OPT_GV2_BULK] = env_int("LILY_CUDA_GV2_BULK", 0) != 0;
    cx->opt[LILY_CUDA_OPT_ATTN_COMB] = env_int("LILY_CUDA_ATTN_COMB", 1) != 0;
    cx->opt[LILY_CUDA_OPT_ATTN_TC] = env_int("LILY_CUDA_ATTN_TC", 1) != 0;
    cx->opt[LILY_CUDA_OPT_QG_BF16W] = env_int("LILY_CUDA_QG_BF16W", 1) != 0;
    cx->opt[LILY_CUDA_OPT_QG_RS] = env_int("LILY_CUDA_QG_RS", 0) != 0;
    cx->opt[LILY_CUDA_OPT_QG_WIDE] = env_int("LILY_CUDA_QG_WIDE", 1);
    cx->opt[LILY_CUDA_OPT_QG_TMA] = env_int("LILY_CUDA_QG_TMA", 1) != 0;
    cx->opt[LILY_CUDA_OPT_MOE_GATHER] = env_int("LILY_CUDA_MOE_GATHER", 1) != 0;
    cx->opt[LILY_CUDA_OPT_QG_TMA128] = env_int("LILY_CUDA_QG_TMA128", 1); // 2: 128-row tiles only
    cx->opt[LILY_CUDA_OPT_MOE_FUSED] = env_int("LILY_CUDA_MOE_FUSED", 1) != 0;
    cx->opt[LILY_CUDA_OPT_MOE_FRONT] = env_int("LILY_CUDA_MOE_FRONT", 0); // 1 = both phases, 2 = the router only
    cx->opt[LILY_CUDA_OPT_MOE_TAILS] = env_int("LILY_CUDA_MOE_TAILS", 2); // 0..3, moe_prefill.cu
    cx->opt[LILY_CUDA_OPT_QG_FILL] = env_int("LILY_CUDA_QG_FILL", 1) != 0;
    cx->opt[LILY_CUDA_OPT_FA_WG] = env_int("LILY_CUDA_FA_WG", 2); // 0 off, 1 V transposed, 2 V MN-major
    cx->opt[LILY_CUDA_OPT_SNAP_DEV] = env_int("LILY_CUDA_SNAP_DEV", 1) != 0;
    cx->opt[LILY_CUDA_OPT_PF_SIDE] = env_int("LILY_CUDA_PF_SIDE", 1);
    // Rastered GEMM blocks: prefill 4K +1.3 %, 32K +3.4 % (the MoE's GEMMs; docs/PERF.md, eleventh session).
    cx->opt[LILY_CUDA_OPT_QG_RASTER] = env_int("LILY_CUDA_QG_RASTER", 1);
    cx->opt[LILY_CUDA_OPT_QG_WSW] = env_int("LILY_CUDA_QG_WSW", 1) != 0; // qgone +2-3 % (docs/PERF.md)
    // The MoE down projection on the persistent kernel: pfprof 4K 13.78 -> 11.80 ms (the gate|up on it
    // lost, 17.29 -> 19.84; docs/PERF.md, sixteenth session).
    cx->opt[LILY_CUDA_OPT_QG_WSP] = env_int("LILY_CUDA_QG_WSP", 1) & 3;
    cx->opt[LILY_CUDA_OPT_GDN_WG] = env_int("LILY_CUDA_GDN_WG", 1) != 0;
    // Dense: qgone 4096 x 8192 x 2048 410 -> 516 TFLOP/s, prefill 4K +5.5 %; the MoE gate|up too: 4K +3.6 %
    // more; the down projection on it (4) lost to qgemm_gt.cu; the folded map (32: a group's last 1..16
    // rows in its last full tile) 4K +1.6-2.3 % more. The same bits (docs/PERF.md, twenty-fifth session).
    cx->opt[LILY_CUDA_OPT_QG_RW] = env_int("LILY_CUDA_QG_RW", 35) & 55;
    cx->opt[LILY_CUDA_OPT_QG_SPLITK] = env_int("LILY_CUDA_QG_SPLITK", 1);
    // The MoE down projection with the tokens as N where groups average 16 rows or more (the narrow form
    // below 48): prefill 512 +2.5 %, 1K +4 %, 2K +5.5 %, 4K +1.5 %, 32K +2.5 % (docs/PERF.md, twentieth
    // and twenty-first sessions).
    cx->opt[LILY_CUDA_OPT_QG_GT] = env_int("LILY_CUDA_QG_GT", 1) & 3;
    cx->opt[LILY_CUDA_OPT_GDN_INPROJ] = env_int("LILY_CUDA_GDN_INPROJ", 1) != 0;
    lily_cuda_moe_fused_tma = env_int("LILY_CUDA_MOE_FUSED_TMA", 1) != 0; // timing knob (bitwise the same)
    *out = cx;
#define FAIL(x) do { rc = (x); if (rc) { free_ctx(cx); *out = NULL; return rc; } } while (0)
    int prio_lo = 0, prio_hi = 0;
    cudaDeviceGetStreamPriorityRange(&prio_lo, &prio_hi);
    const int main_prio = env_int("LILY_CUDA_MAIN_PRIO", 1) ? prio_hi : prio_lo; // dev knob (timing)
    FAIL(cudaStreamCreateWithPriority(&cx->st, cudaStreamNonBlocking, main_prio) == cudaSuccess &&
                 cudaStreamCreateWithPriority(&cx->side[0], cudaStreamNonBlocking, prio_lo) == cudaSuccess &&
                 cudaStreamCreateWithPriority(&cx->side[1], cudaStreamNonBlocking, prio_hi) == cudaSuccess
             ? 0 : lily_err_set(LILY_EBACKEND, "cuda backend: cannot create a stream"));
    for (int i = 0; i < 3; i++)
        FAIL(cudaEventCreateWithFlags(&cx->pf_ev[i], cudaEventDisableTiming) == cudaSuccess ? 0 : LILY_EBACKEND);
    size_t need = model_bytes(m), free_b = 0, total_b = 0;
    cudaMemGetInfo(&free_b, &total_b);
    if (cudaMalloc(&cx->arena, need) != cudaSuccess) {
        cudaGetLastError();
        FAIL(lily_err_set(LILY_ENOMEM, "cuda backend: out of GPU memory: the weights need %.2f GB, "
                          "%.2f GB of %.2f GB free", need / 1e9, free_b / 1e9, total_b / 1e9));
    }
    cx->arena_size = need;
    for (int i = 0; i < 2; i++) {
        FAIL(cudaHostAlloc(&cx->pin[i], PIN_BYTES, 0) == cudaSuccess ? 0
                 : lily_err_set(LILY_ENOMEM, "cuda backend: cannot pin %u host bytes", PIN_BYTES));
        FAIL(cudaEventCreateWithFlags(&cx->pin_ev[i], cudaEventDisableTiming) == cudaSuccess ? 0 : LILY_EBACKEND);
        cudaEventRecord(cx->pin_ev[i], cx->st);
    }
    cx->upload_total = need, cx->next_report = 1ul << 30, cx->t_start = lily_time();
    FAIL(upload_model(cx));
    FAIL(cudaStreamSynchronize(cx->st) == cudaSuccess ? 0
             : lily_err_set(LILY_EBACKEND, "cuda backend: upload failed: %s", cudaGetErrorString(cudaGetLastError())));
    if (cx->uploaded >= (1ul << 30))
        fprintf(stderr, "\rlily: cuda: uploaded %.2f GB of weights in %.1f s                \n",
                cx->uploaded / 1e9, lily_time() - cx->t_start);
    if (const int alias = env_int("LILY_CUDA_DEV_ALIAS", 0)) dev_alias(cx, alias);
    FAIL(scratch_alloc(cx));
    note_mem(cx);
#undef FAIL
    return 0;
}

static void free_ctx(void *p) {
    cuda_ctx *cx = (cuda_ctx *)p;
    if (!cx) return;
    if (cx->st) cudaStreamSynchronize(cx->st);
    float *bufs[] = {cx->x, cx->xn, cx->qkv, cx->z, cx->b, cx->a, cx->o, cx->qg, cx->kk, cx->vv,
                     cx->qr, cx->rl, cx->sg, cx->su, cx->ss, cx->wts, cx->part, cx->h, cx->logits, cx->mf_part};
    for (float *b : bufs) cudaFree(b);
    cudaFree(cx->ids), cudaFree(cx->nan_flag), cudaFree(cx->amax), cudaFree(cx->arena), cudaFree(cx->mf_bar);
    cudaFree(cx->tk_mem);
    cudaFree(cx->ed_dev);
    if (cx->ed_host) cudaFreeHost(cx->ed_host);
    cudaFree(cx->pf.mem);
    if (cx->host_route.pin) cudaFreeHost(cx->host_route.pin);
    qgemm_sep_free(&cx->sep);
    for (int i = 0; i < 2; i++) {
        if (cx->pin[i]) cudaFreeHost(cx->pin[i]);
        if (cx->pin_ev[i]) cudaEventDestroy(cx->pin_ev[i]);
    }
    for (cudaEvent_t e : cx->prof_ev) cudaEventDestroy(e);
    for (int i = 0; i < 3; i++)
        if (cx->pf_ev[i]) cudaEventDestroy(cx->pf_ev[i]);
    for (int i = 0; i < 2; i++)
        if (cx->side[i]) cudaStreamDestroy(cx->side[i]);
    if (cx->st) cudaStreamDestroy(cx->st);
    delete cx;
}

// ---------------------------------------------------------------------------------------------
// States.
static void drop_graphs(cuda_state *s) {
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 2; i++)
            if (s->graph[j][i]) cudaGraphExecDestroy(s->graph[j][i]), s->graph[j][i] = NULL;
}

static void state_free_cuda(void *ctx, void *p) {
    (void)ctx;
    cuda_state *s = (cuda_state *)p;
    if (!s) return;
    drop_graphs(s);
    for (void *a : s->allocs) cudaFree(a);
    if (s->h_tok) cudaFreeHost(s->h_tok);
    if (s->h_log) cudaFreeHost(s->h_log);
    delete s;
}

void state_reset_cuda(void *ctx, void *p) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    const lily_config *c = &cx->c;
    for (int l = 0; l < c->n_layers; l++)
        if (!cx->L[l].full) {
            cudaMemsetAsync(s->ring[l], 0, (size_t)c->conv_kernel * lily_conv_dim(c) * 4, cx->st);
            cudaMemsetAsync(s->S[l], 0, (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim * 4, cx->st);
        }
    cudaMemsetAsync(s->d_pos, 0, sizeof(int), cx->st);
    cudaMemsetAsync(s->d_step, 0, sizeof(int), cx->st);
    cudaStreamSynchronize(cx->st);
    s->pos = 0;
}

static int state_new_cuda(void *ctx, int max_ctx, void **out) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    const lily_config *c = &cx->c;
    *out = NULL;
    if (max_ctx < 1) return lily_err_set(LILY_EINVAL, "cuda backend: max_ctx %d", max_ctx);
    cuda_state *s = new cuda_state();
    s->max_ctx = max_ctx;
    s->kc.assign(c->n_layers, NULL), s->vc.assign(c->n_layers, NULL);
    s->ring.assign(c->n_layers, NULL), s->S.assign(c->n_layers, NULL);
    auto alloc = [&](void **p, size_t n) {
        if (cudaMalloc(p, n) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        s->allocs.push_back(*p);
        return true;
    };
    bool ok = true;
    s->kv_f32 = cx->opt[LILY_CUDA_OPT_F32ACT] != 0;
    size_t kv = (size_t)c->n_kv_heads * max_ctx * c->head_dim * (s->kv_f32 ? 4 : 2);
    for (int l = 0; l < c->n_layers && ok; l++) {
        if (cx->L[l].full)
            ok = alloc(&s->kc[l], kv) && alloc(&s->vc[l], kv);
        else
            ok = alloc((void **)&s->ring[l], (size_t)c->conv_kernel * lily_conv_dim(c) * 4) &&
                 alloc((void **)&s->S[l], (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim * 4);
    }
    s->ids_cap = 1 << 16;
    ok = ok && alloc((void **)&s->d_tok, 4) && alloc((void **)&s->d_pos, 4) && alloc((void **)&s->d_step, 4) &&
         alloc((void **)&s->d_ids, (size_t)s->ids_cap * 4);
    ok = ok && cudaHostAlloc(&s->h_tok, 4, 0) == cudaSuccess &&
         cudaHostAlloc(&s->h_log, (size_t)c->vocab_size * 4, 0) == cudaSuccess;
    if (!ok) {
        size_t fb = 0, tb = 0;
        cudaMemGetInfo(&fb, &tb);
        state_free_cuda(ctx, s);
        return lily_err_set(LILY_ENOMEM, "cuda backend: out of GPU memory for a %d-token state "
                            "(KV cache %.2f GB; %.2f GB free)", max_ctx,
                            2.0 * kv * (c->n_layers / 4) / 1e9, fb / 1e9);
    }
    state_reset_cuda(ctx, s);
    note_mem(cx);
    *out = s;
    return 0;
}

static int state_pos_cuda(void *ctx, void *p) {
    (void)ctx;
    return ((cuda_state *)p)->pos;
}

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
    prof_mark(cx, "start");
    embed_row(cx->embed_q, cx->embed_dense, cx->embed_dt, c->hidden, s->d_tok, cx->x, st);
    prof_mark(cx, "embed");
    attn_dims ad = {c->n_heads, c->n_kv_heads, c->head_dim, c->rope_dim, s->max_ctx, c->rope_theta, eps, s->kv_f32};
    gdn_dims gd = {c->lin_k_heads, c->lin_v_heads, c->lin_k_dim, c->lin_v_dim, c->conv_kernel};
    for (int l = 0; l < c->n_layers; l++) {
        const dev_layer *d = &cx->L[l];
        gv_args g, go; // go: the layer's out_proj (GDN) or o_proj (attention)
        memset(&g, 0, sizeof g);
        g.cols = c->hidden, g.x = cx->x, g.pro = PRO_RMSNORM, g.norm_w = d->in_norm, g.eps = eps;
        if (!d->full) {
            g.nseg = 4;
            g.seg[0].m = d->qkv, g.seg[0].y = cx->qkv;
            g.seg[1].m = d->z, g.seg[1].y = cx->z;
            g.seg[2].m = d->b, g.seg[2].y = cx->b;
            g.seg[3].m = d->a, g.seg[3].y = cx->a;
            gemv_launch(g, 0, st);
            prof_mark(cx, "gdn in_proj (norm+qkv/z/b/a)");
            gdn_step(gd, cx->qkv, cx->b, cx->a, d->conv, d->dt_bias, d->A, s->ring[l], s->S[l], cx->o,
                     s->d_pos, cx->opt[LILY_CUDA_OPT_GDN_SPLIT], st);
            prof_mark(cx, "gdn conv+delta rule");
            memset(&go, 0, sizeof go);
            go.nseg = 1, go.cols = c->lin_v_heads * c->lin_v_dim, go.x = cx->o, go.pro = PRO_GATED;
            go.norm_w = d->gnorm, go.eps = eps, go.gz = cx->z, go.ghd = c->lin_v_dim, go.epi = GV_RESID;
            go.seg[0].m = d->out, go.seg[0].y = cx->x, go.seg[0].res = cx->x;
        } else {
            g.nseg = 3;
            g.seg[0].m = d->q, g.seg[0].y = cx->qg;
            g.seg[1].m = d->k, g.seg[1].y = cx->kk;
            g.seg[2].m = d->v, g.seg[2].y = cx->vv;
            gemv_launch(g, 0, st);
            prof_mark(cx, "attn in_proj (norm+q/k/v)");
            qk_norm_rope_append(ad, cx->qg, cx->kk, cx->vv, d->q_norm, d->k_norm, cx->qr, s->kc[l],
                                s->vc[l], s->d_pos, st);
            prof_mark(cx, "attn qk norm+rope+append");
            int nsplit, gqa;
            attn_plan(cx, ad, &nsplit, &gqa);
            attn_decode(ad, cx->qr, s->kc[l], s->vc[l], cx->qg, cx->part, cx->o, s->d_pos, nsplit, gqa, st);
            prof_mark(cx, "attn decode+combine");
            memset(&go, 0, sizeof go);
            go.nseg = 1, go.cols = c->n_heads * c->head_dim, go.x = cx->o, go.pro = PRO_PLAIN, go.epi = GV_RESID;
            go.seg[0].m = d->o, go.seg[0].y = cx->x, go.seg[0].res = cx->x;
        }
        memset(&g, 0, sizeof g);
        g.cols = c->hidden, g.x = cx->x, g.pro = PRO_RMSNORM, g.norm_w = d->post_norm, g.eps = eps;
        g.x_out = cx->xn;
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
        const gv_args front[2] = {go, g};
        const int fo = cx->opt[LILY_CUDA_OPT_MOE_FRONT] == 2, nf = 2 - fo;
        const bool fused = cx->opt[LILY_CUDA_OPT_MOE_FUSED] && moe_fused_takes(d->moe, d->sh_down, NULL, 0);
        if (fused && cx->opt[LILY_CUDA_OPT_MOE_FRONT] && moe_fused_takes(d->moe, d->sh_down, front + fo, nf)) {
            if (fo) {
                gemv_launch(go, 0, st);
                prof_mark(cx, d->full ? "attn o_proj" : "gdn gated norm+out_proj");
            }
            moe_fused(d->moe, front + fo, nf, cx->rl, NULL, cx->ids, cx->wts, d->sh_down, cx->sg, cx->su, cx->ss, cx->x,
                      cx->x, cx->mf_part, cx->mf_bar, st);
            prof_mark(cx, fo ? "moe router+experts (fused)" : "moe out_proj+router+experts (fused)");
            if (cx->dump) dump_layer(cx, l);
            continue;
        }
        gemv_launch(go, 0, st);
        prof_mark(cx, d->full ? "attn o_proj" : "gdn gated norm+out_proj");
        gemv_launch(g, 0, st);
        prof_mark(cx, "moe norm+router+shared gate/up");
        if (fused) {
            moe_fused(d->moe, NULL, 0, cx->rl, cx->xn, cx->ids, cx->wts, d->sh_down, cx->sg, cx->su, cx->ss, cx->x, cx->x,
                      cx->mf_part, cx->mf_bar, st);
            prof_mark(cx, "moe experts gate/up+down (fused)");
        } else {
            moe_gate_up(d->moe, cx->rl, cx->xn, cx->h, cx->ids, cx->wts, st);
            prof_mark(cx, "moe experts gate/up");
            moe_down(d->moe, cx->h, cx->ids, cx->wts, d->sh_down, cx->sg, cx->su, cx->ss, cx->x, cx->x, st);
            prof_mark(cx, "moe experts down+shared");
        }
        if (cx->dump) dump_layer(cx, l);
    }
    gv_args g;
    memset(&g, 0, sizeof g);
    g.nseg = 1, g.cols = c->hidden, g.x = cx->x, g.pro = PRO_RMSNORM, g.norm_w = cx->final_norm, g.eps = eps;
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
// Snapshots: the position, then every layer's cache/state buffers, in layer order.
static size_t save_size_cuda(void *ctx, void *p) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    const lily_config *c = &cx->c;
    size_t n = sizeof(int);
    for (int l = 0; l < c->n_layers; l++)
        n += cx->L[l].full ? 2 * (size_t)c->n_kv_heads * s->pos * c->head_dim * (s->kv_f32 ? 4 : 2)
                           : ((size_t)c->conv_kernel * lily_conv_dim(c) + (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim) * 4;
    return n;
}

// Copy the state's buffers (positions [0, pos) of the KV caches) to or from buf, in save_size_cuda's
// layout, on the context's stream: save gives the direction, dev says buf is device memory. Host copies
// end with a synchronisation; device-to-device ones are ordered on the stream and need none.
static int snap_copy(cuda_ctx *cx, cuda_state *s, char *buf, int pos, bool save, bool dev) {
    const lily_config *c = &cx->c;
    const cudaMemcpyKind kind = dev ? cudaMemcpyDeviceToDevice : save ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    auto cp = [&](void *state_mem, size_t n) {
        cudaError_t e = save ? cudaMemcpyAsync(buf, state_mem, n, kind, cx->st)
                             : cudaMemcpyAsync(state_mem, buf, n, kind, cx->st);
        buf += n;
        return e;
    };
    for (int l = 0; l < c->n_layers; l++) {
        if (cx->L[l].full) {
            for (int h = 0; h < c->n_kv_heads; h++) {
                size_t es = s->kv_f32 ? 4 : 2;
                size_t off = (size_t)h * s->max_ctx * c->head_dim * es, n = (size_t)pos * c->head_dim * es;
                CU_TRY(cp((char *)s->kc[l] + off, n));
                CU_TRY(cp((char *)s->vc[l] + off, n));
            }
        } else {
            CU_TRY(cp(s->ring[l], (size_t)c->conv_kernel * lily_conv_dim(c) * 4));
            CU_TRY(cp(s->S[l], (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim * 4));
        }
    }
    if (!dev) CU_TRY(cudaStreamSynchronize(cx->st));
    return 0;
}

static int save_cuda(void *ctx, void *p, void *dst) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    CU_TRY(cudaStreamSynchronize(cx->st));
    memcpy(dst, &s->pos, sizeof(int));
    return snap_copy(cx, s, (char *)dst + sizeof(int), s->pos, true, false);
}

// The state's position, on the host and for the step's kernels.
static int set_pos(cuda_ctx *cx, cuda_state *s, int pos) {
    s->pos = pos;
    CU_TRY(cudaMemcpyAsync(s->d_pos, &s->pos, sizeof(int), cudaMemcpyHostToDevice, cx->st));
    CU_TRY(cudaStreamSynchronize(cx->st));
    return 0;
}

static int load_cuda(void *ctx, void *p, const void *src, size_t n) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    int pos;
    if (n < sizeof(int)) return lily_err_set(LILY_EFORMAT, "cuda backend: snapshot too short");
    memcpy(&pos, src, sizeof(int));
    if (pos < 0 || pos > s->max_ctx) return lily_err_set(LILY_ERANGE, "cuda backend: snapshot position %d", pos);
    int old = s->pos;
    s->pos = pos;
    if (save_size_cuda(ctx, p) != n) {
        s->pos = old;
        return lily_err_set(LILY_EFORMAT, "cuda backend: snapshot size %zu does not match", n);
    }
    CU_TRY(cudaStreamSynchronize(cx->st));
    int rc = snap_copy(cx, s, (char *)src + sizeof(int), pos, false, false);
    if (rc) return rc;
    return set_pos(cx, s, pos);
}

// Snapshots for the engine's prefix cache (lily_backend.snap_save): save_cuda's layout, kept in device
// memory, where taking and restoring one are device-to-device copies ordered on the stream. Through
// pageable host memory, the snapshots of a 32K prompt (every 4096 tokens: 3.5 GB) took 2.6 s against
// its 1.1 s of prefill (docs/PERF.md). Device memory is taken only while SNAP_RESERVE bytes stay free
// beside it, and the prefill scratch's, if not yet allocated; else (or with LILY_CUDA_OPT_SNAP_DEV off)
// the snapshot goes to host memory.
#define SNAP_RESERVE ((size_t)1 << 30)
struct cuda_snap {
    int pos, kv_f32;
    bool dev;     // mem is device memory (else host)
    size_t bytes; // save_size_cuda of the state it was taken from
    char *mem;    // the buffers after the position word
};

static void snap_free_cuda(void *ctx, void *snap) {
    (void)ctx;
    cuda_snap *h = (cuda_snap *)snap;
    if (!h) return;
    if (h->dev)
        cudaFree(h->mem);
    else
        free(h->mem);
    delete h;
}

static void *snap_save_cuda(void *ctx, void *p, size_t *bytes) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    cuda_snap *h = new cuda_snap();
    h->pos = s->pos, h->kv_f32 = s->kv_f32, h->bytes = save_size_cuda(ctx, p);
    const size_t n = h->bytes - sizeof(int);
    size_t fb = 0, tb = 0;
    if (cx->opt[LILY_CUDA_OPT_SNAP_DEV] && cudaMemGetInfo(&fb, &tb) == cudaSuccess &&
        fb > n + SNAP_RESERVE + pf_scratch_pending(cx) &&
        cudaMalloc((void **)&h->mem, n) == cudaSuccess)
        h->dev = true;
    else {
        cudaGetLastError();
        h->mem = (char *)malloc(n ? n : 1);
    }
    if (!h->mem) {
        delete h;
        lily_err_set(LILY_ENOMEM, "cuda backend: no memory for a snapshot of %zu bytes", n);
        return NULL;
    }
    if (!h->dev) cudaStreamSynchronize(cx->st);
    if (snap_copy(cx, s, h->mem, s->pos, true, h->dev)) {
        snap_free_cuda(ctx, h);
        return NULL;
    }
    note_mem(cx);
    *bytes = h->bytes;
    return h;
}

static int snap_load_cuda(void *ctx, void *p, void *snap) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    const cuda_snap *h = (const cuda_snap *)snap;
    if (h->pos > s->max_ctx || h->kv_f32 != s->kv_f32)
        return lily_err_set(LILY_ERANGE, "cuda backend: a snapshot of %d positions (%s KV) does not fit this state "
                            "(%d positions, %s KV)", h->pos, h->kv_f32 ? "fp32" : "bf16", s->max_ctx,
                            s->kv_f32 ? "fp32" : "bf16");
    if (!h->dev) CU_TRY(cudaStreamSynchronize(cx->st));
    int rc = snap_copy(cx, s, h->mem, h->pos, false, h->dev);
    if (rc) return rc;
    return set_pos(cx, s, h->pos);
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
    {"attn_comb", LILY_CUDA_OPT_ATTN_COMB, 0, 1}, {"qg_bf16w", LILY_CUDA_OPT_QG_BF16W, 0, 1},
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
