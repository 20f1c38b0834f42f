// ftgen, CUTLASS 3.x sm90 kernels (the gemm and kmeans cutlass90 backends): what the pieces around the sm90 GEMMs share
// -- the tile's accumulator layout (which output element a consumer thread's accumulator holds: the fault units of
// injection), the operands as the wgmma reads them (recomputations in double), and the plumbing of ftgen's own epilogue
// pieces. Copied verbatim into every generated project. Do not edit the copies.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "cutlass/cuda_host_adapter.hpp"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/numeric_conversion.h"
#include "cutlass/tfloat32.h"
#include "ftgen_ft.cuh"  // device_sms

namespace ftgen_sm90 {

// The sm90 tile and how its accumulators are held: consumer warp groups of 128 threads, rows_per_wg rows each (ws-coop:
// two groups split the tile's rows; ws-pingpong: one group holds the whole tile), 64-row wgmmas of tile_n columns.
struct Geometry {
  int tile_m, tile_n;
  int rows_per_wg;
};

// The output element (row, col of C) that accumulator element `elem` of consumer thread `thread` (0 .. threads holding
// the tile - 1) holds in tile (tm, tn): the wgmma D fragment (PTX ISA, wgmma .m64nNk: per warp 16 rows; register i of a
// thread at row lane / 4 + 8 ((i / 2) % 2), column 8 (i / 4) + 2 (lane % 4) + i % 2), tile_n / 2 registers per 64-row
// wgmma, the 64-row blocks of the warp group's rows one after the other.
__host__ __device__ inline void fault_element(Geometry const& g, int thread, int elem, int tm, int tn, long long& row, long long& col) {
  const int wg = thread / 128, lt = thread % 128, warp = lt / 32, lane = lt % 32;
  const int per_m = g.tile_n / 2;
  const int mi = elem / per_m, i = elem % per_m;
  row = static_cast<long long>(tm) * g.tile_m + wg * g.rows_per_wg + 64 * mi + 16 * warp + lane / 4 + 8 * ((i / 2) % 2);
  col = static_cast<long long>(tn) * g.tile_n + 8 * (i / 4) + 2 * (lane % 4) + i % 2;
}

// An operand as the wgmma reads it, widened exactly: fp32 words rounded to TF32 as CUTLASS's converter rounds them (the
// measured sm90 behaviour, docs/gemm-hopper.md "The tf32 reference"); 16-bit values as they are.
__device__ __forceinline__ double wgmma_operand(float x) {
  using Conv = cutlass::NumericConverter<cutlass::tfloat32_t, float, cutlass::PreferredRoundingMode<cutlass::tfloat32_t, float>::kRound>;
  return static_cast<double>(__uint_as_float(Conv::convert(x).raw() & ~0x1fffu));
}
template <class X>
__device__ __forceinline__ double wgmma_operand(X x) {
  return static_cast<double>(static_cast<float>(x));
}

inline int tiles_of(int extent, int tile) { return (extent + tile - 1) / tile; }

// The current device and its SMs (the persistent schedulers' grids; ftgen::device_sms)
inline cudaError_t hardware(cutlass::KernelHardwareInfo& hw) {
  int dev = 0, sms = 0;
  if (const cudaError_t e = ftgen::device_sms(dev, sms); e != cudaSuccess) return e;
  hw.device_id = dev;
  hw.sm_count = sms;
  return cudaSuccess;
}

// An epilogue piece whose arguments are its parameters and that needs no workspace (CUTLASS's static interface of
// fusion nodes and collective epilogues)
template <class Args>
struct PassThrough {
  using Arguments = Args;
  using Params = Args;
  template <class ProblemShape>
  static constexpr Params to_underlying_arguments(ProblemShape const&, Arguments const& args, void*) { return args; }
  template <class ProblemShape>
  static bool can_implement(ProblemShape const&, Arguments const&) { return true; }
  template <class ProblemShape>
  static size_t get_workspace_size(ProblemShape const&, Arguments const&) { return 0; }
  template <class ProblemShape>
  static cutlass::Status initialize_workspace(ProblemShape const&, Arguments const&, void*, cudaStream_t,
                                              cutlass::CudaHostAdapter* = nullptr) {
    return cutlass::Status::kSuccess;
  }
};

}  // namespace ftgen_sm90
