// model.h: the Qwen3.5/3.6 MoE text decoder in two structs: its configuration and its weights
// (views into the mmapped checkpoint, with shapes in comments). Per-sequence state (KV cache, conv
// and recurrent state) belongs to each backend (backend.h). Spec: ../shared/spec/qwen35moe.md.
//
// Shape names: H = hidden, V = vocab, E = n_experts, I = moe_inter, Is = shared_inter,
// Hq = n_heads, Hkv = n_kv_heads, D = head_dim, Hk = lin_k_heads, Hv = lin_v_heads,
// Dk = lin_k_dim, Dv = lin_v_dim, C = conv_dim = 2*Hk*Dk + Hv*Dv, K = conv_kernel.
#ifndef LILY_MODEL_H
#define LILY_MODEL_H

#include "quant.h"

#define LILY_MAX_LAYERS 256

struct lily_config {
    int vocab_size;       // V: rows of embed_tokens and lm_head (padded)
    int hidden;           // H
    int n_layers;
    unsigned char layer_full[LILY_MAX_LAYERS]; // 1 = gated full attention, 0 = Gated DeltaNet
    // gated full attention
    int n_heads;          // Hq
    int n_kv_heads;       // Hkv
    int head_dim;         // D
    int rope_dim;         // rotary dims = D * partial_rotary_factor (NeoX pairs (i, i + rope_dim/2))
    float rope_theta;
    // Gated DeltaNet
    int lin_k_heads;      // Hk
    int lin_v_heads;      // Hv (a multiple of Hk; v head j uses k head j / (Hv/Hk))
    int lin_k_dim;        // Dk
    int lin_v_dim;        // Dv
    int conv_kernel;      // K
    // MoE
    int n_experts;        // E
    int n_experts_tok;    // top-k
    int moe_inter;        // I
    int shared_inter;     // Is (0 = no shared expert)
    int norm_topk;        // renormalise the top-k weights (HF always does)
    float norm_eps;
    int max_pos;          // max_position_embeddings
    int eos_ids[4];       // end-of-generation ids (config + generation_config); -1 = unused
    int n_eos;
};

// Derived sizes.
static inline int lily_conv_dim(const struct lily_config *c) {
    return 2 * c->lin_k_heads * c->lin_k_dim + c->lin_v_heads * c->lin_v_dim;
}

// One decoder layer. Norm gains are fp32 arrays with the zero-centred "+1" already applied, so every
// backend multiplies by them directly (the loader decides the shift from the conv layout, spec §3.3).
struct lily_layer {
    int full;                 // 1 = full attention, 0 = Gated DeltaNet
    const float *in_norm;     // (H) input_layernorm gain
    const float *post_norm;   // (H) post_attention_layernorm gain

    // Gated DeltaNet (full == 0)
    struct lily_mat qkv;      // (C, H)   in_proj_qkv: rows q | k | v, not interleaved
    struct lily_mat z;        // (Hv*Dv, H) in_proj_z
    struct lily_mat b;        // (Hv, H)  in_proj_b (beta logits)
    struct lily_mat a;        // (Hv, H)  in_proj_a (decay input)
    const float *conv;        // (C, K)   depthwise conv taps; tap K-1 multiplies the current token
    const float *dt_bias;     // (Hv)
    const float *A;           // (Hv)     -exp(A_log), fp32
    const float *gnorm;       // (Dv)     gated RMSNorm gain (plain weight, never shifted)
    struct lily_mat out;      // (H, Hv*Dv) out_proj

    // gated full attention (full == 1)
    struct lily_mat q;        // (Hq*2*D, H) q_proj: per head [query (D) | gate (D)]
    struct lily_mat k;        // (Hkv*D, H)
    struct lily_mat v;        // (Hkv*D, H)
    struct lily_mat o;        // (H, Hq*D)
    const float *q_norm;      // (D) gain, +1 applied
    const float *k_norm;      // (D) gain, +1 applied

    // MoE
    struct lily_mat router;   // (E, H)   mlp.gate
    struct lily_mat *gate;    // [E] each (I, H)   expert gate projections
    struct lily_mat *up;      // [E] each (I, H)   expert up projections
    struct lily_mat *down;    // [E] each (H, I)   expert down projections
    struct lily_mat sh_gate;  // (Is, H)  shared expert gate_proj
    struct lily_mat sh_up;    // (Is, H)  shared expert up_proj
    struct lily_mat sh_down;  // (H, Is)  shared expert down_proj
    struct lily_mat sh_score; // (1, H)   shared_expert_gate (sigmoid scalar per token)
};

struct lily_weights {
    struct lily_mat embed;    // (V, H)  embed_tokens (dense or quantised)
    struct lily_layer *layers; // [n_layers]
    const float *final_norm;  // (H) gain, +1 applied
    struct lily_mat lm_head;  // (V, H)
};

// A loaded model: config, weights, and the storage they point into (owned by the loader).
struct lily_model {
    struct lily_config cfg;
    struct lily_weights w;
    char *dir;                // model directory
    int layout;               // LILY_LAYOUT_* the checkpoint was stored in
    long n_tensors;           // tensors read from the checkpoint (skipped ones not counted)
    long weight_bytes;        // bytes of all weights used
    void *priv;               // loader-owned storage (mmaps, converted arrays)
};

enum lily_layout {
    LILY_LAYOUT_HF = 0,       // model.language_model.* (official, multimodal wrapper)
    LILY_LAYOUT_HF_TEXT = 1,  // model.* (plain Qwen3_5MoeForCausalLM)
    LILY_LAYOUT_MLX = 2       // language_model.model.* (mlx-lm / mlx-vlm conversions)
};

#endif
