// Static-evaluation test kernel (Hopper, sm_90a): wgmma code that ptxas accepts but warns about.
// `serialized_wgmma` reads its accumulators between wgmma.mma_async and the wait of the same pipeline
// stage, so ptxas serializes the wgmmas (C7514) and injects warpgroup.arrive/wait (C7517/C7519);
// `ignored_setmaxnreg` uses setmaxnreg without launch bounds, so ptxas ignores it (C7508).
#include <cuda_runtime.h>
#include <stdint.h>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

__device__ __noinline__ void touch(float* p) { p[0] += 1.0f; }

__global__ void __launch_bounds__(128) serialized_wgmma(float* out, uint64_t da, uint64_t db) {
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  for (int it = 0; it < 4; ++it) {
    asm volatile("wgmma.fence.sync.aligned;\n");
    asm volatile(
        "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, 1, 1, 1, 0, 0;\n"
        : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]), "+f"(acc[7])
        : "l"(da), "l"(db));
    touch(acc);
    asm volatile("wgmma.commit_group.sync.aligned;\n");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n");
  }
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = acc[i];
}

__global__ void ignored_setmaxnreg(float* out) {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");
  out[threadIdx.x] = 1.0f;
}

void run_impl(tvm::ffi::TensorView out) {
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(out.device().device_type, out.device().device_id));
  serialized_wgmma<<<1, 128, 0, stream>>>(static_cast<float*>(out.data_ptr()), 0, 0);
  ignored_setmaxnreg<<<1, 128, 0, stream>>>(static_cast<float*>(out.data_ptr()));
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_impl);
