// A CPU GEMM with the kernel ABI (C[M,N] = A[M,K] @ B[N,K]^T, float32) for the judging pipeline's tests
// on a machine without a GPU. The test prepends one behaviour:
//   BIAS v            add v to every element (a wrong result)
//   HALF              write only the first half of the rows
//   CLOBBER           zero A's first row after computing
//   HONEST_CALLS n    answer right for the first n calls, then replay the first answer
//   WRONG n           add 1 to the first n elements (a few wrong among many)
//   WRONG_ON_CALL n   add 1 to one element on call n alone (one wrong call among many right ones)
//   PAYLOAD "code"    run Python code in the host interpreter on the first call (python_door.inc)
//   HANG_ON_CALL n    never return from call n (a kernel that never ends)
#include <stdint.h>
#include <string.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/function.h>
#ifdef PAYLOAD
#include "python_door.inc"
#endif
#ifndef BIAS
#define BIAS 0.0f
#endif

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const int64_t M = A.size(0), K = A.size(1), N = B.size(0);
  float* a = static_cast<float*>(A.data_ptr());
  const float* b = static_cast<const float*>(B.data_ptr());
  float* c = static_cast<float*>(C.data_ptr());
  static int calls = 0;
  ++calls;
#ifdef HANG_ON_CALL
  if (calls == HANG_ON_CALL) {
    for (volatile int spin = 0; spin == 0;) {
    }
  }
#endif
#ifdef PAYLOAD
  static bool ran = false;
  if (!ran) {
    ran = true;
    door::run_python(PAYLOAD);
  }
#endif
#ifdef HONEST_CALLS
  static float* first = nullptr;
  if (calls > HONEST_CALLS && first) {
    memcpy(c, first, sizeof(float) * M * N);
    return;
  }
#endif
  int64_t rows = M;
#ifdef HALF
  rows = M / 2;
#endif
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < N; ++j) {
      float acc = 0.f;
      for (int64_t k = 0; k < K; ++k) acc += a[i * K + k] * b[j * K + k];
      c[i * N + j] = acc + BIAS;
    }
#ifdef WRONG
  for (int64_t e = 0; e < WRONG && e < M * N; ++e) c[e] += 1.f;
#endif
#ifdef WRONG_ON_CALL
  if (calls == WRONG_ON_CALL) c[0] += 1.f;
#endif
#ifdef HONEST_CALLS
  if (!first) {
    first = new float[M * N];
    memcpy(first, c, sizeof(float) * M * N);
  }
#endif
#ifdef CLOBBER
  for (int64_t k = 0; k < K; ++k) a[k] = 0.f;
#endif
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
