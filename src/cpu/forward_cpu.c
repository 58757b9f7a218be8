// forward_cpu.c: placeholder CPU backend until the reference forward pass lands.
#include "backend.h"
#include "common.h"

static int init_cpu(const struct lily_model *m, void **ctx) {
    (void)m;
    *ctx = NULL;
    return lily_err_set(LILY_EUNSUPPORTED, "cpu backend: not implemented yet");
}

const struct lily_backend lily_backend_cpu = {.name = "cpu", .init = init_cpu};
