// quantize.c: `lily quantize`: load any checkpoint (dense bf16/f16/f32, or already quantised, which
// is dequantised first) and write it in the MLX layout of the mlx-community builds (spec §3.3):
// language_model.model.* names, switch_mlp expert stacks, conv [C, K, 1], zero-centred norms
// stored with the +1 folded in, every linear (and embed_tokens, lm_head) quantised with
// lily_quantize_row at the chosen bits and group, the router and shared_expert_gate at 8 bits
// group 64, and config.json carrying the quantization block. The small vectors are written as fp32
// so no precision is lost in the conversion.
#include "quantize.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_write.h"
#include "common.h"
#include "loader.h"

// A stack of `n` matrices of [rows, cols], quantised row by row; part: 0 codes, 1 scales, 2 biases.
struct qsrc {
    const struct lily_mat *mats;
    long rows;
    long cols;
    int bits, group, part;
};

static void fill_q(const void *vctx, long r0, long n, uint8_t *dst) {
    const struct qsrc *c = vctx;
    long ng = c->cols / c->group, rb = lily_q_row_bytes(c->cols, c->bits);
    float *row = xmalloc((size_t)c->cols * sizeof(float));
    uint8_t *codes = xmalloc((size_t)rb);
    uint16_t *s = xmalloc((size_t)ng * 2), *b = xmalloc((size_t)ng * 2);
    for (long r = r0; r < r0 + n; r++) {
        lily_mat_row(&c->mats[r / c->rows], r % c->rows, row);
        lily_quantize_row(row, c->cols, c->bits, c->group, codes, s, b);
        long i = r - r0;
        if (c->part == 0) memcpy(dst + i * rb, codes, (size_t)rb);
        else memcpy(dst + i * ng * 2, c->part == 1 ? s : b, (size_t)ng * 2);
    }
    free(row);
    free(codes);
    free(s);
    free(b);
}

// An fp32 vector (already converted by the loader), optionally mapped through log(-x) (A -> A_log).
struct vsrc {
    const float *v;
    long per_row; // elements per writer row: all of a 1-D vector, 1 for the conv [C, K, 1]
    int a_log;
};

static void fill_v(const void *vctx, long r0, long n, uint8_t *dst) {
    const struct vsrc *c = vctx;
    float *out = (float *)dst;
    const float *v = c->v + r0 * c->per_row;
    for (long i = 0; i < n * c->per_row; i++) out[i] = c->a_log ? logf(-v[i]) : v[i];
}

struct qrun {
    struct ckpt_writer w;
    void **ctx;
    int n_ctx, cap_ctx;
    json_t *qblock;
    int bits, group, gbits, ggroup;
};

static void *keep(struct qrun *Q, void *p) {
    if (Q->n_ctx == Q->cap_ctx) {
        Q->cap_ctx = Q->cap_ctx ? 2 * Q->cap_ctx : 256;
        Q->ctx = xrealloc(Q->ctx, (size_t)Q->cap_ctx * sizeof *Q->ctx);
    }
    return Q->ctx[Q->n_ctx++] = p;
}

static int add_q(struct qrun *Q, const char *module, const struct lily_mat *mats, int n, int small) {
    int bits = small ? Q->gbits : Q->bits, group = small ? Q->ggroup : Q->group;
    long rows = mats[0].rows, cols = mats[0].cols;
    if (cols % group || (cols * bits) % 32)
        return lily_err_set(LILY_EINVAL, "%s: input width %ld not divisible into %d-bit groups of %d",
                            module, cols, bits, group);
    char nm[512];
    int64_t shp[3] = {n, rows, 0};
    int nd = n ? 3 : 2;
    for (int part = 0; part < 3; part++) {
        struct qsrc *c = keep(Q, xmalloc(sizeof *c));
        *c = (struct qsrc){mats, rows, cols, bits, group, part};
        shp[2] = part == 0 ? cols * bits / 32 : cols / group;
        snprintf(nm, sizeof nm, "%s.%s", module, part == 0 ? "weight" : part == 1 ? "scales" : "biases");
        ckpt_add(&Q->w, nm, part == 0 ? LILY_DT_U32 : LILY_DT_BF16, nd, n ? shp : shp + 1, fill_q, c);
    }
    if (small)
        json_object_set_new(Q->qblock, module, json_pack("{s:i,s:i}", "group_size", group, "bits", bits));
    return 0;
}

