// The kmeans assign step on sm90 (templates/kmeans/kmeans90.cuh): the TF32 wgmma distance GEMM with the arg-min in its
// epilogue, per tile configuration, against cuBLAS's TF32 GEMM of the same shape (which writes the distance matrix and
// takes no arg-min: the GEMM's floor), timed alternately (CUDA events, median of REPS). Labels checked against fp64
// distances of sampled rows: a label may differ from the fp64 nearest only within the TF32 rounding band.
//   nvcc -std=c++17 -O3 -arch=sm_90a -DNDEBUG --expt-relaxed-constexpr -I<cutlass>/include -I<cutlass>/tools/util/include \
//        -Itemplates/kmeans -Itemplates/common experiments/scripts/kmeans90_probe.cu -lcublas -o probe
//   ./probe 1048576x128x1024 1048576x8x128 ...
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kmeans90.cuh"
// (after kmeans90.cuh: the visitor tree's headers need CUTLASS's collective ones first)
#include "cutlass/epilogue/fusion/sm90_visitor_store_tma_warpspecialized.hpp"
#include "cutlass/epilogue/fusion/sm90_visitor_tma_warpspecialized.hpp"

// ---- the arg-min as an epilogue visitor tree (the first design; the product's is the operator-style ArgMinDirect) ----
namespace ftgen_km90 {
namespace fusion = cutlass::epilogue::fusion;

// The visitor tree's arguments: the product's, and (kSums) where the row sums go: [3][tiles][rows_padded]
struct ProbeArgs : ArgMinArgs {
  float* parts = nullptr;
  int tiles = 0;
  ProbeArgs() = default;
  CUTLASS_HOST_DEVICE ProbeArgs(ArgMinArgs const& a) : ArgMinArgs(a) {}
};

// The (row, column) of every element a thread visits, partitioned as CUTLASS's own epilogue loads partition theirs:
// (CPY, CPY_M, CPY_N, EPI_M, EPI_N), element epi_v * FragmentSize + i of (epi_m, epi_n) in visit
template <bool ReferenceSrc, class... A>
CUTLASS_DEVICE auto thread_coords(fusion::detail::ConsumerStoreArgs<A...> const& args) {
  auto [M, N, K, L] = args.problem_shape_mnkl;
  return fusion::detail::sm90_partition_for_epilogue<ReferenceSrc>(cute::make_identity_tensor(cute::make_shape(M, N, L)), args.tile_shape_mnk,
                                                                   args.tile_coord_mnkl, args.epi_tile, args.tiled_copy, args.thread_idx);
}


// The tree's one node, a leaf that consumes the accumulators: every thread keeps, for each row it holds, the smallest
// d' = ||c_j||^2 - 2 x_i . c_j of its columns and that column (registers laid out as CUTLASS's column reduction lays
// out its partial sums: the thread's partition of the tile with the columns' stride 0); after the tile's last subtile
// the lanes that share a row take the smaller of their pairs (shuffles), and one lane per row stores the pair as a key
// into the tile's column of the minima. It returns zeros (D is void: nothing is stored). Its ElementAux names the element
// CUTLASS's builder lays the absent output's shared memory out for.
// kSums: besides, per row held and tile, the sums of the accumulators a, (j + 1) a (j: the column in the tile) and |a|
// (a checksum test's row partials), reduced as the minima are and stored into params.parts.
template <int kProbe = 0,  // 1 leaves the norms out, 2 the arg-min (the floors)
          bool kSums = false>
struct RowArgMin : ftgen_sm90::PassThrough<ProbeArgs> {
  using ElementAux = float;
  struct SharedStorage {};
  CUTLASS_DEVICE bool is_producer_load_needed() const { return false; }
  CUTLASS_DEVICE bool is_C_load_needed() const { return false; }
  CUTLASS_HOST_DEVICE RowArgMin() : params() {}
  CUTLASS_HOST_DEVICE RowArgMin(Params const& p, SharedStorage const&) : params(p) {}
  Params params;
  template <class... A>
  CUTLASS_DEVICE auto get_producer_load_callbacks(fusion::detail::ProducerLoadArgs<A...> const&) {
    return fusion::detail::EmptyProducerLoadCallbacks{};
  }

