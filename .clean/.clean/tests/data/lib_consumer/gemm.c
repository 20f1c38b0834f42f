/* Calls a library built by `ftgen build --lib` from C: its gemm entry point at shapes that are not tile
 * multiples (1x1x1, 1000x1234x777, 4097x3x129, 17x4096x33, ...), each checked against cuBLAS (every
 * element) and a host reference in double precision (every element, or a sample for large shapes).
 * Usage: gemm_consumer [MxNxK ...]. Exit 0: all correct; 1: a wrong result or a failed call; 2: bad
 * arguments; 77: no CUDA device (nothing run). Prints one line per shape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include FTGEN_LIB_HEADER

#define CAT3_(a, b, c) a##b##c
#define CAT3(a, b, c) CAT3_(a, b, c)
#define CAT5_(a, b, c, d, e) a##b##c##d##e
#define CAT5(a, b, c, d, e) CAT5_(a, b, c, d, e)
#define API(fn) CAT3(ftgen_, FTGEN_LIB, _##fn)             /* ftgen_<lib>_<fn> */
#define ENTRY(suffix) CAT5(ftgen_, FTGEN_LIB, _, FTGEN_ENTRY, suffix)  /* ftgen_<lib>_<entry><suffix> */
#define HANDLE CAT3(ftgen_, FTGEN_LIB, _t)
#define COUNTERS CAT3(ftgen_, FTGEN_LIB, _counters)

#ifdef FTGEN_F64
typedef double real;
#define UNIT_ROUNDOFF 1.1102230246251565e-16
#define CUBLAS_GEMM cublasDgemm
#else
typedef float real;
#if defined(FTGEN_TF32)
#define UNIT_ROUNDOFF 4.8828125e-04 /* tf32 inputs: 2^-11 */
#elif defined(FTGEN_TF32X3)
#define UNIT_ROUNDOFF 1.1920928955078125e-07 /* tf32x3: 2^-23 */
#else
#define UNIT_ROUNDOFF 5.9604644775390625e-08
#endif
#define CUBLAS_GEMM cublasSgemm /* fp32 (cuBLAS's default math mode) */
#endif

