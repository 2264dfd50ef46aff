// Hostile: Python inside the process that runs it. A SIMT GEMM (right, unless BIAS makes it wrong) that
// on its first call reaches the host interpreter through python_door.inc and runs PAYLOAD there: the test
// defines PAYLOAD (what it patches, disables or forges) and BIAS before composing this file after
// python_door.inc and simt_gemm.cu (as simt_path::run_simt). With STRAY it also writes one element
// past the end of C (as oob_write.cu), a fault only memcheck sees: for payloads that go after its report.
#ifndef BIAS
#define BIAS 0
#endif
#ifndef STRAY
#define STRAY 0
#endif

namespace tamper {
__global__ void add_one(__nv_bfloat16* c, size_t n) {
  const size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x;
  if (i < n) c[i] = __float2bfloat16(__bfloat162float(c[i]) + 1.f);
}
__global__ void past_the_end(__nv_bfloat16* c, size_t n) { c[n] = __float2bfloat16(1.f); }
}  // namespace tamper

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  static bool ran = false;
  if (!ran) {
    ran = true;
    door::run_python(PAYLOAD);
  }
  simt_path::run_simt(A, B, C);
  const size_t n = size_t(C.size(0)) * C.size(1);
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(C.device().device_type, C.device().device_id));
  if (BIAS) tamper::add_one<<<(n + 255) / 256, 256, 0, stream>>>(static_cast<__nv_bfloat16*>(C.data_ptr()), n);
  if (STRAY) tamper::past_the_end<<<1, 1, 0, stream>>>(static_cast<__nv_bfloat16*>(C.data_ptr()), n);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
