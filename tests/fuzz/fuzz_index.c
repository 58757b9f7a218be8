// fuzz_index.c: libFuzzer target for model.safetensors.index.json parsing (lily_index_parse in
// loader.c). Any byte string is an index; the parser returns 0 or a LILY_E* code with a message,
// and an index it accepts names at least one shard, each distinct, none absolute or with "..".
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "loader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char **names;
    int n;
    json_t *root;
    int rc = lily_index_parse((const char *)data, size, "fuzz/index.json", &names, &n, &root);
    if (rc) {
        CHECK(rc < 0 && names == NULL && n == 0 && root == NULL && lily_err_msg()[0]);
        return 0;
    }
    CHECK(n >= 1 && json_is_object(json_object_get(root, "weight_map")));
    for (int i = 0; i < n; i++) {
        CHECK(names[i][0] && names[i][0] != '/' && !strchr(names[i], '\\'));
        CHECK(strcmp(names[i], "..") && strncmp(names[i], "../", 3) && !strstr(names[i], "/../"));
        size_t l = strlen(names[i]);
        CHECK(l < 3 || strcmp(names[i] + l - 3, "/.."));
        for (int j = 0; j < i; j++) CHECK(strcmp(names[i], names[j]));
    }
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    json_decref(root);
    return 0;
}
