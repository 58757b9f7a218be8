// probe.cu (dev): three numbers the decode step's next structure depends on (docs/PERF.md, thirty-sixth session).
//   1. How many thread-block clusters of 2 .. 16 blocks fit the GPU at once (cudaOccupancyMaxActiveClusters) at
//      256 threads and 0 / 64 / 150 KB of dynamic shared memory: 16 k heads need 16 clusters of 8 resident.
//   2. A barrier of 8 blocks: through a global counter (cuda_common.cuh blocks_sync's protocol) against the
//      hardware cluster barrier (barrier.cluster.arrive.release / wait.acquire), us per barrier, 128 blocks.
//   3. The floor of one launch in the step's form: a CUDA graph of 200 launches in a chain with programmatic
//      dependent launch, each kernel waiting (griddepcontrol.wait) and triggering; empty, and reading 8 KB of x
//      and reducing it per block (the decode GEMVs' prologue in miniature). us per launch.
// Built by make (build/dev/cluster_probe) when nvcc is present; run by hand on the GPU machine.
#include <cstdio>
#include <cstdlib>
#include "cuda/cuda_common.cuh" // blocks_sync

#define CK(x)                                                                                                  \
    do {                                                                                                       \
        cudaError_t e_ = (x);                                                                                  \
        if (e_ != cudaSuccess) {                                                                               \
            fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_));                \
            exit(1);                                                                                           \
        }                                                                                                      \
    } while (0)

__global__ void k_nothing() {}

// 2. n barriers of the 8 blocks of each group: the engine's blocks_sync (a counter pair per group).
__global__ void k_bar_global(unsigned *bar, int n) {
    for (int i = 0; i < n; i++) blocks_sync(bar + 2 * (blockIdx.x / 8), 8);
}
__global__ void __cluster_dims__(8, 1, 1) k_bar_cluster(int n) {
    for (int i = 0; i < n; i++) {
        asm volatile("barrier.cluster.arrive.release.aligned;\n" ::: "memory");
        asm volatile("barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
    }
}

// 3. One link of the chain: wait for the previous kernel, optionally read x (2048 floats) and reduce its squares
// in the block, trigger the next.
template <bool X> __global__ void k_link(const float *x, float *out) {
    asm volatile("griddepcontrol.wait;" ::: "memory");
    if (X) {
        __shared__ float red[8];
        float s = 0.0f;
        for (int i = threadIdx.x; i < 2048; i += blockDim.x) s += x[i] * x[i];
        for (int o = 16; o; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        if ((threadIdx.x & 31) == 0) red[threadIdx.x >> 5] = s;
        __syncthreads();
        if (threadIdx.x == 0 && blockIdx.x == 0) out[0] = red[0] + red[7];
    }
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

static float time_graph(cudaGraphExec_t ge, cudaStream_t st, int reps) {
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(a, st));
    for (int i = 0; i < reps; i++) CK(cudaGraphLaunch(ge, st));
    CK(cudaEventRecord(b, st));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    return ms / reps;
}

int main() {
    int sms;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    printf("SMs %d\n", sms);
    // 1. clusters resident at once
    CK(cudaFuncSetAttribute(k_nothing, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    CK(cudaFuncSetAttribute(k_nothing, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
    for (int smem : {0, 64 * 1024, 150 * 1024}) {
        printf("clusters resident, 256 threads, %3d KB dynamic smem:", smem / 1024);
        for (int cs : {1, 2, 4, 8, 16}) {
            cudaLaunchConfig_t cfg = {};
            cudaLaunchAttribute at[1];
            at[0].id = cudaLaunchAttributeClusterDimension;
            at[0].val.clusterDim.x = cs, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
            cfg.gridDim = dim3(cs * 16), cfg.blockDim = dim3(256), cfg.dynamicSmemBytes = smem;
            cfg.attrs = at, cfg.numAttrs = 1;
            int n = -1;
            if (cudaOccupancyMaxActiveClusters(&n, k_nothing, &cfg) != cudaSuccess) n = -1, cudaGetLastError();
            printf("  size %d: %d", cs, n);
        }
        printf("\n");
    }
    // 2. barriers of 8 blocks, 128 blocks
    unsigned *bar;
    CK(cudaMalloc(&bar, 64 * sizeof(unsigned)));
    CK(cudaMemset(bar, 0, 64 * sizeof(unsigned)));
    cudaEvent_t a, b;
    CK(cudaEventCreate(&a));
    CK(cudaEventCreate(&b));
    const int nb = 1000;
    for (int rep = 0; rep < 2; rep++) {
        float ms_g, ms_c;
        CK(cudaEventRecord(a));
        k_bar_global<<<128, 256>>>(bar, nb);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&ms_g, a, b));
        CK(cudaEventRecord(a));
        k_bar_cluster<<<128, 256>>>(nb);
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        CK(cudaGetLastError());
        CK(cudaEventElapsedTime(&ms_c, a, b));
        printf("barrier of 8 blocks (128 blocks, %d in a row): global counter %.3f us, cluster barrier %.3f us\n", nb,
               ms_g * 1e3f / nb, ms_c * 1e3f / nb);
    }
    // 3. chains of 200 launches with PDL, in a graph
    float *x, *out;
    CK(cudaMalloc(&x, 2048 * sizeof(float)));
    CK(cudaMalloc(&out, 16));
    CK(cudaMemset(x, 0, 2048 * sizeof(float)));
    cudaStream_t st;
    CK(cudaStreamCreate(&st));
    for (int grid : {128, 396}) {
        for (int withx = 0; withx < 2; withx++) {
            cudaGraph_t g;
            cudaGraphExec_t ge;
            CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
            for (int i = 0; i < 200; i++) {
                cudaLaunchConfig_t cfg = {};
                cudaLaunchAttribute at[1];
                at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
                at[0].val.programmaticStreamSerializationAllowed = 1;
                cfg.gridDim = dim3(grid), cfg.blockDim = dim3(256), cfg.stream = st, cfg.attrs = at, cfg.numAttrs = 1;
                CK(withx ? cudaLaunchKernelEx(&cfg, k_link<true>, (const float *)x, out)
                         : cudaLaunchKernelEx(&cfg, k_link<false>, (const float *)x, out));
            }
            CK(cudaStreamEndCapture(st, &g));
            CK(cudaGraphInstantiate(&ge, g, 0));
            const float ms = time_graph(ge, st, 50);
            printf("graph of 200 PDL launches, grid %d, %s: %.2f us a launch\n", grid,
                   withx ? "each block reading and reducing 8 KB of x" : "empty", ms * 1e3f / 200);
            CK(cudaGraphExecDestroy(ge));
            CK(cudaGraphDestroy(g));
        }
    }
    return 0;
}
