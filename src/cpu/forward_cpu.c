// forward_cpu.c: the CPU reference backend (struct lily_backend lily_backend_cpu): the whole
// Qwen3.5-MoE forward pass of spec §2, readable top to bottom, on the ops of ops_cpu.h.
//
// Precision (spec §7): every activation is fp32 and every product accumulates in fp32; the GDN
// state, its decay and gates, the attention softmax and the router softmax are fp32. That is more
// precise than HF's bf16 path, and matches HF run in fp32 (the committed fixtures) to within
// ~4e-5 of the largest logit (tests/py/test_model_fixtures.py states the tolerance).
//
// A forward call runs its tokens in internal chunks of at most `chunk` tokens (128, or
// $LILY_CPU_CHUNK), so scratch memory is bounded whatever n is. Within a chunk each projection is
// one matrix product over all its tokens; the GDN recurrence runs token by token (the exact
// sequential form of spec §4). Every per-token result is computed the same way whatever the
// chunking, so `lily logits --step N` gives bit-identical logits for every N.
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "cpu/ops_cpu.h"
#include "sampler.h"

#define CPU_CHUNK_DEFAULT 128
#define CPU_SNAPSHOT_MAGIC 0x3153434cu // "LCS1"

struct cpu_ctx {
    const struct lily_model *m;
    int n_full, n_gdn;
    int slot[LILY_MAX_LAYERS]; // index of layer i among the layers of its kind
    float *inv_freq;           // (rope_dim/2) RoPE inverse frequencies
    int chunk;                 // tokens per internal chunk
    float *last;               // (vocab_size) the logits of the last single step (made at first use)
};

// One sequence. KV cache fp32 [n_full][2 (K, V)][max_ctx][Hkv*D]; conv state [n_gdn][K-1][C]
// (raw pre-conv rows, oldest first); recurrent state [n_gdn][Hv][Dk][Dv] fp32.
struct cpu_state {
    int max_ctx, pos;
    float *kv, *conv, *rec;
    size_t kv_layer; // floats per full layer per K or V: max_ctx * Hkv * D
};

// Scratch for one chunk of T tokens (sizes from the config, allocated per forward call).
struct cpu_scratch {
    float *x, *xn, *out;           // [T][H] residual, normed input, block output
    float *qkv, *conv, *z;         // [T][C], [T][C], [T][Hv*Dv]
    float *q, *k, *v, *o, *gated;  // GDN heads: [T][Hk*Dk] x2, [T][Hv*Dv] x3
    float *ab, *gamma, *beta;      // [T][2*Hv] (b then a), [T][Hv] x2
    float *qg, *aq, *gate, *ak, *av, *att; // attention: [T][2*Hq*D], [T][Hq*D] x2, [T][Hkv*D] x2, [T][Hq*D]
    float *rl, *rw;                // [T][E] router logits, [T][k] routing weights
    int *ri, *tok;                 // [T][k] chosen experts, [T] token list of one expert
    float *ex, *eg, *eu, *ey;      // expert: [T][H] gathered input, [T][I] x2, [T][H]
    float *sg, *su, *sy;           // shared expert: [T][Is] x2, [T][H]
};

static size_t conv_floats(const struct lily_config *c) {
    return (size_t)(c->conv_kernel - 1) * lily_conv_dim(c);
}
static size_t rec_floats(const struct lily_config *c) {
    return (size_t)c->lin_v_heads * c->lin_k_dim * c->lin_v_dim;
}

