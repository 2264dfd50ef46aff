// Static-evaluation test kernel (Hopper, sm_90a): copies a 2-D bf16 tensor tile by tile through
// shared memory with TMA (cp.async.bulk.tensor, an mbarrier with an expected transaction count)
// and writes it back with a TMA store. The tensor maps are built on the host and passed as
// __grid_constant__ kernel parameters. Its SASS holds UTMALDG/UTMASTG and SYNCS, but no GMMA.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

constexpr int kBox = 64;  // a 64 x 64 bf16 tile (8 KiB)

__global__ void tma_copy(const __grid_constant__ CUtensorMap src, const __grid_constant__ CUtensorMap dst) {
  __shared__ alignas(128) __nv_bfloat16 tile[kBox * kBox];
  __shared__ alignas(8) uint64_t bar;
  const uint32_t bar_addr = static_cast<uint32_t>(__cvta_generic_to_shared(&bar));
  const uint32_t tile_addr = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  const int x = blockIdx.x * kBox, y = blockIdx.y * kBox;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bar_addr));
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar_addr),
                 "r"(static_cast<uint32_t>(sizeof(tile))));
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        ::"r"(tile_addr), "l"(&src), "r"(x), "r"(y), "r"(bar_addr)
        : "memory");
  }
  __syncthreads();
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
      "@!done bra wait;\n"
      "}\n" ::"r"(bar_addr)
      : "memory");
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];\n"
                 ::"l"(&dst), "r"(x), "r"(y), "r"(tile_addr)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory");
  }
}

CUtensorMap make_map(PFN_cuTensorMapEncodeTiled_v12000 encode, void* base, int64_t rows, int64_t cols) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[1] = {static_cast<cuuint64_t>(cols) * sizeof(__nv_bfloat16)};
  const cuuint32_t box[2] = {kBox, kBox};
  const cuuint32_t unit[2] = {1, 1};
  CUresult status = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, strides, box, unit,
                           CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE,
                           CU_TENSOR_MAP_L2_PROMOTION_NONE, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TVM_FFI_ICHECK(status == CUDA_SUCCESS) << "cuTensorMapEncodeTiled failed: " << static_cast<int>(status);
  return map;
}

void run_impl(tvm::ffi::TensorView x, tvm::ffi::TensorView y) {
  const int64_t rows = x.size(0), cols = x.size(1);
  TVM_FFI_ICHECK(rows % kBox == 0 && cols % kBox == 0) << "unsupported shape";
  // The driver entry point through the runtime: no link-time dependency on libcuda.
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found;
  cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &entry, 12000, cudaEnableDefault, &found);
  TVM_FFI_ICHECK(err == cudaSuccess && found == cudaDriverEntryPointSuccess) << "no cuTensorMapEncodeTiled";
  auto encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(entry);
  const CUtensorMap src = make_map(encode, x.data_ptr(), rows, cols);
  const CUtensorMap dst = make_map(encode, y.data_ptr(), rows, cols);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  tma_copy<<<dim3(cols / kBox, rows / kBox), 128, 0, stream>>>(src, dst);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_impl);
