// loader_config.c: config.json -> struct lily_config. The text hyperparameters live either at the
// top level or under `text_config` (the official multimodal config); absent keys take the HF
// config-class defaults, which are the Qwen3.6-35B-A3B values (spec §1.2). Every value is checked
// for type and range here, so that later shape arithmetic cannot overflow.
#include <jansson.h>
#include <math.h>
#include <string.h>

#include "common.h"
#include "loader.h"
#include "loader_internal.h"

json_t *loader_text_config(json_t *root) {
    json_t *tc = json_object_get(root, "text_config");
    return json_is_object(tc) ? tc : root;
}

// Integer key with a default and an inclusive range.
static int get_int(json_t *o, const char *key, long def, long lo, long hi, const char *path, int *out) {
    json_t *v = json_object_get(o, key);
    long x = def;
    if (v && !json_is_null(v)) {
        if (!json_is_integer(v))
            return lily_err_set(LILY_EFORMAT, "%s: '%s' is not an integer", path, key);
        json_int_t j = json_integer_value(v);
        if (j < lo || j > hi)
            return lily_err_set(LILY_ERANGE, "%s: '%s' = %lld out of range [%ld, %ld]", path, key,
                                (long long)j, lo, hi);
        x = (long)j;
    }
    *out = (int)x;
    return 0;
}

static int get_num(json_t *o, const char *key, double def, double lo, double hi, const char *path,
                   double *out) {
    json_t *v = json_object_get(o, key);
    double x = def;
    if (v && !json_is_null(v)) {
        if (!json_is_number(v))
            return lily_err_set(LILY_EFORMAT, "%s: '%s' is not a number", path, key);
        x = json_number_value(v);
        if (!(x >= lo && x <= hi))
            return lily_err_set(LILY_ERANGE, "%s: '%s' = %g out of range [%g, %g]", path, key, x, lo, hi);
    }
    *out = x;
    return 0;
}

void loader_add_eos(struct lily_config *c, long id) {
    if (id < 0 || id >= c->vocab_size) return;
    for (int i = 0; i < c->n_eos; i++)
        if (c->eos_ids[i] == id) return;
    if (c->n_eos < 4) c->eos_ids[c->n_eos++] = (int)id;
}