static void add_v(struct qrun *Q, const char *name, const float *v, long n, int a_log, int conv_k) {
    struct vsrc *c = keep(Q, xmalloc(sizeof *c));
    *c = (struct vsrc){v, conv_k ? 1 : n, a_log};
    int64_t shp[3] = {conv_k ? n / conv_k : n, conv_k, 1};
    if (conv_k) ckpt_add(&Q->w, name, LILY_DT_F32, 3, shp, fill_v, c);
    else ckpt_add(&Q->w, name, LILY_DT_F32, 1, shp, fill_v, c);
}

// Copy the small files a model directory carries (tokenizer, template, generation config).
static void copy_side_files(const char *in, const char *out) {
    DIR *d = opendir(in);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        size_t l = strlen(n);
        if (n[0] == '.' || !strcmp(n, "config.json") || !strcmp(n, "model.safetensors.index.json") ||
            (l > 12 && !strcmp(n + l - 12, ".safetensors")))
            continue;
        char *src = lily_path_join(in, n), *dst = lily_path_join(out, n), *buf;
        size_t len;
        struct stat st;
        if (!stat(src, &st) && S_ISREG(st.st_mode) && !lily_read_file(src, 256u << 20, &buf, &len)) {
            FILE *f = fopen(dst, "wb");
            if (f) {
                fwrite(buf, 1, len, f);
                fclose(f);
            }
            free(buf);
        }
        free(src);
        free(dst);
    }
    closedir(d);
}

