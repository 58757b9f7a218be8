// synth.c: `lily synth`: a checkpoint with random weights in the MLX affine layout of the
// mlx-community 4-bit builds (spec §3.3): language_model.model.* names, switch_mlp expert stacks,
// conv [C, K, 1], norms already shifted, 8-bit g64 router and shared_expert_gate, bf16 scales and
// biases, fp32 A_log, ~4 GB shards with an index, and a config.json with the quantization block.
//
// Codes are random bits written directly (uniform codes at any width); each group's scale and
// bias are chosen so the weights have mean ~0 and std sigma = gain/sqrt(fan_in), so activations
// keep a realistic size through all layers. Every value is a pure function of (seed, tensor, row),
// so the output does not depend on the thread count.
//
// The projections that write into the residual stream (out_proj, o_proj, the experts' and the shared
// expert's down_proj) have gain RESID_GAIN = 0.1 instead of 1, and the embedding rows have std 1,
// as in trained models, where each block adds a small update to a stream that carries the token.
// With gain 1 (and embeddings of std 0.05) every block rewrote the stream and the random 40-layer
// model was chaotic: fp32 summation-order differences (1e-7) grew to 3e-2 in the logits, and bf16
// roundings flipped near-tied expert choices from layer 2 on and changed every argmax
// (docs/PERF.md, "Fidelity"). LILY_SYNTH_RESID_GAIN overrides the gain (for that measurement).
#include "synth.h"

#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckpt_write.h"
#include "common.h"
#include "quant.h"

struct preset {
    const char *name;
    int V, H, L, interval, Hq, Hkv, D, Hk, Hv, Dk, Dv, K, E, topk, I, Is;
    double theta, partial;
};

static const struct preset presets[] = {
    {"qwen3.6-35b-a3b", 248320, 2048, 40, 4, 16, 2, 256, 16, 32, 128, 128, 4, 256, 8, 512, 512, 1e7, 0.25},
    {"small", 4096, 512, 8, 4, 8, 2, 64, 4, 8, 64, 64, 4, 32, 4, 128, 128, 1e7, 0.25},
    {"tiny", 4096, 64, 4, 4, 4, 1, 32, 2, 4, 16, 32, 4, 8, 2, 64, 64, 1e7, 0.25},
};
#define N_PRESETS ((int)(sizeof presets / sizeof presets[0]))

const char *synth_presets(void) { return "qwen3.6-35b-a3b small tiny"; }

static uint64_t splitmix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static double unit(uint64_t x) { return (double)(splitmix64(x) >> 11) * (1.0 / 9007199254740992.0); }

static uint64_t hash_name(const char *s, uint64_t seed) {
    uint64_t h = 1469598103934665603ull ^ seed;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return splitmix64(h);
}

// One quantised module: the three tensors share this context (part selects which).
struct qctx {
    uint64_t seed;
    int bits, group;
    long cols;
    float sigma;
    int part; // 0 codes, 1 scales, 2 biases
};

// xoshiro256** for the bulk of the bytes (the codes).
struct xo {
    uint64_t s[4];
};
static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
static uint64_t xo_next(struct xo *x) {
    uint64_t *s = x->s, r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0], s[3] ^= s[1], s[1] ^= s[2], s[0] ^= s[3], s[2] ^= t, s[3] = rotl(s[3], 45);
    return r;
}

static void fill_q(const void *vctx, long r0, long n, uint8_t *dst) {
    const struct qctx *c = vctx;
    if (c->part == 0) {
        struct xo x;
        for (int i = 0; i < 4; i++) x.s[i] = splitmix64(c->seed ^ ((uint64_t)r0 << 8) ^ (uint64_t)i);
        size_t len = (size_t)n * (size_t)lily_q_row_bytes(c->cols, c->bits), i = 0;
        for (; i + 8 <= len; i += 8) {
            uint64_t v = xo_next(&x);
            memcpy(dst + i, &v, 8);
        }
        if (i < len) {
            uint64_t v = xo_next(&x);
            memcpy(dst + i, &v, len - i);
        }
        return;
    }
    // Uniform codes have mean (2^b-1)/2 and variance (4^b-1)/12: scale to sigma and centre.
    long ng = c->cols / c->group;
    double levels = (double)((1 << c->bits) - 1);
    double s0 = c->sigma / sqrt((double)((1L << (2 * c->bits)) - 1) / 12.0);
    uint16_t *out = (uint16_t *)dst;
    for (long r = r0; r < r0 + n; r++)
        for (long g = 0; g < ng; g++) {
            double s = s0 * (0.75 + 0.5 * unit(c->seed ^ (uint64_t)(r * ng + g)));
            uint16_t sb = lily_f32_to_bf16((float)s);
            uint16_t v = c->part == 1 ? sb : lily_f32_to_bf16(-lily_bf16_to_f32(sb) * (float)levels * 0.5f);
            out[(r - r0) * ng + g] = v;
        }
}

