// test_prefix_cache.c: the snapshot LRU (src/prefix_cache.c): longest-prefix lookup, the byte budget,
// eviction order, room made before a snapshot is taken, and every blob released exactly once through
// the cache's release function.
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "prefix_cache.h"

// Blobs are ints holding their id; released ones are counted per id.
static int released[64];

static void release(void *arg, void *blob) {
    int *calls = arg;
    (*calls)++;
    released[*(int *)blob]++;
    free(blob);
}

static void *blob(int id) {
    int *b = malloc(sizeof *b);
    *b = id;
    return b;
}

static void test_lookup_and_eviction(void **unused) {
    (void)unused;
    memset(released, 0, sizeof released);
    int calls = 0;
    struct pcache c;
    const int V = 4; // logits of 16 bytes
    pcache_init(&c, 1000, V, release, &calls);
    int toks[40];
    for (int i = 0; i < 40; i++) toks[i] = 100 + i;
    float lg[4] = {1, 2, 3, 4};
    // Three prefixes of one sequence: 10, 20 and 30 tokens, 200-byte blobs.
    assert_int_equal(pcache_insert(&c, toks, 10, blob(1), 200, NULL), 1);
    assert_int_equal(pcache_insert(&c, toks, 20, blob(2), 200, lg), 1);
    assert_int_equal(pcache_insert(&c, toks, 30, blob(3), 200, NULL), 1);
    assert_int_equal(c.bytes, 3 * 200 + 60 * 4 + 16);
    // Longest prefix of at most n tokens; a different token at 15 leaves only the 10-token entry.
    const struct pcache_entry *e = pcache_find(&c, toks, 25);
    assert_non_null(e);
    assert_int_equal(e->n, 20);
    assert_memory_equal(e->logits, lg, sizeof lg);
    int other[40];
    memcpy(other, toks, sizeof toks);
    other[15] = 7;
    assert_int_equal(pcache_find(&c, other, 40)->n, 10);
    assert_null(pcache_find(&c, other + 1, 39));
    // A duplicate is refused and its blob released at once.
    assert_int_equal(pcache_insert(&c, toks, 20, blob(4), 200, NULL), 0);
    assert_int_equal(released[4], 1);
    // Room for 400 more bytes: the least recently used goes first (30: 10 and 20 were just found).
    assert_int_equal(pcache_make_room(&c, 400), 1);
    assert_int_equal(released[3], 1);
    assert_int_equal(c.n, 2);
    assert_true(c.bytes + 400 <= c.budget);
    // More than the whole budget: refused, nothing evicted.
    assert_int_equal(pcache_make_room(&c, 1001), 0);
    assert_int_equal(c.n, 2);
    assert_int_equal(pcache_insert(&c, toks, 40, blob(5), 990, NULL), 0);
    assert_int_equal(released[5], 1);
    assert_int_equal(c.n, 2);
    // An insert that needs everything evicts both.
    assert_int_equal(pcache_insert(&c, toks, 40, blob(6), 800, NULL), 1);
    assert_int_equal(c.n, 1);
    assert_int_equal(released[1] + released[2], 2);
    pcache_free(&c);
    assert_int_equal(released[6], 1);
    // Every blob released exactly once.
    assert_int_equal(calls, 6);
    for (int i = 1; i <= 6; i++) assert_int_equal(released[i], 1);
}

static void test_default_release_and_zero_budget(void **unused) {
    (void)unused;
    struct pcache c;
    pcache_init(&c, 0, 8, NULL, NULL); // free() and no room at all
    int t[2] = {1, 2};
    assert_int_equal(pcache_make_room(&c, 1), 0);
    assert_int_equal(pcache_insert(&c, t, 2, malloc(16), 16, NULL), 0); // freed (ASan would see a leak)
    assert_null(pcache_find(&c, t, 2));
    pcache_free(&c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lookup_and_eviction),
        cmocka_unit_test(test_default_release_and_zero_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
