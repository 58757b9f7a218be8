// mma_rate.cu (dev): the rate and latency of the legacy warp-level MMAs on this GPU, the numbers that
// bound gdn_chunked.cu's phase B (mma.sync m16n8k8 TF32, chains of dependent accumulations). Each warp
// runs CH independent accumulator chains of N MMAs; CH = 1 gives the latency of one dependent MMA, a
// large CH the throughput. Prints cycles per MMA per warp and the whole GPU's TFLOP/s.
// Built by make (build/dev/mma_rate) when nvcc is present.
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>

template <int CH, bool BF16>
__global__ void mma_loop(int n, float *out, long long *cyc) {
    float c[CH][4] = {};
    uint32_t a[4] = {threadIdx.x, threadIdx.x * 3u, threadIdx.x * 5u, threadIdx.x * 7u}, b[2] = {threadIdx.x * 11u, 13u};
    for (int i = 0; i < 4; i++) a[i] &= 0x3f7fe000u;
    b[0] &= 0x3f7fe000u, b[1] &= 0x3f7fe000u;
    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < n; it++) {
#pragma unroll
        for (int k = 0; k < CH; k++) {
            if (BF16)
                asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                             : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
            else
                asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
                             : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                             : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
        }
    }
    const long long t1 = clock64();
    float s = 0.0f;
    for (int k = 0; k < CH; k++) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0 && blockIdx.x == 0) *cyc = t1 - t0;
}

template <int CH, bool BF16> static void run(int warps, int blocks) {
    const int n = 4096;
    float *out;
    long long *cyc, hc;
    cudaMalloc(&out, (size_t)blocks * warps * 32 * 4);
    cudaMalloc(&cyc, 8);
    mma_loop<CH, BF16><<<blocks, warps * 32>>>(n, out, cyc);
    cudaEvent_t e0, e1;
    cudaEventCreate(&e0), cudaEventCreate(&e1);
    cudaEventRecord(e0);
    mma_loop<CH, BF16><<<blocks, warps * 32>>>(n, out, cyc);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    cudaMemcpy(&hc, cyc, 8, cudaMemcpyDeviceToHost);
    const double flop = 2.0 * 16 * 8 * (BF16 ? 16 : 8) * (double)n * CH * warps * blocks;
    printf("%s chains %2d, %2d warps x %3d blocks: %6.1f cycles per MMA per warp, %7.1f TFLOP/s\n", BF16 ? "bf16 m16n8k16" : "tf32 m16n8k8 ",
           CH, warps, blocks, (double)hc / ((double)n * CH), flop / (ms * 1e-3) / 1e12);
    cudaFree(out), cudaFree(cyc);
}

int main() {
    run<1, false>(1, 1);   // latency
    run<1, false>(8, 132); // phase B's shape: 8 warps an SM, one chain each
    run<2, false>(8, 132);
    run<4, false>(8, 132);
    run<8, false>(8, 132);
    run<8, false>(16, 132);
    run<1, true>(1, 1);
    run<8, true>(8, 132);
    run<8, true>(16, 132);
    return 0;
}
