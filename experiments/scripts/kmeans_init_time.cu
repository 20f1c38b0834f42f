// The initial centroids' choice alone, timed: ftkm_init::run of the ftgen_kmeans_init.cuh first on the include path, on
// uniform random X (fp32), per shape and method, one warm-up and `reps` timed calls (CUDA events, every call
// error-checked); prints the median ms and a hash of the chosen indices (equal hashes: the same choice). To compare
// versions of the header, build one binary per copy (git show REV:templates/kmeans/ftgen_kmeans_init.cuh > DIR/...)
// and run them in turn in one call:
//   nvcc -std=c++17 -O3 -arch=sm_90a -IDIR -Itemplates/kmeans -Itemplates/common \
//        experiments/scripts/kmeans_init_time.cu -o init_time && ./init_time 5 1048576x128x1024 1048576x8x128
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "ftgen_harness.cuh"
#include "ftgen_kmeans_init.cuh"

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  for (int a = 2; a < argc; ++a) {
    int n, d, k;
    if (std::sscanf(argv[a], "%dx%dx%d", &n, &d, &k) != 3) return 2;
    std::vector<float> hx(static_cast<size_t>(n) * d);
    std::mt19937_64 rng(1234);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (auto& v : hx) v = u(rng);
    float *X, *C;
    unsigned char* ws;
    const size_t wsb = ftkm_init::workspace_bytes(n, d, k, sizeof(float));
    FT_CUDA(cudaMalloc(&X, hx.size() * sizeof(float)));
    FT_CUDA(cudaMalloc(&C, static_cast<size_t>(k) * d * sizeof(float)));
    FT_CUDA(cudaMalloc(&ws, wsb));
    FT_CUDA(cudaMemcpy(X, hx.data(), hx.size() * sizeof(float), cudaMemcpyHostToDevice));
    cudaEvent_t e0, e1;
    FT_CUDA(cudaEventCreate(&e0));
    FT_CUDA(cudaEventCreate(&e1));
    for (int method : {FTGEN_KMEANS_INIT_PLUSPLUS, FTGEN_KMEANS_INIT_PLUSPLUS_SAMPLE}) {
      std::vector<float> ms;
      for (int r = 0; r <= reps; ++r) {
        FT_CUDA(cudaEventRecord(e0));
        FT_CUDA(ftkm_init::run<float>(method, X, n, d, k, 42, ws, C, false, nullptr, 0));
        FT_CUDA(cudaEventRecord(e1));
        FT_CUDA(cudaEventSynchronize(e1));
        FT_CUDA(cudaGetLastError());
        float t = 0;
        FT_CUDA(cudaEventElapsedTime(&t, e0, e1));
        if (r) ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      std::vector<long long> chosen(k);
      FT_CUDA(cudaMemcpy(chosen.data(), ws, sizeof(long long) * k, cudaMemcpyDeviceToHost));  // (the scratch starts with them)
      unsigned long long h = 1469598103934665603ull;
      for (long long i : chosen) h = (h ^ static_cast<unsigned long long>(i)) * 1099511628211ull;
      std::printf("%dx%dx%d %s median %.3f ms (min %.3f, max %.3f) picks %016llx\n", n, d, k,
                  method == FTGEN_KMEANS_INIT_PLUSPLUS ? "kmeans++" : "kmeans++-sample", ms[ms.size() / 2], ms.front(), ms.back(), h);
    }
    FT_CUDA(cudaFree(X));
    FT_CUDA(cudaFree(C));
    FT_CUDA(cudaFree(ws));
  }
  return 0;
}
