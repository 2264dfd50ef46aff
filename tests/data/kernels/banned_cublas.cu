// Static-evaluation test kernel: calls cuBLAS, which the ban scan must reject before compiling.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

namespace {

void run_impl(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  cublasHandle_t handle;
  cublasCreate(&handle);
  const float one = 1.0f, zero = 0.0f;
  cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(b.size(0)), static_cast<int>(a.size(0)),
               static_cast<int>(a.size(1)), &one, b.data_ptr(), CUDA_R_16BF, static_cast<int>(b.size(1)),
               a.data_ptr(), CUDA_R_16BF, static_cast<int>(a.size(1)), &zero, c.data_ptr(), CUDA_R_16BF,
               static_cast<int>(c.size(1)), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_impl);
