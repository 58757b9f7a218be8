// ops_gdn_cpu.c: the Gated DeltaNet ops of the CPU backend (ops_cpu.h, spec §2.4): the causal
// depthwise conv with its rolling state, and the delta-rule recurrence over a block of tokens in
// its token-sequential form (exact; spec §4). The fast recurrence threads over value heads (each
// head's state is independent) and fuses the decay with the read of S^T k, and the write with the
// read of S^T q, so each state row is touched twice per token instead of four times.
#include <math.h>
#include <string.h>

#include "common.h"
#include "cpu/ops_cpu.h"

void cpu_gdn_conv(const float *w, float *state, const float *u, int T, int C, int K, float *y) {
    // Window of the K-1 previous raw rows followed by the T new ones: row i of the window is
    // token i - (K-1). Output t uses window rows t..t+K-1 with taps 0..K-1.
    int hist = K - 1;
    for (int t = 0; t < T; t++) {
        float *yt = y + (long)t * C;
        for (int c = 0; c < C; c++) yt[c] = 0.0f;
        for (int j = 0; j < K; j++) {
            int src = t + j - hist; // token index; < 0 means the state
            const float *row = src < 0 ? state + (long)(hist + src) * C : u + (long)src * C;
            for (int c = 0; c < C; c++) yt[c] += w[(long)c * K + j] * row[c];
        }
        for (int c = 0; c < C; c++) yt[c] = cpu_silu(yt[c]);
    }
    // New state: the last K-1 raw rows of (state ++ u).
    if (hist == 0) return;
    if (T >= hist) {
        memcpy(state, u + (long)(T - hist) * C, (size_t)hist * C * sizeof(float));
    } else {
        memmove(state, state + (long)T * C, (size_t)(hist - T) * C * sizeof(float));
        memcpy(state + (long)(hist - T) * C, u, (size_t)T * C * sizeof(float));
    }
}

// ---------------------------------------------------------------------------------------------
struct delta_job {
    float *S;
    const float *q, *k, *v, *gamma, *beta;
    int T, Hk, Hv, Dk, Dv;
    float *o;
};

static void delta_range(void *p, int lo, int hi) {
    struct delta_job *j = p;
    int Dk = j->Dk, Dv = j->Dv, rep = j->Hv / j->Hk;
    float *u = xmalloc((size_t)Dv * sizeof(float));
    for (int h = lo; h < hi; h++) {
        float *S = j->S + (long)h * Dk * Dv;
        int kh = h / rep;
        for (int t = 0; t < j->T; t++) {
            const float *q = j->q + ((long)t * j->Hk + kh) * Dk;
            const float *k = j->k + ((long)t * j->Hk + kh) * Dk;
            const float *v = j->v + ((long)t * j->Hv + h) * Dv;
            float g = j->gamma[(long)t * j->Hv + h], b = j->beta[(long)t * j->Hv + h];
            float *o = j->o + ((long)t * j->Hv + h) * Dv;
            // Pass 1: decay and u = S^T k.
            for (int e = 0; e < Dv; e++) u[e] = 0.0f;
            for (int d = 0; d < Dk; d++) {
                float *row = S + (long)d * Dv;
                float kd = k[d];
                for (int e = 0; e < Dv; e++) {
                    row[e] *= g;
                    u[e] += row[e] * kd;
                }
            }
            // delta = beta (v - u), kept in u.
            for (int e = 0; e < Dv; e++) u[e] = b * (v[e] - u[e]);
            // Pass 2: rank-1 write and o = S^T q.
            for (int e = 0; e < Dv; e++) o[e] = 0.0f;
            for (int d = 0; d < Dk; d++) {
                float *row = S + (long)d * Dv;
                float kd = k[d], qd = q[d];
                for (int e = 0; e < Dv; e++) {
                    row[e] += kd * u[e];
                    o[e] += row[e] * qd;
                }
            }
        }
    }
    free(u);
}

void cpu_gdn_delta(float *S, const float *q, const float *k, const float *v, const float *gamma,
                   const float *beta, int T, int Hk, int Hv, int Dk, int Dv, float *o) {
    struct delta_job j = {S, q, k, v, gamma, beta, T, Hk, Hv, Dk, Dv, o};
    if ((long)T * Hv * Dk * Dv < 65536)
        delta_range(&j, 0, Hv);
    else
        cpu_parallel_for(Hv, delta_range, &j);
}

// The textbook order of spec §2.4 step 7, one operation at a time.
void cpu_gdn_delta_ref(float *S, const float *q, const float *k, const float *v,
                       const float *gamma, const float *beta, int T, int Hk, int Hv, int Dk,
                       int Dv, float *o) {
    float *u = xmalloc((size_t)Dv * sizeof(float));
    for (int t = 0; t < T; t++)
        for (int h = 0; h < Hv; h++) {
            int kh = h / (Hv / Hk);
            float *Sh = S + (long)h * Dk * Dv;
            const float *qt = q + ((long)t * Hk + kh) * Dk, *kt = k + ((long)t * Hk + kh) * Dk;
            const float *vt = v + ((long)t * Hv + h) * Dv;
            float g = gamma[(long)t * Hv + h], b = beta[(long)t * Hv + h];
            for (long i = 0; i < (long)Dk * Dv; i++) Sh[i] *= g;
            for (int e = 0; e < Dv; e++) {
                float acc = 0.0f;
                for (int d = 0; d < Dk; d++) acc += Sh[(long)d * Dv + e] * kt[d];
                u[e] = acc;
            }
            for (int d = 0; d < Dk; d++)
                for (int e = 0; e < Dv; e++) Sh[(long)d * Dv + e] += kt[d] * b * (vt[e] - u[e]);
            for (int e = 0; e < Dv; e++) {
                float acc = 0.0f;
                for (int d = 0; d < Dk; d++) acc += Sh[(long)d * Dv + e] * qt[d];
                o[((long)t * Hv + h) * Dv + e] = acc;
            }
        }
    free(u);
}