// A small vector: a + b * uniform(-1, 1), or log(uniform(a, b)) for A_log.
struct vctx {
    uint64_t seed;
    int dtype;
    float a, b;
    int log_uniform;
};

// Vectors are declared as [rows, cols]; fill_vrows writes `cols` values per row.
struct vrows {
    struct vctx v;
    long cols;
};

static void fill_vrows(const void *vctx, long r0, long n, uint8_t *dst) {
    const struct vrows *c = vctx;
    for (long i = 0; i < n * c->cols; i++) {
        uint64_t idx = (uint64_t)(r0 * c->cols + i);
        double u = unit(c->v.seed ^ idx), x;
        if (c->v.log_uniform) x = log(c->v.a + (c->v.b - c->v.a) * u);
        else x = c->v.a + c->v.b * (2 * u - 1);
        if (c->v.dtype == LILY_DT_F32) ((float *)dst)[i] = (float)x;
        else ((uint16_t *)dst)[i] = lily_f32_to_bf16((float)x);
    }
}

// Arena of contexts that must live until ckpt_write returns.
struct arena {
    void **p;
    int n, cap;
};
static void *arena_add(struct arena *a, void *x) {
    if (a->n == a->cap) {
        a->cap = a->cap ? 2 * a->cap : 256;
        a->p = xrealloc(a->p, (size_t)a->cap * sizeof *a->p);
    }
    return a->p[a->n++] = x;
}

struct synth {
    struct ckpt_writer w;
    struct arena ar;
    uint64_t seed;
    json_t *qblock;
};

// A quantised linear: `module`.{weight,scales,biases}, `n` stacked [rows, cols] (n = 0: 2-D).
static void add_q(struct synth *S, const char *module, int n, long rows, long cols, int bits,
                  int group, float gain, int override) {
    char nm[512];
    int64_t shp[3] = {n, rows, 0};
    int nd = n ? 3 : 2;
    int64_t *d = n ? shp : shp + 1;
    uint64_t seed = hash_name(module, S->seed);
    for (int part = 0; part < 3; part++) {
        struct qctx *c = arena_add(&S->ar, xmalloc(sizeof *c));
        *c = (struct qctx){seed, bits, group, cols, gain / sqrtf((float)cols), part};
        shp[2] = part == 0 ? cols * bits / 32 : cols / group;
        snprintf(nm, sizeof nm, "%s.%s", module, part == 0 ? "weight" : part == 1 ? "scales" : "biases");
        ckpt_add(&S->w, nm, part == 0 ? LILY_DT_U32 : LILY_DT_BF16, nd, d, fill_q, c);
    }
    if (override)
        json_object_set_new(S->qblock, module, json_pack("{s:i,s:i}", "group_size", group, "bits", bits));
}

static void add_v(struct synth *S, const char *name, int dtype, long rows, long cols, int ndim3,
                  float a, float b, int log_uniform) {
    struct vrows *c = arena_add(&S->ar, xmalloc(sizeof *c));
    // The writer's rows are the last dim: one element each for conv [C, K, 1].
    *c = (struct vrows){{hash_name(name, S->seed), dtype, a, b, log_uniform}, ndim3 ? 1 : cols};
    int64_t shp[3] = {rows, cols, 1};
    if (ndim3) ckpt_add(&S->w, name, dtype, 3, shp, fill_vrows, c); // conv [C, K, 1]
    else if (rows == 1) ckpt_add(&S->w, name, dtype, 1, shp + 1, fill_vrows, c);
    else ckpt_add(&S->w, name, dtype, 2, shp, fill_vrows, c);
}

#define RESID_GAIN 0.1f

