// loader_info.c: the human-readable summary of a loaded model that `lily info` prints: config,
// layout, files, tensor count and bytes, and the storage format of each family of weights.
#include <string.h>

#include "loader.h"
#include "loader_internal.h"

static const char *dt_name(int dt) {
    switch (dt) {
    case LILY_DT_F32: return "f32";
    case LILY_DT_F16: return "f16";
    case LILY_DT_BF16: return "bf16";
    default: return "?";
    }
}

// Bytes in a readable unit.
static const char *human(double b, char *buf) {
    const char *u[] = {"B", "KB", "MB", "GB", "TB"};
    int i = 0;
    while (b >= 1000 && i < 4) b /= 1000, i++;
    sprintf(buf, i ? "%.2f %s" : "%.0f %s", b, u[i]);
    return buf;
}

static void mat_desc(const struct lily_mat *m, char *buf, size_t n) {
    if (m->dtype == LILY_DT_Q)
        snprintf(buf, n, "q%d g%d (%s scales)", m->bits, m->group, dt_name(m->sdtype));
    else
        snprintf(buf, n, "%s", dt_name(m->dtype));
}

// One family: the formats of all its matrices, "mixed" listing them when they differ.
struct family {
    const char *name;
    char desc[160];
    long count;
    long bytes;
};

static void family_add(struct family *f, const struct lily_mat *m) {
    if (!m->w) return;
    char d[64];
    mat_desc(m, d, sizeof d);
    if (!f->count) snprintf(f->desc, sizeof f->desc, "%s", d);
    else if (!strstr(f->desc, d) && strlen(f->desc) + strlen(d) + 3 < sizeof f->desc) {
        strcat(f->desc, " | ");
        strcat(f->desc, d);
    }
    f->count++;
    f->bytes += lily_mat_bytes(m);
}

void lily_model_print_info(const struct lily_model *m, FILE *f) {
    const struct lily_config *c = &m->cfg;
    const struct loader_priv *p = m->priv;
    static const char *layouts[] = {"HF (model.language_model.*)", "HF text (model.*)",
                                    "MLX (language_model.model.*)"};
    int n_full = 0;
    for (int i = 0; i < c->n_layers; i++) n_full += c->layer_full[i];
    fprintf(f, "model        %s\n", m->dir);
    char h1[32];
    fprintf(f, "layout       %s, %d file%s, %s on disk\n", layouts[m->layout], p->n_shards,
            p->n_shards == 1 ? "" : "s", human((double)p->file_bytes, h1));
    fprintf(f, "tensors      %ld used (%s), %ld skipped\n", m->n_tensors,
            human((double)m->weight_bytes, h1), p->n_skipped);
    fprintf(f, "norms        %s\n", p->shifted ? "zero-centred, +1 applied at load"
                                               : "already shifted (MLX conversion)");
    fprintf(f, "vocab        %d\nhidden       %d\n", c->vocab_size, c->hidden);
    fprintf(f, "layers       %d (%d Gated DeltaNet, %d full attention at", c->n_layers,
            c->n_layers - n_full, n_full);
    for (int i = 0; i < c->n_layers; i++)
        if (c->layer_full[i]) fprintf(f, " %d", i);
    fprintf(f, ")\n");
    fprintf(f, "attention    %d q heads, %d kv heads, head_dim %d, rope dims %d, theta %g\n",
            c->n_heads, c->n_kv_heads, c->head_dim, c->rope_dim, c->rope_theta);
    fprintf(f, "deltanet     %d k heads x %d, %d v heads x %d, conv %d (conv dim %d)\n",
            c->lin_k_heads, c->lin_k_dim, c->lin_v_heads, c->lin_v_dim, c->conv_kernel,
            lily_conv_dim(c));
    fprintf(f, "moe          %d experts, top %d, inter %d, shared inter %d\n", c->n_experts,
            c->n_experts_tok, c->moe_inter, c->shared_inter);
    fprintf(f, "misc         rms eps %g, max positions %d, eos", c->norm_eps, c->max_pos);
    for (int i = 0; i < c->n_eos; i++) fprintf(f, " %d", c->eos_ids[i]);
    fprintf(f, "\n");

    static const char *fam_names[] = {"embed_tokens", "lm_head", "deltanet proj", "attention proj",
                                      "router",       "experts", "shared expert", "shared gate"};
    struct family fam[8];
    memset(fam, 0, sizeof fam);
    for (int i = 0; i < 8; i++) fam[i].name = fam_names[i];
    family_add(&fam[0], &m->w.embed);
    family_add(&fam[1], &m->w.lm_head);
    long active = lily_mat_bytes(&m->w.lm_head); // bytes read per decoded token
    for (int i = 0; i < c->n_layers; i++) {
        const struct lily_layer *l = &m->w.layers[i];
        const struct lily_mat *gd[] = {&l->qkv, &l->z, &l->b, &l->a, &l->out};
        const struct lily_mat *at[] = {&l->q, &l->k, &l->v, &l->o};
        for (int j = 0; j < 5; j++) family_add(&fam[2], gd[j]), active += l->full ? 0 : lily_mat_bytes(gd[j]);
        for (int j = 0; j < 4; j++) family_add(&fam[3], at[j]), active += l->full ? lily_mat_bytes(at[j]) : 0;
        family_add(&fam[4], &l->router);
        for (int e = 0; e < c->n_experts; e++) {
            family_add(&fam[5], &l->gate[e]);
            family_add(&fam[5], &l->up[e]);
            family_add(&fam[5], &l->down[e]);
        }
        family_add(&fam[6], &l->sh_gate);
        family_add(&fam[6], &l->sh_up);
        family_add(&fam[6], &l->sh_down);
        family_add(&fam[7], &l->sh_score);
        active += lily_mat_bytes(&l->router) + lily_mat_bytes(&l->sh_gate) + lily_mat_bytes(&l->sh_up) +
                  lily_mat_bytes(&l->sh_down) + lily_mat_bytes(&l->sh_score) +
                  (long)c->n_experts_tok * (lily_mat_bytes(&l->gate[0]) + lily_mat_bytes(&l->up[0]) +
                                            lily_mat_bytes(&l->down[0]));
    }
    fprintf(f, "weights by family:\n");
    for (size_t i = 0; i < sizeof fam / sizeof fam[0]; i++)
        if (fam[i].count)
            fprintf(f, "  %-15s %6ld matrices %10s  %s\n", fam[i].name, fam[i].count,
                    human((double)fam[i].bytes, h1), fam[i].desc);
    fprintf(f, "bytes/token  %s of weights read per decoded token (top-%d experts + lm_head)\n",
            human((double)active, h1), c->n_experts_tok);
}
