// Instantiates every helper of ptxwb_wgmma.cuh for sm_90a.
#include "ptxwb_wgmma.cuh"

using namespace ptxwb;

__global__ void __launch_bounds__(384, 1) wgmma_helpers(const uint32_t* a_frag, float* out) {
  __shared__ alignas(1024) unsigned char a_tile[64 * 128];
  __shared__ alignas(1024) unsigned char b_tile[256 * 128];
  const int warpgroup = warp_idx_uniform() / 4;
  if (warpgroup == 0) {
    setmaxnreg_dec<40>();
    return;
  }
  setmaxnreg_inc<232>();
  uint64_t da = desc_kmajor_sw128(a_tile);
  uint64_t db = desc_kmajor_sw128(b_tile);
  uint64_t dv = desc_mnmajor_sw128(b_tile, 64 * 128);
  uint64_t dn = make_smem_desc(wg_smem_u32(b_tile), 128, 256, kSwizzleNone);
  float d64[32] = {}, d128[64] = {}, d256[128] = {}, r64[32] = {}, r128[64] = {};
  uint32_t a[4] = {a_frag[threadIdx.x], a_frag[threadIdx.x + 1], a_frag[threadIdx.x + 2], a_frag[threadIdx.x + 3]};
  wgmma_fence();
  wgmma_m64n64k16_ss(d64, da, db, 0);
  wgmma_m64n128k16_ss(d128, desc_advance(da, 32), desc_advance(db, 32), 1);
  wgmma_m64n256k16_ss<0, 1>(d256, da, dv, 1);
  wgmma_m64n64k16_rs(r64, a, dn, 0);
  wgmma_m64n128k16_rs<1>(r128, a, dv, 1);
  wgmma_commit();
  wgmma_wait<0>();
  fence_accumulator(d64);
  fence_accumulator(d128);
  fence_accumulator(d256);
  int row, col;
  acc_coord(threadIdx.x % 32, threadIdx.x % 32, (threadIdx.x / 32) % 4, row, col);
  float s = 0.f;
  for (int i = 0; i < 32; ++i) s += d64[i] + r64[i];
  for (int i = 0; i < 64; ++i) s += d128[i] + r128[i];
  for (int i = 0; i < 128; ++i) s += d256[i];
  out[threadIdx.x] = s + row + col;
  uint32_t p = pack_bf16x2(s, s + 1.f);
  stmatrix_x4(a_tile + 16 * (threadIdx.x % 32), p, p, p, p);
  stmatrix_x4_trans(b_tile + 16 * (threadIdx.x % 32), p, p, p, p);
}
