// test_model.cu: random in-memory models for the GPU tests (a tiny 4-bit model for the e2e checks)
// and comparison helpers. The reference they are judged against is the CPU backend
// (lily_backend_cpu): no model code is duplicated here.
#include <thread>

#include "gpu_test.h"

float bfr(float f) { return lily_round_bf16(f); }

double rel_l2(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - ref[i];
        num += d * d, den += (double)ref[i] * ref[i];
    }
    if (!(num == num)) return INFINITY;
    return sqrt(num / (den > 0 ? den : 1e-30));
}

int count_nonfinite(const float *a, size_t n) {
    int k = 0;
    for (size_t i = 0; i < n; i++) k += !isfinite(a[i]);
    return k;
}

// Scale and bias of a group so that w = s q + b has mean ~0 and std ~sigma.
static void group_sb(int bits, float sigma, rng &r, uint16_t *s, uint16_t *b) {
    float qmax = (float)((1 << bits) - 1), qstd = qmax / sqrtf(12.0f);
    float sc = sigma / qstd * (0.75f + 0.5f * r.uni());
    *s = lily_f32_to_bf16(sc);
    *b = lily_f32_to_bf16(-0.5f * qmax * sc + 0.1f * sigma * r.sym());
}

static void fill_q(uint8_t *codes, uint16_t *sc, uint16_t *bi, long rows, int cols, int bits, int group,
                   float sigma, uint64_t seed, int threads) {
    long cb = (long)cols * bits / 8, ng = cols / group;
    if (threads < 1 || rows < 64) threads = 1; // before the lambda copies it
    auto work = [=](int t) {
        rng r(seed * 1000003 + t);
        long r0 = rows * t / threads, r1 = rows * (t + 1) / threads;
        uint64_t *p = (uint64_t *)(codes + r0 * cb);
        long nw = (r1 - r0) * cb / 8;
        for (long i = 0; i < nw; i++) p[i] = r.next();
        for (long i = nw * 8; i < (r1 - r0) * cb; i++) codes[r0 * cb + i] = (uint8_t)r.next();
        for (long i = r0 * ng; i < r1 * ng; i++) group_sb(bits, sigma, r, sc + i, bi + i);
    };
    if (threads == 1) {
        work(0);
        return;
    }
    std::vector<std::thread> th;
    for (int t = 0; t < threads; t++) th.emplace_back(work, t);
    for (auto &x : th) x.join();
}

void make_qmat(host_mat &h, int rows, int cols, int bits, int group, float sigma, rng &r) {
    h.codes.resize((size_t)rows * cols * bits / 8);
    h.sc.resize((size_t)rows * (cols / group));
    h.bi.resize(h.sc.size());
    fill_q(h.codes.data(), h.sc.data(), h.bi.data(), rows, cols, bits, group, sigma, r.next(), 1);
    h.m = {rows, cols, LILY_DT_Q, bits, group, LILY_DT_BF16, h.codes.data(), h.sc.data(), h.bi.data()};
}

// ---------------------------------------------------------------------------------------------
struct test_model {
    lily_model m;
    std::vector<void *> blocks;
    std::vector<lily_layer> layers;
    std::vector<std::vector<lily_mat>> experts; // per layer: gate[E], up[E], down[E]
    uint64_t seed;
    int threads;
    void *take(size_t n) {
        void *p = malloc(n ? n : 1);
        CHECK(p);
        blocks.push_back(p);
        return p;
    }
    // `count` stacked matrices of (rows, cols) sharing one allocation.
    void qmats(lily_mat *out, int count, int rows, int cols, int bits, float sigma) {
        int group = 64;
        long n = (long)count * rows;
        uint8_t *codes = (uint8_t *)take((size_t)n * cols * bits / 8);
        uint16_t *sc = (uint16_t *)take((size_t)n * (cols / group) * 2);
        uint16_t *bi = (uint16_t *)take((size_t)n * (cols / group) * 2);
        fill_q(codes, sc, bi, n, cols, bits, group, sigma, seed++, threads);
        for (int e = 0; e < count; e++) {
            long r0 = (long)e * rows;
            out[e] = {rows, cols, LILY_DT_Q, bits, group, LILY_DT_BF16, codes + r0 * cols * bits / 8,
                      sc + r0 * (cols / group), bi + r0 * (cols / group)};
        }
    }
    const float *vec(int n, float base, float spread) {
        float *p = (float *)take((size_t)n * 4);
        rng r(seed++);
        for (int i = 0; i < n; i++) p[i] = base + spread * r.sym();
        return p;
    }
};