  template <class CTensor, class VTensor, class ITensor, class GTensor, class LaneLayout, class LaneCoord>
  struct ConsumerStoreCallbacks : fusion::detail::EmptyConsumerStoreCallbacks {
    CUTLASS_DEVICE ConsumerStoreCallbacks(CTensor c, VTensor v, ITensor i, GTensor g, LaneLayout ll, LaneCoord lc, Params const* p,
                                          VTensor s1, VTensor sw, VTensor sa, int col0)
        : tCc(c), tCrVal(v), tCrIdx(i), tCgKey(g), lane_layout(ll), lane_mn(lc), params(p), tS1(s1), tSW(sw), tSA(sa), col0(col0) {}
    CTensor tCc;     // (row, column) of every element
    VTensor tCrVal;  // per row held: the smallest d'
    ITensor tCrIdx;  // ... and its column
    GTensor tCgKey;  // per row held: its key's place in the tile's column of minima
    LaneLayout lane_layout;
    LaneCoord lane_mn;
    Params const* params;
    VTensor tS1, tSW, tSA;  // (kSums) per row held: the sums of a, (j + 1) a, |a| over the thread's columns
    int col0;               // the tile's first column, less 1

    template <typename ElementAccumulator, int FragmentSize>
    CUTLASS_DEVICE cutlass::Array<float, FragmentSize> visit(cutlass::Array<ElementAccumulator, FragmentSize> const& acc, int epi_v,
                                                             int epi_m, int epi_n) {
      auto c = tCc(cute::_, cute::_, cute::_, epi_m, epi_n);
      auto v = tCrVal(cute::_, cute::_, cute::_, epi_m, epi_n);
      auto x = tCrIdx(cute::_, cute::_, cute::_, epi_m, epi_n);
      CUTLASS_PRAGMA_UNROLL
      for (int i = 0; i < FragmentSize; ++i) {
        const int e = epi_v * FragmentSize + i;
        const int col = int(cute::get<1>(c(e)));
        float d;
        if constexpr (kProbe == 0) d = col < params->clusters ? fmaf(-2.f, static_cast<float>(acc[i]), __ldg(params->cc + col)) : INFINITY;
        else d = col < params->clusters ? -2.f * static_cast<float>(acc[i]) : INFINITY;
        if constexpr (kSums) {
          auto s1 = tS1(cute::_, cute::_, cute::_, epi_m, epi_n);
          auto sw = tSW(cute::_, cute::_, cute::_, epi_m, epi_n);
          auto sa = tSA(cute::_, cute::_, cute::_, epi_m, epi_n);
          const float a = static_cast<float>(acc[i]);
          s1(e) += a;
          sw(e) = fmaf(static_cast<float>(col - col0), a, sw(e));
          sa(e) += fabsf(a);
        }
        if constexpr (kProbe == 2) v(e) = fminf(v(e), d);
        else if (d < v(e) || (d == v(e) && col < x(e))) {
          v(e) = d;
          x(e) = col;
        }
      }
      cutlass::Array<float, FragmentSize> z;
      z.clear();
      return z;
    }

