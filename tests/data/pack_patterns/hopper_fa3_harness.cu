// Runs the kernel of knowledge_packs/hopper/patterns/fa3_forward.md (the test writes the epilogue
// chapter's code and the kernel, O's registers poisoned with NaN, to pattern_kernel.cuh) on a Hopper
// GPU: B=2, H=2, S=512, D=128, non-causal and causal, against a float64 CPU reference of O and LSE
// (outputs NaN-filled before each launch). Prints PASS or FAIL.
#include "harness_common.cuh"
#include "ptxwb_barrier.cuh"
#include "ptxwb_tma.cuh"
#include "ptxwb_wgmma.cuh"

using namespace ptxwb;

#include "pattern_kernel.cuh"

int main() {
  constexpr int B = 2, H = 2, S = 512, D = 128, ROWS = B * H * S;
  if (!is_hopper()) {
    std::printf("FAIL: needs a Hopper GPU (sm_90)\n");
    return 1;
  }
  std::vector<__nv_bfloat16> q(size_t(ROWS) * D), k(q.size()), v(q.size()), o(q.size());
  std::vector<float> qf(q.size()), kf(q.size()), vf(q.size()), lse(ROWS);
  fill_bf16(q, qf, 3u, 2.0f);  // scores of a few units: a peaked softmax, rescaling exercised
  fill_bf16(k, kf, 5u, 2.0f);
  fill_bf16(v, vf, 7u, 1.0f);
  __nv_bfloat16 *dq, *dk, *dv, *dout;
  float* dlse;
  const size_t bytes = q.size() * 2;
  CHECK_CUDA(cudaMalloc(&dq, bytes));
  CHECK_CUDA(cudaMalloc(&dk, bytes));
  CHECK_CUDA(cudaMalloc(&dv, bytes));
  CHECK_CUDA(cudaMalloc(&dout, bytes));
  CHECK_CUDA(cudaMalloc(&dlse, ROWS * 4));
  CHECK_CUDA(cudaMemcpy(dq, q.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dk, k.data(), bytes, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dv, v.data(), bytes, cudaMemcpyHostToDevice));
  CUtensorMap map_q, map_k, map_v, map_o;
  const auto bf16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  CHECK_MAP(make_tmap_2d(&map_q, dq, bf16, D, ROWS, D * 2, 64, 128, CU_TENSOR_MAP_SWIZZLE_128B));
  CHECK_MAP(make_tmap_2d(&map_k, dk, bf16, D, ROWS, D * 2, 64, 128, CU_TENSOR_MAP_SWIZZLE_128B));
  CHECK_MAP(make_tmap_2d(&map_v, dv, bf16, D, ROWS, D * 2, 64, 128, CU_TENSOR_MAP_SWIZZLE_128B));
  CHECK_MAP(make_tmap_2d(&map_o, dout, bf16, D, ROWS, D * 2, 64, 64, CU_TENSOR_MAP_SWIZZLE_128B));
  CHECK_CUDA(cudaFuncSetAttribute(attn_fwd, cudaFuncAttributeMaxDynamicSharedMemorySize, FA_SMEM_BYTES));
  const double scale = 1.0 / std::sqrt(double(D));
  bool ok = true;
  for (int causal = 0; causal < 2; ++causal) {
    CHECK_CUDA(cudaMemset(dout, 0xFF, bytes));  // NaN until written
    CHECK_CUDA(cudaMemset(dlse, 0xFF, ROWS * 4));
    attn_fwd<<<dim3(S / 128, B * H), 384, FA_SMEM_BYTES>>>(map_q, map_k, map_v, map_o, dlse, S, causal);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemcpy(o.data(), dout, bytes, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(lse.data(), dlse, ROWS * 4, cudaMemcpyDeviceToHost));
    Tally to, tl;
    std::vector<double> p(S), acc(D);
    for (int bh = 0; bh < B * H; ++bh)
      for (int i = 0; i < S; ++i) {
        const size_t qi = size_t(bh) * S + i;
        const int keys = causal ? i + 1 : S;
        double mx = -INFINITY;
        for (int j = 0; j < keys; ++j) {
          const size_t kj = size_t(bh) * S + j;
          double dot = 0.0;
          for (int d = 0; d < D; ++d) dot += double(qf[qi * D + d]) * double(kf[kj * D + d]);
          p[j] = dot * scale;
          mx = std::fmax(mx, p[j]);
        }
        double l = 0.0;
        for (int d = 0; d < D; ++d) acc[d] = 0.0;
        for (int j = 0; j < keys; ++j) {
          const double e = std::exp(p[j] - mx);
          l += e;
          const size_t kj = size_t(bh) * S + j;
          for (int d = 0; d < D; ++d) acc[d] += e * double(vf[kj * D + d]);
        }
        for (int d = 0; d < D; ++d) to.add(double(__bfloat162float(o[qi * D + d])), acc[d] / l);
        tl.add(double(lse[qi]), mx + std::log(l));
      }
    std::printf("causal=%d  O: max_abs_err=%.3e failing=%ld of %ld  LSE: max_abs_err=%.3e failing=%ld of %ld\n",
                causal, to.max_abs, to.failures, to.checked, tl.max_abs, tl.failures, tl.checked);
    ok = ok && to.failures == 0 && tl.failures == 0;
  }
  std::printf("smem=%u B\n%s\n", FA_SMEM_BYTES, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