lily_config config_tiny(void) {
    lily_config c;
    memset(&c, 0, sizeof c);
    c.vocab_size = 1000, c.hidden = 320, c.n_layers = 4;
    for (int i = 0; i < c.n_layers; i++) c.layer_full[i] = (i + 1) % 4 == 0;
    c.n_heads = 6, c.n_kv_heads = 2, c.head_dim = 64, c.rope_dim = 16, c.rope_theta = 1e6f;
    c.lin_k_heads = 2, c.lin_v_heads = 4, c.lin_k_dim = 64, c.lin_v_dim = 96, c.conv_kernel = 4;
    c.n_experts = 12, c.n_experts_tok = 3, c.moe_inter = 192, c.shared_inter = 128, c.norm_topk = 1;
    c.norm_eps = 1e-6f, c.max_pos = 4096, c.eos_ids[0] = 1, c.n_eos = 1;
    return c;
}

// Projections into the residual stream get gain 0.1, as in src/synth.c: with gain 1 a random model is
// chaotic and bf16 roundings alone move its logits by 10-50 % (docs/PERF.md, "Fidelity").
#define RG 0.1f

test_model *test_model_new(const lily_config &c, uint64_t seed, int threads) {
    test_model *t = new test_model();
    t->seed = seed, t->threads = threads;
    memset(&t->m, 0, sizeof t->m);
    t->m.cfg = c;
    const int H = c.hidden, C = lily_conv_dim(&c);
    const float sH = 1.0f / sqrtf((float)H);
    t->layers.resize(c.n_layers);
    t->experts.resize(c.n_layers);
    for (int l = 0; l < c.n_layers; l++) {
        lily_layer &y = t->layers[l];
        memset(&y, 0, sizeof y);
        y.full = c.layer_full[l];
        y.in_norm = t->vec(H, 1.0f, 0.2f);
        y.post_norm = t->vec(H, 1.0f, 0.2f);
        if (y.full) {
            t->qmats(&y.q, 1, c.n_heads * 2 * c.head_dim, H, 4, sH);
            t->qmats(&y.k, 1, c.n_kv_heads * c.head_dim, H, 4, sH);
            t->qmats(&y.v, 1, c.n_kv_heads * c.head_dim, H, 4, sH);
            t->qmats(&y.o, 1, H, c.n_heads * c.head_dim, 4, RG / sqrtf((float)c.n_heads * c.head_dim));
            y.q_norm = t->vec(c.head_dim, 1.0f, 0.2f);
            y.k_norm = t->vec(c.head_dim, 1.0f, 0.2f);
        } else {
            int vd = c.lin_v_heads * c.lin_v_dim;
            t->qmats(&y.qkv, 1, C, H, 4, sH);
            t->qmats(&y.z, 1, vd, H, 4, sH);
            t->qmats(&y.b, 1, c.lin_v_heads, H, 4, sH);
            t->qmats(&y.a, 1, c.lin_v_heads, H, 4, sH);
            t->qmats(&y.out, 1, H, vd, 4, RG / sqrtf((float)vd));
            y.conv = t->vec(C * c.conv_kernel, 0.0f, 0.6f);
            y.dt_bias = t->vec(c.lin_v_heads, 0.0f, 1.0f);
            float *A = (float *)t->vec(c.lin_v_heads, 0.0f, 1.0f);
            for (int i = 0; i < c.lin_v_heads; i++) A[i] = -expf(A[i]);
            y.A = A;
            y.gnorm = t->vec(c.lin_v_dim, 1.0f, 0.2f);
        }
        t->qmats(&y.router, 1, c.n_experts, H, 8, sH * 4);
        if (c.shared_inter) {
            t->qmats(&y.sh_gate, 1, c.shared_inter, H, 4, sH);
            t->qmats(&y.sh_up, 1, c.shared_inter, H, 4, sH);
            t->qmats(&y.sh_down, 1, H, c.shared_inter, 4, RG / sqrtf((float)c.shared_inter));
            t->qmats(&y.sh_score, 1, 1, H, 8, sH);
        }
        std::vector<lily_mat> &ex = t->experts[l];
        ex.resize(3 * (size_t)c.n_experts);
        t->qmats(ex.data(), c.n_experts, c.moe_inter, H, 4, sH);
        t->qmats(ex.data() + c.n_experts, c.n_experts, c.moe_inter, H, 4, sH);
        t->qmats(ex.data() + 2 * c.n_experts, c.n_experts, H, c.moe_inter, 4, RG / sqrtf((float)c.moe_inter));
        y.gate = ex.data(), y.up = ex.data() + c.n_experts, y.down = ex.data() + 2 * c.n_experts;
    }
    t->m.w.layers = t->layers.data();
    t->qmats(&t->m.w.embed, 1, c.vocab_size, H, 4, 1.0f);
    t->qmats(&t->m.w.lm_head, 1, c.vocab_size, H, 4, sH);
    t->m.w.final_norm = t->vec(H, 1.0f, 0.2f);
    return t;
}

const lily_model *test_model_get(test_model *t) { return &t->m; }
void test_model_free(test_model *t) {
    for (void *p : t->blocks) free(p);
    delete t;
}

