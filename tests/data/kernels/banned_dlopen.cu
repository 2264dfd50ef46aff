// Static-evaluation test kernel: reaches cuBLASLt through dlopen/dlsym with no cuBLAS include
// (the comment mentions cublas, which the scan ignores; the string literal and the calls are banned).
#include <cuda_runtime.h>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>

extern "C" void* dlopen(const char* file, int mode);
extern "C" void* dlsym(void* handle, const char* name);

namespace {

void run_impl(tvm::ffi::TensorView a, tvm::ffi::TensorView b, tvm::ffi::TensorView c) {
  void* library = dlopen("libcublasLt.so.13", 2);
  void* matmul = dlsym(library, "cublasLtMatmul");
  (void)matmul;
}

}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_impl);
