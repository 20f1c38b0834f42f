/* Calls a library built by `ftgen build --lib` from C: its fft entry point at sizes 2^3 .. 2^24 with odd
 * batches, each checked against cuFFT (every element, relative L2 error) and a direct DFT in double
 * precision on the host (a few bins of the first and the last signal).
 * Usage: fft_consumer [NxBATCH ...]. Exit 0: all correct; 1: a wrong result or a failed call; 2: bad
 * arguments; 77: no CUDA device (nothing run). Prints one line per shape. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>
#include <cufft.h>

#include FTGEN_LIB_HEADER

#define CAT3_(a, b, c) a##b##c
#define CAT3(a, b, c) CAT3_(a, b, c)
#define CAT5_(a, b, c, d, e) a##b##c##d##e
#define CAT5(a, b, c, d, e) CAT5_(a, b, c, d, e)
#define API(fn) CAT3(ftgen_, FTGEN_LIB, _##fn)                         /* ftgen_<lib>_<fn> */
#define ENTRY(suffix) CAT5(ftgen_, FTGEN_LIB, _, FTGEN_ENTRY, suffix)  /* ftgen_<lib>_<entry><suffix> */
#define HANDLE CAT3(ftgen_, FTGEN_LIB, _t)
#define COUNTERS CAT3(ftgen_, FTGEN_LIB, _counters)

#ifdef FTGEN_F64
typedef double real;
#define TOL 1e-13
#define CUFFT_TYPE CUFFT_Z2Z
#define CUFFT_EXEC(plan, in, out, dir) cufftExecZ2Z(plan, (cufftDoubleComplex*)(in), (cufftDoubleComplex*)(out), dir)
#else
typedef float real;
#define TOL 1e-5
#define CUFFT_TYPE CUFFT_C2C
#define CUFFT_EXEC(plan, in, out, dir) cufftExecC2C(plan, (cufftComplex*)(in), (cufftComplex*)(out), dir)
#endif
#ifdef FTGEN_INVERSE
#define SIGN 1.0
#define CUFFT_DIR CUFFT_INVERSE
#else
#define SIGN -1.0
#define CUFFT_DIR CUFFT_FORWARD
#endif