    template <class STensor, class SyncFn, class RTensor>
    CUTLASS_DEVICE void reduce(STensor&&, SyncFn const&, int, int, bool is_last_iteration, RTensor) {
      if (!is_last_iteration) return;
      auto vf = cute::filter(tCrVal);
      auto xf = cute::filter(tCrIdx);
      CUTLASS_PRAGMA_UNROLL
      for (int r = cute::size<1>(lane_layout) / 2; r > 0; r /= 2) {
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < cute::size(vf); ++k) {
          const float ov = __shfl_down_sync(0xffffffffu, vf(k), lane_layout(cute::_0{}, r));
          const int ox = __shfl_down_sync(0xffffffffu, xf(k), lane_layout(cute::_0{}, r));
          if (ov < vf(k) || (ov == vf(k) && ox < xf(k))) {
            vf(k) = ov;
            xf(k) = ox;
          }
        }
      }
      if constexpr (kSums) {
        auto f1 = cute::filter(tS1);
        auto fw = cute::filter(tSW);
        auto fa = cute::filter(tSA);
        CUTLASS_PRAGMA_UNROLL
        for (int r = cute::size<1>(lane_layout) / 2; r > 0; r /= 2) {
          CUTLASS_PRAGMA_UNROLL
          for (int k = 0; k < cute::size(f1); ++k) {
            f1(k) += __shfl_down_sync(0xffffffffu, f1(k), lane_layout(cute::_0{}, r));
            fw(k) += __shfl_down_sync(0xffffffffu, fw(k), lane_layout(cute::_0{}, r));
            fa(k) += __shfl_down_sync(0xffffffffu, fa(k), lane_layout(cute::_0{}, r));
          }
        }
      }
      if (cute::get<1>(lane_mn) != 0) return;
      auto gf = cute::filter(tCgKey);
      CUTLASS_PRAGMA_UNROLL
      for (int k = 0; k < cute::size(vf); ++k) gf(k) = key(vf(k), xf(k));
      if constexpr (kSums) {
        // the sums' places: the keys' (the same rows), in the parts' planes
        auto f1 = cute::filter(tS1);
        auto fw = cute::filter(tSW);
        auto fa = cute::filter(tSA);
        const long long plane = static_cast<long long>(params->tiles) * params->rows_padded;
        CUTLASS_PRAGMA_UNROLL
        for (int k = 0; k < cute::size(vf); ++k) {
          const long long at = &gf(k) - params->keys;
          params->parts[at] = f1(k);
          params->parts[plane + at] = fw(k);
          params->parts[2 * plane + at] = fa(k);
        }
      }
    }
  };

  template <bool ReferenceSrc, class... A>
  CUTLASS_DEVICE auto get_consumer_store_callbacks(fusion::detail::ConsumerStoreArgs<A...> const& args) {
    using namespace cute;
    auto tCc = thread_coords<ReferenceSrc>(args);
    // the lanes that share a row (as CUTLASS's column reduction finds them): lane_mn -> lane
    Layout ref_layout_MN = [&]() {
      auto mn_shape = shape(typename decltype(args.tiled_copy)::Tiler_MN{});
      if constexpr (ReferenceSrc) return right_inverse(args.tiled_copy.get_layoutS_TV()).with_shape(mn_shape);
      else return right_inverse(args.tiled_copy.get_layoutD_TV()).with_shape(mn_shape);
    }();
    using W = Int<decltype(args.tiled_copy)::TiledNumThr::value / cutlass::NumThreadsPerWarp>;
    Layout tv2lane = Layout<Shape<Int<cutlass::NumThreadsPerWarp>, W, _1>, Stride<_1, _0, _0>>{};
    Layout ref2lane = composition(tv2lane, ref_layout_MN);
    Layout lane_layout = make_layout(filter(get<0>(ref2lane)), filter(get<1>(ref2lane)));
    auto lane_mn = idx2crd(right_inverse(lane_layout)(cutlass::canonical_lane_idx()), shape(lane_layout));
    Layout tv2warp = Layout<Shape<Int<cutlass::NumThreadsPerWarp>, W, _1>, Stride<_0, _1, _0>>{};
    Layout ref2warp = composition(tv2warp, ref_layout_MN);
    static_assert(decltype(size(filter(get<1>(ref2warp))))::value == 1, "one warp across a row of the tile");
    // the tile's column of minima, its rows partitioned as the epilogue partitions the tile (the columns' stride 0)
    auto [M, N, K, L] = args.problem_shape_mnkl;
    auto [m, n, k, l] = args.tile_coord_mnkl;
    Tensor mKey = make_tensor(make_gmem_ptr(params.keys + static_cast<long long>(n) * params.rows_padded),
                              make_layout(make_shape(params.rows_padded, N), make_stride(_1{}, _0{})));
    Tensor gKey = local_tile(mKey, take<0, 2>(args.tile_shape_mnk), make_coord(m, _0{}));
    Tensor tCgKey = fusion::detail::sm90_partition_for_epilogue<ReferenceSrc>(gKey, args.epi_tile, args.tiled_copy, args.thread_idx);
    Tensor tCrVal = make_tensor_like<float>(tCgKey);
    Tensor tCrIdx = make_tensor_like<int>(tCgKey);
    fill(tCrVal, INFINITY);
    fill(tCrIdx, 0);
    Tensor tS1 = make_tensor_like<float>(tCgKey);
    Tensor tSW = make_tensor_like<float>(tCgKey);
    Tensor tSA = make_tensor_like<float>(tCgKey);
    if constexpr (kSums) {
      fill(tS1, 0.f);
      fill(tSW, 0.f);
      fill(tSA, 0.f);
    }
    const int col0 = int(n) * int(size<1>(args.tile_shape_mnk)) - 1;
    return ConsumerStoreCallbacks<decltype(tCc), decltype(tCrVal), decltype(tCrIdx), decltype(tCgKey), decltype(lane_layout),
                                  decltype(lane_mn)>(tCc, tCrVal, tCrIdx, tCgKey, lane_layout, lane_mn, &params, tS1, tSW, tSA, col0);
  }
};



