// safetensors.c: validating parser for the safetensors header (see safetensors.h). Every value in
// the header is untrusted: sizes are checked for overflow before use and each failure names the
// file and the offending tensor in a one-line message.
#include "safetensors.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "quant.h"

static const struct {
    const char *name;
    int size;
    int lily;
} st_dtypes[] = {
    {"F32", 4, LILY_DT_F32}, {"F16", 2, LILY_DT_F16}, {"BF16", 2, LILY_DT_BF16},
    {"U32", 4, LILY_DT_U32}, {"I64", 8, LILY_DT_I64}, {"I32", 4, LILY_DT_I32},
    {"U8", 1, LILY_DT_U8},   {"BOOL", 1, -1},         {"I8", 1, -1},
    {"I16", 2, -1},          {"U16", 2, -1},          {"U64", 8, -1},
    {"F64", 8, -1},          {"F8_E4M3", 1, -1},      {"F8_E5M2", 1, -1},
    {"F8_E8M0", 1, -1},
};
#define N_ST_DTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

int st_dtype_size(const char *name, int *lily) {
    for (int i = 0; i < N_ST_DTYPES; i++)
        if (!strcmp(name, st_dtypes[i].name)) {
            if (lily) *lily = st_dtypes[i].lily;
            return st_dtypes[i].size;
        }
    return 0;
}

const char *st_dtype_name(int lily_dtype) {
    for (int i = 0; i < N_ST_DTYPES; i++)
        if (st_dtypes[i].lily == lily_dtype) return st_dtypes[i].name;
    return NULL;
}

// Strict UTF-8 check (no overlongs, no surrogates, nothing above U+10FFFF); returns the offset of
// the first bad byte or -1.
static long utf8_first_invalid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        int len;
        uint32_t cp;
        if ((c & 0xe0) == 0xc0) len = 2, cp = c & 0x1f;
        else if ((c & 0xf0) == 0xe0) len = 3, cp = c & 0x0f;
        else if ((c & 0xf8) == 0xf0) len = 4, cp = c & 0x07;
        else return (long)i;
        if (i + (size_t)len > n) return (long)i;
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return (long)i;
            cp = (cp << 6) | (s[i + k] & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return (long)i;
        i += (size_t)len;
    }
    return -1;
}

static int cmp_begin(const void *a, const void *b) {
    const struct st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return 0;
}

void st_header_free(struct st_header *h) {
    for (int i = 0; i < h->n; i++) free(h->t[i].name);
    free(h->t);
    memset(h, 0, sizeof *h);
}

// One tensor entry: {"dtype": "BF16", "shape": [..], "data_offsets": [b, e]}.
static int parse_entry(const char *path, const char *name, json_t *v, uint64_t data_size,
                       struct st_tensor *t) {
    if (!json_is_object(v))
        return lily_err_set(LILY_EFORMAT, "%s: tensor '%s': entry is not an object", path, name);
    json_t *jd = json_object_get(v, "dtype"), *js = json_object_get(v, "shape"),
           *jo = json_object_get(v, "data_offsets");
    if (!json_is_string(jd) || !json_is_array(js) || !json_is_array(jo))
        return lily_err_set(LILY_EFORMAT, "%s: tensor '%s': needs dtype, shape and data_offsets",
                            path, name);
    t->esize = st_dtype_size(json_string_value(jd), &t->dtype);
    if (!t->esize)
        return lily_err_set(LILY_EFORMAT, "%s: tensor '%s': unknown dtype '%.32s'", path, name,
                            json_string_value(jd));
    for (int i = 0; i < N_ST_DTYPES; i++)
        if (!strcmp(json_string_value(jd), st_dtypes[i].name)) t->dtype_name = st_dtypes[i].name;
    size_t nd = json_array_size(js);
    if (nd > ST_MAX_DIMS)
        return lily_err_set(LILY_EFORMAT, "%s: tensor '%s': %zu dims (max %d)", path, name, nd,
                            ST_MAX_DIMS);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(js, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return lily_err_set(LILY_EFORMAT, "%s: tensor '%s': shape[%zu] is not a non-negative integer",
                                path, name, i);
        t->shape[i] = (int64_t)json_integer_value(d);
        if (__builtin_mul_overflow(numel, (uint64_t)t->shape[i], &numel))
            return lily_err_set(LILY_EFORMAT, "%s: tensor '%s': shape product overflows", path, name);
    }
    t->numel = numel;
    if (json_array_size(jo) != 2 || !json_is_integer(json_array_get(jo, 0)) ||
        !json_is_integer(json_array_get(jo, 1)) || json_integer_value(json_array_get(jo, 0)) < 0 ||
        json_integer_value(json_array_get(jo, 1)) < 0)
        return lily_err_set(LILY_EFORMAT, "%s: tensor '%s': data_offsets must be two non-negative integers",
                            path, name);
    t->begin = (uint64_t)json_integer_value(json_array_get(jo, 0));
    t->end = (uint64_t)json_integer_value(json_array_get(jo, 1));
    if (t->begin > t->end)
        return lily_err_set(LILY_EFORMAT, "%s: tensor '%s': data_offsets begin %llu > end %llu", path,
                            name, (unsigned long long)t->begin, (unsigned long long)t->end);
    if (t->end > data_size)
        return lily_err_set(LILY_EFORMAT, "%s: tensor '%s': end offset %llu past the data (%llu bytes); file truncated?",
                            path, name, (unsigned long long)t->end, (unsigned long long)data_size);
    uint64_t bytes;
    if (__builtin_mul_overflow(numel, (uint64_t)t->esize, &bytes) || bytes != t->end - t->begin)
        return lily_err_set(LILY_EFORMAT, "%s: tensor '%s': %s x %llu elements does not match its %llu-byte span",
                            path, name, t->dtype_name, (unsigned long long)numel,
                            (unsigned long long)(t->end - t->begin));
    return 0;
}

