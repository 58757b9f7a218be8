// template_py.h: the few Python/Jinja string semantics the chat template depends on, done in C so
// that tmpl_render is byte-identical with HF apply_chat_template: str.strip() (Unicode whitespace),
// repr(float), str() of JSON scalars and json.dumps(ensure_ascii=False) with ", " / ": " separators
// (transformers' `tojson` filter). Internal to template.c and parse.c; tested by test_template.c.
#ifndef LILY_TEMPLATE_PY_H
#define LILY_TEMPLATE_PY_H

#include <jansson.h>
#include <stddef.h>

// A growable byte buffer (always NUL-terminated once anything was put).
struct sbuf {
    char *p;
    size_t n, cap;
};
void sbuf_put(struct sbuf *b, const char *s, size_t n);
void sbuf_puts(struct sbuf *b, const char *s);
void sbuf_putc(struct sbuf *b, char c);
void sbuf_free(struct sbuf *b);

// 1 if the code point is whitespace for Python's str.isspace() (what str.strip() removes).
int py_is_space(unsigned cp);
// Python str.strip() on valid UTF-8: the trimmed range [*off, *off + *len) of s[0..n).
void py_strip(const char *s, size_t n, size_t *off, size_t *len);

// repr(float): the shortest digits that round-trip, in Python's fixed/scientific layout.
void py_float_repr(double x, struct sbuf *b);
// str(x) of a JSON scalar as Python sees it after json.loads: True/False/None, ints, repr(float);
// strings raw. Arrays and objects are not scalars (callers use py_tojson for them).
void py_str_scalar(const json_t *v, struct sbuf *b);
// json.dumps(v, ensure_ascii=False) with separators (", ", ": "), keys in document order.
void py_tojson(const json_t *v, struct sbuf *b);

// memmem for the last occurrence; NULL if none.
const char *mem_rfind(const char *s, size_t n, const char *needle, size_t nn);

#endif