// ---------------------------------------------------------------------------------------------
// Context.
static int cpu_init(const struct lily_model *m, void **out) {
    const struct lily_config *c = &m->cfg;
    *out = NULL;
    if (c->n_layers < 1 || c->n_layers > LILY_MAX_LAYERS || c->hidden < 1 || c->vocab_size < 1)
        return lily_err_set(LILY_EUNSUPPORTED, "cpu backend: bad model sizes");
    int n_full = 0, n_gdn = 0;
    for (int i = 0; i < c->n_layers; i++) n_full += c->layer_full[i] != 0;
    n_gdn = c->n_layers - n_full;
    if (n_full && (c->n_heads < 1 || c->n_kv_heads < 1 || c->n_heads % c->n_kv_heads ||
                   c->head_dim < 1 || c->rope_dim < 0 || c->rope_dim % 2 ||
                   c->rope_dim > c->head_dim || c->rope_dim > 1024))
        return lily_err_set(LILY_EUNSUPPORTED, "cpu backend: unsupported attention shape");
    if (n_gdn && (c->lin_k_heads < 1 || c->lin_v_heads % c->lin_k_heads || c->lin_k_dim < 1 ||
                  c->lin_v_dim < 1 || c->conv_kernel < 1))
        return lily_err_set(LILY_EUNSUPPORTED, "cpu backend: unsupported Gated DeltaNet shape");
    if (c->n_experts < 1 || c->n_experts_tok < 1 || c->n_experts_tok > c->n_experts)
        return lily_err_set(LILY_EUNSUPPORTED, "cpu backend: unsupported MoE shape");

    struct cpu_ctx *x = xcalloc(1, sizeof *x);
    x->m = m;
    for (int i = 0; i < c->n_layers; i++)
        x->slot[i] = c->layer_full[i] ? x->n_full++ : x->n_gdn++;
    x->inv_freq = xmalloc((size_t)(c->rope_dim / 2 + 1) * sizeof(float));
    cpu_rope_freqs(x->inv_freq, c->rope_dim, c->rope_theta);
    x->chunk = CPU_CHUNK_DEFAULT;
    const char *e = getenv("LILY_CPU_CHUNK");
    if (e && atoi(e) > 0) x->chunk = atoi(e);
    *out = x;
    return 0;
}

static void cpu_free(void *ctx) {
    struct cpu_ctx *x = ctx;
    if (!x) return;
    free(x->inv_freq);
    free(x->last);
    free(x);
}

// ---------------------------------------------------------------------------------------------
// States.
static int cpu_state_new(void *ctx, int max_ctx, void **out) {
    struct cpu_ctx *x = ctx;
    const struct lily_config *c = &x->m->cfg;
    *out = NULL;
    if (max_ctx < 1) return lily_err_set(LILY_EINVAL, "cpu backend: context size %d < 1", max_ctx);
    struct cpu_state *s = xcalloc(1, sizeof *s);
    s->max_ctx = max_ctx;
    s->kv_layer = (size_t)max_ctx * c->n_kv_heads * c->head_dim;
    // Sizes follow from the user's max_ctx: plain calloc, so a too-large context is an error.
    s->kv = x->n_full ? calloc(2 * (size_t)x->n_full * s->kv_layer, sizeof(float)) : NULL;
    s->conv = x->n_gdn && conv_floats(c) ? calloc((size_t)x->n_gdn * conv_floats(c), sizeof(float)) : NULL;
    s->rec = x->n_gdn ? calloc((size_t)x->n_gdn * rec_floats(c), sizeof(float)) : NULL;
    if ((x->n_full && !s->kv) || (x->n_gdn && conv_floats(c) && !s->conv) || (x->n_gdn && !s->rec)) {
        free(s->kv), free(s->conv), free(s->rec), free(s);
        return lily_err_set(LILY_ENOMEM, "cpu backend: no memory for a state of %d positions", max_ctx);
    }
    *out = s;
    return 0;
}

static void cpu_state_free(void *ctx, void *state) {
    (void)ctx;
    struct cpu_state *s = state;
    if (!s) return;
    free(s->kv), free(s->conv), free(s->rec), free(s);
}