template <class TileShape, class ClusterShape, class EpiSchedule, class EpiTile = cutlass::epilogue::collective::EpilogueTileAuto,
          int kProbe = 0, bool kSums = false>
using EvtEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape, EpiTile, float, float, void, cutlass::layout::RowMajor, 4,
    void, cutlass::layout::RowMajor, 4, EpiSchedule, RowArgMin<kProbe, kSums>>::CollectiveOp;
}  // namespace ftgen_km90

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(1);                                                                             \
    }                                                                                           \
  } while (0)

using namespace cute;

__global__ void fill_kernel(float* p, long long n, unsigned seed, float scale) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < n; i += 256ll * gridDim.x) {
    unsigned h = static_cast<unsigned>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    h *= 3266489917u;
    h ^= h >> 16;
    unsigned g = h * 747796405u + 2891336453u;
    g ^= g >> 17;
    const float u1 = (h >> 8) * (1.f / 16777216.f) + 1e-7f, u2 = (g >> 8) * (1.f / 16777216.f);
    p[i] = scale * sqrtf(-2.f * logf(u1)) * cospif(2.f * u2);
  }
}
// centroids: rows of X plus a small offset (points near their centroids, as in a clustering)
__global__ void centroids_kernel(const float* X, int dims, int clusters, long long stride, float* C) {
  for (long long i = blockIdx.x * 256ll + threadIdx.x; i < static_cast<long long>(clusters) * dims; i += 256ll * gridDim.x) {
    const long long r = i / dims, d = i % dims;
    C[i] = X[r * stride * dims + d] + 0.01f * static_cast<float>((r * 7 + d * 13) % 17 - 8);
  }
}
__global__ void norms_kernel(const float* A, int rows, int dims, float* out) {
  const long long r = blockIdx.x * 256ll + threadIdx.x;
  if (r >= rows) return;
  float s = 0.f;
  for (int d = 0; d < dims; ++d) s = fmaf(A[r * dims + d], A[r * dims + d], s);
  out[r] = s;
}
// fp64 check of sampled rows: the label's distance minus the nearest one, against the row's scale ||x||^2 + ||c||^2
__global__ void check_kernel(const float* X, const float* C, int samples, int dims, int clusters, const int* labels, int step, double* worst,
                             int* differ) {
  const int r = (blockIdx.x * step) % samples;
  __shared__ double bv[256];
  __shared__ int bi[256];
  double best = 1e300;
  int arg = 0;
  for (int j = threadIdx.x; j < clusters; j += blockDim.x) {
    double d = 0;
    for (int k = 0; k < dims; ++k) {
      const double t = static_cast<double>(X[static_cast<long long>(r) * dims + k]) - C[static_cast<long long>(j) * dims + k];
      d += t * t;
    }
    if (d < best) best = d, arg = j;
  }
  bv[threadIdx.x] = best;
  bi[threadIdx.x] = arg;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int t = 1; t < blockDim.x; ++t)
      if (bv[t] < best || (bv[t] == best && bi[t] < arg)) best = bv[t], arg = bi[t];
    const int l = labels[r];
    double dl = 0, xx = 0, cc = 0;
    for (int k = 0; k < dims; ++k) {
      const double x = X[static_cast<long long>(r) * dims + k], c = C[static_cast<long long>(l) * dims + k];
      dl += (x - c) * (x - c);
      xx += x * x;
      cc += c * c;
    }
    if (l != arg) atomicAdd(differ, 1);
    const double gap = (dl - best) / (xx + cc);
    unsigned long long* w = reinterpret_cast<unsigned long long*>(worst);
    unsigned long long old = *w;
    while (gap > __longlong_as_double(old)) {
      const unsigned long long prev = atomicCAS(w, old, __double_as_longlong(gap));
      if (prev == old) break;
      old = prev;
    }
  }
}

