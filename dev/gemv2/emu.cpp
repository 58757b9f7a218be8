// emu.cpp: a host check of gemv2's fragment bookkeeping (src/cuda/gemv.cuh: gv2_split_x and
// gv2_tile), written before any GPU run: mma.m16n8k32 (uint8 codes of 4 or 8 bits times int8 digits
// of x, s32 accumulate) emulated from the PTX fragment layouts, one 16-row tile through ks warps,
// against a double-precision dot product of the dequantised rows. A transcription of the kernel's
// index arithmetic, so it checks the layout and the digit reasoning, not the compiled kernel
// (tests/gpu/test_kernels.cu does that).
// Build: g++ -O2 -o emu dev/gemv2/emu.cpp
#include <cstdio>
#include <cstdint>
#include <cstring>
#include <cmath>
#include <vector>
#include <random>
static float u2f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t f2u(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static uint32_t bf(float f) { uint32_t u = f2u(f); u += 0x7fffu + ((u >> 16) & 1u); return u >> 16; }
static float hi(uint32_t w) { return u2f(w & 0xffff0000u); }
static int8_t sb8(uint32_t w, int i) { return (int8_t)(w >> (8 * i)); }
static int ub8(uint32_t w, int i) { return (int)((w >> (8 * i)) & 0xff); }
// __byte_perm(x, y, s)
static uint32_t perm(uint32_t x, uint32_t y, uint32_t s) {
    uint64_t v = ((uint64_t)y << 32) | x;
    uint32_t r = 0;
    for (int n = 0; n < 4; n++) r |= (uint32_t)((v >> (8 * ((s >> (4 * n)) & 7))) & 0xff) << (8 * n);
    return r;
}
struct Lane { uint32_t a[4], b[2]; int d[4]; };
static void imma(Lane *L) { // D += A B over the warp, m16n8k32, A uint8, B int8
    int A[16][32], B[32][8];
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, q = l & 3;
        for (int i = 0; i < 4; i++) {
            A[g][4 * q + i] = ub8(L[l].a[0], i), A[g + 8][4 * q + i] = ub8(L[l].a[1], i);
            A[g][16 + 4 * q + i] = ub8(L[l].a[2], i), A[g + 8][16 + 4 * q + i] = ub8(L[l].a[3], i);
            B[4 * q + i][g] = sb8(L[l].b[0], i), B[16 + 4 * q + i][g] = sb8(L[l].b[1], i);
        }
    }
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, q = l & 3;
        for (int i = 0; i < 4; i++) {
            int r = g + (i >= 2 ? 8 : 0), n = 2 * q + (i & 1);
            long s = L[l].d[i];
            for (int k = 0; k < 32; k++) s += (long)A[r][k] * B[k][n];
            L[l].d[i] = (int)s;
        }
    }
}
static int run(int HPG, int cols, int ks, int xkind, int bits, std::mt19937 &rng) {
    const int G = 128 / HPG, rows = 16, NM = HPG == 4 ? 2 : 1, steps = cols / 128, nchunk = cols / 32, ng = cols / G;
    std::normal_distribution<float> nd;
    std::vector<float> x(cols);
    for (int c = 0; c < cols; c++) {
        x[c] = nd(rng) * 2;
        if (xkind == 1 && c % 97 == 5) x[c] *= 3000.0f;                     // outliers
        if (xkind == 2) x[c] = (c / G) % 3 == 1 ? 0.0f : x[c] * ldexpf(1, (c / G) % 7 * 9 - 30); // zero groups, scales
        if (xkind == 3 && (c / G) % 2) x[c] *= 1e-25f;                      // tiny groups
    }
    std::vector<uint32_t> codes(rows * cols * bits / 32); // 4-bit: code c in nibble c % 8 of word c / 8; 8-bit: byte c
    for (auto &w : codes) w = rng();
    std::vector<uint32_t> sbv(rows * ng);
    for (auto &w : sbv) {
        float s = 0.01f * (1 + nd(rng) * 0.1f), b = -0.08f * (1 + nd(rng) * 0.1f);
        w = bf(s) | (bf(b) << 16);
    }
    // gv2_split_x
    std::vector<uint32_t> bsm(cols + 4, 0); // cols / 4 uint4 (4 bytes a column) as words, then zero4
    std::vector<float> xsg(ng * 4, 0);
    const uint32_t zero_idx = cols / 4;
    for (int gi = 0; gi < ng; gi++) {
        float mx = 0, pf = 0;
        for (int c = gi * G; c < gi * G + G; c++) mx = fmaxf(mx, fabsf(x[c]));
        int b = (int)(f2u(mx) >> 23);
        b = b < 64 ? 64 : b;
        float mul = u2f((uint32_t)(283 - b) << 23);
        for (int i = gi * G / 8; i < gi * G / 8 + G / 8; i++) {
            uint32_t dw[8];
            for (int k = 0; k < 8; k++) {
                float v = x[8 * i + k] * mul;
                int N = (int)nearbyintf(v);
                if (fabsf(v) >= 1073741824.5f) { printf("N out of range\n"); return 0; }
                dw[k] = ((uint32_t)N + 0x80808080u) ^ 0x80808080u;
            }
            uint32_t b0[4], b1[4];
            for (int h = 0; h < 2; h++) {
                uint32_t *o = h ? b1 : b0;
                uint32_t pl = perm(dw[h], dw[h + 2], 0x5140), ph = perm(dw[h], dw[h + 2], 0x7362);
                uint32_t ql = perm(dw[h + 4], dw[h + 6], 0x5140), qh = perm(dw[h + 4], dw[h + 6], 0x7362);
                o[0] = perm(pl, ql, 0x5410), o[1] = perm(pl, ql, 0x7632), o[2] = perm(ph, qh, 0x5410), o[3] = perm(ph, qh, 0x7632);
            }
            int t = i >> 4, p = (i >> 2) & 3, v = i & 3;
            for (int j = 0; j < 4; j++) {
                uint32_t u2 = (((t * 2 + (v >> 1)) * 16 + p) * 2 + (v & 1)) + 8 * j; // uint2 index
                bsm[2 * u2] = b0[j], bsm[2 * u2 + 1] = b1[j];
            }
        }
        for (int c = gi * G; c < gi * G + G; c++) pf += x[c];
        xsg[gi * 4] = u2f((uint32_t)(b - 29) << 23), xsg[gi * 4 + 3] = pf;
    }
    // gv2_tile, warp row group 0
    std::vector<double> part(8 * 16, 0);
    for (int warp = 0; warp < ks; warp++) {
        int kw = warp % ks;
        float acc0[32] = {}, acc1[32] = {};
        for (int t = kw; t < steps; t += ks) {
            Lane L[2][32];
            for (int m = 0; m < NM; m++) for (int l = 0; l < 32; l++) for (int i = 0; i < 4; i++) L[m][l].d[i] = 0;
            for (int v = 0; v < 4; v++) {
                for (int l = 0; l < 32; l++) {
                    int g = l >> 2, p = l & 3;
                    uint32_t a0, a1, a2, a3;
                    if (bits == 4) {
                        uint32_t wa = codes[(g * nchunk + p + 4 * t) * 4 + v], wb = codes[((g + 8) * nchunk + p + 4 * t) * 4 + v];
                        a0 = wa & 0x0f0f0f0fu, a2 = (wa >> 4) & 0x0f0f0f0fu, a1 = wb & 0x0f0f0f0fu, a3 = (wb >> 4) & 0x0f0f0f0fu;
                    } else { // the lane's two chunks 8t + 2p, 8t + 2p + 1 of 16 bytes: words 2v, 2v + 1
                        const uint32_t *ra = &codes[(g * cols + 128 * t + 32 * p) / 4], *rb = &codes[((g + 8) * cols + 128 * t + 32 * p) / 4];
                        a0 = perm(ra[2 * v], ra[2 * v + 1], 0x6420), a2 = perm(ra[2 * v], ra[2 * v + 1], 0x7531);
                        a1 = perm(rb[2 * v], rb[2 * v + 1], 0x6420), a3 = perm(rb[2 * v], rb[2 * v + 1], 0x7531);
                    }
                    for (int m = 0; m < NM; m++) {
                        int n = g + 8 * m;
                        bool live = n / HPG < 4 && n % HPG == p * HPG / 4;
                        uint32_t idx = live ? (t * 2 + v / 2) * 16 + (n / HPG) * 4 + p : zero_idx;
                        const uint32_t *bx = &bsm[idx * 4 + (v & 1) * 2];
                        L[m][l].a[0] = a0, L[m][l].a[1] = a1, L[m][l].a[2] = a2, L[m][l].a[3] = a3;
                        L[m][l].b[0] = bx[0], L[m][l].b[1] = bx[1];
                    }
                }
                for (int m = 0; m < NM; m++) imma(L[m]);
            }
            for (int l = 0; l < 32; l++) {
                int g = l >> 2, p = l & 3, h0 = HPG == 4 ? 2 * (p & 1) : 0;
                for (int m = 0; m < NM; m++)
                    for (int e = 0; e < 2; e++) {
                        int n = 8 * m + 2 * p + e, pt = n / HPG;
                        if (pt >= 4) continue;
                        int grp = t * HPG + (HPG == 1 ? 0 : h0 + e);
                        const float *xg = &xsg[grp * 4];
                        float w = xg[0] * u2f((uint32_t)(127 + 8 * pt) << 23);
                        uint32_t sa = sbv[g * ng + grp], sB = sbv[(g + 8) * ng + grp];
                        acc0[l] = fmaf(u2f(sa << 16), w * (float)L[m][l].d[e], acc0[l]);
                        acc1[l] = fmaf(u2f(sB << 16), w * (float)L[m][l].d[2 + e], acc1[l]);
                        if (pt == 0) acc0[l] = fmaf(hi(sa), xg[3], acc0[l]), acc1[l] = fmaf(hi(sB), xg[3], acc1[l]);
                    }
            }
        }
        for (int g = 0; g < 8; g++) {
            double s0 = 0, s1 = 0;
            for (int p = 0; p < 4; p++) s0 += acc0[4 * g + p], s1 += acc1[4 * g + p];
            part[warp * 16 + g] = s0, part[warp * 16 + g + 8] = s1;
        }
    }
    double num = 0, den = 0;
    for (int r = 0; r < 16; r++) {
        double y = 0;
        for (int k = 0; k < ks; k++) y += part[k * 16 + r];
        double ref = 0, mag = 0;
        for (int c = 0; c < cols; c++) {
            int q = bits == 4 ? (codes[(r * cols + c) / 8] >> (4 * (c % 8))) & 15 : (codes[(r * cols + c) / 4] >> (8 * (c % 4))) & 255;
            uint32_t s = sbv[r * ng + c / G];
            double wv = (double)u2f(s << 16) * q + hi(s);
            ref += wv * x[c], mag += fabs(wv * x[c]);
        }
        num += (y - ref) * (y - ref), den += mag * mag;
    }
    double e = sqrt(num / den);
    printf("bits=%d HPG=%d cols=%d ks=%d x kind %d: err/|wx| %.2e %s\n", bits, HPG, cols, ks, xkind, e, e < 2e-6 ? "ok" : "BAD");
    return e < 2e-6;
}
int main() {
    std::mt19937 rng(1);
    int ok = 1;
    for (int h : {1, 2, 4})
        for (int c : {128, 512, 2048})
            for (int ks : {1, 4})
                for (int xk = 0; xk < 4; xk++)
                    for (int bits : {4, 8}) ok &= run(h, c, ks, xk, bits, rng);
    printf("%s\n", ok ? "all ok" : "FAILED");
    return !ok;
}
