// fuzz_config.c: libFuzzer target for the config.json parser (loader_config.c). Any byte string is
// a config; the parser returns 0 or a LILY_E* code, and a config it accepts must be one whose shape
// arithmetic cannot overflow or index outside its arrays.
#include <stdint.h>
#include <stdlib.h>

#include "common.h"
#include "loader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct lily_config c;
    int rc = lily_config_parse((const char *)data, size, "fuzz/config.json", &c);
    if (rc == 0) {
        CHECK(c.n_layers >= 1 && c.n_layers <= LILY_MAX_LAYERS);
        CHECK(c.hidden > 0 && c.vocab_size > 0 && c.n_experts_tok <= c.n_experts);
        CHECK(c.n_heads % c.n_kv_heads == 0 && c.lin_v_heads % c.lin_k_heads == 0);
        CHECK(c.rope_dim > 0 && c.rope_dim % 2 == 0 && c.rope_dim <= c.head_dim);
        CHECK(c.n_eos >= 0 && c.n_eos <= 4);
        for (int i = 0; i < c.n_eos; i++) CHECK(c.eos_ids[i] >= 0 && c.eos_ids[i] < c.vocab_size);
        CHECK((long long)c.vocab_size * c.hidden < (1LL << 62));
    } else {
        CHECK(rc < 0);
    }
    return 0;
}
