// server.h: the OpenAI-compatible HTTP server on libmicrohttpd (one thread per connection). HTTP
// threads parse and check requests, render and tokenize prompts, submit tasks to the engine and
// turn its events into JSON or SSE; they never touch the model. docs/SERVER.md describes the API
// and the security defaults.
#ifndef LILY_SERVER_H
#define LILY_SERVER_H

#include <stddef.h>

#include "engine.h"

struct server_opts {
    const char *host;        // bind address (default 127.0.0.1)
    int port;                // default 8080; 0 = any free port (printed)
    const char *api_key;     // NULL = no key; else "Authorization: Bearer KEY" on all but /health
    const char *cors;        // NULL = no CORS headers; else the Access-Control-Allow-Origin value
    const char *model_id;    // the id the model is served under
    int timeout_s;           // idle / read timeout per connection (default 60)
    size_t max_body;         // request body cap in bytes (default 8 MiB)
    int max_conns;           // concurrent connections (default 64)
    int max_prompt;          // prompt tokens cap (0 = context - 1)
    int keepalive_s;         // SSE comment interval while waiting (default 5)
};
void server_opts_default(struct server_opts *o);

// Serve until SIGINT or SIGTERM. Prints "lily: listening on http://HOST:PORT" to stderr (and the
// port to the file named by $LILY_PORT_FILE, for tests using port 0). Returns 0 or LILY_E*.
int server_run(struct engine *e, const struct server_opts *o);

#endif
