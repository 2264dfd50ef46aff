// The body of the TVM-FFI link-policy probe: the test puts an #include of every public header of the
// pinned apache-tvm-ffi above it. It touches what a kernel's host code may: tensors, shapes, dtypes,
// errors (ICHECK, THROW), strings, optionals, arrays, a workspace, the stream, a launch.
#include <cuda_runtime.h>

#include <string>
#include <vector>

namespace ffi = tvm::ffi;

__global__ void probe_kernel(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

void probe_run(ffi::TensorView x, ffi::TensorView y, int64_t n, double scale) {
  TVM_FFI_ICHECK_EQ(x.ndim(), 1) << "x must be 1-D";
  TVM_FFI_ICHECK((x.dtype() == DLDataType{kDLFloat, 32, 1})) << "x must be float32";
  if (x.size(0) != y.size(0)) TVM_FFI_THROW(ValueError) << "shape " << x.shape() << " vs " << y.shape();
  ffi::Shape shape = x.shape();
  ffi::String name = ffi::DLDataTypeToString(x.dtype());
  const std::string text = std::string(name) + std::to_string(shape.size());
  ffi::Optional<int64_t> limit = n > 0 ? ffi::Optional<int64_t>(n) : std::nullopt;
  ffi::Array<int64_t> dims{x.size(0), y.size(0)};
  std::vector<int64_t> copied(dims.begin(), dims.end());
  ffi::Tensor work =
      ffi::Tensor::FromEnvAlloc(TVMFFIEnvTensorAlloc, ffi::Shape({x.size(0)}), x.dtype(), x.device());
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(x.device().device_type, x.device().device_id));
  const int count = static_cast<int>(limit.value_or(static_cast<int64_t>(copied.size())));
  probe_kernel<<<(count + 127) / 128, 128, 0, stream>>>(static_cast<float*>(work.data_ptr()), count);
  if (text.empty() || scale < 0) TVM_FFI_THROW(RuntimeError) << "unreachable";
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, probe_run);
