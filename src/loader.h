// loader.h: model directory -> struct lily_model. Reads config.json (flat or under text_config),
// one safetensors file or a sharded set with model.safetensors.index.json, mmaps the shards, checks
// every tensor's dtype, shape and byte range, and fills struct lily_weights with views. Accepts the
// official HF layout, the plain Qwen3_5MoeForCausalLM layout and the MLX layout (spec §3).
//
// Every failure is a negative LILY_E* code with a one-line lily_err_msg() naming the file and the
// problem; nothing in a checkpoint can crash the loader (fuzzed: tests/fuzz/).
#ifndef LILY_LOADER_H
#define LILY_LOADER_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#include "model.h"

// Load the model in directory `dir`. On failure `m` is left empty (safe to lily_model_free).
int lily_model_load(const char *dir, struct lily_model *m);
void lily_model_free(struct lily_model *m);

// Parse the text of a config.json into `c` (defaults for absent keys as in the HF config class).
// `path` is used in error messages only.
int lily_config_parse(const char *json, size_t len, const char *path, struct lily_config *c);

// Parse the text of a model.safetensors.index.json: the distinct shard file names its weight_map
// names, in first-seen order (*names and each name malloc'd), rejecting absolute paths, "..", and
// backslashes. If root is not NULL it receives the parsed JSON (json_decref it). `path` is for error
// messages only. On failure nothing is left allocated.
int lily_index_parse(const char *json, size_t len, const char *path, char ***names, int *n,
                     json_t **root);

// Print a summary of a loaded model (lily info).
void lily_model_print_info(const struct lily_model *m, FILE *f);

#endif