static void cpu_state_reset(void *ctx, void *state) {
    struct cpu_ctx *x = ctx;
    struct cpu_state *s = state;
    const struct lily_config *c = &x->m->cfg;
    // The KV cache past pos is never read, so only the GDN states need clearing.
    if (s->conv) memset(s->conv, 0, (size_t)x->n_gdn * conv_floats(c) * sizeof(float));
    if (s->rec) memset(s->rec, 0, (size_t)x->n_gdn * rec_floats(c) * sizeof(float));
    s->pos = 0;
}

static int cpu_state_pos(void *ctx, void *state) {
    (void)ctx;
    return ((struct cpu_state *)state)->pos;
}

// ---------------------------------------------------------------------------------------------
// Scratch.
static void scratch_alloc(struct cpu_scratch *b, const struct lily_config *c, int T) {
    size_t H = c->hidden, C = lily_conv_dim(c), HvDv = (size_t)c->lin_v_heads * c->lin_v_dim;
    size_t HkDk = (size_t)c->lin_k_heads * c->lin_k_dim, HqD = (size_t)c->n_heads * c->head_dim;
    size_t HkvD = (size_t)c->n_kv_heads * c->head_dim, E = c->n_experts, k = c->n_experts_tok;
    size_t I = c->moe_inter, Is = c->shared_inter > 0 ? c->shared_inter : 1, Hv = c->lin_v_heads;
#define A(f, n) b->f = xmalloc_aligned(((size_t)T * (n) + 1) * sizeof(*b->f))
    A(x, H); A(xn, H); A(out, H);
    A(qkv, C); A(conv, C); A(z, HvDv);
    A(q, HkDk); A(k, HkDk); A(v, HvDv); A(o, HvDv); A(gated, HvDv);
    A(ab, 2 * Hv); A(gamma, Hv); A(beta, Hv);
    A(qg, 2 * HqD); A(aq, HqD); A(gate, HqD); A(ak, HkvD); A(av, HkvD); A(att, HqD);
    A(rl, E); A(rw, k); A(ri, k); A(tok, 1);
    A(ex, H); A(eg, I); A(eu, I); A(ey, H);
    A(sg, Is); A(su, Is); A(sy, H);
#undef A
}

static void scratch_free(struct cpu_scratch *b) {
    void *all[] = {b->x, b->xn, b->out, b->qkv, b->conv, b->z, b->q, b->k, b->v, b->o, b->gated,
                   b->ab, b->gamma, b->beta, b->qg, b->aq, b->gate, b->ak, b->av, b->att, b->rl,
                   b->rw, b->ri, b->tok, b->ex, b->eg, b->eu, b->ey, b->sg, b->su, b->sy};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) free(all[i]);
}

