// gemm_relu for Hopper (sm_90a) with CUTLASS 3.x/4.x: D = relu(A @ B), fp32 accumulation.
//
// A is M x K row-major, B is K x N row-major (N contiguous, "N-major" in CUTLASS terms), D is M x N row-major.
// Mainloop: TMA loads + wgmma, warp-specialized cooperative kernel (one producer warp group, two consumer warp
// groups sharing each 128x256 tile), persistent tile scheduler. Epilogue: TMA store with ReLU fused through
// LinCombEltAct; there is no C operand (ElementC = void), so nothing but A, B and D touches global memory.
//
// C ABI for ctypes: opmatrix_gemm_relu_{f16,bf16}(M, N, K, A, B, D, stream, err, err_len) -> 0 on success,
// else non-zero with a message in err. Every stride must be a multiple of 8 elements (16 bytes, TMA).

#include <cstdio>
#include <cstring>

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/device/gemm_universal_adapter.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/util/packed_stride.hpp"
#include "cutlass/version.h"

#if !defined(CUTLASS_ARCH_MMA_SM90_SUPPORTED)
#error "CUTLASS sees no SM90 support in this CUDA toolkit (needs CUDA 12.0 or newer)"
#endif
#if defined(__CUDA_ARCH__) && !defined(CUTLASS_ARCH_MMA_SM90A_ENABLED)
#error "compile with -arch=sm_90a: wgmma and setmaxnreg need the 'a' target (the kernel body would be empty)"
#endif

using namespace cute;

namespace {

constexpr int kAlignment = 8;  // elements: 16 bytes of fp16 / bf16, what TMA requires of every stride
using TileShape = Shape<_128, _256, _64>;
using ClusterShape = Shape<_2, _1, _1>;  // 2 CTAs along M share (multicast) each B tile
using MainloopSchedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpilogueSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;

template <class Element>
struct GemmRelu {
  using ElementAccumulator = float;
  using ElementCompute = float;
  using LayoutA = cutlass::layout::RowMajor;  // M x K, K contiguous
  using LayoutB = cutlass::layout::RowMajor;  // K x N, N contiguous
  using LayoutD = cutlass::layout::RowMajor;  // M x N, N contiguous

  // D = relu(1 * acc + 0 * C) with ElementC = void: no source tensor is read.
  using Fusion = cutlass::epilogue::fusion::LinCombEltAct<cutlass::epilogue::thread::ReLu, Element, ElementCompute,
                                                          void, ElementCompute>;

  using CollectiveEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, ElementAccumulator, ElementCompute,
      void, LayoutD, kAlignment,      // C: none
      Element, LayoutD, kAlignment,   // D
      EpilogueSchedule, Fusion>::CollectiveOp;