int st_header_parse(const uint8_t *buf, size_t len, const char *path, struct st_header *h) {
    memset(h, 0, sizeof *h);
    if (len < 8)
        return lily_err_set(LILY_EFORMAT, "%s: file too short for a safetensors header (%zu bytes)",
                            path, len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = (n << 8) | buf[i];
    if (n == 0) return lily_err_set(LILY_EFORMAT, "%s: safetensors header length is 0", path);
    if (n > ST_MAX_HEADER)
        return lily_err_set(LILY_EFORMAT, "%s: safetensors header length %llu exceeds 100 MB", path,
                            (unsigned long long)n);
    if (n > len - 8)
        return lily_err_set(LILY_EFORMAT, "%s: header length %llu past end of file (%zu bytes)", path,
                            (unsigned long long)n, len);
    const uint8_t *js = buf + 8;
    if (js[0] != '{') return lily_err_set(LILY_EFORMAT, "%s: header does not start with '{'", path);
    long bad = utf8_first_invalid(js, (size_t)n);
    if (bad >= 0)
        return lily_err_set(LILY_EFORMAT, "%s: header is not UTF-8 (byte %ld)", path, bad);
    json_error_t jerr;
    json_t *root = json_loadb((const char *)js, (size_t)n, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return lily_err_set(LILY_EFORMAT, "%s: header is not valid JSON: %s (line %d, column %d)", path,
                            jerr.text, jerr.line, jerr.column);
    if (!json_is_object(root)) {
        json_decref(root);
        return lily_err_set(LILY_EFORMAT, "%s: header is not a JSON object", path);
    }
    h->data_start = 8 + n;
    h->data_size = len - 8 - n;
    h->t = xcalloc(json_object_size(root) + 1, sizeof *h->t);
    int rc = 0;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (!strcmp(key, "__metadata__")) {
            if (!json_is_object(v)) {
                rc = lily_err_set(LILY_EFORMAT, "%s: __metadata__ is not an object", path);
                break;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(v, mk, mv) if (!json_is_string(mv)) {
                rc = lily_err_set(LILY_EFORMAT, "%s: __metadata__ value of '%.64s' is not a string",
                                  path, mk);
                break;
            }
            if (rc) break;
            continue;
        }
        struct st_tensor *t = &h->t[h->n];
        rc = parse_entry(path, key, v, h->data_size, t);
        if (rc) break;
        t->name = xstrdup(key);
        h->n++;
    }
    json_decref(root);
    if (rc) {
        st_header_free(h);
        return rc;
    }
    // The tensors must tile the data buffer: sorted by offset, each begins where the last ended.
    qsort(h->t, (size_t)h->n, sizeof *h->t, cmp_begin);
    uint64_t pos = 0;
    for (int i = 0; i < h->n; i++) {
        if (h->t[i].begin < pos) {
            rc = lily_err_set(LILY_EFORMAT, "%s: tensors '%s' and '%s' overlap", path, h->t[i - 1].name,
                              h->t[i].name);
            break;
        }
        if (h->t[i].begin > pos) {
            rc = lily_err_set(LILY_EFORMAT, "%s: gap of %llu bytes before tensor '%s'", path,
                              (unsigned long long)(h->t[i].begin - pos), h->t[i].name);
            break;
        }
        pos = h->t[i].end;
    }
    if (!rc && pos != h->data_size)
        rc = lily_err_set(LILY_EFORMAT, "%s: %llu bytes after the last tensor", path,
                          (unsigned long long)(h->data_size - pos));
    if (rc) st_header_free(h);
    return rc;
}