// ---------------------------------------------------------------------------------------------
// Gated DeltaNet mixer (spec §2.4): b->xn [T][H] -> b->out [T][H]; conv and recurrent state of
// this layer updated.
static void gdn_forward(const struct lily_config *c, const struct lily_layer *L, float *conv_state,
                        float *S, struct cpu_scratch *b, int T) {
    int C = lily_conv_dim(c), Hk = c->lin_k_heads, Hv = c->lin_v_heads;
    int Dk = c->lin_k_dim, Dv = c->lin_v_dim, HkDk = Hk * Dk, HvDv = Hv * Dv;
    float eps = c->norm_eps;

    // 1. Projections (q|k|v channels, z, beta logits, decay input).
    cpu_matmul(&L->qkv, b->xn, T, b->qkv);
    cpu_matmul(&L->z, b->xn, T, b->z);
    cpu_matmul(&L->b, b->xn, T, b->ab);
    cpu_matmul(&L->a, b->xn, T, b->ab + (size_t)T * Hv);

    // 2. Causal depthwise conv + SiLU over the q|k|v channels.
    cpu_gdn_conv(L->conv, conv_state, b->qkv, T, C, c->conv_kernel, b->conv);

    // 3-6. Split heads, L2-normalise q and k (eps inside the sqrt; q also scaled by Dk^-0.5),
    // beta = sigmoid(b), per-step decay gamma = exp(-exp(A_log) * softplus(a + dt_bias)).
    float qscale = 1.0f / sqrtf((float)Dk);
    for (int t = 0; t < T; t++) {
        const float *y = b->conv + (size_t)t * C;
        for (int h = 0; h < Hk; h++) {
            const float *qi = y + h * Dk, *ki = y + HkDk + h * Dk;
            float *qo = b->q + (size_t)t * HkDk + h * Dk, *ko = b->k + (size_t)t * HkDk + h * Dk;
            float iq = 1.0f / sqrtf(cpu_dot(qi, qi, Dk) + 1e-6f);
            float ik = 1.0f / sqrtf(cpu_dot(ki, ki, Dk) + 1e-6f);
            for (int d = 0; d < Dk; d++) {
                qo[d] = qi[d] * iq * qscale;
                ko[d] = ki[d] * ik;
            }
        }
        memcpy(b->v + (size_t)t * HvDv, y + 2 * HkDk, (size_t)HvDv * sizeof(float));
        for (int h = 0; h < Hv; h++) {
            float bl = b->ab[(size_t)t * Hv + h], al = b->ab[(size_t)(T + t) * Hv + h];
            b->beta[(size_t)t * Hv + h] = cpu_sigmoid(bl);
            b->gamma[(size_t)t * Hv + h] = expf(L->A[h] * cpu_softplus(al + L->dt_bias[h]));
        }
    }

    // 7. Delta rule, token by token, fp32 state.
    cpu_gdn_delta(S, b->q, b->k, b->v, b->gamma, b->beta, T, Hk, Hv, Dk, Dv, b->o);

    // 9. Gated RMSNorm per v head: rmsnorm(o) * w * silu(z).
    for (int t = 0; t < T; t++)
        for (int h = 0; h < Hv; h++) {
            size_t off = (size_t)t * HvDv + (size_t)h * Dv;
            cpu_rmsnorm(b->gated + off, b->o + off, L->gnorm, Dv, eps);
            for (int e = 0; e < Dv; e++) b->gated[off + e] *= cpu_silu(b->z[off + e]);
        }

    // 10. Output projection.
    cpu_matmul(&L->out, b->gated, T, b->out);
}

// ---------------------------------------------------------------------------------------------
// Gated full attention (spec §2.3): b->xn [T][H] at positions pos..pos+T-1 -> b->out [T][H]; the
// keys and values of these positions are written to the layer's cache.
static void attn_forward(const struct cpu_ctx *x, const struct lily_layer *L, float *kc, float *vc,
                         struct cpu_scratch *b, int T, int pos) {
    const struct lily_config *c = &x->m->cfg;
    int Hq = c->n_heads, Hkv = c->n_kv_heads, D = c->head_dim;
    int HqD = Hq * D, HkvD = Hkv * D;

    cpu_matmul(&L->q, b->xn, T, b->qg);
    cpu_matmul(&L->k, b->xn, T, b->ak);
    cpu_matmul(&L->v, b->xn, T, b->av);

    for (int t = 0; t < T; t++) {
        // q_proj rows are per head [query (D) | gate (D)], not two flat halves.
        for (int h = 0; h < Hq; h++) {
            const float *src = b->qg + (size_t)t * 2 * HqD + (size_t)h * 2 * D;
            float *q = b->aq + (size_t)t * HqD + (size_t)h * D;
            cpu_rmsnorm(q, src, L->q_norm, D, c->norm_eps);
            memcpy(b->gate + (size_t)t * HqD + (size_t)h * D, src + D, (size_t)D * sizeof(float));
        }
        float *k = b->ak + (size_t)t * HkvD;
        for (int h = 0; h < Hkv; h++) cpu_rmsnorm(k + h * D, k + h * D, L->k_norm, D, c->norm_eps);
        // RoPE after the q/k norms; the cache holds k after norm and RoPE.
        cpu_rope(b->aq + (size_t)t * HqD, Hq, D, c->rope_dim, x->inv_freq, pos + t);
        cpu_rope(k, Hkv, D, c->rope_dim, x->inv_freq, pos + t);
        memcpy(kc + (size_t)(pos + t) * HkvD, k, (size_t)HkvD * sizeof(float));
        memcpy(vc + (size_t)(pos + t) * HkvD, b->av + (size_t)t * HkvD, (size_t)HkvD * sizeof(float));
    }

    cpu_attention(b->aq, kc, vc, T, pos, Hq, Hkv, D, b->att);
    for (size_t i = 0; i < (size_t)T * HqD; i++) b->att[i] *= cpu_sigmoid(b->gate[i]);
    cpu_matmul(&L->o, b->att, T, b->out);
}

