// Hostile: wrong some of the time. Honest for its first eight calls (correctness and warm-up), then on a
// random fifth of its calls it zeroes the last quarter of C's rows after computing them. Three timed calls
// read after the fact miss a rarer version of it often; every timed call checked, never. Composed after
// wgmma_gemm.cu (as run_wgmma).
#include <random>
void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  static int calls = 0;
  static std::mt19937 draw(12345);
  run_wgmma(A, B, C);
  if (++calls > 8 && draw() % 5 == 0) {
    auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(C.device().device_type, C.device().device_id));
    const size_t row = size_t(C.size(1)) * 2, rows = size_t(C.size(0)) / 4;
    cudaMemsetAsync(static_cast<char*>(C.data_ptr()) + (C.size(0) - rows) * row, 0, rows * row, stream);
  }
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
