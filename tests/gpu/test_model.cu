// test_model.cu: random models for the GPU tests (any size, the full Qwen3.6-35B-A3B shape included,
// filled in parallel) and a plain CPU reference decoder written from the spec (§2, rounding at the
// §7 points), independent of the CUDA code it judges. Matrix products go through quant.c's
// lily_mat_vec_ref.
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

lily_config config_full(void) {
    lily_config c;
    memset(&c, 0, sizeof c);
    c.vocab_size = 248320, c.hidden = 2048, c.n_layers = 40;
    for (int i = 0; i < c.n_layers; i++) c.layer_full[i] = (i + 1) % 4 == 0;
    c.n_heads = 16, c.n_kv_heads = 2, c.head_dim = 256, c.rope_dim = 64, c.rope_theta = 1e7f;
    c.lin_k_heads = 16, c.lin_v_heads = 32, c.lin_k_dim = 128, c.lin_v_dim = 128, c.conv_kernel = 4;
    c.n_experts = 256, c.n_experts_tok = 8, c.moe_inter = 512, c.shared_inter = 512, c.norm_topk = 1;
    c.norm_eps = 1e-6f, c.max_pos = 262144, c.eos_ids[0] = 248046, c.n_eos = 1;
    return c;
}

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
            t->qmats(&y.o, 1, H, c.n_heads * c.head_dim, 4, 1.0f / sqrtf((float)c.n_heads * c.head_dim));
            y.q_norm = t->vec(c.head_dim, 1.0f, 0.2f);
            y.k_norm = t->vec(c.head_dim, 1.0f, 0.2f);
        } else {
            int vd = c.lin_v_heads * c.lin_v_dim;
            t->qmats(&y.qkv, 1, C, H, 4, sH);
            t->qmats(&y.z, 1, vd, H, 4, sH);
            t->qmats(&y.b, 1, c.lin_v_heads, H, 4, sH);
            t->qmats(&y.a, 1, c.lin_v_heads, H, 4, sH);
            t->qmats(&y.out, 1, H, vd, 4, 1.0f / sqrtf((float)vd));
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
            t->qmats(&y.sh_down, 1, H, c.shared_inter, 4, 1.0f / sqrtf((float)c.shared_inter));
            t->qmats(&y.sh_score, 1, 1, H, 8, sH);
        }
        std::vector<lily_mat> &ex = t->experts[l];
        ex.resize(3 * (size_t)c.n_experts);
        t->qmats(ex.data(), c.n_experts, c.moe_inter, H, 4, sH);
        t->qmats(ex.data() + c.n_experts, c.n_experts, c.moe_inter, H, 4, sH);
        t->qmats(ex.data() + 2 * c.n_experts, c.n_experts, H, c.moe_inter, 4, 1.0f / sqrtf((float)c.moe_inter));
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

// ---------------------------------------------------------------------------------------------
struct ref_state {
    const lily_model *m;
    int pos, max_ctx;
    std::vector<std::vector<float>> kc, vc, conv, S; // per layer
};

ref_state *ref_new(const lily_model *m, int max_ctx) {
    const lily_config &c = m->cfg;
    ref_state *s = new ref_state();
    s->m = m, s->pos = 0, s->max_ctx = max_ctx;
    s->kc.resize(c.n_layers), s->vc.resize(c.n_layers), s->conv.resize(c.n_layers), s->S.resize(c.n_layers);
    for (int l = 0; l < c.n_layers; l++) {
        if (c.layer_full[l]) {
            s->kc[l].assign((size_t)max_ctx * c.n_kv_heads * c.head_dim, 0.0f);
            s->vc[l].assign((size_t)max_ctx * c.n_kv_heads * c.head_dim, 0.0f);
        } else {
            s->conv[l].assign((size_t)(c.conv_kernel - 1) * lily_conv_dim(&c), 0.0f);
            s->S[l].assign((size_t)c.lin_v_heads * c.lin_k_dim * c.lin_v_dim, 0.0f);
        }
    }
    return s;
}
void ref_free(ref_state *s) { delete s; }

static std::vector<float> mv(const lily_mat &w, const std::vector<float> &x, bool round = true) {
    std::vector<float> y(w.rows);
    lily_mat_vec_ref(&w, x.data(), y.data());
    if (round)
        for (float &v : y) v = bfr(v);
    return y;
}
static std::vector<float> rmsnorm(const float *x, int n, const float *w, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float r = 1.0f / sqrtf((float)(ss / n) + eps);
    std::vector<float> y(n);
    for (int i = 0; i < n; i++) y[i] = bfr(x[i] * r * w[i]);
    return y;
}
static float silu(float x) { return x / (1.0f + expf(-x)); }
static float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