// ---------------------------------------------------------------------------------------------
// MoE (spec §2.5): b->xn [T][H] -> b->out [T][H]. Routed experts run over the tokens that chose
// them, in ascending expert order; each token's routed sum accumulates in that order.
static void moe_forward(const struct lily_config *c, const struct lily_layer *L,
                        struct cpu_scratch *b, int T) {
    int H = c->hidden, E = c->n_experts, K = c->n_experts_tok, I = c->moe_inter;

    cpu_matmul(&L->router, b->xn, T, b->rl);
    for (int t = 0; t < T; t++)
        cpu_route(b->rl + (size_t)t * E, E, K, c->norm_topk, b->ri + (size_t)t * K,
                  b->rw + (size_t)t * K);

    memset(b->out, 0, (size_t)T * H * sizeof(float));
    for (int e = 0; e < E; e++) {
        int n = 0;
        for (int t = 0; t < T; t++)
            for (int j = 0; j < K; j++)
                if (b->ri[(size_t)t * K + j] == e) {
                    b->tok[n] = t * K + j; // token and slot
                    memcpy(b->ex + (size_t)n * H, b->xn + (size_t)t * H, (size_t)H * sizeof(float));
                    n++;
                }
        if (!n) continue;
        cpu_matmul(&L->gate[e], b->ex, n, b->eg);
        cpu_matmul(&L->up[e], b->ex, n, b->eu);
        for (size_t i = 0; i < (size_t)n * I; i++) b->eg[i] = cpu_silu(b->eg[i]) * b->eu[i];
        cpu_matmul(&L->down[e], b->eg, n, b->ey);
        for (int i = 0; i < n; i++) {
            int t = b->tok[i] / K;
            float w = b->rw[b->tok[i]];
            float *o = b->out + (size_t)t * H;
            const float *y = b->ey + (size_t)i * H;
            for (int d = 0; d < H; d++) o[d] += w * y[d];
        }
    }

    // Shared expert, scaled by a per-token sigmoid gate.
    if (c->shared_inter > 0) {
        int Is = c->shared_inter;
        cpu_matmul(&L->sh_gate, b->xn, T, b->sg);
        cpu_matmul(&L->sh_up, b->xn, T, b->su);
        for (size_t i = 0; i < (size_t)T * Is; i++) b->sg[i] = cpu_silu(b->sg[i]) * b->su[i];
        cpu_matmul(&L->sh_down, b->sg, T, b->sy);
        float score[1];
        for (int t = 0; t < T; t++) {
            cpu_matmul(&L->sh_score, b->xn + (size_t)t * H, 1, score);
            float g = cpu_sigmoid(score[0]);
            float *o = b->out + (size_t)t * H;
            const float *s = b->sy + (size_t)t * H;
            for (int d = 0; d < H; d++) o[d] += g * s[d];
        }
    }
}

