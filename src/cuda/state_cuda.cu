// state_cuda.cu: the CUDA backend's per-sequence states (KV caches of the attention layers, conv rings
// and recurrent states of the GDN layers, the step's token/position words, its captured graphs) and
// their snapshots: save/load through host memory, and the prefix cache's snapshots kept in device
// memory where there is room.
#include <vector>

#include "backend_cuda.cuh"

// ---------------------------------------------------------------------------------------------
// States.
void drop_graphs(cuda_state *s) {
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 2; i++)
            if (s->graph[j][i]) cudaGraphExecDestroy(s->graph[j][i]), s->graph[j][i] = NULL;
}

void state_free_cuda(void *ctx, void *p) {
    (void)ctx;
    cuda_state *s = (cuda_state *)p;
    if (!s) return;
    drop_graphs(s);
    for (void *a : s->allocs) cudaFree(a);
    if (s->h_tok) cudaFreeHost(s->h_tok);
    if (s->h_log) cudaFreeHost(s->h_log);
    delete s;
}

void state_reset_cuda(void *ctx, void *p) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    const lily_config *c = &cx->c;
    for (int l = 0; l < c->n_layers; l++)
        if (!cx->L[l].full) {
            cudaMemsetAsync(s->ring[l], 0, (size_t)c->conv_kernel * lily_conv_dim(c) * 4, cx->st);
            cudaMemsetAsync(s->S[l], 0, (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim * 4, cx->st);
        }
    cudaMemsetAsync(s->d_pos, 0, sizeof(int), cx->st);
    cudaMemsetAsync(s->d_tok, 0, sizeof(int), cx->st); // a fresh state's token: id 0, not what the memory held
    cudaMemsetAsync(s->d_step, 0, sizeof(int), cx->st);
    cudaStreamSynchronize(cx->st);
    s->pos = 0;
}

int state_new_cuda(void *ctx, int max_ctx, void **out) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    const lily_config *c = &cx->c;
    *out = NULL;
    if (max_ctx < 1) return lily_err_set(LILY_EINVAL, "cuda backend: max_ctx %d", max_ctx);
    cuda_state *s = new cuda_state();
    s->max_ctx = max_ctx;
    s->kc.assign(c->n_layers, NULL), s->vc.assign(c->n_layers, NULL);
    s->ring.assign(c->n_layers, NULL), s->S.assign(c->n_layers, NULL);
    auto alloc = [&](void **p, size_t n) {
        if (cudaMalloc(p, n) != cudaSuccess) {
            cudaGetLastError();
            return false;
        }
        s->allocs.push_back(*p);
        return true;
    };
    bool ok = true;
    s->kv_f32 = cx->opt[LILY_CUDA_OPT_F32ACT] != 0;
    size_t kv = (size_t)c->n_kv_heads * max_ctx * c->head_dim * (s->kv_f32 ? 4 : 2);
    for (int l = 0; l < c->n_layers && ok; l++) {
        if (cx->L[l].full)
            ok = alloc(&s->kc[l], kv) && alloc(&s->vc[l], kv);
        else
            ok = alloc((void **)&s->ring[l], (size_t)c->conv_kernel * lily_conv_dim(c) * 4) &&
                 alloc((void **)&s->S[l], (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim * 4);
    }
    s->ids_cap = 1 << 16;
    ok = ok && alloc((void **)&s->d_tok, 4) && alloc((void **)&s->d_pos, 4) && alloc((void **)&s->d_step, 4) &&
         alloc((void **)&s->d_ids, (size_t)s->ids_cap * 4);
    ok = ok && cudaHostAlloc(&s->h_tok, 4, 0) == cudaSuccess &&
         cudaHostAlloc(&s->h_log, (size_t)c->vocab_size * 4, 0) == cudaSuccess;
    if (!ok) {
        size_t fb = 0, tb = 0;
        cudaMemGetInfo(&fb, &tb);
        state_free_cuda(ctx, s);
        return lily_err_set(LILY_ENOMEM, "cuda backend: out of GPU memory for a %d-token state "
                            "(KV cache %.2f GB; %.2f GB free)", max_ctx,
                            2.0 * kv * (c->n_layers / 4) / 1e9, fb / 1e9);
    }
    state_reset_cuda(ctx, s);
    note_mem(cx);
    *out = s;
    return 0;
}

