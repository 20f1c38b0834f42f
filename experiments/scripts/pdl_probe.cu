// What a programmatic dependent launch saves per kernel boundary on this GPU: a chain of N small kernels (each block
// reads the previous kernel's output and writes its own, so a missing wait would show as a wrong sum), timed with
// ordinary launches and with ftgen::launch_dependent, alternately, median of 15; and what pdl_allowed() reads off the
// kernel's attributes. Build: nvcc -std=c++17 -O3 -gencode arch=compute_90a,code=sm_90a -I templates/common pdl_probe.cu
#include <cstdio>
#include <vector>
#include <algorithm>

#include "ftgen_ft.cuh"

__global__ void step_kernel(const float* in, float* out, int n) {
  ftgen::pdl_trigger();
  ftgen::pdl_wait();
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) out[i] = in[i] + 1.f;
}

int main() {
  const int n = 1 << 20, chain = 200;
  float *a, *b;
  cudaMalloc(&a, n * sizeof(float));
  cudaMalloc(&b, n * sizeof(float));
  cudaMemset(a, 0, n * sizeof(float));
  cudaFuncAttributes fa{};
  cudaFuncGetAttributes(&fa, step_kernel);
  std::printf("{\"binaryVersion\": %d, \"ptxVersion\": %d, \"pdl_allowed\": %d}\n", fa.binaryVersion, fa.ptxVersion,
              ftgen::pdl_allowed(reinterpret_cast<const void*>(step_kernel)) ? 1 : 0);
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  for (int grid : {132, 1056}) {
    std::vector<float> t[2];
    for (int rep = 0; rep < 16; ++rep) {
      for (int pdl = 0; pdl < 2; ++pdl) {
        cudaMemset(a, 0, n * sizeof(float));
        cudaEventRecord(e0);
        for (int s = 0; s < chain; ++s) {
          const float* in = s % 2 ? b : a;
          float* out = s % 2 ? a : b;
          if (pdl) ftgen::launch_dependent(step_kernel, grid, 256, 0, nullptr, in, out, n);
          else step_kernel<<<grid, 256>>>(in, out, n);
        }
        cudaEventRecord(e1);
        cudaEventSynchronize(e1);
        float ms = 0;
        cudaEventElapsedTime(&ms, e0, e1);
        float v = 0;
        cudaMemcpy(&v, (chain % 2 ? b : a) + n - 1, sizeof(float), cudaMemcpyDeviceToHost);
        if (v != chain) std::printf("WRONG: pdl %d grid %d: %g after %d steps\n", pdl, grid, v, chain);
        if (rep) t[pdl].push_back(ms * 1000.f / chain);
      }
    }
    for (auto& v : t) std::sort(v.begin(), v.end());
    std::printf("{\"grid\": %d, \"us_per_kernel_plain\": %.3f, \"us_per_kernel_pdl\": %.3f}\n", grid, t[0][t[0].size() / 2], t[1][t[1].size() / 2]);
  }
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("%s\n", cudaGetErrorString(e));
  return e != cudaSuccess;
}