// ---------------------------------------------------------------------------------------------
// One chunk of T tokens at positions s->pos.. : embeddings, the layers, and the logits of the
// tokens that want them (all T into `logits` [T][V] when all, else the last one into [V]).
static void forward_chunk(struct cpu_ctx *x, struct cpu_state *s, struct cpu_scratch *b,
                          const int *tokens, int T, float *logits, int all) {
    const struct lily_model *m = x->m;
    const struct lily_config *c = &m->cfg;
    int H = c->hidden;

    for (int t = 0; t < T; t++) cpu_mat_row(&m->w.embed, tokens[t], b->x + (size_t)t * H);

    for (int i = 0; i < c->n_layers; i++) {
        const struct lily_layer *L = &m->w.layers[i];
        int sl = x->slot[i];
        // h = x + Mixer(RMSNorm_in(x))
        for (int t = 0; t < T; t++)
            cpu_rmsnorm(b->xn + (size_t)t * H, b->x + (size_t)t * H, L->in_norm, H, c->norm_eps);
        if (c->layer_full[i]) {
            float *kc = s->kv + (size_t)sl * 2 * s->kv_layer;
            attn_forward(x, L, kc, kc + s->kv_layer, b, T, s->pos);
        } else {
            gdn_forward(c, L, s->conv ? s->conv + (size_t)sl * conv_floats(c) : NULL,
                        s->rec + (size_t)sl * rec_floats(c), b, T);
        }
        for (size_t j = 0; j < (size_t)T * H; j++) b->x[j] += b->out[j];
        // out = h + MoE(RMSNorm_post(h))
        for (int t = 0; t < T; t++)
            cpu_rmsnorm(b->xn + (size_t)t * H, b->x + (size_t)t * H, L->post_norm, H, c->norm_eps);
        moe_forward(c, L, b, T);
        for (size_t j = 0; j < (size_t)T * H; j++) b->x[j] += b->out[j];
    }
    s->pos += T;

    if (!logits) return;
    int first = all ? 0 : T - 1;
    for (int t = first; t < T; t++)
        cpu_rmsnorm(b->xn + (size_t)t * H, b->x + (size_t)t * H, m->w.final_norm, H, c->norm_eps);
    cpu_matmul(&m->w.lm_head, b->xn + (size_t)first * H, T - first, logits);
}

static int cpu_forward(void *ctx, void *state, const int *tokens, int n, float *logits,
                       int all_logits) {
    struct cpu_ctx *x = ctx;
    struct cpu_state *s = state;
    const struct lily_config *c = &x->m->cfg;
    if (n < 0) return lily_err_set(LILY_EINVAL, "cpu backend: negative token count");
    if (n == 0) return 0;
    if ((long)s->pos + n > s->max_ctx)
        return lily_err_set(LILY_ERANGE, "cpu backend: %d tokens at position %d exceed the context of %d",
                            n, s->pos, s->max_ctx);
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= c->vocab_size)
            return lily_err_set(LILY_ERANGE, "cpu backend: token id %d outside [0, %d)", tokens[i],
                                c->vocab_size);

    int chunk = n < x->chunk ? n : x->chunk;
    struct cpu_scratch b;
    scratch_alloc(&b, c, chunk);
    for (int done = 0; done < n; done += chunk) {
        int T = n - done < chunk ? n - done : chunk;
        int last = done + T == n;
        float *out = NULL;
        if (logits && all_logits) out = logits + (size_t)done * c->vocab_size;
        else if (logits && last) out = logits;
        forward_chunk(x, s, &b, tokens + done, T, out, all_logits);
    }
    scratch_free(&b);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Snapshots: a header, the conv and recurrent states, then K and V of positions 0..pos-1 of each
// full-attention layer.
struct snap_header {
    uint32_t magic, pos;
    uint64_t conv_floats, rec_floats, kv_row_floats, n_full, n_gdn;
};

static size_t cpu_state_save_size(void *ctx, void *state) {
    struct cpu_ctx *x = ctx;
    struct cpu_state *s = state;
    const struct lily_config *c = &x->m->cfg;
    size_t row = (size_t)c->n_kv_heads * c->head_dim;
    return sizeof(struct snap_header) +
           sizeof(float) * ((size_t)x->n_gdn * (conv_floats(c) + rec_floats(c)) +
                            2 * (size_t)x->n_full * s->pos * row);
}