int synth_write(const struct synth_opts *o) {
    const char *rg_env = getenv("LILY_SYNTH_RESID_GAIN");
    const float rg = rg_env && atof(rg_env) > 0 ? (float)atof(rg_env) : RESID_GAIN;
    const struct preset *p = NULL;
    for (int i = 0; i < N_PRESETS; i++)
        if (!strcmp(o->preset, presets[i].name)) p = &presets[i];
    if (!p)
        return lily_err_set(LILY_EINVAL, "unknown preset '%s' (have: %s)", o->preset, synth_presets());
    struct preset P = *p;
    if (o->vocab) P.V = o->vocab;
    int bits = o->bits ? o->bits : 4, group = o->group ? o->group : 64;
    int gbits = 8, ggroup = 64; // router and shared_expert_gate, as the community builds
    while (ggroup > 32 && P.H % ggroup) ggroup /= 2;
    long C = 2L * P.Hk * P.Dk + (long)P.Hv * P.Dv;
    long ins[] = {P.H, (long)P.Hv * P.Dv, (long)P.Hq * P.D, P.I, P.Is};
    for (int i = 0; i < 5; i++)
        if (!lily_q_supported(bits, group) || ins[i] % group || (ins[i] * bits) % 32)
            return lily_err_set(LILY_EINVAL, "preset %s: input width %ld not divisible into %d-bit groups of %d",
                                P.name, ins[i], bits, group);
    if (P.H % ggroup) return lily_err_set(LILY_EINVAL, "preset %s: hidden %d not a multiple of 32", P.name, P.H);

    struct synth S = {.seed = o->seed};
    S.qblock = json_pack("{s:i,s:i,s:s}", "group_size", group, "bits", bits, "mode", "affine");
    const char *pf = "language_model.model.";
    char nm[512];
    add_q(&S, "language_model.model.embed_tokens", 0, P.V, P.H, bits, group, sqrtf((float)P.H), 0);
    for (int i = 0; i < P.L; i++) {
        int full = (i + 1) % P.interval == 0;
#define M(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)
        // Norms hold 1 + w (already shifted, as in MLX conversions).
        add_v(&S, M("%slayers.%d.input_layernorm.weight", pf, i), LILY_DT_BF16, 1, P.H, 0, 1.0f, 0.1f, 0);
        add_v(&S, M("%slayers.%d.post_attention_layernorm.weight", pf, i), LILY_DT_BF16, 1, P.H, 0, 1.0f, 0.1f, 0);
        if (!full) {
            add_q(&S, M("%slayers.%d.linear_attn.in_proj_qkv", pf, i), 0, C, P.H, bits, group, 1, 0);
            add_q(&S, M("%slayers.%d.linear_attn.in_proj_z", pf, i), 0, (long)P.Hv * P.Dv, P.H, bits, group, 1, 0);
            add_q(&S, M("%slayers.%d.linear_attn.in_proj_b", pf, i), 0, P.Hv, P.H, bits, group, 1, 0);
            add_q(&S, M("%slayers.%d.linear_attn.in_proj_a", pf, i), 0, P.Hv, P.H, bits, group, 1, 0);
            add_q(&S, M("%slayers.%d.linear_attn.out_proj", pf, i), 0, P.H, (long)P.Hv * P.Dv, bits, group, rg, 0);
            add_v(&S, M("%slayers.%d.linear_attn.conv1d.weight", pf, i), LILY_DT_BF16, C, P.K, 1, 0.0f,
                  1.0f / sqrtf((float)P.K), 0);
            add_v(&S, M("%slayers.%d.linear_attn.dt_bias", pf, i), LILY_DT_BF16, 1, P.Hv, 0, 1.0f, 0.5f, 0);
            // A in [0.1, 2]: per-token decays exp(-A softplus(a + dt_bias)) well inside (0, 1).
            add_v(&S, M("%slayers.%d.linear_attn.A_log", pf, i), LILY_DT_F32, 1, P.Hv, 0, 0.1f, 2.0f, 1);
            add_v(&S, M("%slayers.%d.linear_attn.norm.weight", pf, i), LILY_DT_BF16, 1, P.Dv, 0, 1.0f, 0.1f, 0);
        } else {
            add_q(&S, M("%slayers.%d.self_attn.q_proj", pf, i), 0, 2L * P.Hq * P.D, P.H, bits, group, 1, 0);
            add_q(&S, M("%slayers.%d.self_attn.k_proj", pf, i), 0, (long)P.Hkv * P.D, P.H, bits, group, 1, 0);
            add_q(&S, M("%slayers.%d.self_attn.v_proj", pf, i), 0, (long)P.Hkv * P.D, P.H, bits, group, 1, 0);
            add_q(&S, M("%slayers.%d.self_attn.o_proj", pf, i), 0, P.H, (long)P.Hq * P.D, bits, group, rg, 0);
            add_v(&S, M("%slayers.%d.self_attn.q_norm.weight", pf, i), LILY_DT_BF16, 1, P.D, 0, 1.0f, 0.1f, 0);
            add_v(&S, M("%slayers.%d.self_attn.k_norm.weight", pf, i), LILY_DT_BF16, 1, P.D, 0, 1.0f, 0.1f, 0);
        }
        add_q(&S, M("%slayers.%d.mlp.gate", pf, i), 0, P.E, P.H, gbits, ggroup, 1, 1);
        add_q(&S, M("%slayers.%d.mlp.switch_mlp.gate_proj", pf, i), P.E, P.I, P.H, bits, group, 1, 0);
        add_q(&S, M("%slayers.%d.mlp.switch_mlp.up_proj", pf, i), P.E, P.I, P.H, bits, group, 1, 0);
        add_q(&S, M("%slayers.%d.mlp.switch_mlp.down_proj", pf, i), P.E, P.H, P.I, bits, group, rg, 0);
        add_q(&S, M("%slayers.%d.mlp.shared_expert.gate_proj", pf, i), 0, P.Is, P.H, bits, group, 1, 0);
        add_q(&S, M("%slayers.%d.mlp.shared_expert.up_proj", pf, i), 0, P.Is, P.H, bits, group, 1, 0);
        add_q(&S, M("%slayers.%d.mlp.shared_expert.down_proj", pf, i), 0, P.H, P.Is, bits, group, rg, 0);
        add_q(&S, M("%slayers.%d.mlp.shared_expert_gate", pf, i), 0, 1, P.H, gbits, ggroup, 1, 1);
#undef M
    }
    add_v(&S, "language_model.model.norm.weight", LILY_DT_BF16, 1, P.H, 0, 1.0f, 0.1f, 0);
    add_q(&S, "language_model.lm_head", 0, P.V, P.H, bits, group, 1, 0);

    // config.json: the multimodal nesting of the official release, with the quantization block.
    json_t *lt = json_array();
    for (int i = 0; i < P.L; i++)
        json_array_append_new(lt, json_string((i + 1) % P.interval ? "linear_attention" : "full_attention"));
    json_t *tc = json_pack(
        "{s:s,s:i,s:i,s:i,s:o,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:f,s:i,s:b,"
        "s:{s:s,s:f,s:f},s:i,s:s}",
        "model_type", "qwen3_5_moe_text", "vocab_size", P.V, "hidden_size", P.H, "num_hidden_layers", P.L,
        "layer_types", lt, "full_attention_interval", P.interval, "num_attention_heads", P.Hq,
        "num_key_value_heads", P.Hkv, "head_dim", P.D, "linear_num_key_heads", P.Hk,
        "linear_num_value_heads", P.Hv, "linear_key_head_dim", P.Dk, "linear_value_head_dim", P.Dv,
        "linear_conv_kernel_dim", P.K, "num_experts", P.E, "num_experts_per_tok", P.topk,
        "moe_intermediate_size", P.I, "shared_expert_intermediate_size", P.Is, "rms_norm_eps", 1e-6,
        "max_position_embeddings", 262144, "tie_word_embeddings", 0, "rope_parameters", "rope_type",
        "default", "rope_theta", P.theta, "partial_rotary_factor", P.partial, "eos_token_id",
        248044, "dtype", "bfloat16");
    // A small vocabulary has no Qwen end-of-text id: leave the end tokens to the tokenizer that is
    // paired with the model (<|im_end|>, <|endoftext|>) rather than naming an arbitrary id.
    if (P.V <= 248044) json_object_del(tc, "eos_token_id");
    json_t *cfg = json_pack("{s:[s],s:s,s:o,s:b,s:O,s:O}", "architectures",
                            "Qwen3_5MoeForConditionalGeneration", "model_type", "qwen3_5_moe", "text_config",
                            tc, "tie_word_embeddings", 0, "quantization", S.qblock, "quantization_config",
                            S.qblock);
    json_decref(S.qblock);
    uint64_t total = ckpt_bytes(&S.w);
    fprintf(stderr, "lily synth: %s, %d tensors, %.2f GB, %d-bit g%d, writing to %s\n", P.name, S.w.n,
            total / 1e9, bits, group, o->out);
    double t0 = lily_time();
    int rc = ckpt_write(&S.w, o->out, 4000000000ull, o->threads > 0 ? o->threads : lily_num_threads());
    if (!rc) {
        char *cp = lily_path_join(o->out, "config.json");
        if (json_dump_file(cfg, cp, JSON_INDENT(2))) rc = lily_err_set(LILY_EIO, "%s: cannot write", cp);
        free(cp);
    }
    double dt = lily_time() - t0;
    if (!rc)
        fprintf(stderr, "lily synth: wrote %.2f GB in %.1f s (%.2f GB/s)\n", total / 1e9, dt, total / 1e9 / dt);
    json_decref(cfg);
    ckpt_free(&S.w);
    for (int i = 0; i < S.ar.n; i++) free(S.ar.p[i]);
    free(S.ar.p);
    return rc;
}