int state_pos_cuda(void *ctx, void *p) {
    (void)ctx;
    return ((cuda_state *)p)->pos;
}

// ---------------------------------------------------------------------------------------------
// Snapshots: the position, then every layer's cache/state buffers, in layer order.
size_t save_size_cuda(void *ctx, void *p) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    const lily_config *c = &cx->c;
    size_t n = sizeof(int);
    for (int l = 0; l < c->n_layers; l++)
        n += cx->L[l].full ? 2 * (size_t)c->n_kv_heads * s->pos * c->head_dim * (s->kv_f32 ? 4 : 2)
                           : ((size_t)c->conv_kernel * lily_conv_dim(c) + (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim) * 4;
    return n;
}

// Copy the state's buffers (positions [0, pos) of the KV caches) to or from buf, in save_size_cuda's
// layout, on the context's stream: save gives the direction, dev says buf is device memory. Host copies
// end with a synchronisation; device-to-device ones are ordered on the stream and need none.
static int snap_copy(cuda_ctx *cx, cuda_state *s, char *buf, int pos, bool save, bool dev) {
    const lily_config *c = &cx->c;
    const cudaMemcpyKind kind = dev ? cudaMemcpyDeviceToDevice : save ? cudaMemcpyDeviceToHost : cudaMemcpyHostToDevice;
    auto cp = [&](void *state_mem, size_t n) {
        cudaError_t e = save ? cudaMemcpyAsync(buf, state_mem, n, kind, cx->st)
                             : cudaMemcpyAsync(state_mem, buf, n, kind, cx->st);
        buf += n;
        return e;
    };
    for (int l = 0; l < c->n_layers; l++) {
        if (cx->L[l].full) {
            for (int h = 0; h < c->n_kv_heads; h++) {
                size_t es = s->kv_f32 ? 4 : 2;
                size_t off = (size_t)h * s->max_ctx * c->head_dim * es, n = (size_t)pos * c->head_dim * es;
                CU_TRY(cp((char *)s->kc[l] + off, n));
                CU_TRY(cp((char *)s->vc[l] + off, n));
            }
        } else {
            CU_TRY(cp(s->ring[l], (size_t)c->conv_kernel * lily_conv_dim(c) * 4));
            CU_TRY(cp(s->S[l], (size_t)c->lin_v_heads * c->lin_v_dim * c->lin_k_dim * 4));
        }
    }
    if (!dev) CU_TRY(cudaStreamSynchronize(cx->st));
    return 0;
}

int save_cuda(void *ctx, void *p, void *dst) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    CU_TRY(cudaStreamSynchronize(cx->st));
    memcpy(dst, &s->pos, sizeof(int));
    return snap_copy(cx, s, (char *)dst + sizeof(int), s->pos, true, false);
}

// The state's position, on the host and for the step's kernels.
static int set_pos(cuda_ctx *cx, cuda_state *s, int pos) {
    s->pos = pos;
    CU_TRY(cudaMemcpyAsync(s->d_pos, &s->pos, sizeof(int), cudaMemcpyHostToDevice, cx->st));
    CU_TRY(cudaStreamSynchronize(cx->st));
    return 0;
}

