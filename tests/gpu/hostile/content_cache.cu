// Hostile: content-keyed caching. Hashes a sample of A and B on the host; a call whose inputs it has seen
// replays the stored result instead of computing. When every timed call gets values no call has seen, it
// never hits and is timed as the wgmma kernel it is. Composed after wgmma_gemm.cu (as run_wgmma).
void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  constexpr int SLOTS = 8, SAMPLES = 64;
  static uint64_t keys[SLOTS] = {};
  static void* results[SLOTS] = {};
  static int next = 0;
  const size_t a_bytes = size_t(A.size(0)) * A.size(1) * 2, b_bytes = size_t(B.size(0)) * B.size(1) * 2;
  const size_t c_bytes = size_t(C.size(0)) * C.size(1) * 2;
  auto stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(C.device().device_type, C.device().device_id));
  uint16_t sample[2 * SAMPLES];
  for (int i = 0; i < SAMPLES; ++i) {
    cudaMemcpy(&sample[i], static_cast<char*>(A.data_ptr()) + (a_bytes / SAMPLES) * i / 2 * 2, 2, cudaMemcpyDeviceToHost);
    cudaMemcpy(&sample[SAMPLES + i], static_cast<char*>(B.data_ptr()) + (b_bytes / SAMPLES) * i / 2 * 2, 2,
               cudaMemcpyDeviceToHost);
  }
  uint64_t key = 1469598103934665603ull;
  for (uint16_t value : sample) key = (key ^ value) * 1099511628211ull;
  for (int slot = 0; slot < SLOTS; ++slot)
    if (results[slot] && keys[slot] == key) {
      cudaMemcpyAsync(C.data_ptr(), results[slot], c_bytes, cudaMemcpyDeviceToDevice, stream);
      return;
    }
  run_wgmma(A, B, C);
  if (!results[next]) cudaMalloc(&results[next], c_bytes);
  cudaMemcpyAsync(results[next], C.data_ptr(), c_bytes, cudaMemcpyDeviceToDevice, stream);
  keys[next] = key;
  next = (next + 1) % SLOTS;
}
TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