static int cpu_state_save(void *ctx, void *state, void *dst) {
    struct cpu_ctx *x = ctx;
    struct cpu_state *s = state;
    const struct lily_config *c = &x->m->cfg;
    size_t row = (size_t)c->n_kv_heads * c->head_dim;
    struct snap_header h = {CPU_SNAPSHOT_MAGIC, (uint32_t)s->pos, conv_floats(c), rec_floats(c), row,
                            (uint64_t)x->n_full, (uint64_t)x->n_gdn};
    char *p = dst;
    memcpy(p, &h, sizeof h);
    p += sizeof h;
    size_t nc = (size_t)x->n_gdn * conv_floats(c) * sizeof(float);
    size_t nr = (size_t)x->n_gdn * rec_floats(c) * sizeof(float);
    if (nc) memcpy(p, s->conv, nc);
    p += nc;
    if (nr) memcpy(p, s->rec, nr);
    p += nr;
    size_t nkv = (size_t)s->pos * row * sizeof(float);
    for (int l = 0; l < 2 * x->n_full; l++) {
        if (nkv) memcpy(p, s->kv + (size_t)l * s->kv_layer, nkv);
        p += nkv;
    }
    return 0;
}

static int cpu_state_load(void *ctx, void *state, const void *src, size_t n) {
    struct cpu_ctx *x = ctx;
    struct cpu_state *s = state;
    const struct lily_config *c = &x->m->cfg;
    size_t row = (size_t)c->n_kv_heads * c->head_dim;
    struct snap_header h;
    if (n < sizeof h) return lily_err_set(LILY_EFORMAT, "cpu backend: snapshot too short");
    memcpy(&h, src, sizeof h);
    if (h.magic != CPU_SNAPSHOT_MAGIC || h.conv_floats != conv_floats(c) ||
        h.rec_floats != rec_floats(c) || h.kv_row_floats != row || h.n_full != (uint64_t)x->n_full ||
        h.n_gdn != (uint64_t)x->n_gdn)
        return lily_err_set(LILY_EFORMAT, "cpu backend: snapshot is not of this model");
    if (h.pos > (uint32_t)s->max_ctx)
        return lily_err_set(LILY_ERANGE, "cpu backend: snapshot of %u positions exceeds the context of %d",
                            h.pos, s->max_ctx);
    size_t nc = (size_t)x->n_gdn * conv_floats(c) * sizeof(float);
    size_t nr = (size_t)x->n_gdn * rec_floats(c) * sizeof(float);
    size_t nkv = (size_t)h.pos * row * sizeof(float);
    if (n != sizeof h + nc + nr + 2 * (size_t)x->n_full * nkv)
        return lily_err_set(LILY_EFORMAT, "cpu backend: snapshot size does not match its header");
    const char *p = (const char *)src + sizeof h;
    if (nc) memcpy(s->conv, p, nc);
    p += nc;
    if (nr) memcpy(s->rec, p, nr);
    p += nr;
    for (int l = 0; l < 2 * x->n_full; l++) {
        if (nkv) memcpy(s->kv + (size_t)l * s->kv_layer, p, nkv);
        p += nkv;
    }
    s->pos = (int)h.pos;
    return 0;
}

// Snapshots for the engine's prefix cache: state_save's blob in host memory, behind its size.
struct cpu_snap {
    size_t bytes;
    max_align_t data[];
};

static void *cpu_snap_save(void *ctx, void *state, size_t *bytes) {
    size_t n = cpu_state_save_size(ctx, state);
    struct cpu_snap *h = malloc(sizeof *h + n);
    if (!h) {
        lily_err_set(LILY_ENOMEM, "cpu backend: no memory for a snapshot of %zu bytes", n);
        return NULL;
    }
    h->bytes = n;
    if (cpu_state_save(ctx, state, h->data)) {
        free(h);
        return NULL;
    }
    *bytes = n;
    return h;
}

