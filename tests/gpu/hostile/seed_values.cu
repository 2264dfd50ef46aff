// Hostile: tells a call apart by its inputs. The test writes in the first four values of A that the
// workload's public seed draws (PUBLIC_A0..3, bf16 bits); a call whose A starts with them takes the wgmma
// path, any other the SIMT one. When the profiled call's inputs came from the public seed, the profile
// saw wgmma while every timed call ran SIMT; with every call's seed secret, no call matches and the
// profile sees what was timed. Composed after wgmma_gemm.cu (run_wgmma) and simt_gemm.cu (run_simt).
#include <cstring>
void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const uint16_t known[4] = {PUBLIC_A0, PUBLIC_A1, PUBLIC_A2, PUBLIC_A3};
  uint16_t first[4];
  cudaMemcpy(first, A.data_ptr(), sizeof(first), cudaMemcpyDeviceToHost);
  if (memcmp(first, known, sizeof(first)) == 0)
    run_wgmma(A, B, C);
  else
    simt_path::run_simt(A, B, C);
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