static void rope(float *x, int rd, float theta, int pos) {
    int half = rd / 2;
    std::vector<float> y(x, x + rd);
    for (int i = 0; i < half; i++) {
        float inv = 1.0f / powf(theta, (float)(2 * i) / (float)rd);
        float ang = (float)pos * inv, c = bfr(cosf(ang)), s = bfr(sinf(ang));
        x[i] = bfr(bfr(y[i] * c) - bfr(y[i + half] * s));
        x[i + half] = bfr(bfr(y[i + half] * c) + bfr(y[i] * s));
    }
}

void ref_step(ref_state *s, int tok, float *logits) {
    const lily_model *m = s->m;
    const lily_config &c = m->cfg;
    const int H = c.hidden, p = s->pos;
    std::vector<float> x(H);
    lily_mat_row(&m->w.embed, tok, x.data());
    for (int l = 0; l < c.n_layers; l++) {
        const lily_layer &y = m->w.layers[l];
        std::vector<float> xn = rmsnorm(x.data(), H, y.in_norm, c.norm_eps), mix;
        if (!y.full) {
            const int C = lily_conv_dim(&c), K = c.conv_kernel, dk = c.lin_k_dim, dv = c.lin_v_dim;
            std::vector<float> qkv = mv(y.qkv, xn), z = mv(y.z, xn), b = mv(y.b, xn), a = mv(y.a, xn);
            std::vector<float> u(C);
            std::vector<float> &hist = s->conv[l]; // (K-1, C), row K-2 = previous token
            for (int ch = 0; ch < C; ch++) {
                float acc = y.conv[(long)ch * K + K - 1] * qkv[ch];
                for (int t = 0; t < K - 1; t++) acc += y.conv[(long)ch * K + t] * hist[(size_t)t * C + ch];
                u[ch] = bfr(silu(bfr(acc)));
            }
            for (int t = 0; t + 1 < K - 1; t++)
                memcpy(&hist[(size_t)t * C], &hist[(size_t)(t + 1) * C], C * 4);
            if (K > 1) memcpy(&hist[(size_t)(K - 2) * C], qkv.data(), C * 4);
            std::vector<float> o(c.lin_v_heads * dv), gated(c.lin_v_heads * dv);
            for (int h = 0; h < c.lin_v_heads; h++) {
                int kh = h / (c.lin_v_heads / c.lin_k_heads);
                std::vector<float> q(u.begin() + kh * dk, u.begin() + (kh + 1) * dk);
                std::vector<float> k(u.begin() + c.lin_k_heads * dk + kh * dk, u.begin() + c.lin_k_heads * dk + (kh + 1) * dk);
                const float *v = &u[2 * c.lin_k_heads * dk + h * dv];
                double sq = 0, sk = 0;
                for (int i = 0; i < dk; i++) sq += q[i] * q[i], sk += k[i] * k[i];
                for (int i = 0; i < dk; i++) q[i] = q[i] / sqrtf((float)sq + 1e-6f) / sqrtf((float)dk), k[i] = k[i] / sqrtf((float)sk + 1e-6f);
                float beta = bfr(sigm(b[h])), xa = a[h] + y.dt_bias[h];
                float g = y.A[h] * (xa > 20 ? xa : log1pf(expf(xa))), gamma = expf(g);
                float *S = &s->S[l][(size_t)h * dk * dv]; // (dk, dv) as HF stores it
                for (int i = 0; i < dk * dv; i++) S[i] *= gamma;
                for (int j = 0; j < dv; j++) {
                    float uu = 0;
                    for (int i = 0; i < dk; i++) uu += S[i * dv + j] * k[i];
                    float delta = beta * (v[j] - uu);
                    for (int i = 0; i < dk; i++) S[i * dv + j] += k[i] * delta;
                    float oo = 0;
                    for (int i = 0; i < dk; i++) oo += S[i * dv + j] * q[i];
                    o[h * dv + j] = bfr(oo);
                }
                double ss = 0;
                for (int j = 0; j < dv; j++) ss += (double)o[h * dv + j] * o[h * dv + j];
                float r = 1.0f / sqrtf((float)(ss / dv) + c.norm_eps);
                for (int j = 0; j < dv; j++) {
                    float t = bfr(y.gnorm[j] * bfr(o[h * dv + j] * r));
                    gated[h * dv + j] = bfr(t * silu(z[h * dv + j]));
                }
            }
            mix = mv(y.out, gated);
        } else {
            const int D = c.head_dim, Hq = c.n_heads, Hkv = c.n_kv_heads;
            std::vector<float> qg = mv(y.q, xn), k = mv(y.k, xn), v = mv(y.v, xn);
            std::vector<float> q(Hq * D);
            for (int h = 0; h < Hq; h++) {
                std::vector<float> t = rmsnorm(&qg[(size_t)h * 2 * D], D, y.q_norm, c.norm_eps);
                rope(t.data(), c.rope_dim, c.rope_theta, p);
                memcpy(&q[h * D], t.data(), D * 4);
            }
            for (int h = 0; h < Hkv; h++) {
                std::vector<float> t = rmsnorm(&k[(size_t)h * D], D, y.k_norm, c.norm_eps);
                rope(t.data(), c.rope_dim, c.rope_theta, p);
                for (int i = 0; i < D; i++) {
                    s->kc[l][((size_t)p * Hkv + h) * D + i] = bfr(t[i]);
                    s->vc[l][((size_t)p * Hkv + h) * D + i] = bfr(v[h * D + i]);
                }
            }
            std::vector<float> o(Hq * D);
            for (int h = 0; h < Hq; h++) {
                int kvh = h / (Hq / Hkv);
                std::vector<double> sc(p + 1);
                double mx = -1e300;
                for (int t = 0; t <= p; t++) {
                    double d = 0;
                    for (int i = 0; i < D; i++) d += (double)q[h * D + i] * s->kc[l][((size_t)t * Hkv + kvh) * D + i];
                    sc[t] = d / sqrt((double)D);
                    mx = sc[t] > mx ? sc[t] : mx;
                }
                double sum = 0;
                for (int t = 0; t <= p; t++) sum += (sc[t] = exp(sc[t] - mx));
                for (int i = 0; i < D; i++) {
                    double acc = 0;
                    for (int t = 0; t <= p; t++) acc += sc[t] * s->vc[l][((size_t)t * Hkv + kvh) * D + i];
                    float gate = qg[(size_t)h * 2 * D + D + i];
                    o[h * D + i] = bfr(bfr((float)(acc / sum)) * sigm(gate));
                }
            }
            mix = mv(y.o, o);
        }
        for (int i = 0; i < H; i++) x[i] = bfr(x[i] + mix[i]);
        // MoE
        xn = rmsnorm(x.data(), H, y.post_norm, c.norm_eps);
        std::vector<float> rl = mv(y.router, xn);
        float mx = -INFINITY;
        for (float v : rl) mx = v > mx ? v : mx;
        std::vector<float> pr(c.n_experts);
        double sum = 0;
        for (int e = 0; e < c.n_experts; e++) sum += (pr[e] = expf(rl[e] - mx));
        for (float &v : pr) v = (float)(v / sum);
        std::vector<int> ids;
        std::vector<float> wt;
        std::vector<char> used(c.n_experts, 0);
        float tot = 0;
        for (int k = 0; k < c.n_experts_tok; k++) {
            int bi = -1;
            for (int e = 0; e < c.n_experts; e++)
                if (!used[e] && (bi < 0 || pr[e] > pr[bi])) bi = e;
            used[bi] = 1, ids.push_back(bi), wt.push_back(pr[bi]), tot += pr[bi];
        }
        std::vector<double> acc(H, 0.0);
        for (int k = 0; k < c.n_experts_tok; k++) {
            int e = ids[k];
            float w = bfr(c.norm_topk ? wt[k] / tot : wt[k]);
            std::vector<float> g = mv(y.gate[e], xn), u = mv(y.up[e], xn), hh(c.moe_inter);
            for (int i = 0; i < c.moe_inter; i++) hh[i] = bfr(bfr(silu(g[i])) * u[i]);
            std::vector<float> d = mv(y.down[e], hh, false);
            for (int i = 0; i < H; i++) acc[i] += (double)w * d[i];
        }
        if (c.shared_inter) {
            std::vector<float> g = mv(y.sh_gate, xn), u = mv(y.sh_up, xn), hh(c.shared_inter);
            for (int i = 0; i < c.shared_inter; i++) hh[i] = bfr(bfr(silu(g[i])) * u[i]);
            std::vector<float> d = mv(y.sh_down, hh, false), sg = mv(y.sh_score, xn);
            float w = bfr(sigm(sg[0]));
            for (int i = 0; i < H; i++) acc[i] += (double)w * d[i];
        }
        for (int i = 0; i < H; i++) x[i] = bfr(x[i] + bfr((float)acc[i]));
    }
    std::vector<float> xn = rmsnorm(x.data(), H, m->w.final_norm, c.norm_eps);
    lily_mat_vec_ref(&m->w.lm_head, xn.data(), logits);
    s->pos++;
}
