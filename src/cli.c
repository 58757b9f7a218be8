// cli.c: the option parser shared by every verb (cli.h).
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_parse(int argc, char **argv, struct cli_opt *opts, int n) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        size_t len = eq && a[0] == '-' ? (size_t)(eq - a) : strlen(a);
        int found = -1;
        for (int k = 0; k < n; k++)
            if (strlen(opts[k].name) == len && !strncmp(opts[k].name, a, len)) found = k;
        if (found < 0) {
            fprintf(stderr, "lily %s: unknown option '%s'\n", argv[0], a);
            return 2;
        }
        if (!opts[found].has_arg) {
            if (eq) {
                fprintf(stderr, "lily %s: option '%s' takes no value\n", argv[0], opts[found].name);
                return 2;
            }
            opts[found].val = "1";
        } else if (eq) {
            opts[found].val = eq + 1;
        } else {
            if (i + 1 >= argc) {
                fprintf(stderr, "lily %s: option '%s' needs a value\n", argv[0], a);
                return 2;
            }
            opts[found].val = argv[++i];
        }
    }
    return 0;
}

const char *cli_get(const struct cli_opt *opts, int n, const char *name) {
    for (int k = 0; k < n; k++)
        if (!strcmp(opts[k].name, name)) return opts[k].val;
    return NULL;
}

int cli_get_int(const struct cli_opt *opts, int n, const char *name, long def, long lo, long hi,
                long *out) {
    const char *v = cli_get(opts, n, name);
    if (!v) {
        *out = def;
        return 0;
    }
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi) {
        fprintf(stderr, "lily: %s must be an integer in [%ld, %ld], got '%s'\n", name, lo, hi, v);
        return -1;
    }
    *out = x;
    return 0;
}

const char *cli_default_model(void) {
    const char *e = getenv("LILY_MODEL");
    if (e && *e) return e;
    // The bundled demo model, found relative to the binary (build/lily -> ../models/demo) or to
    // the working directory.
    static char path[4096];
    char exe[2048];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k > 0) {
        exe[k] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(path, sizeof path, "%s/../models/demo", exe);
            if (access(path, R_OK) == 0) return path;
        }
    }
    return "models/demo";
}
