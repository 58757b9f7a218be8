// upload_cuda.cu: the CUDA backend's context: the model's weights uploaded once (4-bit or 8-bit codes as
// they are, scales and biases repacked into one word per group, the GDN in_proj's qkv, b and a stacked
// for the prefill's one GEMM) through pinned buffers with a progress line, the options read from the
// environment, the streams and the decode step's scratch; and its release. Out-of-memory and CUDA
// errors come back as one clear message (lily_err_set), never as a half-made context.
#include <limits.h>
#include <math.h>

#include <vector>

#include "backend_cuda.cuh"

#define PIN_BYTES (64u << 20)
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
// routed experts, bit 4 the routed experts of layer 0 for every layer, of either kind (with
// LILY_CUDA_DEV_MF_FIXED, the step's experts are then the same 8, ~14 MB, resident in L2). It bounds
// what reading weights from L2 instead of DRAM could give the decode step.
static void dev_alias(cuda_ctx *cx, int mode) {
    const int n = (int)cx->L.size();
    for (int l = 0; l < n; l++) {
        int f = 0;
        while (cx->L[f].full != cx->L[l].full) f++;
        if ((mode & 4) && l > 0) {
            dev_layer *d = &cx->L[l];
            d->moe.gate = cx->L[0].moe.gate, d->moe.up = cx->L[0].moe.up, d->moe.down = cx->L[0].moe.down;
            d->moe.dsl_codes = cx->L[0].moe.dsl_codes, d->moe.dsl_sb = cx->L[0].moe.dsl_sb;
        }
        if (f == l) continue;
        dev_layer *d = &cx->L[l];
        const dev_layer *s = &cx->L[f];
        if (mode & 1) {
            d->qkv = s->qkv, d->z = s->z, d->b = s->b, d->a = s->a, d->out = s->out, d->qkvba = s->qkvba;
            d->q = s->q, d->k = s->k, d->v = s->v, d->o = s->o;
            d->router = s->router, d->sh_gate = s->sh_gate, d->sh_up = s->sh_up, d->sh_down = s->sh_down;
            d->sh_score = s->sh_score;
        }
        if (mode & 2)
            d->moe.gate = s->moe.gate, d->moe.up = s->moe.up, d->moe.down = s->moe.down, d->moe.dsl_codes = s->moe.dsl_codes,
            d->moe.dsl_sb = s->moe.dsl_sb;
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
    float **bufs[] = {&cx->x, &cx->x2, &cx->xn, &cx->qkv, &cx->z, &cx->b, &cx->a, &cx->o, &cx->qg, &cx->kk,
                      &cx->vv, &cx->qr, &cx->rl, &cx->sg, &cx->su, &cx->ss, &cx->wts};
    for (float **b : bufs) CU_TRY(cudaMalloc(b, (big + 1024) * sizeof(float)));
    attn_dims ad = {c->n_heads, c->n_kv_heads, c->head_dim, c->rope_dim, 0, c->rope_theta, c->norm_eps, 0};
    CU_TRY(cudaMalloc(&cx->part, attn_part_floats(ad, maxsplit) * sizeof(float)));
    CU_TRY(cudaMalloc(&cx->h, (size_t)c->n_experts_tok * c->moe_inter * sizeof(float)));
    // moe_fused's partial outputs (the model's expert shapes; moe_fused_part_floats of a layer's moe_w)
    CU_TRY(cudaMalloc(&cx->mf_part, ((size_t)c->n_experts_tok * (c->moe_inter / 32) + 1) * c->hidden * sizeof(float)));
    CU_TRY(cudaMalloc(&cx->mf_bar, 2 * sizeof(unsigned)));
    CU_TRY(cudaMemset(cx->mf_bar, 0, 2 * sizeof(unsigned)));
    CU_TRY(cudaMalloc(&cx->mf_acc, 2 * ((size_t)c->hidden + 1) * sizeof(unsigned long long)));
    CU_TRY(cudaMemset(cx->mf_acc, 0, 2 * ((size_t)c->hidden + 1) * sizeof(unsigned long long)));
    CU_TRY(cudaMalloc(&cx->gdn_hbar, 2 * (size_t)(c->lin_v_heads > 0 ? c->lin_v_heads : 1) * sizeof(unsigned)));
    CU_TRY(cudaMemset(cx->gdn_hbar, 0, 2 * (size_t)(c->lin_v_heads > 0 ? c->lin_v_heads : 1) * sizeof(unsigned)));
    CU_TRY(cudaMalloc(&cx->logits, (size_t)c->vocab_size * sizeof(float)));
    CU_TRY(cudaMalloc(&cx->ids, 64 * sizeof(int)));
    CU_TRY(cudaMalloc(&cx->nan_flag, sizeof(int)));
    CU_TRY(cudaMemset(cx->nan_flag, 0, sizeof(int)));
    cx->amax_n = gemv_max_blocks();
    CU_TRY(cudaMalloc(&cx->amax, cx->amax_n * sizeof(float2)));
    return 0;
}


// Device memory in use now (all of the device's, as the driver reports it), kept as a peak.
void note_mem(cuda_ctx *cx) {
    size_t fb = 0, tb = 0;
    if (cudaMemGetInfo(&fb, &tb) == cudaSuccess && tb - fb > cx->peak) cx->peak = tb - fb;
}

int init_cuda(const lily_model *m, void **out) {
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
    cx->opt[LILY_CUDA_OPT_ATTN_COMB] = env_int("LILY_CUDA_ATTN_COMB", 2); // 0 serial, 1 batches of 8, 2 all at once
    cx->opt[LILY_CUDA_OPT_ATTN_TC] = env_int("LILY_CUDA_ATTN_TC", 1) != 0;
    cx->opt[LILY_CUDA_OPT_QG_BF16W] = env_int("LILY_CUDA_QG_BF16W", 1) != 0;
    cx->opt[LILY_CUDA_OPT_QG_RS] = env_int("LILY_CUDA_QG_RS", 0) != 0;
    cx->opt[LILY_CUDA_OPT_QG_WIDE] = env_int("LILY_CUDA_QG_WIDE", 1);
    cx->opt[LILY_CUDA_OPT_QG_TMA] = env_int("LILY_CUDA_QG_TMA", 1) != 0;
    cx->opt[LILY_CUDA_OPT_MOE_GATHER] = env_int("LILY_CUDA_MOE_GATHER", 1) != 0;
    cx->opt[LILY_CUDA_OPT_QG_TMA128] = env_int("LILY_CUDA_QG_TMA128", 1); // 2: 128-row tiles only
    cx->opt[LILY_CUDA_OPT_MOE_FUSED] = env_int("LILY_CUDA_MOE_FUSED", 1) != 0;
    cx->opt[LILY_CUDA_OPT_MOE_FRONT] = env_int("LILY_CUDA_MOE_FRONT", 0); // 1 = both phases, 2 = the router only
    cx->opt[LILY_CUDA_OPT_MOE_ACC] = env_int("LILY_CUDA_MOE_ACC", 1) != 0;
    // Off: within noise in the step's graph (+0.4 %), though 118 us faster with plain launches (docs/PERF.md,
    // twenty-ninth session); its head barrier needs every block resident.
    cx->opt[LILY_CUDA_OPT_GDN_OUT] = env_int("LILY_CUDA_GDN_OUT", 0) != 0;
    cx->opt[LILY_CUDA_OPT_GDN_FRONT] = env_int("LILY_CUDA_GDN_FRONT", 0) != 0;
    // The q/k norm, RoPE and append inside the attention kernel: decode 4K +0.5 %, 32K +0.9 % (docs/PERF.md,
    // thirty-first session).
    cx->opt[LILY_CUDA_OPT_ATTN_QK] = env_int("LILY_CUDA_ATTN_QK", 1) != 0;
    // moe_fused's down slice from the slice-major copy, where it was built at load (LILY_CUDA_MOE_DSL=0 builds
    // none: ~6.4 GB less GPU memory for the full-size model).
    cx->opt[LILY_CUDA_OPT_MOE_DSL] = env_int("LILY_CUDA_MOE_DSL", 1) != 0;
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
    lily_cuda_dev_mf_fixed = env_int("LILY_CUDA_DEV_MF_FIXED", 0);
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
    if (cx->opt[LILY_CUDA_OPT_MOE_DSL]) { // after the weights, layer by layer, while an eighth of the GPU stays free
        size_t fr = 0, tot = 0;          // (layers without a copy run from the row-major weights: the same results)
        cudaMemGetInfo(&fr, &tot);
        for (dev_layer &d : cx->L) {
            void *mem = NULL;
            if (moe_dsl_build(&d.moe, &mem, tot / 8, cx->st)) cx->dsl_mem.push_back(mem);
        }
        FAIL(cudaStreamSynchronize(cx->st) == cudaSuccess ? 0 : lily_err_set(LILY_EBACKEND, "cuda backend: the slice-major "
                 "down copies: %s", cudaGetErrorString(cudaGetLastError())));
    }
    if (const int alias = env_int("LILY_CUDA_DEV_ALIAS", 0)) dev_alias(cx, alias);
    FAIL(scratch_alloc(cx));
    note_mem(cx);
#undef FAIL
    return 0;
}

void free_ctx(void *p) {
    cuda_ctx *cx = (cuda_ctx *)p;
    if (!cx) return;
    if (cx->st) cudaStreamSynchronize(cx->st);
    float *bufs[] = {cx->x, cx->x2, cx->xn, cx->qkv, cx->z, cx->b, cx->a, cx->o, cx->qg, cx->kk, cx->vv,
                     cx->qr, cx->rl, cx->sg, cx->su, cx->ss, cx->wts, cx->part, cx->h, cx->logits, cx->mf_part};
    for (float *b : bufs) cudaFree(b);
    cudaFree(cx->ids), cudaFree(cx->nan_flag), cudaFree(cx->amax), cudaFree(cx->arena), cudaFree(cx->mf_bar), cudaFree(cx->mf_acc),
        cudaFree(cx->gdn_hbar);
    cudaFree(cx->tk_mem);
    for (void *p : cx->dsl_mem) cudaFree(p);
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