int quantize_model(const char *in, const char *out, int bits, int group, int threads) {
    if (!lily_q_supported(bits, group))
        return lily_err_set(LILY_EINVAL, "%d-bit group-%d quantisation not supported", bits, group);
    struct lily_model m;
    int rc = lily_model_load(in, &m);
    if (rc) return rc;
    const struct lily_config *c = &m.cfg;
    struct qrun Q = {.bits = bits, .group = group, .gbits = 8, .ggroup = 64};
    while (Q.ggroup > 32 && c->hidden % Q.ggroup) Q.ggroup /= 2;
    Q.qblock = json_pack("{s:i,s:i,s:s}", "group_size", group, "bits", bits, "mode", "affine");
    const char *P = "language_model.model.";
    char nm[512];
#define NM(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
    rc = add_q(&Q, NM("%sembed_tokens", P), &m.w.embed, 0, 0);
    for (int i = 0; i < c->n_layers && !rc; i++) {
        const struct lily_layer *l = &m.w.layers[i];
        add_v(&Q, NM("%slayers.%d.input_layernorm.weight", P, i), l->in_norm, c->hidden, 0, 0);
        add_v(&Q, NM("%slayers.%d.post_attention_layernorm.weight", P, i), l->post_norm, c->hidden, 0, 0);
        if (!l->full) {
            if ((rc = add_q(&Q, NM("%slayers.%d.linear_attn.in_proj_qkv", P, i), &l->qkv, 0, 0)) ||
                (rc = add_q(&Q, NM("%slayers.%d.linear_attn.in_proj_z", P, i), &l->z, 0, 0)) ||
                (rc = add_q(&Q, NM("%slayers.%d.linear_attn.in_proj_b", P, i), &l->b, 0, 0)) ||
                (rc = add_q(&Q, NM("%slayers.%d.linear_attn.in_proj_a", P, i), &l->a, 0, 0)) ||
                (rc = add_q(&Q, NM("%slayers.%d.linear_attn.out_proj", P, i), &l->out, 0, 0)))
                break;
            add_v(&Q, NM("%slayers.%d.linear_attn.conv1d.weight", P, i), l->conv,
                  (long)lily_conv_dim(c) * c->conv_kernel, 0, c->conv_kernel);
            add_v(&Q, NM("%slayers.%d.linear_attn.dt_bias", P, i), l->dt_bias, c->lin_v_heads, 0, 0);
            add_v(&Q, NM("%slayers.%d.linear_attn.A_log", P, i), l->A, c->lin_v_heads, 1, 0);
            add_v(&Q, NM("%slayers.%d.linear_attn.norm.weight", P, i), l->gnorm, c->lin_v_dim, 0, 0);
        } else {
            if ((rc = add_q(&Q, NM("%slayers.%d.self_attn.q_proj", P, i), &l->q, 0, 0)) ||
                (rc = add_q(&Q, NM("%slayers.%d.self_attn.k_proj", P, i), &l->k, 0, 0)) ||
                (rc = add_q(&Q, NM("%slayers.%d.self_attn.v_proj", P, i), &l->v, 0, 0)) ||
                (rc = add_q(&Q, NM("%slayers.%d.self_attn.o_proj", P, i), &l->o, 0, 0)))
                break;
            add_v(&Q, NM("%slayers.%d.self_attn.q_norm.weight", P, i), l->q_norm, c->head_dim, 0, 0);
            add_v(&Q, NM("%slayers.%d.self_attn.k_norm.weight", P, i), l->k_norm, c->head_dim, 0, 0);
        }
        if ((rc = add_q(&Q, NM("%slayers.%d.mlp.gate", P, i), &l->router, 0, 1)) ||
            (rc = add_q(&Q, NM("%slayers.%d.mlp.switch_mlp.gate_proj", P, i), l->gate, c->n_experts, 0)) ||
            (rc = add_q(&Q, NM("%slayers.%d.mlp.switch_mlp.up_proj", P, i), l->up, c->n_experts, 0)) ||
            (rc = add_q(&Q, NM("%slayers.%d.mlp.switch_mlp.down_proj", P, i), l->down, c->n_experts, 0)))
            break;
        if (c->shared_inter > 0 &&
            ((rc = add_q(&Q, NM("%slayers.%d.mlp.shared_expert.gate_proj", P, i), &l->sh_gate, 0, 0)) ||
             (rc = add_q(&Q, NM("%slayers.%d.mlp.shared_expert.up_proj", P, i), &l->sh_up, 0, 0)) ||
             (rc = add_q(&Q, NM("%slayers.%d.mlp.shared_expert.down_proj", P, i), &l->sh_down, 0, 0)) ||
             (rc = add_q(&Q, NM("%slayers.%d.mlp.shared_expert_gate", P, i), &l->sh_score, 0, 1))))
            break;
    }
#undef NM
    if (!rc) {
        add_v(&Q, "language_model.model.norm.weight", m.w.final_norm, c->hidden, 0, 0);
        rc = add_q(&Q, "language_model.lm_head", &m.w.lm_head, 0, 0);
    }
    json_t *cfg = NULL;
    if (!rc) { // the source config, with the quantization block replaced
        char *cp = lily_path_join(in, "config.json");
        cfg = json_load_file(cp, 0, NULL);
        free(cp);
        if (!cfg) rc = lily_err_set(LILY_EIO, "%s/config.json: cannot re-read", in);
    }
    if (!rc) {
        json_object_set(cfg, "quantization", Q.qblock);
        json_object_set(cfg, "quantization_config", Q.qblock);
        fprintf(stderr, "lily quantize: %s -> %s, %d tensors, %.3f GB\n", in, out, Q.w.n,
                ckpt_bytes(&Q.w) / 1e9);
        rc = ckpt_write(&Q.w, out, 4000000000ull, threads > 0 ? threads : lily_num_threads());
    }
    if (!rc) {
        char *cp = lily_path_join(out, "config.json");
        if (json_dump_file(cfg, cp, JSON_INDENT(2))) rc = lily_err_set(LILY_EIO, "%s: cannot write", cp);
        free(cp);
        copy_side_files(in, out);
    }
    json_decref(cfg);
    json_decref(Q.qblock);
    ckpt_free(&Q.w);
    for (int i = 0; i < Q.n_ctx; i++) free(Q.ctx[i]);
    free(Q.ctx);
    lily_model_free(&m);
    return rc;
}
