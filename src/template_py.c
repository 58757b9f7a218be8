// template_py.c: Python string semantics for the chat template renderer (template_py.h). Each
// function states which Python behaviour it reproduces; tests/test_template.c checks them against
// values printed by CPython.
#include "template_py.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

// ---------------------------------------------------------------------------------------------
// Byte buffer.

void sbuf_put(struct sbuf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        b->p = xrealloc(b->p, cap);
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

void sbuf_puts(struct sbuf *b, const char *s) { sbuf_put(b, s, strlen(s)); }
void sbuf_putc(struct sbuf *b, char c) { sbuf_put(b, &c, 1); }

void sbuf_free(struct sbuf *b) {
    free(b->p);
    b->p = NULL;
    b->n = b->cap = 0;
}

// ---------------------------------------------------------------------------------------------
// str.strip(): Python's whitespace is the Unicode White_Space set minus U+180E plus the four
// information separators U+001C..U+001F (Py_UNICODE_ISSPACE).

int py_is_space(unsigned cp) {
    if (cp <= 0x20) return cp == 0x20 || (cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x1f);
    if (cp < 0x85) return 0;
    return cp == 0x85 || cp == 0xa0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200a) ||
           cp == 0x2028 || cp == 0x2029 || cp == 0x202f || cp == 0x205f || cp == 0x3000;
}

// Decode the code point at s[i] (valid UTF-8 assumed; a stray byte counts as itself).
static unsigned utf8_at(const char *s, size_t n, size_t i, size_t *len) {
    const unsigned char *u = (const unsigned char *)s + i;
    size_t left = n - i;
    if (u[0] < 0x80 || left < 2) return *len = 1, u[0];
    if ((u[0] & 0xe0) == 0xc0) return *len = 2, ((u[0] & 0x1fu) << 6) | (u[1] & 0x3fu);
    if ((u[0] & 0xf0) == 0xe0 && left >= 3)
        return *len = 3, ((u[0] & 0x0fu) << 12) | ((u[1] & 0x3fu) << 6) | (u[2] & 0x3fu);
    if ((u[0] & 0xf8) == 0xf0 && left >= 4)
        return *len = 4, ((u[0] & 0x07u) << 18) | ((u[1] & 0x3fu) << 12) | ((u[2] & 0x3fu) << 6) |
                             (u[3] & 0x3fu);
    return *len = 1, u[0];
}

void py_strip(const char *s, size_t n, size_t *off, size_t *len) {
    size_t a = 0, b = n, k;
    while (a < b && py_is_space(utf8_at(s, n, a, &k))) a += k;
    while (b > a) {
        size_t j = b - 1; // step back to the lead byte of the last code point
        while (j > a && ((unsigned char)s[j] & 0xc0) == 0x80 && b - j < 4) j--;
        if (!py_is_space(utf8_at(s, n, j, &k)) || j + k != b) break;
        b = j;
    }
    *off = a;
    *len = b - a;
}

// ---------------------------------------------------------------------------------------------
// repr(float): Python prints the shortest digit string that reads back to the same double, in
// fixed notation when the decimal exponent is in [-4, 16), else as d.ddde+XX.