int loader_config_from_json(json_t *root, const char *path, struct lily_config *c) {
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 4; i++) c->eos_ids[i] = -1;
    if (!json_is_object(root)) return lily_err_set(LILY_EFORMAT, "%s: not a JSON object", path);
    json_t *t = loader_text_config(root);
    int rc = 0, interval = 0;
    const long big = 1L << 20; // any width above this is not a real model and risks overflow
    // clang-format off
    if ((rc = get_int(t, "vocab_size", 248320, 1, 1L << 24, path, &c->vocab_size)) ||
        (rc = get_int(t, "hidden_size", 2048, 1, 65536, path, &c->hidden)) ||
        (rc = get_int(t, "num_hidden_layers", 40, 1, LILY_MAX_LAYERS, path, &c->n_layers)) ||
        (rc = get_int(t, "full_attention_interval", 4, 1, LILY_MAX_LAYERS, path, &interval)) ||
        (rc = get_int(t, "num_attention_heads", 16, 1, 4096, path, &c->n_heads)) ||
        (rc = get_int(t, "num_key_value_heads", 2, 1, 4096, path, &c->n_kv_heads)) ||
        (rc = get_int(t, "head_dim", 256, 2, 4096, path, &c->head_dim)) ||
        (rc = get_int(t, "linear_num_key_heads", 16, 1, 4096, path, &c->lin_k_heads)) ||
        (rc = get_int(t, "linear_num_value_heads", 32, 1, 4096, path, &c->lin_v_heads)) ||
        (rc = get_int(t, "linear_key_head_dim", 128, 1, 4096, path, &c->lin_k_dim)) ||
        (rc = get_int(t, "linear_value_head_dim", 128, 1, 4096, path, &c->lin_v_dim)) ||
        (rc = get_int(t, "linear_conv_kernel_dim", 4, 1, 64, path, &c->conv_kernel)) ||
        (rc = get_int(t, "num_experts", 256, 1, 4096, path, &c->n_experts)) ||
        (rc = get_int(t, "num_experts_per_tok", 8, 1, 4096, path, &c->n_experts_tok)) ||
        (rc = get_int(t, "moe_intermediate_size", 512, 1, big, path, &c->moe_inter)) ||
        (rc = get_int(t, "shared_expert_intermediate_size", 512, 0, big, path, &c->shared_inter)) ||
        (rc = get_int(t, "max_position_embeddings", 32768, 1, 1L << 30, path, &c->max_pos)))
        return rc;
    // clang-format on
    double eps, theta = 1e7, partial = 0.25;
    if ((rc = get_num(t, "rms_norm_eps", 1e-6, 0.0, 1.0, path, &eps))) return rc;
    c->norm_eps = (float)eps;
    // rope_theta and partial_rotary_factor: inside rope_parameters (new HF), rope_scaling, or at
    // the text-config top level (older configs and mlx conversions).
    json_t *srcs[3] = {t, json_object_get(t, "rope_scaling"), json_object_get(t, "rope_parameters")};
    for (int i = 0; i < 3; i++) {
        if (!json_is_object(srcs[i])) continue;
        if ((rc = get_num(srcs[i], "rope_theta", theta, 1.0, 1e12, path, &theta)) ||
            (rc = get_num(srcs[i], "partial_rotary_factor", partial, 0.0, 1.0, path, &partial)))
            return rc;
    }
    c->rope_theta = (float)theta;
    c->rope_dim = (int)lround(c->head_dim * partial);
    if (c->rope_dim % 2 || c->rope_dim <= 0 || c->rope_dim > c->head_dim)
        return lily_err_set(LILY_ERANGE, "%s: rotary dims %d (head_dim %d x partial_rotary_factor %g) must be even and in (0, head_dim]",
                            path, c->rope_dim, c->head_dim, partial);
    json_t *nt = json_object_get(t, "norm_topk_prob");
    if (nt && !json_is_null(nt) && !json_is_boolean(nt))
        return lily_err_set(LILY_EFORMAT, "%s: 'norm_topk_prob' is not a boolean", path);
    c->norm_topk = nt && json_is_false(nt) ? 0 : 1;

    if (c->n_heads % c->n_kv_heads)
        return lily_err_set(LILY_ERANGE, "%s: num_attention_heads %d not a multiple of num_key_value_heads %d",
                            path, c->n_heads, c->n_kv_heads);
    if (c->lin_v_heads % c->lin_k_heads)
        return lily_err_set(LILY_ERANGE, "%s: linear_num_value_heads %d not a multiple of linear_num_key_heads %d",
                            path, c->lin_v_heads, c->lin_k_heads);
    if (c->n_experts_tok > c->n_experts)
        return lily_err_set(LILY_ERANGE, "%s: num_experts_per_tok %d > num_experts %d", path,
                            c->n_experts_tok, c->n_experts);

    // Layer pattern: layer_types if given, else every interval-th layer is full attention.
    json_t *lt = json_object_get(t, "layer_types");
    if (lt && !json_is_null(lt)) {
        if (!json_is_array(lt) || (int)json_array_size(lt) != c->n_layers)
            return lily_err_set(LILY_ESHAPE, "%s: layer_types must be a list of num_hidden_layers (%d) strings",
                                path, c->n_layers);
        for (int i = 0; i < c->n_layers; i++) {
            const char *s = json_string_value(json_array_get(lt, (size_t)i));
            if (s && !strcmp(s, "full_attention")) c->layer_full[i] = 1;
            else if (s && !strcmp(s, "linear_attention")) c->layer_full[i] = 0;
            else
                return lily_err_set(LILY_EFORMAT, "%s: layer_types[%d] is not \"full_attention\" or \"linear_attention\"",
                                    path, i);
        }
    } else {
        for (int i = 0; i < c->n_layers; i++) c->layer_full[i] = (i + 1) % interval == 0;
    }

    // End-of-generation ids: the config's (text_config first, then the top level), int or list.
    json_t *eos = json_object_get(t, "eos_token_id");
    if (!eos || json_is_null(eos)) eos = json_object_get(root, "eos_token_id");
    if (json_is_integer(eos)) loader_add_eos(c, (long)json_integer_value(eos));
    else if (json_is_array(eos))
        for (size_t i = 0; i < json_array_size(eos); i++)
            if (json_is_integer(json_array_get(eos, i)))
                loader_add_eos(c, (long)json_integer_value(json_array_get(eos, i)));
    return 0;
}

int lily_config_parse(const char *json, size_t len, const char *path, struct lily_config *c) {
    memset(c, 0, sizeof *c);
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return lily_err_set(LILY_EFORMAT, "%s: not valid JSON: %s (line %d, column %d)", path,
                            jerr.text, jerr.line, jerr.column);
    int rc = loader_config_from_json(root, path, c);
    json_decref(root);
    if (!rc) {
        // The chat and text end tokens of the Qwen3.5 tokenizer, when the vocabulary has them.
        loader_add_eos(c, 248046);
        loader_add_eos(c, 248044);
    }
    return rc;
}
