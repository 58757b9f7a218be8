// loader.c: model directory -> struct lily_model (loader.h). Finds the shards (index, single file or
// any *.safetensors), mmaps them, parses each header (safetensors.c), then walks the model the config
// describes and takes a checked view of every tensor it needs: dtype, shape against the config, and
// alignment. Big matrices stay in the mapping (dense or MLX affine); small vectors (norms, conv taps,
// dt_bias, A) become fp32 arrays owned by the model. Tensors the text model does not use (vision
// tower, MTP block) are skipped.
#include "loader.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "loader_internal.h"
#include "safetensors.h"


// Hash-table slot: tensor name -> (shard, index in its header).
struct slot {
    const char *name;
    int shard, idx;
    int used;
};

// Load-time context.
struct ld {
    struct lily_model *m;
    struct loader_priv *p;
    struct slot *tab;
    size_t tab_mask;
    json_t *quant;       // the config's quantization block, or NULL (bits inferred from shapes)
    const char *pfx;     // text-model prefix: "model.language_model.", "model." or "language_model.model."
    const char *head;    // lm_head module: "lm_head" or "language_model.lm_head"
};

static void *priv_keep(struct loader_priv *p, void *ptr) {
    if (p->n_allocs == p->cap_allocs) {
        p->cap_allocs = p->cap_allocs ? 2 * p->cap_allocs : 64;
        p->allocs = xrealloc(p->allocs, (size_t)p->cap_allocs * sizeof *p->allocs);
    }
    p->allocs[p->n_allocs++] = ptr;
    return ptr;
}

static uint64_t hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    while (*s) h = (h ^ (uint8_t)*s++) * 1099511628211ull;
    return h;
}

static struct slot *tab_find(struct ld *L, const char *name) {
    for (size_t i = hash_str(name) & L->tab_mask;; i = (i + 1) & L->tab_mask) {
        if (!L->tab[i].name) return &L->tab[i];
        if (!strcmp(L->tab[i].name, name)) return &L->tab[i];
    }
}

// The tensor called `name`, or NULL. Marks it used.
static const struct st_tensor *tensor(struct ld *L, const char *name, const struct shard **sh) {
    struct slot *s = tab_find(L, name);
    if (!s->name) return NULL;
    s->used = 1;
    *sh = &L->p->shards[s->shard];
    return &(*sh)->h.t[s->idx];
}

static const void *tensor_data(const struct shard *sh, const struct st_tensor *t) {
    return sh->map + sh->h.data_start + t->begin;
}

static int is_float(int dt) { return dt == LILY_DT_F32 || dt == LILY_DT_F16 || dt == LILY_DT_BF16; }

static void shape_str(const struct st_tensor *t, char *buf, size_t n) {
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < t->ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (k < n) snprintf(buf + k, n - k, "]");
}

// Check dtype class, rank, dims (-1 = any) and alignment of one tensor.
static int check_tensor(const struct shard *sh, const struct st_tensor *t, int want_float, int ndim,
                        const int64_t *dims) {
    char got[128];
    shape_str(t, got, sizeof got);
    if (want_float ? !is_float(t->dtype) : t->dtype != LILY_DT_U32)
        return lily_err_set(LILY_ESHAPE, "%s: tensor '%s': dtype %s, expected %s", sh->path, t->name,
                            t->dtype_name, want_float ? "F32, F16 or BF16" : "U32 (packed codes)");
    int ok = t->ndim == ndim;
    for (int i = 0; ok && i < ndim; i++) ok = dims[i] < 0 || t->shape[i] == dims[i];
    if (!ok) {
        char want[128];
        size_t k = (size_t)snprintf(want, sizeof want, "[");
        for (int i = 0; i < ndim && k < sizeof want; i++)
            k += (size_t)snprintf(want + k, sizeof want - k, dims[i] < 0 ? "%s*" : "%s%lld",
                                  i ? ", " : "", (long long)dims[i]);
        if (k < sizeof want) snprintf(want + k, sizeof want - k, "]");
        return lily_err_set(LILY_ESHAPE, "%s: tensor '%s': shape %s, config expects %s", sh->path,
                            t->name, got, want);
    }
    if ((sh->h.data_start + t->begin) % (uint64_t)t->esize)
        return lily_err_set(LILY_EFORMAT, "%s: tensor '%s': data offset %llu not a multiple of its %d-byte element (misaligned)",
                            sh->path, t->name, (unsigned long long)(sh->h.data_start + t->begin), t->esize);
    return 0;
}

