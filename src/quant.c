// quant.c: host reference code for the weight formats of quant.h: row dequantisation, the plain
// matrix-vector product every fast kernel is judged against, and the MLX-style affine quantiser
// used by `lily quantize` and `lily synth`.
#include "quant.h"

#include <math.h>

#include "common.h"

void lily_mat_row(const struct lily_mat *m, long r, float *out) {
    long cols = m->cols;
    if (m->dtype == LILY_DT_F32) {
        memcpy(out, (const float *)m->w + r * cols, (size_t)cols * sizeof(float));
        return;
    }
    if (m->dtype == LILY_DT_BF16 || m->dtype == LILY_DT_F16) {
        const uint16_t *p = (const uint16_t *)m->w + r * cols;
        if (m->dtype == LILY_DT_BF16)
            for (long c = 0; c < cols; c++) out[c] = lily_bf16_to_f32(p[c]);
        else
            for (long c = 0; c < cols; c++) out[c] = lily_f16_to_f32(p[c]);
        return;
    }
    CHECK(m->dtype == LILY_DT_Q);
    long ng = cols / m->group;
    const uint8_t *row = (const uint8_t *)m->w + r * lily_q_row_bytes(cols, m->bits);
    for (long g = 0; g < ng; g++) {
        float s = lily_load_f32(m->scales, m->sdtype, r * ng + g);
        float b = lily_load_f32(m->biases, m->sdtype, r * ng + g);
        for (long j = g * m->group; j < (g + 1) * m->group; j++)
            out[j] = s * (float)lily_q_code(row, j, m->bits) + b;
    }
}

void lily_mat_vec_ref(const struct lily_mat *m, const float *x, float *y) {
    float *row = xmalloc((size_t)m->cols * sizeof(float));
    for (long r = 0; r < m->rows; r++) {
        lily_mat_row(m, r, row);
        float acc = 0.0f;
        for (long c = 0; c < m->cols; c++) acc += row[c] * x[c];
        y[r] = acc;
    }
    free(row);
}

void lily_quantize_row(const float *w, long cols, int bits, int group, uint8_t *codes,
                       uint16_t *scales, uint16_t *biases) {
    const float n_bins = (float)((1 << bits) - 1);
    memset(codes, 0, (size_t)lily_q_row_bytes(cols, bits));
    for (long g = 0; g < cols / group; g++) {
        const float *v = w + g * group;
        float mn = v[0], mx = v[0];
        for (int j = 1; j < group; j++) {
            if (v[j] < mn) mn = v[j];
            if (v[j] > mx) mx = v[j];
        }
        // Plain min/max affine: the bias is the group minimum and the scale spans the range.
        // (MLX additionally snaps an edge so 0 is exact; any (s, b) is valid to the format.)
        float s = (mx - mn) / n_bins;
        if (s < 1e-7f) s = 1e-7f;
        float b = mn;
        uint16_t sb = lily_f32_to_bf16(s), bb = lily_f32_to_bf16(b);
        scales[g] = sb;
        biases[g] = bb;
        float sf = lily_bf16_to_f32(sb), bf = lily_bf16_to_f32(bb);
        for (int j = 0; j < group; j++) {
            float q = roundf((v[j] - bf) / sf);
            if (!(q >= 0.0f)) q = 0.0f; // also catches NaN
            if (q > n_bins) q = n_bins;
            uint32_t code = (uint32_t)q;
            long bit = (g * group + j) * (long)bits;
            // Little-endian bit stream: spread the code over at most two bytes.
            codes[bit >> 3] |= (uint8_t)(code << (bit & 7));
            if ((bit & 7) + bits > 8) codes[(bit >> 3) + 1] |= (uint8_t)(code >> (8 - (bit & 7)));
        }
    }
}
