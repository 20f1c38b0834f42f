// ftgen kmeans: the problem description every generated kmeans launcher takes.
#pragma once
#include <cuda_runtime.h>
#include <stddef.h>

#ifdef __cplusplus
namespace ftgen {
struct FtCounters;
struct FaultSpec;
struct FaultRecord;
}  // namespace ftgen
#endif

// Where the planned faults of an injection build land (one site per launch).
enum ftgen_kmeans_site {
  FTGEN_KMEANS_SITE_ACC = 0,     // an accumulator of the distance GEMM, before its verification
  FTGEN_KMEANS_SITE_ARGMIN = 1,  // the label the first arg-min copy of a thread chooses (made another one)
  FTGEN_KMEANS_SITE_NORM = 2,    // the first copy of a squared norm: of sample `block`, or (block >= samples) of
                                 // centroid block - samples in the first iteration
  FTGEN_KMEANS_SITE_UPDATE = 3,  // the first copy of a cluster sum (elem < dims) or count (elem == dims)
  FTGEN_KMEANS_SITE_REFINE = 4,  // refine builds: the first copy of the exact distance to the nearest of sample `block`,
                                 // where that sample is a near tie of the first iteration (else no fault lands)
};

// Where the initial centroids come from (ftgen_kmeans_init.h): C as given, or samples of X chosen by the problem's seed
enum ftgen_kmeans_init {
  FTGEN_KMEANS_INIT_GIVEN = 0,     // C holds them
  FTGEN_KMEANS_INIT_RANDOM = 1,    // clusters distinct samples, uniformly
  FTGEN_KMEANS_INIT_PLUSPLUS = 2,  // kmeans++ (D^2 weighting): O(samples dims clusters), a pass over X per centroid
  FTGEN_KMEANS_INIT_PLUSPLUS_SAMPLE = 3,  // kmeans++ over a uniform sample of 64 samples per cluster (all of X where
                                          // that is more; ftkm_sample_size): a pass over the sample per centroid
};

// How a variant decomposes a problem: what fault plans need to know.
struct ftgen_kmeans_geometry {
  long long blocks;      // threadblocks of the assign launch (one per m_tb samples)
  int threads;           // threads per assign block
  int elems_per_thread;  // accumulators per thread of one centroid tile
  int steps;             // centroid tiles (the assign loop)
  int value_bits;        // bits of one element (32 or 64)
};

// A Lloyd loop: X (samples x dims, row-major) into C (clusters x dims, row-major; in: the initial
// centroids unless `init` chooses them, out: the final ones, or with max_iters 0 the initial ones).
// Pointers are to the variant's element type (float for tf32 and tf32x3, double for fp64). Every
// iteration assigns each sample to its nearest centroid (the lower index on a tie) and moves every
// centroid to the mean of its samples; an empty cluster keeps its centroid. The loop stops after
// max_iters iterations, or after the first iteration whose largest squared centroid shift is at most
// tol * (mean squared centroid norm) when tol > 0 (decided on the device: the launches after it
// return at once).
struct ftgen_kmeans_problem {
  int samples, dims, clusters;
  const void* X;
  void* C;
  int* labels;        // samples: the last iteration's labels
  int* counts;        // clusters: the last iteration's counts (may be null)
  double* inertia;    // max_iters: sum of squared distances of each iteration's assignment (may be null)
  int max_iters;
  double tol;
  int* iters_done;    // device int: iterations run (may be null)
  void* workspace;    // device workspace of <kernel>_workspace(samples, dims, clusters) bytes
  // Fault tolerance (read by protected variants only).
  ftgen::FtCounters* counters;  // device pointer; may be null
  double threshold;             // > 0 replaces the factor LAMBDA u (sqrt(dims) + sqrt(n_tb) + 1) of the derived
                                // detection threshold of the distance GEMM (the scale stays)
  // Fault injection (read only by variants built with inject: true), in the first iteration.
  int fault_site;               // ftgen_kmeans_site
  const ftgen::FaultSpec* faults;
  ftgen::FaultRecord* fault_records;
  int fault_count;
  int no_correct;  // detect and count, but do not correct (campaigns: the effect of the faults)
  // The initial centroids (ftgen_kmeans_init; 0: C as given) and the seed of their choice.
  int init;
  unsigned long long seed;
};