static int missing(struct ld *L, const char *name) {
    return lily_err_set(LILY_EMISSING, "%s: missing tensor '%s'", L->m->dir, name);
}

// Bits and group size of a quantised module: the per-path override of the quantization block, else
// its global values; inferred from the shapes when the config has no block.
static int quant_params(struct ld *L, const char *module, const struct shard *sh,
                        const struct st_tensor *w, const struct st_tensor *s, long cols, int *bits,
                        int *group) {
    int64_t packed = w->ndim ? w->shape[w->ndim - 1] : 0, ng = s->ndim ? s->shape[s->ndim - 1] : 0;
    if (L->quant) {
        json_t *o = json_object_get(L->quant, module);
        if (!json_is_object(o)) o = L->quant;
        json_t *jb = json_object_get(o, "bits"), *jg = json_object_get(o, "group_size"),
               *jm = json_object_get(o, "mode");
        if (jm && !(json_is_string(jm) && !strcmp(json_string_value(jm), "affine")))
            return lily_err_set(LILY_EUNSUPPORTED, "%s: quantization mode of '%s' is not \"affine\"",
                                L->m->dir, module);
        if (!json_is_integer(jb) || !json_is_integer(jg))
            return lily_err_set(LILY_EFORMAT, "%s/config.json: quantization for '%s' lacks integer bits and group_size",
                                L->m->dir, module);
        *bits = (int)json_integer_value(jb);
        *group = (int)json_integer_value(jg);
        if (json_integer_value(jb) != *bits || json_integer_value(jg) != *group) *bits = *group = 0;
    } else {
        // in = scales.shape[-1] * group_size and bits = 32 * weight.shape[-1] / in (spec §3.3).
        if (ng <= 0 || cols % ng || (packed * 32) % cols)
            return lily_err_set(LILY_ESHAPE, "%s: tensor '%s': cannot infer bits/group from packed width %lld and %lld groups for %ld inputs",
                                sh->path, w->name, (long long)packed, (long long)ng, cols);
        *group = (int)(cols / ng);
        *bits = (int)(packed * 32 / cols);
    }
    if (!lily_q_supported(*bits, *group))
        return lily_err_set(LILY_EUNSUPPORTED, "%s: '%s': %d-bit group-%d quantisation not supported",
                            sh->path, module, *bits, *group);
    if (cols % *group || (cols * *bits) % 32)
        return lily_err_set(LILY_ESHAPE, "%s: '%s': %ld inputs not divisible into %d-bit groups of %d",
                            sh->path, module, cols, *bits, *group);
    if (packed != cols * *bits / 32 || ng != cols / *group)
        return lily_err_set(LILY_ESHAPE, "%s: '%s': packed shapes (%lld words, %lld groups) disagree with %d bits, group %d, %ld inputs",
                            sh->path, module, (long long)packed, (long long)ng, *bits, *group, cols);
    return 0;
}