static unsigned long long rng_state = 0x9e3779b97f4a7c15ull;
static double uniform(void) { /* in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static int fail(const char* what, int status) {
  fprintf(stderr, "FAIL: %s: %d (%s)\n", what, status, API(status_string)(status));
  return 1;
}

/* One shape: 0 ok, 1 wrong or failed. */
static int run_shape(HANDLE h, cublasHandle_t cb, int m, int n, int k) {
  const double alpha = 1.5, beta = -0.5;
  const size_t na = (size_t)m * k, nb = (size_t)k * n, nc = (size_t)m * n;
  real *hA = malloc(na * sizeof(real)), *hB = malloc(nb * sizeof(real)), *hC = malloc(nc * sizeof(real));
  real *got = malloc(nc * sizeof(real)), *ref = malloc(nc * sizeof(real));
  real *dA = NULL, *dB = NULL, *dC = NULL, *dR = NULL;
  const real ra = (real)alpha, rb = (real)beta;
  size_t i, checked = 0, step;
  double worst = 0.0, worst_host = 0.0;
  int bad = 0, st, variant;
  COUNTERS cnt;
  if (!hA || !hB || !hC || !got || !ref) {
    fprintf(stderr, "FAIL: out of host memory at %dx%dx%d\n", m, n, k);
    return 1;
  }
  for (i = 0; i < na; ++i) hA[i] = (real)uniform();
  for (i = 0; i < nb; ++i) hB[i] = (real)uniform();
  for (i = 0; i < nc; ++i) hC[i] = (real)uniform();
  if (cudaMalloc((void**)&dA, na * sizeof(real)) || cudaMalloc((void**)&dB, nb * sizeof(real)) ||
      cudaMalloc((void**)&dC, nc * sizeof(real)) || cudaMalloc((void**)&dR, nc * sizeof(real))) {
    fprintf(stderr, "FAIL: cudaMalloc at %dx%dx%d\n", m, n, k);
    return 1;
  }
  cudaMemcpy(dA, hA, na * sizeof(real), cudaMemcpyHostToDevice);
  cudaMemcpy(dB, hB, nb * sizeof(real), cudaMemcpyHostToDevice);
  cudaMemcpy(dC, hC, nc * sizeof(real), cudaMemcpyHostToDevice);
  cudaMemcpy(dR, hC, nc * sizeof(real), cudaMemcpyHostToDevice);

  /* the library (its own workspace: NULL), then cuBLAS: row-major C = A B is column-major C^T = B^T A^T */
  st = ENTRY()(h, m, n, k, alpha, dA, k, dB, n, beta, dC, n, NULL, 0, NULL);
  if (st != 0) return fail("entry point", st);
  st = (int)CUBLAS_GEMM(cb, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &ra, dB, n, dA, k, &rb, dR, n);
  if (st != 0) {
    fprintf(stderr, "FAIL: cuBLAS gemm: status %d\n", st);
    return 1;
  }
  if ((st = (int)cudaDeviceSynchronize()) != 0) return fail("cudaDeviceSynchronize", st);
  cudaMemcpy(got, dC, nc * sizeof(real), cudaMemcpyDeviceToHost);
  cudaMemcpy(ref, dR, nc * sizeof(real), cudaMemcpyDeviceToHost);
  if ((st = API(last_counters)(h, &cnt)) != 0) return fail("last_counters", st);
  variant = API(last_variant)(h);
  if (variant != ENTRY(_select)(m, n, k)) {
    fprintf(stderr, "FAIL: ran variant %d, select() says %d\n", variant, ENTRY(_select)(m, n, k));
    bad = 1;
  }

  /* error bound per element: (k + 2) u (|alpha| sum |a||b| + |beta| |c|), twice that against cuBLAS */
  step = nc * (size_t)k > 400000000u ? nc / 20011 + 1 : 1; /* large shapes: a sample of the elements */
  for (i = 0; i < nc; i += step) {
    const size_t r = i / n, c = i % n;
    double exact = 0.0, scale = 0.0, e_host, e_ref;
    int p;
    for (p = 0; p < k; ++p) {
      exact += (double)hA[r * k + p] * hB[(size_t)p * n + c];
      scale += fabs((double)hA[r * k + p] * hB[(size_t)p * n + c]);
    }
    exact = alpha * exact + beta * hC[i];
    scale = fabs(alpha) * scale + fabs(beta) * fabs((double)hC[i]);
    e_host = fabs((double)got[i] - exact) / ((k + 2) * UNIT_ROUNDOFF * scale + 1e-300);
    e_ref = fabs((double)got[i] - ref[i]) / (2.0 * (k + 2) * UNIT_ROUNDOFF * scale + 1e-300);
    if (!(e_host <= 1.0) || !(e_ref <= 1.0)) bad = 1; /* NaN fails too */
    if (e_host > worst_host || e_host != e_host) worst_host = e_host;
    if (e_ref > worst || e_ref != e_ref) worst = e_ref;
    ++checked;
  }
  printf("{\"shape\":{\"m\":%d,\"n\":%d,\"k\":%d},\"variant\":\"%s\",\"checked\":%lu,\"err_vs_cublas\":%.3g,\"err_vs_host\":%.3g,"
         "\"detected\":%llu,\"corrected\":%llu,\"recomputed\":%llu,\"uncorrectable\":%llu,\"max_score\":%.3g,\"ok\":%s}\n",
         m, n, k, API(variant_name)(variant), (unsigned long)checked, worst, worst_host, cnt.detected, cnt.corrected,
         cnt.recomputed, cnt.uncorrectable, cnt.max_score, bad ? "false" : "true");
  cudaFree(dA), cudaFree(dB), cudaFree(dC), cudaFree(dR);
  free(hA), free(hB), free(hC), free(got), free(ref);
  return bad;
}

int main(int argc, char** argv) {
  static const int defaults[][3] = {{1, 1, 1}, {1000, 1234, 777}, {4097, 3, 129}, {17, 4096, 33}, {512, 512, 512}, {70000, 8, 5} /* two row blocks */};
  int shapes[64][3], count = 0, i, bad = 0, devices = 0, st;
  HANDLE h = NULL;
  cublasHandle_t cb;
  for (i = 1; i < argc; ++i) {
    if (count == 64 || sscanf(argv[i], "%dx%dx%d", &shapes[count][0], &shapes[count][1], &shapes[count][2]) != 3 ||
        shapes[count][0] < 1 || shapes[count][1] < 1 || shapes[count][2] < 1) {
      fprintf(stderr, "usage: %s [MxNxK ...] (at most 64 shapes, each value >= 1); %s is not one\n", argv[0], argv[i]);
      return 2;
    }
    ++count;
  }
  if (count == 0) {
    for (i = 0; i < (int)(sizeof(defaults) / sizeof(defaults[0])); ++i) memcpy(shapes[i], defaults[i], sizeof(defaults[i]));
    count = i;
  }
  printf("# %s: %d variant(s)\n", API(version)(), API(variant_count)());
  /* arguments are checked before any device work: an illegal shape is refused */
  if (ENTRY()(NULL, 0, 1, 1, 1.0, NULL, 1, NULL, 1, 0.0, NULL, 1, NULL, 0, NULL) != 1) {
    fprintf(stderr, "FAIL: an illegal call was not refused with cudaErrorInvalidValue\n");
    return 1;
  }
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("# no CUDA device: nothing run\n");
    return 77;
  }
  if ((st = API(create)(&h)) != 0) return fail("create", st);
  if ((st = API(record_scores)(h, 1)) != 0) return fail("record_scores", st); /* max_score in the counters */
  if (cublasCreate(&cb) != CUBLAS_STATUS_SUCCESS) {
    fprintf(stderr, "FAIL: cublasCreate\n");
    return 1;
  }
  for (i = 0; i < count; ++i) bad |= run_shape(h, cb, shapes[i][0], shapes[i][1], shapes[i][2]);
  cublasDestroy(cb);
  if ((st = API(destroy)(h)) != 0) return fail("destroy", st);
  printf("# %s\n", bad ? "FAILED" : "all shapes correct");
  return bad;
}
