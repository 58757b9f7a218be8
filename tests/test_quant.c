// test_quant.c: unit tests for the weight formats (quant.h): scalar conversions, code unpacking
// at every bit width against an independent bit-by-bit unpacker, and the quantiser's round trip.
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <cmocka.h>

#include "common.h"
#include "quant.h"

static uint32_t rng_state = 12345;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}
static float rndf(void) { return (float)(rnd() >> 8) / 16777216.0f * 2.0f - 1.0f; }

static void test_bf16_round_trip(void **st) {
    (void)st;
    for (int i = 0; i < 100000; i++) {
        uint16_t h = (uint16_t)rnd();
        float f = lily_bf16_to_f32(h);
        if (isnan(f)) continue;
        assert_int_equal(lily_f32_to_bf16(f), h);
    }
    // Ties round to even: 1 + 2^-8 lies halfway between 1 and 1 + 2^-7.
    assert_int_equal(lily_f32_to_bf16(1.0f + 1.0f / 256.0f), 0x3f80);
    assert_int_equal(lily_f32_to_bf16(1.0f + 3.0f / 256.0f), 0x3f82);
}

static void test_f16_round_trip(void **st) {
    (void)st;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = lily_f16_to_f32((uint16_t)h);
        if (isnan(f)) continue;
        assert_int_equal(lily_f32_to_f16(f), h);
    }
    assert_true(lily_f16_to_f32(0x3c00) == 1.0f);
    assert_true(lily_f16_to_f32(0x0001) == ldexpf(1.0f, -24));
}

// Independent unpacker: walk the bits one at a time.
static uint32_t code_bitwise(const uint8_t *row, long j, int bits) {
    uint32_t v = 0;
    for (int b = 0; b < bits; b++) {
        long bit = j * bits + b;
        v |= (uint32_t)((row[bit / 8] >> (bit % 8)) & 1) << b;
    }
    return v;
}

static void test_codes_every_width(void **st) {
    (void)st;
    int widths[] = {2, 3, 4, 5, 6, 8};
    for (int w = 0; w < 6; w++) {
        int bits = widths[w];
        long cols = 32 * 7;
        uint8_t row[32 * 7];
        for (long i = 0; i < lily_q_row_bytes(cols, bits); i++) row[i] = (uint8_t)rnd();
        for (long j = 0; j < cols; j++)
            assert_int_equal(lily_q_code(row, j, bits), code_bitwise(row, j, bits));
    }
    // 4-bit: element 0 is the low nibble of byte 0, as MLX packs uint32 words from the LSB.
    uint8_t r4[4] = {0x21, 0x43, 0x65, 0x87};
    for (int j = 0; j < 8; j++) assert_int_equal(lily_q_code(r4, j, 4), (uint32_t)(j + 1));
}

static void test_quantize_round_trip(void **st) {
    (void)st;
    int widths[] = {2, 3, 4, 5, 6, 8}, groups[] = {32, 64, 128};
    for (int w = 0; w < 6; w++)
        for (int g = 0; g < 3; g++) {
            int bits = widths[w], group = groups[g];
            long cols = group * 3;
            float *x = xmalloc(cols * sizeof(float)), *y = xmalloc(cols * sizeof(float));
            for (long i = 0; i < cols; i++) x[i] = rndf() * 0.1f;
            uint8_t *codes = xcalloc(lily_q_row_bytes(cols, bits), 1);
            uint16_t sc[3], bi[3];
            lily_quantize_row(x, cols, bits, group, codes, sc, bi);
            struct lily_mat m = {.rows = 1, .cols = (int)cols, .dtype = LILY_DT_Q, .bits = bits,
                                 .group = group, .sdtype = LILY_DT_BF16, .w = codes,
                                 .scales = sc, .biases = bi};
            lily_mat_row(&m, 0, y);
            for (long gi = 0; gi < 3; gi++) {
                float mn = 1e9f, mx = -1e9f;
                for (int j = 0; j < group; j++) {
                    mn = fminf(mn, x[gi * group + j]);
                    mx = fmaxf(mx, x[gi * group + j]);
                }
                // Error bound: half a step, plus slack for the bf16 scale and bias.
                float step = (mx - mn) / (float)((1 << bits) - 1);
                for (int j = 0; j < group; j++) {
                    float e = fabsf(y[gi * group + j] - x[gi * group + j]);
                    assert_true(e <= 0.5f * step * 1.05f + 0.01f * (fabsf(mn) + fabsf(mx)));
                    assert_true(lily_mat_get(&m, 0, gi * group + j) == y[gi * group + j]);
                }
            }
            free(x);
            free(y);
            free(codes);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bf16_round_trip),
        cmocka_unit_test(test_f16_round_trip),
        cmocka_unit_test(test_codes_every_width),
        cmocka_unit_test(test_quantize_round_trip),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