// A weight of `n` stacked matrices (n = 0: a plain 2-D matrix) of [rows, cols] each, dense or
// quantised (quantised iff "<module>.scales" exists). `wname` is the weight tensor's name; the
// module name is wname without ".weight". Fills out[0..max(n,1)).
static int get_weight(struct ld *L, const char *wname, int n, long rows, long cols,
                      struct lily_mat *out) {
    const struct shard *sh = NULL, *ssh = NULL, *bsh = NULL;
    const struct st_tensor *w = tensor(L, wname, &sh);
    if (!w) return missing(L, wname);
    char module[512], sname[600], bname[600];
    snprintf(module, sizeof module, "%s", wname);
    size_t ml = strlen(module);
    if (ml > 7 && !strcmp(module + ml - 7, ".weight")) module[ml - 7] = 0;
    snprintf(sname, sizeof sname, "%s.scales", module);
    snprintf(bname, sizeof bname, "%s.biases", module);
    const struct st_tensor *s = tensor(L, sname, &ssh);
    int nd = n ? 3 : 2, rc;
    int64_t dims[3], *d = n ? dims + 0 : dims + 1;
    dims[0] = n;
    dims[1] = rows;
    int nmat = n ? n : 1;
    if (!s) { // dense
        dims[2] = cols;
        if ((rc = check_tensor(sh, w, 1, nd, d))) return rc;
        size_t esz = (size_t)w->esize, mat_bytes = (size_t)rows * (size_t)cols * esz;
        for (int e = 0; e < nmat; e++)
            out[e] = (struct lily_mat){.rows = (int)rows, .cols = (int)cols, .dtype = w->dtype,
                                       .w = (const uint8_t *)tensor_data(sh, w) + e * mat_bytes};
        return 0;
    }
    const struct st_tensor *b = tensor(L, bname, &bsh);
    if (!b) return missing(L, bname);
    int bits = 0, group = 0;
    if (w->ndim != nd)
        return lily_err_set(LILY_ESHAPE, "%s: tensor '%s': %d dims, expected %d", sh->path, wname,
                            w->ndim, nd);
    if ((rc = quant_params(L, module, sh, w, s, cols, &bits, &group))) return rc;
    dims[2] = cols * bits / 32;
    if ((rc = check_tensor(sh, w, 0, nd, d))) return rc;
    dims[2] = cols / group;
    if ((rc = check_tensor(ssh, s, 1, nd, d)) || (rc = check_tensor(bsh, b, 1, nd, d))) return rc;
    if (b->dtype != s->dtype)
        return lily_err_set(LILY_ESHAPE, "%s: '%s': biases dtype %s differs from scales dtype %s",
                            bsh->path, module, b->dtype_name, s->dtype_name);
    size_t wb = (size_t)rows * (size_t)lily_q_row_bytes(cols, bits);
    size_t sb = (size_t)rows * (size_t)(cols / group) * (size_t)s->esize;
    for (int e = 0; e < nmat; e++)
        out[e] = (struct lily_mat){.rows = (int)rows, .cols = (int)cols, .dtype = LILY_DT_Q,
                                   .bits = bits, .group = group, .sdtype = s->dtype,
                                   .w = (const uint8_t *)tensor_data(sh, w) + e * wb,
                                   .scales = (const uint8_t *)tensor_data(ssh, s) + e * sb,
                                   .biases = (const uint8_t *)tensor_data(bsh, b) + e * sb};
    return 0;
}

// Rows [r0, r0 + n) of a matrix, as a view.
static struct lily_mat mat_rows(struct lily_mat m, int r0, int n) {
    if (m.dtype == LILY_DT_Q) {
        size_t sb = (size_t)(m.cols / m.group) * (size_t)lily_dtype_size(m.sdtype);
        m.w = (const uint8_t *)m.w + (size_t)r0 * (size_t)lily_q_row_bytes(m.cols, m.bits);
        m.scales = (const uint8_t *)m.scales + (size_t)r0 * sb;
        m.biases = (const uint8_t *)m.biases + (size_t)r0 * sb;
    } else {
        m.w = (const uint8_t *)m.w + (size_t)r0 * (size_t)m.cols * (size_t)lily_dtype_size(m.dtype);
    }
    m.rows = n;
    return m;
}

// A float vector of n elements (any shape with n elements) as an owned fp32 array, + `add`.
static int get_vec(struct ld *L, const char *name, long n, float add, const float **out) {
    const struct shard *sh;
    const struct st_tensor *t = tensor(L, name, &sh);
    if (!t) return missing(L, name);
    int64_t d[1] = {n};
    if (t->numel == (uint64_t)n && t->ndim > 1) d[0] = -1; // e.g. [1, n]: only the count matters
    int rc = t->ndim == 1 ? check_tensor(sh, t, 1, 1, d) : 0;
    if (!rc && t->ndim != 1) {
        if (t->numel != (uint64_t)n) {
            char got[128];
            shape_str(t, got, sizeof got);
            return lily_err_set(LILY_ESHAPE, "%s: tensor '%s': shape %s, config expects [%ld]",
                                sh->path, name, got, n);
        }
        int64_t any[ST_MAX_DIMS];
        for (int i = 0; i < t->ndim; i++) any[i] = -1;
        rc = check_tensor(sh, t, 1, t->ndim, any);
    }
    if (rc) return rc;
    float *v = priv_keep(L->p, xmalloc((size_t)n * sizeof(float) + 1));
    const void *p = tensor_data(sh, t);
    for (long i = 0; i < n; i++) v[i] = lily_load_f32(p, t->dtype, i) + add;
    *out = v;
    return 0;
}