// RN to TF32 (10 mantissa bits), as the wgmma reads fp32 words on this GPU
float tf32_host(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
  std::memcpy(&x, &u, 4);
  return x;
}

#define PROBE_STR(x) #x
#define PROBE_NAME(x) PROBE_STR(x)

struct Shape3 {
  int n, d, k;
};

// Whether a configuration's epilogue stores the row sums (the visitor tree's kSums)
template <class Assign>
struct Sums : std::false_type {};

template <class Assign>
struct Runner {
  using Gemm = typename Assign::Gemm;
  Gemm op;
  void* ws = nullptr;
  size_t ws_bytes = 0;
  uint64_t* keys = nullptr;
  float* parts = nullptr;
  const char* name;
  explicit Runner(const char* nm) : name(nm) {}
  bool setup(const float* X, const float* C, const Shape3& s, const float* cc, const cutlass::KernelHardwareInfo& hw) {
    CK(cudaMalloc(&keys, Assign::keys_bytes(s.n, s.k)));
    CK(cudaMalloc(&parts, 3 * Assign::keys_bytes(s.n, s.k) / 2));  // 3 floats per key
    auto args = Assign::arguments(X, s.d, C, s.d, s.n, s.d, s.k, cc, keys, hw);
    if constexpr (Sums<Assign>::value) {
      args.epilogue.thread.parts = parts;
      args.epilogue.thread.tiles = Assign::col_tiles(s.k);
    }
    if (Gemm::can_implement(args) != cutlass::Status::kSuccess) {
      std::printf("%s: cannot implement\n", name);
      return false;
    }
    ws_bytes = Gemm::get_workspace_size(args);
    if (ws_bytes) CK(cudaMalloc(&ws, ws_bytes));
    if (op.initialize(args, ws) != cutlass::Status::kSuccess) {
      std::printf("%s: initialize failed\n", name);
      return false;
    }
    return true;
  }
  void run(const Shape3& s, const float* xx, int* labels, double* inertia) {
    if (op.run() != cutlass::Status::kSuccess) {
      std::printf("%s: run failed\n", name);
      std::exit(1);
    }
    ftgen_km90::finish_kernel<<<528, 256>>>(keys, Assign::rows_padded(s.n), Assign::col_tiles(s.k), s.n, xx, labels, inertia, nullptr);
    CK(cudaGetLastError());
  }
  void release() {
    cudaFree(keys);
    cudaFree(parts);
    if (ws) cudaFree(ws);
  }
};

