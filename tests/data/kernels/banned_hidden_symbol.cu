// Static-evaluation test kernel: hides a cuBLAS call from the source scan by token pasting; the
// library's undefined symbol gives it away after linking.
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#define PASTE(a, b) a##b
extern "C" int PASTE(cub, lasCreate_v2)(void** handle);
namespace {
void run_impl(tvm::ffi::TensorView a) { void* h; PASTE(cub, lasCreate_v2)(&h); }
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run_impl);