// Depthwise conv taps as fp32 [C][K] from HF [C, 1, K] or MLX [C, K, 1].
static int get_conv(struct ld *L, const char *name, long C, int K, const float **out) {
    const struct shard *sh;
    const struct st_tensor *t = tensor(L, name, &sh);
    if (!t) return missing(L, name);
    int64_t hf[3] = {C, 1, K}, mlx[3] = {C, K, 1};
    int rc = t->ndim == 3 && t->shape[1] == K ? check_tensor(sh, t, 1, 3, mlx)
                                              : check_tensor(sh, t, 1, 3, hf);
    if (rc) return rc;
    float *v = priv_keep(L->p, xmalloc((size_t)C * (size_t)K * sizeof(float)));
    const void *p = tensor_data(sh, t);
    // Both layouts hold element (c, k) at c*K + k: the unit axis does not move data.
    for (long i = 0; i < C * K; i++) v[i] = lily_load_f32(p, t->dtype, i);
    *out = v;
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Finding and mapping the files.

static int bad_shard_name(const char *s) {
    if (!*s || s[0] == '/' || strchr(s, '\\')) return 1;
    for (const char *p = s; *p;) { // reject any ".." path component
        const char *q = strchr(p, '/');
        size_t n = q ? (size_t)(q - p) : strlen(p);
        if (n == 2 && p[0] == '.' && p[1] == '.') return 1;
        if (!q) break;
        p = q + 1;
    }
    return 0;
}

static int map_shard(struct shard *s) {
    int fd = open(s->path, O_RDONLY);
    if (fd < 0) return lily_err_set(LILY_EIO, "%s: cannot open: %s", s->path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return lily_err_set(LILY_EIO, "%s: not a regular file", s->path);
    }
    s->size = (size_t)st.st_size;
    if (s->size < 8) {
        close(fd);
        return lily_err_set(LILY_EFORMAT, "%s: file too short for a safetensors header (%zu bytes)",
                            s->path, s->size);
    }
    s->map = mmap(NULL, s->size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (s->map == MAP_FAILED) {
        s->map = NULL;
        return lily_err_set(LILY_EIO, "%s: mmap failed: %s", s->path, strerror(errno));
    }
    return st_header_parse(s->map, s->size, s->path, &s->h);
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

// Parse the text of a model.safetensors.index.json (loader.h).
int lily_index_parse(const char *json, size_t len, const char *path, char ***names, int *n,
                     json_t **root_out) {
    *names = NULL;
    *n = 0;
    if (root_out) *root_out = NULL;
    json_error_t jerr;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &jerr);
    json_t *wm = root ? json_object_get(root, "weight_map") : NULL;
    if (!json_is_object(wm)) {
        int rc = root ? lily_err_set(LILY_EFORMAT, "%s: no weight_map object", path)
                      : lily_err_set(LILY_EFORMAT, "%s: not valid JSON: %s (line %d)", path, jerr.text,
                                     jerr.line);
        json_decref(root);
        return rc;
    }
    int rc = 0;
    const char *k;
    json_t *v;
    json_object_foreach(wm, k, v) {
        const char *f = json_string_value(v);
        if (!f || bad_shard_name(f)) {
            rc = lily_err_set(LILY_EFORMAT, "%s: weight_map entry '%.100s' names a bad shard path", path, k);
            break;
        }
        int seen = 0;
        for (int i = 0; i < *n && !seen; i++) seen = !strcmp((*names)[i], f);
        if (seen) continue;
        *names = xrealloc(*names, (size_t)(*n + 1) * sizeof **names);
        (*names)[(*n)++] = xstrdup(f);
    }
    if (!rc && *n == 0) rc = lily_err_set(LILY_EFORMAT, "%s: weight_map is empty", path);
    if (rc) {
        for (int i = 0; i < *n; i++) free((*names)[i]);
        free(*names);
        *names = NULL;
        *n = 0;
        json_decref(root);
        return rc;
    }
    if (root_out)
        *root_out = root;
    else
        json_decref(root);
    return 0;
}

// The shard file names: from the index's weight_map, else model.safetensors, else every
// *.safetensors in the directory (sorted). `index` receives the parsed index (or NULL).
static int list_shards(const char *dir, char ***names, int *n, json_t **index) {
    *names = NULL;
    *n = 0;
    *index = NULL;
    char *ipath = lily_path_join(dir, "model.safetensors.index.json");
    struct stat st;
    if (stat(ipath, &st) == 0) {
        char *txt;
        size_t len;
        int rc = lily_read_file(ipath, 64u << 20, &txt, &len);
        if (!rc) {
            rc = lily_index_parse(txt, len, ipath, names, n, index);
            free(txt);
        }
        free(ipath);
        return rc;
    }
    free(ipath);
    char *single = lily_path_join(dir, "model.safetensors");
    int have = stat(single, &st) == 0;
    free(single);
    if (have) {
        *names = xmalloc(sizeof **names);
        (*names)[0] = xstrdup("model.safetensors");
        *n = 1;
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d) return lily_err_set(LILY_EIO, "%s: cannot open model directory: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (l > 12 && !strcmp(de->d_name + l - 12, ".safetensors") && de->d_name[0] != '.') {
            *names = xrealloc(*names, (size_t)(*n + 1) * sizeof **names);
            (*names)[(*n)++] = xstrdup(de->d_name);
        }
    }
    closedir(d);
    if (*n == 0)
        return lily_err_set(LILY_EMISSING, "%s: no model here (no model.safetensors, index or *.safetensors)",
                            dir);
    qsort(*names, (size_t)*n, sizeof **names, cmp_str);
    return 0;
}

// ---------------------------------------------------------------------------------------------
// Walking the model.

#define NAME(...) (snprintf(nm, sizeof nm, __VA_ARGS__), nm)

static int load_layer(struct ld *L, int i, int shift) {
    const struct lily_config *c = &L->m->cfg;
    struct lily_layer *ly = &L->m->w.layers[i];
    char nm[512];
    const char *P = L->pfx;
    long H = c->hidden, C = lily_conv_dim(c), E = c->n_experts, I = c->moe_inter;
    long HvDv = (long)c->lin_v_heads * c->lin_v_dim;
    float one = shift ? 1.0f : 0.0f;
    int rc;
    ly->full = c->layer_full[i];
    if ((rc = get_vec(L, NAME("%slayers.%d.input_layernorm.weight", P, i), H, one, &ly->in_norm)) ||
        (rc = get_vec(L, NAME("%slayers.%d.post_attention_layernorm.weight", P, i), H, one, &ly->post_norm)))
        return rc;
    if (!ly->full) {
        const float *alog;
        if ((rc = get_weight(L, NAME("%slayers.%d.linear_attn.in_proj_qkv.weight", P, i), 0, C, H, &ly->qkv)) ||
            (rc = get_weight(L, NAME("%slayers.%d.linear_attn.in_proj_z.weight", P, i), 0, HvDv, H, &ly->z)) ||
            (rc = get_weight(L, NAME("%slayers.%d.linear_attn.in_proj_b.weight", P, i), 0, c->lin_v_heads, H, &ly->b)) ||
            (rc = get_weight(L, NAME("%slayers.%d.linear_attn.in_proj_a.weight", P, i), 0, c->lin_v_heads, H, &ly->a)) ||
            (rc = get_weight(L, NAME("%slayers.%d.linear_attn.out_proj.weight", P, i), 0, H, HvDv, &ly->out)) ||
            (rc = get_conv(L, NAME("%slayers.%d.linear_attn.conv1d.weight", P, i), C, c->conv_kernel, &ly->conv)) ||
            (rc = get_vec(L, NAME("%slayers.%d.linear_attn.dt_bias", P, i), c->lin_v_heads, 0, &ly->dt_bias)) ||
            (rc = get_vec(L, NAME("%slayers.%d.linear_attn.A_log", P, i), c->lin_v_heads, 0, &alog)) ||
            (rc = get_vec(L, NAME("%slayers.%d.linear_attn.norm.weight", P, i), c->lin_v_dim, 0, &ly->gnorm)))
            return rc;
        float *A = (float *)alog; // owned by us: convert in place
        for (int h = 0; h < c->lin_v_heads; h++) A[h] = -expf(A[h]);
        ly->A = A;
    } else {
        long D = c->head_dim;
        if ((rc = get_weight(L, NAME("%slayers.%d.self_attn.q_proj.weight", P, i), 0, c->n_heads * 2 * D, H, &ly->q)) ||
            (rc = get_weight(L, NAME("%slayers.%d.self_attn.k_proj.weight", P, i), 0, c->n_kv_heads * D, H, &ly->k)) ||
            (rc = get_weight(L, NAME("%slayers.%d.self_attn.v_proj.weight", P, i), 0, c->n_kv_heads * D, H, &ly->v)) ||
            (rc = get_weight(L, NAME("%slayers.%d.self_attn.o_proj.weight", P, i), 0, H, c->n_heads * D, &ly->o)) ||
            (rc = get_vec(L, NAME("%slayers.%d.self_attn.q_norm.weight", P, i), D, one, &ly->q_norm)) ||
            (rc = get_vec(L, NAME("%slayers.%d.self_attn.k_norm.weight", P, i), D, one, &ly->k_norm)))
            return rc;
    }
    // MoE: router, experts (MLX switch_mlp stacks, HF fused stacks or HF per-expert), shared expert.
    if ((rc = get_weight(L, NAME("%slayers.%d.mlp.gate.weight", P, i), 0, E, H, &ly->router))) return rc;
    struct lily_mat *mats = priv_keep(L->p, xcalloc((size_t)E * 3, sizeof *mats));
    ly->gate = mats;
    ly->up = mats + E;
    ly->down = mats + 2 * E;
    struct slot *probe;
    const char *fused = NULL;
    if ((probe = tab_find(L, NAME("%slayers.%d.mlp.switch_mlp.gate_proj.weight", P, i)))->name) {
        if ((rc = get_weight(L, nm, (int)E, I, H, ly->gate)) ||
            (rc = get_weight(L, NAME("%slayers.%d.mlp.switch_mlp.up_proj.weight", P, i), (int)E, I, H, ly->up)) ||
            (rc = get_weight(L, NAME("%slayers.%d.mlp.switch_mlp.down_proj.weight", P, i), (int)E, H, I, ly->down)))
            return rc;
    } else if (tab_find(L, NAME("%slayers.%d.mlp.experts.gate_up_proj", P, i))->name ||
               tab_find(L, NAME("%slayers.%d.mlp.experts.gate_up_proj.weight", P, i))->name) {
        fused = nm;
        if ((rc = get_weight(L, fused, (int)E, 2 * I, H, ly->gate))) return rc;
        for (long e = 0; e < E; e++) {
            ly->up[e] = mat_rows(ly->gate[e], (int)I, (int)I);
            ly->gate[e] = mat_rows(ly->gate[e], 0, (int)I);
        }
        const char *dn = tab_find(L, NAME("%slayers.%d.mlp.experts.down_proj", P, i))->name
                             ? nm : NAME("%slayers.%d.mlp.experts.down_proj.weight", P, i);
        if ((rc = get_weight(L, dn, (int)E, H, I, ly->down))) return rc;
    } else {
        for (long e = 0; e < E; e++)
            if ((rc = get_weight(L, NAME("%slayers.%d.mlp.experts.%ld.gate_proj.weight", P, i, e), 0, I, H, &ly->gate[e])) ||
                (rc = get_weight(L, NAME("%slayers.%d.mlp.experts.%ld.up_proj.weight", P, i, e), 0, I, H, &ly->up[e])) ||
                (rc = get_weight(L, NAME("%slayers.%d.mlp.experts.%ld.down_proj.weight", P, i, e), 0, H, I, &ly->down[e])))
                return rc;
    }
    if (c->shared_inter > 0) {
        long Is = c->shared_inter;
        if ((rc = get_weight(L, NAME("%slayers.%d.mlp.shared_expert.gate_proj.weight", P, i), 0, Is, H, &ly->sh_gate)) ||
            (rc = get_weight(L, NAME("%slayers.%d.mlp.shared_expert.up_proj.weight", P, i), 0, Is, H, &ly->sh_up)) ||
            (rc = get_weight(L, NAME("%slayers.%d.mlp.shared_expert.down_proj.weight", P, i), 0, H, Is, &ly->sh_down)) ||
            (rc = get_weight(L, NAME("%slayers.%d.mlp.shared_expert_gate.weight", P, i), 0, 1, H, &ly->sh_score)))
            return rc;
    }
    return 0;
}

// Whether the zero-centred norms still need +1: a raw checkpoint stores the first GDN conv as
// [C, 1, K]; an MLX conversion (which folded the +1 in) as [C, K, 1] (spec §3.3, gotcha 1).
static int decide_shift(struct ld *L) {
    const struct lily_config *c = &L->m->cfg;
    char nm[512];
    for (int i = 0; i < c->n_layers; i++) {
        if (c->layer_full[i]) continue;
        struct slot *s = tab_find(L, NAME("%slayers.%d.linear_attn.conv1d.weight", L->pfx, i));
        if (!s->name) break;
        const struct st_tensor *t = &L->p->shards[s->shard].h.t[s->idx];
        if (t->ndim == 3 && c->conv_kernel > 1) return t->shape[2] == c->conv_kernel;
        break;
    }
    return L->m->layout != LILY_LAYOUT_MLX; // no usable conv: go by the names
}

static int has_prefix(struct ld *L, const char *pfx) {
    size_t n = strlen(pfx);
    for (int s = 0; s < L->p->n_shards; s++)
        for (int i = 0; i < L->p->shards[s].h.n; i++)
            if (!strncmp(L->p->shards[s].h.t[i].name, pfx, n)) return 1;
    return 0;
}

static int load_all(struct ld *L, json_t *cfg_root, json_t *index) {
    struct lily_model *m = L->m;
    struct loader_priv *p = L->p;
    int rc;
    // Name table over all shards; a name in two shards is an error.
    long total = 0;
    for (int s = 0; s < p->n_shards; s++) total += p->shards[s].h.n;
    size_t cap = 16;
    while (cap < (size_t)total * 2) cap *= 2;
    L->tab = xcalloc(cap, sizeof *L->tab);
    L->tab_mask = cap - 1;
    for (int s = 0; s < p->n_shards; s++)
        for (int i = 0; i < p->shards[s].h.n; i++) {
            struct slot *sl = tab_find(L, p->shards[s].h.t[i].name);
            if (sl->name)
                return lily_err_set(LILY_EFORMAT, "%s: tensor '%s' also in %s", p->shards[s].path,
                                    sl->name, p->shards[sl->shard].path);
            *sl = (struct slot){.name = p->shards[s].h.t[i].name, .shard = s, .idx = i};
        }
    if (index) { // every weight_map entry must be in the shard it names
        const char *k;
        json_t *v;
        json_object_foreach(json_object_get(index, "weight_map"), k, v) {
            struct slot *sl = tab_find(L, k);
            const char *want = json_string_value(v), *got = sl->name ? p->shards[sl->shard].path : NULL;
            size_t gl = got ? strlen(got) : 0, wl = strlen(want);
            if (!got || gl < wl || strcmp(got + gl - wl, want))
                return lily_err_set(LILY_EMISSING, "%s/model.safetensors.index.json: tensor '%.100s' is not in %s",
                                    m->dir, k, want);
        }
    }
    // Layout from the names.
    if (has_prefix(L, "language_model.model.")) {
        m->layout = LILY_LAYOUT_MLX, L->pfx = "language_model.model.", L->head = "language_model.lm_head";
    } else if (has_prefix(L, "model.language_model.")) {
        m->layout = LILY_LAYOUT_HF, L->pfx = "model.language_model.", L->head = "lm_head";
    } else if (has_prefix(L, "model.layers.") || has_prefix(L, "model.embed_tokens.")) {
        m->layout = LILY_LAYOUT_HF_TEXT, L->pfx = "model.", L->head = "lm_head";
    } else {
        return lily_err_set(LILY_EMISSING, "%s: no Qwen3.5 text-model tensors (model.language_model.*, model.* or language_model.model.*)",
                            m->dir);
    }
    L->quant = json_object_get(cfg_root, "quantization");
    if (!json_is_object(L->quant)) L->quant = json_object_get(cfg_root, "quantization_config");
    if (!json_is_object(L->quant)) L->quant = NULL;
    // A quantization_config of another kind (e.g. HF's fp8) has no "bits": not an MLX block.
    if (L->quant && !json_object_get(L->quant, "bits")) L->quant = NULL;

    const struct lily_config *c = &m->cfg;
    char nm[512];
    p->shifted = decide_shift(L);
    float one = p->shifted ? 1.0f : 0.0f;
    if ((rc = get_weight(L, NAME("%sembed_tokens.weight", L->pfx), 0, c->vocab_size, c->hidden, &m->w.embed)) ||
        (rc = get_vec(L, NAME("%snorm.weight", L->pfx), c->hidden, one, &m->w.final_norm)))
        return rc;
    if (tab_find(L, NAME("%s.weight", L->head))->name) {
        if ((rc = get_weight(L, nm, 0, c->vocab_size, c->hidden, &m->w.lm_head))) return rc;
    } else {
        json_t *tie = json_object_get(loader_text_config(cfg_root), "tie_word_embeddings");
        if (!json_is_true(tie)) tie = json_object_get(cfg_root, "tie_word_embeddings");
        if (!json_is_true(tie)) return missing(L, nm);
        m->w.lm_head = m->w.embed;
    }
    m->w.layers = priv_keep(p, xcalloc((size_t)c->n_layers, sizeof *m->w.layers));
    for (int i = 0; i < c->n_layers; i++)
        if ((rc = load_layer(L, i, p->shifted))) return rc;
    for (size_t i = 0; i <= L->tab_mask; i++) {
        if (!L->tab[i].name) continue;
        const struct st_tensor *t = &p->shards[L->tab[i].shard].h.t[L->tab[i].idx];
        if (L->tab[i].used) {
            m->n_tensors++;
            m->weight_bytes += (long)(t->end - t->begin);
        } else {
            p->n_skipped++;
            LOG_DEBUG("loader: skipping %s\n", t->name);
        }
    }
    return 0;
}

static int read_json(const char *path, json_t **out) {
    char *txt;
    size_t len;
    int rc = lily_read_file(path, 64u << 20, &txt, &len);
    if (rc) return rc;
    json_error_t jerr;
    *out = json_loadb(txt, len, JSON_REJECT_DUPLICATES, &jerr);
    free(txt);
    if (!*out)
        return lily_err_set(LILY_EFORMAT, "%s: not valid JSON: %s (line %d, column %d)", path, jerr.text,
                            jerr.line, jerr.column);
    return 0;
}

int lily_model_load(const char *dir, struct lily_model *m) {
    memset(m, 0, sizeof *m);
    struct stat st;
    if (stat(dir, &st) || !S_ISDIR(st.st_mode))
        return lily_err_set(LILY_EIO, "%s: not a model directory", dir);
    m->dir = xstrdup(dir);
    struct loader_priv *p = xcalloc(1, sizeof *p);
    m->priv = p;
    json_t *cfg = NULL, *index = NULL;
    char **names = NULL;
    int n_names = 0;
    struct ld L = {.m = m, .p = p};
    char *cpath = lily_path_join(dir, "config.json");
    int rc = stat(cpath, &st) ? lily_err_set(LILY_EMISSING, "%s: no config.json: not a model directory", dir)
                              : read_json(cpath, &cfg);
    if (!rc) rc = loader_config_from_json(cfg, cpath, &m->cfg);
    free(cpath);
    if (!rc) { // generation_config.json may add end-of-generation ids
        char *gpath = lily_path_join(dir, "generation_config.json");
        json_t *gen = NULL;
        if (stat(gpath, &st) == 0 && (rc = read_json(gpath, &gen)) == 0) {
            json_t *eos = json_object_get(gen, "eos_token_id");
            if (json_is_integer(eos)) loader_add_eos(&m->cfg, (long)json_integer_value(eos));
            for (size_t i = 0; json_is_array(eos) && i < json_array_size(eos); i++)
                if (json_is_integer(json_array_get(eos, i)))
                    loader_add_eos(&m->cfg, (long)json_integer_value(json_array_get(eos, i)));
            json_decref(gen);
        }
        free(gpath);
        loader_add_eos(&m->cfg, 248046);
        loader_add_eos(&m->cfg, 248044);
    }
    if (!rc) rc = list_shards(dir, &names, &n_names, &index);
    if (!rc) {
        p->shards = xcalloc((size_t)n_names, sizeof *p->shards);
        for (int i = 0; i < n_names && !rc; i++) {
            p->shards[i].path = lily_path_join(dir, names[i]);
            p->n_shards++;
            rc = map_shard(&p->shards[i]);
            p->file_bytes += (long)p->shards[i].size;
        }
    }
    if (!rc) rc = load_all(&L, cfg, index);
    for (int i = 0; i < n_names; i++) free(names[i]);
    free(names);
    free(L.tab);
    json_decref(cfg);
    json_decref(index);
    // Headers are only needed while loading; the mappings stay.
    for (int i = 0; i < p->n_shards; i++) st_header_free(&p->shards[i].h);
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", lily_err_msg());
        lily_model_free(m);
        lily_err_set(rc, "%s", msg);
    }
    return rc;
}

void lily_model_free(struct lily_model *m) {
    struct loader_priv *p = m->priv;
    if (p) {
        for (int i = 0; i < p->n_shards; i++) {
            if (p->shards[i].map) munmap(p->shards[i].map, p->shards[i].size);
            st_header_free(&p->shards[i].h);
            free(p->shards[i].path);
        }
        free(p->shards);
        for (int i = 0; i < p->n_allocs; i++) free(p->allocs[i]);
        free(p->allocs);
        free(p);
    }
    free(m->dir);
    memset(m, 0, sizeof *m);
}