using Coop = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using Ping = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using ECoop = cutlass::epilogue::TmaWarpSpecializedCooperative;
using EPing = cutlass::epilogue::TmaWarpSpecialized;
using EpiAuto = cutlass::epilogue::collective::EpilogueTileAuto;
template <class Tile, class Cluster, class Sched, class EpiSched, class EpiTile = EpiAuto, int kProbe = 0, bool kSums = false>
using Evt = ftgen_km90::AssignGemm<Tile, Cluster, Sched, 0, false, ftgen_km90::EvtEpilogue<Tile, Cluster, EpiSched, EpiTile, kProbe, kSums>>;
using C1 = Shape<_1, _1, _1>;
using C2 = Shape<_2, _1, _1>;
// the visitor tree
using A0 = Evt<Shape<_128, _128, _32>, C1, Coop, ECoop>;
using A1 = Evt<Shape<_128, _128, _32>, C2, Coop, ECoop>;
using A2 = Evt<Shape<_64, _128, _32>, C1, Ping, EPing>;
using A3 = Evt<Shape<_128, _128, _32>, C1, Ping, EPing>;
using A4 = Evt<Shape<_256, _128, _32>, C1, Coop, ECoop>;
using A5 = Evt<Shape<_128, _128, _16>, C1, Coop, ECoop>;
using A6 = Evt<Shape<_128, _128, _32>, C1, Coop, ECoop, Shape<_128, _64>>;
using A7 = Evt<Shape<_128, _128, _32>, C1, Coop, ECoop, Shape<_128, _128>>;
using A8 = Evt<Shape<_128, _256, _32>, C1, Coop, ECoop>;
// the floors: without the norms' loads, without the arg-min (their labels are not checked)
using F1 = Evt<Shape<_128, _128, _32>, C1, Coop, ECoop, EpiAuto, 1>;
using F2 = Evt<Shape<_128, _128, _32>, C1, Coop, ECoop, EpiAuto, 2>;
// with a checksum test's row sums (a, (j + 1) a, |a| per row and tile)
using S1 = Evt<Shape<_128, _128, _32>, C1, Coop, ECoop, EpiAuto, 0, true>;
using S2 = Evt<Shape<_128, _256, _32>, C1, Coop, ECoop, EpiAuto, 0, true>;
template <>
struct Sums<S1> : std::true_type {};
template <>
struct Sums<S2> : std::true_type {};
// the product's operator-style epilogue on the accumulator registers (ArgMinDirect)
using D0 = ftgen_km90::AssignGemm<Shape<_128, _128, _32>, C1, Coop>;
using D1 = ftgen_km90::AssignGemm<Shape<_128, _256, _32>, C1, Coop>;
using D3 = ftgen_km90::AssignGemm<Shape<_64, _128, _32>, C1, Ping>;
using D4 = ftgen_km90::AssignGemm<Shape<_128, _128, _32>, C1, Ping>;

