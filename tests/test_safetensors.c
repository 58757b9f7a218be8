// test_safetensors.c: the safetensors header parser (safetensors.c) on hand-built byte buffers:
// valid files (with and without padding and metadata) and each error of the reference
// implementation's set (openai-api.md §2): header length 0 / past EOF / above 100 MB, not '{', not
// UTF-8, not JSON, bad offsets, overlaps, gaps, trailing bytes, shape overflow, bad dims, span
// mismatch, unknown dtype, duplicate names, non-string metadata.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common.h"
#include "quant.h"
#include "safetensors.h"

// A file: u64 length of `json`, the json, then `data_len` bytes of data.
static uint8_t *mkfile(const char *json, size_t data_len, size_t *len) {
    size_t n = strlen(json);
    *len = 8 + n + data_len;
    uint8_t *b = calloc(1, *len);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)n >> (8 * i));
    memcpy(b + 8, json, n);
    return b;
}

static int parse(const char *json, size_t data_len, struct st_header *h) {
    size_t len;
    uint8_t *b = mkfile(json, data_len, &len);
    int rc = st_header_parse(b, len, "x.safetensors", h);
    free(b);
    return rc;
}

static void expect_err(const char *json, size_t data_len, const char *what) {
    struct st_header h;
    int rc = parse(json, data_len, &h);
    if (rc != LILY_EFORMAT || !strstr(lily_err_msg(), what) || !strstr(lily_err_msg(), "x.safetensors"))
        fail_msg("%s: want format error with '%s', got %d: %s", json, what, rc, lily_err_msg());
    assert_int_equal(h.n, 0);
    assert_null(h.t);
}

static void test_valid(void **st) {
    (void)st;
    struct st_header h;
    const char *j = "{\"__metadata__\":{\"format\":\"pt\"},"
                    "\"b\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[8,14]},"
                    "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                    "\"e\":{\"dtype\":\"U8\",\"shape\":[0,5],\"data_offsets\":[14,14]}}     ";
    assert_int_equal(parse(j, 14, &h), 0);
    assert_int_equal(h.n, 3);
    assert_string_equal(h.t[0].name, "a"); // sorted by offset
    assert_int_equal(h.t[0].dtype, LILY_DT_F32);
    assert_int_equal(h.t[1].dtype, LILY_DT_BF16);
    assert_int_equal(h.t[1].numel, 3);
    assert_int_equal(h.t[2].numel, 0);
    assert_int_equal(h.data_start, 8 + strlen(j));
    assert_int_equal(h.data_size, 14);
    st_header_free(&h);
    // A scalar (shape []) has one element; dtypes Lily never reads are still valid files.
    assert_int_equal(parse("{\"s\":{\"dtype\":\"F64\",\"shape\":[],\"data_offsets\":[0,8]}}", 8, &h), 0);
    assert_int_equal(h.t[0].numel, 1);
    assert_int_equal(h.t[0].dtype, -1);
    st_header_free(&h);
    assert_int_equal(parse("{}", 0, &h), 0);
    assert_int_equal(h.n, 0);
    st_header_free(&h);
}

static void test_header_length(void **st) {
    (void)st;
    struct st_header h;
    uint8_t b[16] = {0};
    assert_int_equal(st_header_parse(b, 7, "x.safetensors", &h), LILY_EFORMAT);
    assert_non_null(strstr(lily_err_msg(), "too short"));
    assert_int_equal(st_header_parse(b, 16, "x.safetensors", &h), LILY_EFORMAT);
    assert_non_null(strstr(lily_err_msg(), "length is 0"));
    b[0] = 9; // 9 bytes of header in a 16-byte file
    assert_int_equal(st_header_parse(b, 16, "x.safetensors", &h), LILY_EFORMAT);
    assert_non_null(strstr(lily_err_msg(), "past end of file"));
    memset(b, 0xff, 8); // 2^64 - 1: must not wrap around in the bounds check
    assert_int_equal(st_header_parse(b, 16, "x.safetensors", &h), LILY_EFORMAT);
    assert_non_null(strstr(lily_err_msg(), "100 MB"));
    memset(b, 0, 8);
    b[3] = 0x10; // 256 MiB
    assert_int_equal(st_header_parse(b, 16, "x.safetensors", &h), LILY_EFORMAT);
    assert_non_null(strstr(lily_err_msg(), "100 MB"));
}

static void test_header_text(void **st) {
    (void)st;
    expect_err(" {}", 0, "'{'");
    expect_err("[1]", 0, "'{'");
    expect_err("{\"a\xff\":1}", 0, "UTF-8");
    expect_err("{\"a\xc0\x80\":1}", 0, "UTF-8");     // overlong NUL
    expect_err("{\"a\xed\xa0\x80\":1}", 0, "UTF-8"); // surrogate
    expect_err("{\"a\":", 0, "JSON");
    expect_err("{} x", 0, "JSON");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 8, "JSON");
    expect_err("{\"__metadata__\":{\"n\":1}}", 0, "__metadata__");
    expect_err("{\"__metadata__\":[]}", 0, "__metadata__");
    expect_err("{\"a\":1}", 0, "not an object");
    expect_err("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "needs dtype");
}

static void test_tensor_entries(void **st) {
    (void)st;
    expect_err("{\"a\":{\"dtype\":\"Q4\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, "unknown dtype");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, "non-negative");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, "non-negative");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[\"1\"],\"data_offsets\":[0,4]}}", 4, "non-negative");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,4]}}",
               4, "overflows");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904],\"data_offsets\":[0,4]}}", 4,
               "does not match");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4, "dims");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, "does not match");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, "begin");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 4, "past the data");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, "data_offsets");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", 4, "data_offsets");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}", 8, "overlap");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
               "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 12, "gap");
    expect_err("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 6, "after the last");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_header_length),
        cmocka_unit_test(test_header_text),
        cmocka_unit_test(test_tensor_entries),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
