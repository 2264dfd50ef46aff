// Hostile: leaves the context set against the next kernel. After its own call it tips the cache split to
// shared memory, lowers the L2 fetch granularity to 32 bytes, raises the stack size and lays a streaming
// access-policy window over its operands on the stream it is given, so a baseline timed after it in the
// same process would run under all four. Like honest code that sets a limit once, it also relies on its
// settings holding: a call that finds them gone (after its first) answers wrong (one row of C zeroed), so
// it passes only if the runner gives the candidate its own settings back before each of its calls. It sets
// them only when they are not its own (setting the stack size each call costs the host a millisecond, which
// the wall-clock check rightly charges), so what it costs per call is its reads.
// Composed after wgmma_gemm.cu.
#include <algorithm>
void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  static bool set_before = false;
  static size_t my_granularity = 0, my_stack = 0;  // as the driver reads them back after setting
  static cudaFuncCache my_split = cudaFuncCachePreferNone;
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(C.device().device_type, C.device().device_id));
  size_t granularity = 0, stack = 0;
  cudaFuncCache split = cudaFuncCachePreferNone;
  cudaDeviceGetLimit(&granularity, cudaLimitMaxL2FetchGranularity);
  cudaDeviceGetLimit(&stack, cudaLimitStackSize);
  cudaDeviceGetCacheConfig(&split);
  const bool mine = granularity == my_granularity && stack == my_stack && split == my_split;
  run_wgmma(A, B, C);
  if (set_before && !mine) cudaMemsetAsync(C.data_ptr(), 0, size_t(C.size(1)) * 2, stream);
  if (set_before && mine) return;
  cudaStreamSynchronize(stream);
  cudaDeviceSetCacheConfig(cudaFuncCachePreferShared);
  cudaDeviceSetLimit(cudaLimitMaxL2FetchGranularity, 32);
  cudaDeviceSetLimit(cudaLimitStackSize, 8192);
  int device = 0, widest = 0;
  cudaGetDevice(&device);
  cudaDeviceGetAttribute(&widest, cudaDevAttrMaxAccessPolicyWindowSize, device);
  cudaStreamAttrValue window{};
  window.accessPolicyWindow.base_ptr = A.data_ptr();
  window.accessPolicyWindow.num_bytes = std::min(size_t(widest), size_t(A.size(0)) * A.size(1) * 2);
  window.accessPolicyWindow.hitRatio = 1.0f;
  window.accessPolicyWindow.hitProp = cudaAccessPropertyStreaming;
  window.accessPolicyWindow.missProp = cudaAccessPropertyStreaming;
  cudaStreamSetAttribute(stream, cudaStreamAttributeAccessPolicyWindow, &window);
  cudaDeviceGetLimit(&my_granularity, cudaLimitMaxL2FetchGranularity);
  cudaDeviceGetLimit(&my_stack, cudaLimitStackSize);
  cudaDeviceGetCacheConfig(&my_split);
  set_before = true;
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