int load_cuda(void *ctx, void *p, const void *src, size_t n) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    int pos;
    if (n < sizeof(int)) return lily_err_set(LILY_EFORMAT, "cuda backend: snapshot too short");
    memcpy(&pos, src, sizeof(int));
    if (pos < 0 || pos > s->max_ctx) return lily_err_set(LILY_ERANGE, "cuda backend: snapshot position %d", pos);
    int old = s->pos;
    s->pos = pos;
    if (save_size_cuda(ctx, p) != n) {
        s->pos = old;
        return lily_err_set(LILY_EFORMAT, "cuda backend: snapshot size %zu does not match", n);
    }
    CU_TRY(cudaStreamSynchronize(cx->st));
    int rc = snap_copy(cx, s, (char *)src + sizeof(int), pos, false, false);
    if (rc) return rc;
    return set_pos(cx, s, pos);
}

// Snapshots for the engine's prefix cache (lily_backend.snap_save): save_cuda's layout, kept in device
// memory, where taking and restoring one are device-to-device copies ordered on the stream. Through
// pageable host memory, the snapshots of a 32K prompt (every 4096 tokens: 3.5 GB) took 2.6 s against
// its 1.1 s of prefill (docs/PERF.md). Device memory is taken only while SNAP_RESERVE bytes stay free
// beside it, and the prefill scratch's, if not yet allocated; else (or with LILY_CUDA_OPT_SNAP_DEV off)
// the snapshot goes to host memory.
#define SNAP_RESERVE ((size_t)1 << 30)
struct cuda_snap {
    int pos, kv_f32;
    bool dev;     // mem is device memory (else host)
    size_t bytes; // save_size_cuda of the state it was taken from
    char *mem;    // the buffers after the position word
};

void snap_free_cuda(void *ctx, void *snap) {
    (void)ctx;
    cuda_snap *h = (cuda_snap *)snap;
    if (!h) return;
    if (h->dev)
        cudaFree(h->mem);
    else
        free(h->mem);
    delete h;
}

void *snap_save_cuda(void *ctx, void *p, size_t *bytes) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    cuda_snap *h = new cuda_snap();
    h->pos = s->pos, h->kv_f32 = s->kv_f32, h->bytes = save_size_cuda(ctx, p);
    const size_t n = h->bytes - sizeof(int);
    size_t fb = 0, tb = 0;
    if (cx->opt[LILY_CUDA_OPT_SNAP_DEV] && cudaMemGetInfo(&fb, &tb) == cudaSuccess &&
        fb > n + SNAP_RESERVE + pf_scratch_pending(cx) &&
        cudaMalloc((void **)&h->mem, n) == cudaSuccess)
        h->dev = true;
    else {
        cudaGetLastError();
        h->mem = (char *)malloc(n ? n : 1);
    }
    if (!h->mem) {
        delete h;
        lily_err_set(LILY_ENOMEM, "cuda backend: no memory for a snapshot of %zu bytes", n);
        return NULL;
    }
    if (!h->dev) cudaStreamSynchronize(cx->st);
    if (snap_copy(cx, s, h->mem, s->pos, true, h->dev)) {
        snap_free_cuda(ctx, h);
        return NULL;
    }
    note_mem(cx);
    *bytes = h->bytes;
    return h;
}

int snap_load_cuda(void *ctx, void *p, void *snap) {
    cuda_ctx *cx = (cuda_ctx *)ctx;
    cuda_state *s = (cuda_state *)p;
    const cuda_snap *h = (const cuda_snap *)snap;
    if (h->pos > s->max_ctx || h->kv_f32 != s->kv_f32)
        return lily_err_set(LILY_ERANGE, "cuda backend: a snapshot of %d positions (%s KV) does not fit this state "
                            "(%d positions, %s KV)", h->pos, h->kv_f32 ? "fp32" : "bf16", s->max_ctx,
                            s->kv_f32 ? "fp32" : "bf16");
    if (!h->dev) CU_TRY(cudaStreamSynchronize(cx->st));
    int rc = snap_copy(cx, s, h->mem, h->pos, false, h->dev);
    if (rc) return rc;
    return set_pos(cx, s, h->pos);
}