template <class F>
float time_ms(F&& f, cudaEvent_t a, cudaEvent_t b) {
  CK(cudaEventRecord(a));
  f();
  CK(cudaEventRecord(b));
  CK(cudaEventSynchronize(b));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, a, b));
  return ms;
}
float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class Assign>
void probe(const char* name, const Shape3& s, const float* X, const float* C, const float* xx, const float* cc, float* D, cublasHandle_t h,
           const cutlass::KernelHardwareInfo& hw, int reps) {
  Runner<Assign> r(name);
  if (!r.setup(X, C, s, cc, hw)) return;
  int* labels;
  double *inertia, *worst;
  int* differ;
  CK(cudaMalloc(&labels, sizeof(int) * s.n));
  CK(cudaMalloc(&inertia, sizeof(double)));
  CK(cudaMalloc(&worst, sizeof(double)));
  CK(cudaMalloc(&differ, sizeof(int)));
  CK(cudaMemset(inertia, 0, sizeof(double)));
  CK(cudaMemset(worst, 0, sizeof(double)));
  CK(cudaMemset(differ, 0, sizeof(int)));
  CK(cudaMemset(labels, 0xff, sizeof(int) * s.n));
  r.run(s, xx, labels, inertia);
  CK(cudaDeviceSynchronize());
  const int checks = 4096;
  check_kernel<<<checks, 256>>>(X, C, s.n, s.d, s.k, labels, 7919, worst, differ);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  double w = 0, in = 0;
  int dif = 0;
  CK(cudaMemcpy(&w, worst, sizeof(double), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&dif, differ, sizeof(int), cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(&in, inertia, sizeof(double), cudaMemcpyDeviceToHost));
  // the check's row sums (kSums builds): rows 0, 1, n/2, n-1 of every tile against fp64 sums of the TF32 operands
  double sums_err = -1;
  if (Sums<Assign>::value) {
    std::vector<float> hc(static_cast<size_t>(s.k) * s.d), hx(s.d);
    CK(cudaMemcpy(hc.data(), C, sizeof(float) * hc.size(), cudaMemcpyDeviceToHost));
    const long long rp = Assign::rows_padded(s.n), tiles = Assign::col_tiles(s.k);
    std::vector<float> hp(3 * rp * tiles);
    CK(cudaMemcpy(hp.data(), r.parts, sizeof(float) * hp.size(), cudaMemcpyDeviceToHost));
    sums_err = 0;
    for (long long row : {0ll, 1ll, static_cast<long long>(s.n / 2), static_cast<long long>(s.n - 1)}) {
      CK(cudaMemcpy(hx.data(), X + row * s.d, sizeof(float) * s.d, cudaMemcpyDeviceToHost));
      for (long long t = 0; t < tiles; ++t) {
        double s1 = 0, sw = 0, sa = 0;
        for (int j = static_cast<int>(t * Assign::kTileN); j < std::min<long long>(s.k, (t + 1) * Assign::kTileN); ++j) {
          double a = 0;
          for (int d = 0; d < s.d; ++d) a += static_cast<double>(tf32_host(hx[d])) * tf32_host(hc[static_cast<size_t>(j) * s.d + d]);
          s1 += a;
          sw += (j - t * Assign::kTileN + 1) * a;
          sa += std::fabs(a);
        }
        const double e = std::max({std::fabs(hp[t * rp + row] - s1) / sa, std::fabs(hp[rp * tiles + t * rp + row] - sw) / (sa * Assign::kTileN),
                                   std::fabs(hp[2 * rp * tiles + t * rp + row] - sa) / sa});
        sums_err = std::max(sums_err, e);
      }
    }
  }
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  const float one = 1.f, zero = 0.f;
  auto ours = [&] { r.run(s, xx, labels, nullptr); };
  auto blas = [&] {
    // D^T (k x n, column-major) = C (k x d, row-major = d x k column-major, transposed) x X^T
    if (cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, s.k, s.n, s.d, &one, C, s.d, X, s.d, &zero, D, s.k) != CUBLAS_STATUS_SUCCESS) std::exit(1);
  };
  for (int i = 0; i < 5; ++i) ours(), blas();
  CK(cudaDeviceSynchronize());
  std::vector<float> t0, t1;
  for (int i = 0; i < reps; ++i) {
    t0.push_back(time_ms(ours, a, b));
    t1.push_back(time_ms(blas, a, b));
  }
  const double flop = 2.0 * s.n * s.k * static_cast<double>(s.d);
  const float m0 = median(t0), m1 = median(t1);
  std::printf("{\"shape\": \"%dx%dx%d\", \"config\": \"%s\", \"assign_us\": %.2f, \"cublas_tf32_gemm_us\": %.2f, \"x_cublas_gemm\": %.3f, "
              "\"tflops\": %.1f, \"sampled\": %d, \"differ\": %d, \"worst_gap\": %.3g, \"inertia\": %.9g, \"sums_err\": %.3g}\n",
              s.n, s.d, s.k, name, 1e3 * m0, 1e3 * m1, m1 / m0, flop / (m0 * 1e9), checks, dif, w, in, sums_err);
  std::fflush(stdout);
  r.release();
  cudaFree(labels);
  cudaFree(inertia);
  cudaFree(worst);
  cudaFree(differ);
}

