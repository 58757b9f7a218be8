// fuzz_safetensors.c: libFuzzer target for the safetensors header parser (safetensors.c). Any byte
// string is a "file"; the parser must return 0 or a LILY_E* code, never crash, read out of bounds
// or leak, and on success the tensors it returns must lie inside the buffer and tile it.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    // Copy into an exact-size allocation so ASan sees any read past the end.
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) return 0;
    if (size) memcpy(buf, data, size);
    struct st_header h;
    int rc = st_header_parse(buf, size, "fuzz.safetensors", &h);
    if (rc == 0) {
        uint64_t pos = 0;
        for (int i = 0; i < h.n; i++) {
            CHECK(h.t[i].begin == pos && h.t[i].end >= h.t[i].begin);
            CHECK(h.t[i].numel * (uint64_t)h.t[i].esize == h.t[i].end - h.t[i].begin);
            pos = h.t[i].end;
        }
        CHECK(pos == h.data_size && h.data_start + h.data_size == size);
        st_header_free(&h);
    } else {
        CHECK(rc < 0 && h.n == 0 && h.t == NULL);
    }
    free(buf);
    return 0;
}
