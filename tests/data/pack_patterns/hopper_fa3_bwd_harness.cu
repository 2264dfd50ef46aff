// Runs the kernels of knowledge_packs/hopper/patterns/fa3_backward.md (the test writes the epilogue
// chapter's code and the kernels, dK and dV poisoned with NaN, to pattern_kernel.cuh) on a Hopper GPU:
// B*H = 2, S = 256, D = 128, non-causal and causal. O and LSE come from a float64 CPU forward (O
// rounded to bf16, as the task hands it over); dQ, dK, dV are compared with a float64 reference of
// the backward (outputs NaN-filled before each run). Prints PASS or FAIL.
#include "harness_common.cuh"
#include "ptxwb_barrier.cuh"
#include "ptxwb_tma.cuh"
#include "ptxwb_wgmma.cuh"

using namespace ptxwb;

#include "pattern_kernel.cuh"

int main() {
  constexpr int BH = 2, S = 256, D = 128, ROWS = BH * S;
  if (!is_hopper()) {
    std::printf("FAIL: needs a Hopper GPU (sm_90)\n");
    return 1;
  }
  const size_t n = size_t(ROWS) * D;
  std::vector<__nv_bfloat16> q(n), k(n), v(n), dout(n), o(n), dq(n), dk(n), dv(n);
  std::vector<float> qf(n), kf(n), vf(n), dof(n), of(n), lse(ROWS);
  fill_bf16(q, qf, 13u, 2.0f);
  fill_bf16(k, kf, 17u, 2.0f);
  fill_bf16(v, vf, 19u, 1.0f);
  fill_bf16(dout, dof, 23u, 1.0f);
  const double scale = 1.0 / std::sqrt(double(D));
  __nv_bfloat16 *d_q, *d_k, *d_v, *d_do, *d_o, *d_dq, *d_dk, *d_dv;
  float *d_lse, *d_lse2, *d_delta, *d_acc;
  for (auto* p : {&d_q, &d_k, &d_v, &d_do, &d_o, &d_dq, &d_dk, &d_dv}) CHECK_CUDA(cudaMalloc(p, n * 2));
  for (auto* p : {&d_lse, &d_lse2, &d_delta}) CHECK_CUDA(cudaMalloc(p, ROWS * 4));
  CHECK_CUDA(cudaMalloc(&d_acc, n * 4));
  CHECK_CUDA(cudaMemcpy(d_q, q.data(), n * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_k, k.data(), n * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_v, v.data(), n * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(d_do, dout.data(), n * 2, cudaMemcpyHostToDevice));
  CUtensorMap map_q, map_k, map_v, map_do, map_dk, map_dv;
  const auto bf16 = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  const auto sw = CU_TENSOR_MAP_SWIZZLE_128B;
  CHECK_MAP(make_tmap_2d(&map_q, d_q, bf16, D, ROWS, D * 2, 64, 64, sw));
  CHECK_MAP(make_tmap_2d(&map_do, d_do, bf16, D, ROWS, D * 2, 64, 64, sw));
  CHECK_MAP(make_tmap_2d(&map_k, d_k, bf16, D, ROWS, D * 2, 64, 128, sw));
  CHECK_MAP(make_tmap_2d(&map_v, d_v, bf16, D, ROWS, D * 2, 64, 128, sw));
  CHECK_MAP(make_tmap_2d(&map_dk, d_dk, bf16, D, ROWS, D * 2, 64, 64, sw));
  CHECK_MAP(make_tmap_2d(&map_dv, d_dv, bf16, D, ROWS, D * 2, 64, 64, sw));
  CHECK_CUDA(cudaFuncSetAttribute(attn_bwd, cudaFuncAttributeMaxDynamicSharedMemorySize, BWD_SMEM_BYTES));
  bool ok = true;
  std::vector<double> p(size_t(S) * S), ds(size_t(S) * S);
  for (int causal = 0; causal < 2; ++causal) {
    // float64 forward: P, LSE and O (bf16) per (b, h)
    for (int bh = 0; bh < BH; ++bh)
      for (int i = 0; i < S; ++i) {
        const size_t qi = size_t(bh) * S + i;
        double mx = -INFINITY;
        for (int j = 0; j < S; ++j) {
          double dot = 0.0;
          for (int d = 0; d < D; ++d) dot += double(qf[qi * D + d]) * double(kf[(size_t(bh) * S + j) * D + d]);
          p[size_t(i) * S + j] = (causal && j > i) ? -INFINITY : dot * scale;
          mx = std::fmax(mx, p[size_t(i) * S + j]);
        }
        double l = 0.0;
        for (int j = 0; j < S; ++j) l += std::exp(p[size_t(i) * S + j] - mx);
        lse[qi] = float(mx + std::log(l));
        for (int d = 0; d < D; ++d) {
          double acc = 0.0;
          for (int j = 0; j < S; ++j) acc += std::exp(p[size_t(i) * S + j] - mx) / l * double(vf[(size_t(bh) * S + j) * D + d]);
          o[qi * D + d] = __float2bfloat16(float(acc));
          of[qi * D + d] = __bfloat162float(o[qi * D + d]);
        }
      }
    CHECK_CUDA(cudaMemcpy(d_o, o.data(), n * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(d_lse, lse.data(), ROWS * 4, cudaMemcpyHostToDevice));
    for (auto* p_out : {d_dq, d_dk, d_dv}) CHECK_CUDA(cudaMemset(p_out, 0xFF, n * 2));  // NaN until written
    bwd_pre<<<ROWS / 8, 256>>>(d_o, d_do, d_lse, d_delta, d_lse2, d_acc);
    attn_bwd<<<dim3(S / 128, BH), 384, BWD_SMEM_BYTES>>>(map_q, map_k, map_v, map_do, map_dk, map_dv, d_lse2, d_delta,
                                                          d_acc, S, causal);
    bwd_post<<<int(n / 256), 256>>>(d_acc, d_dq);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemcpy(dq.data(), d_dq, n * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(dk.data(), d_dk, n * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(dv.data(), d_dv, n * 2, cudaMemcpyDeviceToHost));
    Tally tq, tk, tv;
    for (int bh = 0; bh < BH; ++bh) {
      const size_t base = size_t(bh) * S;
      for (int i = 0; i < S; ++i) {  // P from the LSE handed over, dS = P (dP - Delta)
        double delta = 0.0;
        for (int d = 0; d < D; ++d) delta += double(dof[(base + i) * D + d]) * double(of[(base + i) * D + d]);
        for (int j = 0; j < S; ++j) {
          double dot = 0.0, dp = 0.0;
          for (int d = 0; d < D; ++d) {
            dot += double(qf[(base + i) * D + d]) * double(kf[(base + j) * D + d]);
            dp += double(dof[(base + i) * D + d]) * double(vf[(base + j) * D + d]);
          }
          const double pij = (causal && j > i) ? 0.0 : std::exp(dot * scale - double(lse[base + i]));
          p[size_t(i) * S + j] = pij;
          ds[size_t(i) * S + j] = pij * (dp - delta);
        }
      }
      for (int r = 0; r < S; ++r)
        for (int d = 0; d < D; ++d) {
          double gq = 0.0, gk = 0.0, gv = 0.0;
          for (int x = 0; x < S; ++x) {
            gq += ds[size_t(r) * S + x] * double(kf[(base + x) * D + d]);   // dQ row r (query)
            gk += ds[size_t(x) * S + r] * double(qf[(base + x) * D + d]);   // dK row r (key)
            gv += p[size_t(x) * S + r] * double(dof[(base + x) * D + d]);   // dV row r (key)
          }
          tq.add(double(__bfloat162float(dq[(base + r) * D + d])), gq * scale);
          tk.add(double(__bfloat162float(dk[(base + r) * D + d])), gk * scale);
          tv.add(double(__bfloat162float(dv[(base + r) * D + d])), gv);
        }
    }
    std::printf("causal=%d  dQ: max_abs_err=%.3e failing=%ld  dK: max_abs_err=%.3e failing=%ld  dV: max_abs_err=%.3e "
                "failing=%ld (of %ld each)\n",
                causal, tq.max_abs, tq.failures, tk.max_abs, tk.failures, tv.max_abs, tv.failures, tq.checked);
    ok = ok && tq.failures == 0 && tk.failures == 0 && tv.failures == 0;
  }
  std::printf("smem=%u B\n%s\n", BWD_SMEM_BYTES, ok ? "PASS" : "FAIL");
  return ok ? 0 : 1;
}