int main(int argc, char** argv) {
  int reps = 50;
  std::vector<Shape3> shapes;
  for (int i = 1; i < argc; ++i) {
    Shape3 s{};
    if (std::sscanf(argv[i], "%dx%dx%d", &s.n, &s.d, &s.k) != 3 || s.d % 4 || s.k > s.n) {
      std::fprintf(stderr, "bad shape %s (samples x dims x clusters, dims a multiple of 4)\n", argv[i]);
      return 2;
    }
    shapes.push_back(s);
  }
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) return 1;
  cublasSetMathMode(h, CUBLAS_TF32_TENSOR_OP_MATH);
  cutlass::KernelHardwareInfo hw;
  hw.device_id = 0;
  hw.sm_count = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(0);
  for (const Shape3& s : shapes) {
    float *X, *C, *xx, *cc, *D;
    CK(cudaMalloc(&X, sizeof(float) * s.n * static_cast<size_t>(s.d)));
    CK(cudaMalloc(&C, sizeof(float) * s.k * static_cast<size_t>(s.d)));
    CK(cudaMalloc(&xx, sizeof(float) * s.n));
    CK(cudaMalloc(&cc, sizeof(float) * (s.k + 256)));  // (ArgMinDirect reads a whole tile's norms: +inf past the last)
    ftgen::fill_value_kernel<float><<<1, 256>>>(cc + s.k, 256, INFINITY);
    CK(cudaMalloc(&D, sizeof(float) * s.n * static_cast<size_t>(s.k)));
    fill_kernel<<<4096, 256>>>(X, static_cast<long long>(s.n) * s.d, 12345u + s.d, 1.f);
    centroids_kernel<<<1024, 256>>>(X, s.d, s.k, s.n / s.k, C);
    norms_kernel<<<(s.n + 255) / 256, 256>>>(X, s.n, s.d, xx);
    norms_kernel<<<(s.k + 255) / 256, 256>>>(C, s.k, s.d, cc);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
#ifdef PROBE_ONLY  // one configuration (e.g. -DPROBE_ONLY=F2: a binary for Nsight Compute)
    probe<PROBE_ONLY>(PROBE_NAME(PROBE_ONLY), s, X, C, xx, cc, D, h, hw, reps);
#else
    probe<A0>("coop 128x128x32 c1", s, X, C, xx, cc, D, h, hw, reps);
    probe<D0>("direct coop 128x128x32", s, X, C, xx, cc, D, h, hw, reps);
    probe<D1>("direct coop 128x256x32", s, X, C, xx, cc, D, h, hw, reps);
    probe<D3>("direct pingpong 64x128x32", s, X, C, xx, cc, D, h, hw, reps);
    probe<D4>("direct pingpong 128x128x32", s, X, C, xx, cc, D, h, hw, reps);
    probe<S1>("coop 128x128x32 c1 + sums", s, X, C, xx, cc, D, h, hw, reps);
    probe<A8>("coop 128x256x32 c1", s, X, C, xx, cc, D, h, hw, reps);
    probe<S2>("coop 128x256x32 c1 + sums", s, X, C, xx, cc, D, h, hw, reps);
#ifndef ONE_CONFIG
    probe<A1>("coop 128x128x32 c2", s, X, C, xx, cc, D, h, hw, reps);
    probe<A2>("pingpong 64x128x32 c1", s, X, C, xx, cc, D, h, hw, reps);
    probe<A3>("pingpong 128x128x32 c1", s, X, C, xx, cc, D, h, hw, reps);
    probe<A4>("coop 256x128x32 c1", s, X, C, xx, cc, D, h, hw, reps);
    probe<A5>("coop 128x128x16 c1", s, X, C, xx, cc, D, h, hw, reps);
    probe<A6>("coop 128x128x32 c1 epi128x64", s, X, C, xx, cc, D, h, hw, reps);
    probe<A7>("coop 128x128x32 c1 epi128x128", s, X, C, xx, cc, D, h, hw, reps);
    probe<F1>("floor: no norms", s, X, C, xx, cc, D, h, hw, reps);
    probe<F2>("floor: no arg-min", s, X, C, xx, cc, D, h, hw, reps);
#endif
#endif
    cudaFree(X);
    cudaFree(C);
    cudaFree(xx);
    cudaFree(cc);
    cudaFree(D);
  }
  return 0;
}
