// pool_cpu.c: the small thread pool behind cpu_parallel_for (ops_cpu.h). One process-wide pool of
// lily_num_threads() threads (the caller counts as one), started on first use and kept for the
// life of the process. A job is split into one contiguous range per thread, so the way work is
// divided (and hence every result) does not depend on timing.
#include <pthread.h>

#include "common.h"
#include "cpu/ops_cpu.h"

struct pool {
    int n_threads;            // including the calling thread
    pthread_mutex_t call_mu;  // one job at a time
    pthread_mutex_t mu;
    pthread_cond_t cv_start, cv_done;
    unsigned long gen;        // bumped for every job
    int pending;              // workers still running the current job
    void (*fn)(void *, int, int);
    void *arg;
    int n;
};

static struct pool g_pool;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void range_of(int n, int parts, int i, int *lo, int *hi) {
    *lo = (int)((long)n * i / parts);
    *hi = (int)((long)n * (i + 1) / parts);
}

static void *pool_worker(void *p) {
    int id = (int)(long)p;
    unsigned long seen = 0;
    for (;;) {
        pthread_mutex_lock(&g_pool.mu);
        while (g_pool.gen == seen) pthread_cond_wait(&g_pool.cv_start, &g_pool.mu);
        seen = g_pool.gen;
        void (*fn)(void *, int, int) = g_pool.fn;
        void *arg = g_pool.arg;
        int n = g_pool.n;
        pthread_mutex_unlock(&g_pool.mu);

        int lo, hi;
        range_of(n, g_pool.n_threads, id, &lo, &hi);
        if (lo < hi) fn(arg, lo, hi);

        pthread_mutex_lock(&g_pool.mu);
        if (--g_pool.pending == 0) pthread_cond_signal(&g_pool.cv_done);
        pthread_mutex_unlock(&g_pool.mu);
    }
    return NULL;
}

static void pool_start(void) {
    g_pool.n_threads = lily_num_threads();
    if (g_pool.n_threads < 1) g_pool.n_threads = 1;
    if (g_pool.n_threads > 256) g_pool.n_threads = 256;
    pthread_mutex_init(&g_pool.call_mu, NULL);
    pthread_mutex_init(&g_pool.mu, NULL);
    pthread_cond_init(&g_pool.cv_start, NULL);
    pthread_cond_init(&g_pool.cv_done, NULL);
    for (int i = 1; i < g_pool.n_threads; i++) {
        pthread_t th;
        if (pthread_create(&th, NULL, pool_worker, (void *)(long)i) != 0) {
            // Best effort: run with the threads we have (ranges are assigned by id, so the pool
            // size must match the threads actually running).
            g_pool.n_threads = i;
            break;
        }
        pthread_detach(th);
    }
}

int cpu_pool_threads(void) {
    pthread_once(&g_once, pool_start);
    return g_pool.n_threads;
}

void cpu_parallel_for(int n, void (*fn)(void *arg, int lo, int hi), void *arg) {
    if (n <= 0) return;
    pthread_once(&g_once, pool_start);
    int nt = g_pool.n_threads;
    if (nt == 1 || n == 1) {
        fn(arg, 0, n);
        return;
    }
    pthread_mutex_lock(&g_pool.call_mu);
    pthread_mutex_lock(&g_pool.mu);
    g_pool.fn = fn;
    g_pool.arg = arg;
    g_pool.n = n;
    g_pool.pending = nt - 1;
    g_pool.gen++;
    pthread_cond_broadcast(&g_pool.cv_start);
    pthread_mutex_unlock(&g_pool.mu);

    int lo, hi;
    range_of(n, nt, 0, &lo, &hi);
    if (lo < hi) fn(arg, lo, hi);

    pthread_mutex_lock(&g_pool.mu);
    while (g_pool.pending > 0) pthread_cond_wait(&g_pool.cv_done, &g_pool.mu);
    pthread_mutex_unlock(&g_pool.mu);
    pthread_mutex_unlock(&g_pool.call_mu);
}
