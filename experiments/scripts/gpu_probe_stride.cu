// Usage (device machine): nvcc -arch=sm_90 -O3 -o /tmp/stride experiments/scripts/gpu_probe_stride.cu && /tmp/stride
// Access-pattern probe: blocks that take L 32 KB chunks one after the other (as the sequential two-sided-tb's
// blocks take their L signals), chunk of (block b, step l) = b*L + l ("blocked", today's mapping) or l*nb + b
// ("interleaved": the resident blocks at one step read one contiguous run). Copy in -> out with a barrier per step
// and some arithmetic per element; 99 KB of dynamic shared memory per block (two blocks per SM, as the fp32 2^12 kernel).
#include <cstdio>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
template <int L, bool INTER, int WORK>
__global__ void __launch_bounds__(256, 2) k(const float4* __restrict__ in, float4* __restrict__ out, int nb) {
  extern __shared__ float4 sm[];
  const int b = blockIdx.x, t = threadIdx.x;
  for (int l = 0; l < L; ++l) {
    const long long chunk = INTER ? (long long)l * nb + b : (long long)b * L + l;
    const float4* src = in + chunk * 2048;  // 32 KB = 2048 float4
    float4 v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = src[t + 256 * i];
#pragma unroll
    for (int i = 0; i < 8; ++i) sm[t + 256 * i] = v[i];
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = sm[(t * 8 + i) & 2047];
    for (int w = 0; w < WORK; ++w) {
#pragma unroll
      for (int i = 0; i < 8; ++i) { v[i].x = fmaf(v[i].x, 1.0001f, v[i].y); v[i].y = fmaf(v[i].y, 0.9999f, v[i].x); }
    }
    __syncthreads();
    float4* dst = out + chunk * 2048;
#pragma unroll
    for (int i = 0; i < 8; ++i) dst[t + 256 * i] = v[i];
  }
}
template <int L, bool INTER, int WORK>
float run(const float4* in, float4* out, long long nchunks) {
  const int nb = int(nchunks / L);
  auto f = k<L, INTER, WORK>;
  cudaFuncSetAttribute(f, cudaFuncAttributeMaxDynamicSharedMemorySize, 99 * 1024);
  cudaEvent_t a, z; cudaEventCreate(&a); cudaEventCreate(&z);
  for (int w = 0; w < 3; ++w) f<<<nb, 256, 99 * 1024>>>(in, out, nb);
  float best[21]; 
  for (int r = 0; r < 21; ++r) { cudaEventRecord(a); f<<<nb, 256, 99 * 1024>>>(in, out, nb); cudaEventRecord(z); cudaEventSynchronize(z); cudaEventElapsedTime(&best[r], a, z); }
  if (cudaGetLastError() != cudaSuccess) { printf("launch error\n"); return -1; }
  for (int i = 0; i < 21; ++i) for (int j = i + 1; j < 21; ++j) if (best[j] < best[i]) { float x = best[i]; best[i] = best[j]; best[j] = x; }
  return best[10];
}
int main() {
  const long long bytes = 512ll << 20, nchunks = bytes / 32768;
  float4 *in, *out; CK(cudaMalloc(&in, bytes)); CK(cudaMalloc(&out, bytes)); CK(cudaMemset(in, 1, bytes));
  auto gbs = [&](float ms) { return 2.0 * bytes / ms / 1e6; };
#define R(L, W) { float b = run<L, false, W>(in, out, nchunks), i = run<L, true, W>(in, out, nchunks); \
  printf("L=%2d work=%3d  blocked %.3f ms %6.0f GB/s   interleaved %.3f ms %6.0f GB/s  (%.3f)\n", L, W, b, gbs(b), i, gbs(i), b / i); }
  R(1, 0) R(4, 0) R(5, 0) R(8, 0) R(16, 0) R(4, 16) R(8, 16) R(16, 16) R(4, 48) R(8, 48) R(16, 48)
  return 0;
}