static unsigned long long rng_state = 0x2545f4914f6cdd1dull;
static double uniform(void) { /* in [-1, 1) */
  rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
  return (double)(rng_state >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static int fail(const char* what, int status) {
  fprintf(stderr, "FAIL: %s: %d (%s)\n", what, status, API(status_string)(status));
  return 1;
}

/* One shape: 0 ok, 1 wrong or failed. */
static int run_shape(HANDLE h, long long n, long long batch) {
  const size_t count = (size_t)(n * batch), bytes = 2 * count * sizeof(real);
  const double tol = TOL * log2((double)n);
  real *x = malloc(bytes), *got = malloc(bytes), *ref = malloc(bytes);
  void *dx = NULL, *dy = NULL, *dr = NULL;
  double num = 0.0, den = 0.0, err_ref, worst_host = 0.0;
  size_t i;
  int bad = 0, st, variant, s, j;
  cufftHandle plan;
  COUNTERS cnt;
  if (!x || !got || !ref) {
    fprintf(stderr, "FAIL: out of host memory at %lldx%lld\n", n, batch);
    return 1;
  }
  for (i = 0; i < 2 * count; ++i) x[i] = (real)uniform();
  if (cudaMalloc(&dx, bytes) || cudaMalloc(&dy, bytes) || cudaMalloc(&dr, bytes)) {
    fprintf(stderr, "FAIL: cudaMalloc at %lldx%lld\n", n, batch);
    return 1;
  }
  cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
  st = ENTRY()(h, n, batch, dx, dy, NULL, 0, NULL);
  if (st != 0) return fail("entry point", st);
  if (cufftPlan1d(&plan, (int)n, CUFFT_TYPE, (int)batch) != CUFFT_SUCCESS || CUFFT_EXEC(plan, dx, dr, CUFFT_DIR) != CUFFT_SUCCESS) {
    fprintf(stderr, "FAIL: cuFFT at %lldx%lld\n", n, batch);
    return 1;
  }
  if ((st = (int)cudaDeviceSynchronize()) != 0) return fail("cudaDeviceSynchronize", st);
  cufftDestroy(plan);
  cudaMemcpy(got, dy, bytes, cudaMemcpyDeviceToHost);
  cudaMemcpy(ref, dr, bytes, cudaMemcpyDeviceToHost);
  if ((st = API(last_counters)(h, &cnt)) != 0) return fail("last_counters", st);
  variant = API(last_variant)(h);
  if (variant != ENTRY(_select)(n, batch)) {
    fprintf(stderr, "FAIL: ran variant %d, select() says %d\n", variant, ENTRY(_select)(n, batch));
    bad = 1;
  }
  /* against cuFFT: relative L2 error over everything */
  for (i = 0; i < 2 * count; ++i) {
    num += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
    den += (double)ref[i] * ref[i];
  }
  err_ref = sqrt(num / (den + 1e-300)) / tol;
  if (!(err_ref <= 1.0)) bad = 1;
  /* against a direct DFT: 16 bins (4 above 2^20 points) of the first and the last signal, relative to its L2 norm */
  for (s = 0; s < 2; ++s) {
    const real* xs = x + 2 * (size_t)(s ? batch - 1 : 0) * n;
    const real* gs = got + 2 * (size_t)(s ? batch - 1 : 0) * n;
    double norm = 0.0;
    long long t;
    for (t = 0; t < n; ++t) norm += (double)xs[2 * t] * xs[2 * t] + (double)xs[2 * t + 1] * xs[2 * t + 1];
    norm = sqrt(norm);
    for (j = 0; j < (n > (1LL << 20) ? 4 : 16); ++j) {
      const long long b = j < 8 ? j % n : (long long)(((unsigned long long)j * 2654435761u) % (unsigned long long)n);
      double re = 0.0, im = 0.0, e;
      for (t = 0; t < n; ++t) {
        const double a = SIGN * 6.283185307179586476925 * (double)((b * t) % n) / (double)n;
        re += xs[2 * t] * cos(a) - xs[2 * t + 1] * sin(a);
        im += xs[2 * t] * sin(a) + xs[2 * t + 1] * cos(a);
      }
      e = hypot(gs[2 * b] - re, gs[2 * b + 1] - im) / (norm * tol + 1e-300);
      if (!(e <= 1.0)) bad = 1;
      if (e > worst_host || e != e) worst_host = e;
    }
  }
  printf("{\"shape\":{\"n\":%lld,\"batch\":%lld},\"variant\":\"%s\",\"err_vs_cufft\":%.3g,\"err_vs_host\":%.3g,"
         "\"detected\":%llu,\"corrected\":%llu,\"recomputed\":%llu,\"uncorrectable\":%llu,\"max_score\":%.3g,\"ok\":%s}\n",
         n, batch, API(variant_name)(variant), err_ref, worst_host, cnt.detected, cnt.corrected, cnt.recomputed,
         cnt.uncorrectable, cnt.max_score, bad ? "false" : "true");
  cudaFree(dx), cudaFree(dy), cudaFree(dr);
  free(x), free(got), free(ref);
  return bad;
}

int main(int argc, char** argv) {
  long long shapes[64][2];
  int count = 0, i, bad = 0, devices = 0, st;
  HANDLE h = NULL;
  for (i = 1; i < argc; ++i) {
    if (count == 64 || sscanf(argv[i], "%lldx%lld", &shapes[count][0], &shapes[count][1]) != 2 || shapes[count][0] < 1 ||
        shapes[count][1] < 1) {
      fprintf(stderr, "usage: %s [NxBATCH ...] (at most 64 shapes, each value >= 1); %s is not one\n", argv[0], argv[i]);
      return 2;
    }
    ++count;
  }
  if (count == 0) { /* 2^3 .. 2^24, odd batches, at most 2^25 points */
    for (i = 3; i <= 24; ++i) {
      const long long b = (1LL << 25 >> i) > 7 ? 7 : 1;
      shapes[count][0] = 1LL << i;
      shapes[count][1] = i % 2 ? b : (b > 1 ? 3 : 1);
      ++count;
    }
  }
  printf("# %s: %d variant(s)\n", API(version)(), API(variant_count)());
  /* arguments are checked before any device work: n = 3 is not a power of two */
  if (ENTRY()(NULL, 3, 1, NULL, NULL, NULL, 0, NULL) != 1) {
    fprintf(stderr, "FAIL: an illegal call was not refused with cudaErrorInvalidValue\n");
    return 1;
  }
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("# no CUDA device: nothing run\n");
    return 77;
  }
  if ((st = API(create)(&h)) != 0) return fail("create", st);
  if ((st = API(record_scores)(h, 1)) != 0) return fail("record_scores", st); /* max_score in the counters */
  for (i = 0; i < count; ++i) bad |= run_shape(h, shapes[i][0], shapes[i][1]);
  if ((st = API(destroy)(h)) != 0) return fail("destroy", st);
  printf("# %s\n", bad ? "FAILED" : "all shapes correct");
  return bad;
}