  using CollectiveMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
      Element, LayoutA, kAlignment,
      Element, LayoutB, kAlignment,
      ElementAccumulator, TileShape, ClusterShape,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(
          sizeof(typename CollectiveEpilogue::SharedStorage))>,
      MainloopSchedule>::CollectiveOp;

  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, CollectiveMainloop,
                                                      CollectiveEpilogue>;
  using Gemm = cutlass::gemm::device::GemmUniversalAdapter<Kernel>;
};

void set_error(char* err, int err_len, const char* what, const char* detail) {
  if (err && err_len > 0) std::snprintf(err, static_cast<size_t>(err_len), "%s: %s", what, detail);
}

int sm_count_of_current_device(int* device_id) {
  // Cached per device: querying it on every call would add host time to each launch.
  static int cached[64] = {0};
  if (cudaGetDevice(device_id) != cudaSuccess || *device_id < 0) return 0;
  if (*device_id >= 64) return cutlass::KernelHardwareInfo::query_device_multiprocessor_count(*device_id);
  if (cached[*device_id] == 0)
    cached[*device_id] = cutlass::KernelHardwareInfo::query_device_multiprocessor_count(*device_id);
  return cached[*device_id];
}

template <class Element>
int run_gemm_relu(int M, int N, int K, const void* A, const void* B, void* D, void* stream_ptr, char* err,
                  int err_len) {
  using Gemm = typename GemmRelu<Element>::Gemm;
  using StrideA = typename Gemm::GemmKernel::StrideA;
  using StrideB = typename Gemm::GemmKernel::StrideB;
  using StrideC = typename Gemm::GemmKernel::StrideC;
  using StrideD = typename Gemm::GemmKernel::StrideD;
  cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  if (err && err_len > 0) err[0] = '\0';

  cutlass::KernelHardwareInfo hw_info;
  hw_info.sm_count = sm_count_of_current_device(&hw_info.device_id);

  typename Gemm::Arguments args{
      cutlass::gemm::GemmUniversalMode::kGemm,
      {M, N, K, 1},
      {static_cast<Element const*>(A), cutlass::make_cute_packed_stride(StrideA{}, make_shape(M, K, 1)),
       static_cast<Element const*>(B), cutlass::make_cute_packed_stride(StrideB{}, make_shape(N, K, 1))},
      {{},  // fusion arguments, set below
       nullptr, cutlass::make_cute_packed_stride(StrideC{}, make_shape(M, N, 1)),
       static_cast<Element*>(D), cutlass::make_cute_packed_stride(StrideD{}, make_shape(M, N, 1))},
      hw_info};
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;

  Gemm gemm;
  cutlass::Status status = gemm.can_implement(args);
  if (status != cutlass::Status::kSuccess) {
    char detail[200];
    std::snprintf(detail, sizeof(detail),
                  "M=%d N=%d K=%d rejected (%s; TMA needs K and N, the row strides, multiples of %d elements)",
                  M, N, K, cutlass::cutlassGetStatusString(status), kAlignment);
    set_error(err, err_len, "CUTLASS can_implement failed", detail);
    return 1;
  }

  size_t workspace_size = Gemm::get_workspace_size(args);
  void* workspace = nullptr;
  if (workspace_size > 0) {  // 0 for this (non split-K, non stream-K) kernel; handled anyway
    cudaError_t e = cudaMallocAsync(&workspace, workspace_size, stream);
    if (e != cudaSuccess) {
      set_error(err, err_len, "cudaMallocAsync of the CUTLASS workspace failed", cudaGetErrorString(e));
      return 2;
    }
  }

  int rc = 0;
  status = gemm.initialize(args, workspace, stream);
  if (status != cutlass::Status::kSuccess) {
    set_error(err, err_len, "CUTLASS initialize failed", cutlass::cutlassGetStatusString(status));
    rc = 3;
  } else {
    status = gemm.run(stream);
    if (status != cutlass::Status::kSuccess) {
      cudaError_t e = cudaGetLastError();
      char detail[256];
      std::snprintf(detail, sizeof(detail), "%s (CUDA: %s)", cutlass::cutlassGetStatusString(status),
                    cudaGetErrorString(e));
      set_error(err, err_len, "CUTLASS run failed", detail);
      rc = 4;
    }
  }
  if (workspace) cudaFreeAsync(workspace, stream);
  return rc;
}

}  // namespace

extern "C" {

int opmatrix_gemm_relu_f16(int M, int N, int K, const void* A, const void* B, void* D, void* stream, char* err,
                           int err_len) {
  return run_gemm_relu<cutlass::half_t>(M, N, K, A, B, D, stream, err, err_len);
}

int opmatrix_gemm_relu_bf16(int M, int N, int K, const void* A, const void* B, void* D, void* stream, char* err,
                            int err_len) {
  return run_gemm_relu<cutlass::bfloat16_t>(M, N, K, A, B, D, stream, err, err_len);
}

const char* opmatrix_cutlass_config() {
  static char text[512];
  if (!text[0]) {
    using Mainloop = typename GemmRelu<cutlass::half_t>::CollectiveMainloop;
    std::snprintf(text, sizeof(text),
                  "CUTLASS %d.%d.%d sm90 GemmUniversal: tile %dx%dx%d, cluster %dx%dx%d, "
                  "KernelTmaWarpSpecializedCooperative + TmaWarpSpecializedCooperative epilogue, "
                  "LinCombEltAct<ReLu> (no C), %d stages (fp16; auto carveout), alignment %d, fp32 accumulate",
                  CUTLASS_MAJOR, CUTLASS_MINOR, CUTLASS_PATCH, int(size<0>(TileShape{})),
                  int(size<1>(TileShape{})), int(size<2>(TileShape{})), int(size<0>(ClusterShape{})),
                  int(size<1>(ClusterShape{})), int(size<2>(ClusterShape{})), int(Mainloop::DispatchPolicy::Stages),
                  kAlignment);
  }
  return text;
}

int opmatrix_cutlass_stages_f16() { return GemmRelu<cutlass::half_t>::CollectiveMainloop::DispatchPolicy::Stages; }
int opmatrix_cutlass_stages_bf16() {
  return GemmRelu<cutlass::bfloat16_t>::CollectiveMainloop::DispatchPolicy::Stages;
}

}  // extern "C"
