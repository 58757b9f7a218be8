// clusters.cu (dev): how many thread-block clusters of 8 and of 16 the GPU holds at once, at one block
// an SM (512 threads, ~110 registers, the given dynamic shared memory), and the SMs per GPC that
// implies; for moe_fused.cu's choice of layout. Build: nvcc -arch=sm_90a -o clusters clusters.cu
#include <cstdio>
#include <cuda_runtime.h>

__global__ void __launch_bounds__(512, 1) k_dummy(float *p) {
    if (p) p[blockIdx.x * blockDim.x + threadIdx.x] = 0.0f;
}

int main() {
    cudaFuncSetAttribute(k_dummy, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    for (int smem : {48 * 1024, 120 * 1024, 175 * 1024}) {
        cudaFuncSetAttribute(k_dummy, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        for (int threads : {256, 512})
            for (int cl : {2, 4, 8, 16}) {
                cudaLaunchConfig_t cfg = {};
                cudaLaunchAttribute at[1];
                cfg.gridDim = dim3(cl * 16), cfg.blockDim = dim3(threads), cfg.dynamicSmemBytes = smem;
                at[0].id = cudaLaunchAttributeClusterDimension;
                at[0].val.clusterDim.x = cl, at[0].val.clusterDim.y = 1, at[0].val.clusterDim.z = 1;
                cfg.attrs = at, cfg.numAttrs = 1;
                int n = 0;
                cudaError_t e = cudaOccupancyMaxActiveClusters(&n, k_dummy, &cfg);
                printf("smem %3d KB threads %3d cluster %2d: max active clusters %d (%s)\n", smem / 1024, threads, cl, n,
                       cudaGetErrorString(e));
            }
    }
    return 0;
}