static int cpu_snap_load(void *ctx, void *state, void *snap) {
    struct cpu_snap *h = snap;
    return cpu_state_load(ctx, state, h->data, h->bytes);
}

static void cpu_snap_free(void *ctx, void *snap) {
    (void)ctx;
    free(snap);
}

// The engine's single steps on the CPU: one token's logits into the context's row (logits_last),
// then the sampler's own choice of them (k = 0: the greedy id into ids[0]; else the k largest, *n of
// them, and with mass the softmax's mass at temperature as sampler_sample sums it).
static int cpu_step_choose(void *ctx, void *state, int token, int k, float temperature,
                           const struct sampler_edit *edits, int n_edits, float *vals, int *ids, int *n, double *mass) {
    struct cpu_ctx *x = ctx;
    const int V = x->m->cfg.vocab_size;
    if (!x->last && !(x->last = malloc((size_t)V * sizeof(float))))
        return lily_err_set(LILY_ENOMEM, "cpu backend: no memory for the logits");
    float *l = x->last;
    int rc = cpu_forward(ctx, state, &token, 1, l, 0);
    if (!rc) sampler_edits_apply(l, edits, n_edits);
    if (!rc && k == 0) ids[0] = sampler_argmax(l, V);
    if (!rc && k > 0) *n = sampler_top_candidates(l, V, k, vals, ids);
    if (!rc && mass && (*mass = sampler_softmax_total(l, V, temperature)) < 0)
        rc = lily_err_set(LILY_ENOMEM, "cpu backend: no memory for the softmax");
    return rc;
}

static int cpu_step_greedy(void *ctx, void *state, int token, int *next) {
    return cpu_step_choose(ctx, state, token, 0, 0.0f, NULL, 0, NULL, next, NULL, NULL);
}

static int cpu_step_topk(void *ctx, void *state, int token, int k, float temperature, const struct sampler_edit *edits,
                         int n_edits, int n_bias, float *vals, int *ids, int *n, double *mass) {
    (void)n_bias;
    struct cpu_ctx *x = ctx;
    if (k < 1 || k > LILY_TOPK_MAX) return lily_err_set(LILY_EINVAL, "cpu backend: top-k step of %d", k);
    if (mass && !(temperature > 0.0f))
        return lily_err_set(LILY_EINVAL, "cpu backend: top-k step's mass at temperature %g", temperature);
    for (int i = 0; i < n_edits; i++)
        if (edits[i].id < 0 || edits[i].id >= x->m->cfg.vocab_size)
            return lily_err_set(LILY_ERANGE, "cpu backend: logit edit of id %d", edits[i].id);
    return cpu_step_choose(ctx, state, token, k, temperature, edits, n_edits, vals, ids, n, mass);
}

static int cpu_logits_last(void *ctx, void *state, float *logits) {
    (void)state;
    struct cpu_ctx *x = ctx;
    if (!x->last) return lily_err_set(LILY_EINVAL, "cpu backend: no step's logits yet");
    memcpy(logits, x->last, (size_t)x->m->cfg.vocab_size * sizeof(float));
    return 0;
}

const struct lily_backend lily_backend_cpu = {
    .name = "cpu",
    .prefill_piece = 256, // ~1 s of the 35B model's prefill on a few cores
    .init = cpu_init,
    .free = cpu_free,
    .state_new = cpu_state_new,
    .state_free = cpu_state_free,
    .state_reset = cpu_state_reset,
    .state_pos = cpu_state_pos,
    .forward = cpu_forward,
    .state_save_size = cpu_state_save_size,
    .state_save = cpu_state_save,
    .state_load = cpu_state_load,
    .snap_save = cpu_snap_save,
    .snap_load = cpu_snap_load,
    .snap_free = cpu_snap_free,
    .step_greedy = cpu_step_greedy,
    .step_topk = cpu_step_topk,
    .logits_last = cpu_logits_last,
};