void py_float_repr(double x, struct sbuf *b) {
    if (isnan(x)) return sbuf_puts(b, "NaN");
    if (isinf(x)) return sbuf_puts(b, x < 0 ? "-Infinity" : "Infinity");
    if (x == 0) return sbuf_puts(b, signbit(x) ? "-0.0" : "0.0");
    char tmp[48];
    for (int p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, x);
        if (strtod(tmp, NULL) == x) break;
    }
    // tmp = [-]D[.DDD]e(+|-)XX
    const char *q = tmp;
    if (*q == '-') sbuf_putc(b, '-'), q++;
    char dig[24];
    int nd = 0;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') dig[nd++] = *q;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    int decpt = atoi(q + 1) + 1; // value = 0.DIG * 10^decpt
    if (decpt <= -4 || decpt > 16) {
        sbuf_putc(b, dig[0]);
        if (nd > 1) {
            sbuf_putc(b, '.');
            sbuf_put(b, dig + 1, nd - 1);
        }
        char e[16];
        snprintf(e, sizeof e, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
        sbuf_puts(b, e);
    } else if (decpt <= 0) {
        sbuf_puts(b, "0.");
        for (int i = 0; i < -decpt; i++) sbuf_putc(b, '0');
        sbuf_put(b, dig, nd);
    } else if (decpt >= nd) {
        sbuf_put(b, dig, nd);
        for (int i = nd; i < decpt; i++) sbuf_putc(b, '0');
        sbuf_puts(b, ".0");
    } else {
        sbuf_put(b, dig, decpt);
        sbuf_putc(b, '.');
        sbuf_put(b, dig + decpt, nd - decpt);
    }
}

void py_str_scalar(const json_t *v, struct sbuf *b) {
    char tmp[32];
    switch (json_typeof(v)) {
    case JSON_STRING: sbuf_put(b, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER:
        snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        sbuf_puts(b, tmp);
        break;
    case JSON_REAL: py_float_repr(json_real_value(v), b); break;
    case JSON_TRUE: sbuf_puts(b, "True"); break;
    case JSON_FALSE: sbuf_puts(b, "False"); break;
    case JSON_NULL: sbuf_puts(b, "None"); break;
    default: py_tojson(v, b); break; // not reached by the renderer
    }
}

// ---------------------------------------------------------------------------------------------
// json.dumps(ensure_ascii=False): escape only '"', '\\' and the C0 controls; everything else,
// including U+2028 and DEL, is written as is.

static void py_json_string(const char *s, size_t n, struct sbuf *b) {
    sbuf_putc(b, '"');
    size_t run = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        if (c == '"') esc = "\\\"";
        else if (c == '\\') esc = "\\\\";
        else if (c == '\n') esc = "\\n";
        else if (c == '\r') esc = "\\r";
        else if (c == '\t') esc = "\\t";
        else if (c == '\b') esc = "\\b";
        else if (c == '\f') esc = "\\f";
        else if (c < 0x20) snprintf(u, sizeof u, "\\u%04x", c), esc = u;
        if (!esc) continue;
        sbuf_put(b, s + run, i - run);
        sbuf_puts(b, esc);
        run = i + 1;
    }
    sbuf_put(b, s + run, n - run);
    sbuf_putc(b, '"');
}

void py_tojson(const json_t *v, struct sbuf *b) {
    char tmp[32];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        const char *k;
        json_t *x;
        int first = 1;
        sbuf_putc(b, '{');
        json_object_foreach((json_t *)v, k, x) {
            if (!first) sbuf_puts(b, ", ");
            first = 0;
            py_json_string(k, strlen(k), b);
            sbuf_puts(b, ": ");
            py_tojson(x, b);
        }
        sbuf_putc(b, '}');
        break;
    }
    case JSON_ARRAY:
        sbuf_putc(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i) sbuf_puts(b, ", ");
            py_tojson(json_array_get(v, i), b);
        }
        sbuf_putc(b, ']');
        break;
    case JSON_STRING: py_json_string(json_string_value(v), json_string_length(v), b); break;
    case JSON_INTEGER:
        snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        sbuf_puts(b, tmp);
        break;
    case JSON_REAL: py_float_repr(json_real_value(v), b); break;
    case JSON_TRUE: sbuf_puts(b, "true"); break;
    case JSON_FALSE: sbuf_puts(b, "false"); break;
    case JSON_NULL: sbuf_puts(b, "null"); break;
    }
}

const char *mem_rfind(const char *s, size_t n, const char *needle, size_t nn) {
    const char *last = NULL, *p = s;
    while ((size_t)(p - s) + nn <= n) {
        const char *q = memmem(p, n - (size_t)(p - s), needle, nn);
        if (!q) break;
        last = q;
        p = q + 1;
    }
    return last;
}
