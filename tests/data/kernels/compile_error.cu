// Static-evaluation test kernel: does not compile (an undeclared identifier on line 12).
#include <cuda_runtime.h>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {

__global__ void broken(float* out, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = undeclared_value * 2.0f;
}

void run_impl(tvm::ffi::TensorView out) {
  broken<<<1, 128>>>(static_cast<float*>(out.data_ptr()), static_cast<int>(out.numel()));
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_impl);
