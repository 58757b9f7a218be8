// loader_internal.h: pieces shared by the loader's files (loader.c, loader_config.c) and by the
// checkpoint writers (quantize.c, synth.c). Not a public contract.
#ifndef LILY_LOADER_INTERNAL_H
#define LILY_LOADER_INTERNAL_H

#include <jansson.h>

#include "model.h"
#include "safetensors.h"

struct shard {
    char *path;
    uint8_t *map;
    size_t size;
    struct st_header h;
};

// What the model owns after loading: the mappings and every converted array.
struct loader_priv {
    struct shard *shards;
    int n_shards;
    void **allocs;
    int n_allocs, cap_allocs;
    int shifted;      // +1 applied to the zero-centred norms (raw HF checkpoint)
    long n_skipped;   // tensors in the files that the text model does not use
    long file_bytes;  // size of all shards
};


// The text-model object of a config.json: `text_config` if present, else the root.
json_t *loader_text_config(json_t *root);
// Fill `c` from a parsed config.json (flat or nested); validates ranges and consistency.
int loader_config_from_json(json_t *root, const char *path, struct lily_config *c);
// Append `id` to the eos list if it is a valid token and not present yet.
void loader_add_eos(struct lily_config *c, long id);

#endif
