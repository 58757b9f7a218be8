// backend.c: the backend registry (backend.h).
#include "backend.h"

#include <string.h>

extern const struct lily_backend lily_backend_cpu;
#ifdef LILY_CUDA
extern const struct lily_backend lily_backend_cuda;
#endif

const struct lily_backend *lily_backend_get(const char *name) {
    if (!name || !strcmp(name, "cpu")) return &lily_backend_cpu;
#ifdef LILY_CUDA
    if (!strcmp(name, "cuda")) return &lily_backend_cuda;
#endif
    return NULL;
}
