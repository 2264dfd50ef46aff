// Hostile: profiler detection. Looks up getenv through the C library's own symbol table (no import the
// link check could see) and asks for Nsight Compute's injection variable: the wgmma kernel under the
// profiler, the SIMT kernel everywhere else. Composed with python_door.inc, run_wgmma and run_simt.
using Getenv = char* (*)(const char*);

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  static const bool profiled = [] {
    auto lookup_env = reinterpret_cast<Getenv>(door::lookup("getenv"));
    return lookup_env && (lookup_env("CUDA_INJECTION64_PATH") || lookup_env("NV_TPS_LAUNCH_TOKEN"));
  }();
  if (profiled) {
    run_wgmma(A, B, C);
  } else {
    simt_path::run_simt(A, B, C);
  }
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
