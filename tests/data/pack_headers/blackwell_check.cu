// Instantiates every helper of ptxwb_tcgen05.cuh for sm_100a: one kernel per cta_group, since all
// tcgen05 instructions of a kernel must agree on it.
#include "ptxwb_tcgen05.cuh"

using namespace ptxwb;

__global__ void __launch_bounds__(128, 1) tcgen05_one_cta(float* out) {
  __shared__ alignas(1024) unsigned char a_tile[128 * 128];
  __shared__ alignas(1024) unsigned char b_tile[256 * 128];
  __shared__ alignas(8) uint64_t mma_done;
  __shared__ uint32_t tmem_base;
  const int warp = threadIdx.x / 32;
  if (warp == 0) {
    tmem_alloc(&tmem_base, 512);
    tmem_relinquish();
  }
  if (threadIdx.x == 32) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(tc_smem_u32(&mma_done)));
  }
  tc05_fence_before_sync();
  __syncthreads();
  tc05_fence_after_sync();
  const uint32_t d_tmem = tmem_base;
  if (threadIdx.x == 0) {
    constexpr uint32_t idesc = make_idesc_bf16_f32(128, 256);
    const uint64_t a = tc_desc_kmajor_sw128(a_tile);
    const uint64_t b = make_tc_smem_desc(tc_smem_u32(b_tile), 16, 1024, kTcSwizzle128B);
    tc05_mma_bf16_ss(d_tmem, a, b, idesc, 0);
    tc05_mma_bf16_ss(d_tmem, a + 2, b + 2, idesc, 1);
    tc05_mma_bf16_ts(tmem_addr(d_tmem, 0, 256), d_tmem, b, make_idesc_bf16_f32(128, 128, 0, 1), 1);
    tc05_commit(&mma_done);
  }
  uint32_t done = 0;
  while (!done) {
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}" : "=r"(done) : "r"(tc_smem_u32(&mma_done)) : "memory");
  }
  tc05_fence_after_sync();
  uint32_t r16[16], r32[32];
  const uint32_t lane_base = 32 * (warp % 4);
  tmem_ld_32x32b_x16(tmem_addr(d_tmem, lane_base, 0), r16);
  tmem_ld_32x32b_x32(tmem_addr(d_tmem, lane_base, 16), r32);
  tmem_wait_ld();
  fence_regs(r16);
  fence_regs(r32);
  float s = 0.f;
  for (int i = 0; i < 16; ++i) s += __uint_as_float(r16[i]);
  for (int i = 0; i < 32; ++i) s += __uint_as_float(r32[i]);
  out[threadIdx.x] = s + __uint_as_float(pack_bf16x2(s, 1.f));
  tmem_st_32x32b_x16(tmem_addr(d_tmem, lane_base, 384), r16);
  tmem_st_32x32b_x32(tmem_addr(d_tmem, lane_base, 400), r32);
  tmem_wait_st();
  tc05_fence_before_sync();
  __syncthreads();
  if (warp == 0) {
    tc05_fence_after_sync();
    tmem_dealloc(d_tmem, 512);
  }
}

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128, 1)
tcgen05_cta_pair(const __grid_constant__ CUtensorMap map, float* out) {
  __shared__ alignas(1024) unsigned char a_tile[128 * 128];
  __shared__ alignas(8) uint64_t bar;
  __shared__ uint32_t tmem_base;
  if (threadIdx.x < 32) {
    tmem_alloc_pair(&tmem_base, 256);
    tmem_relinquish_pair();
  }
  tc05_fence_before_sync();
  __syncthreads();
  tc05_fence_after_sync();
  uint32_t rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  if (threadIdx.x == 0) {
    uint32_t leader_bar;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(leader_bar) : "r"(tc_smem_u32(&bar)), "r"(rank & ~1u));
    tma_load_2d_pair(a_tile, &map, leader_bar, 0, int32_t(rank) * 128);
    if (rank % 2 == 0) {
      const uint64_t a = tc_desc_kmajor_sw128(a_tile);
      tc05_mma_bf16_ss_pair(tmem_base, a, a, make_idesc_bf16_f32(256, 256), 0);
      tc05_commit_pair_multicast(&bar, 0x3);
    }
  }
  out[threadIdx.x] = float(tmem_base);
  tc05_fence_before_sync();
  __syncthreads();
  if (threadIdx.x < 32) {
    tc05_fence_after_sync();
    tmem_dealloc_pair(tmem_base, 256);
  }
}

// FP8 MMA from a tile gathered four rows at a time (the paged-KV pattern).
__global__ void __launch_bounds__(128, 1) tcgen05_fp8_gather(const __grid_constant__ CUtensorMap map,
                                                             const int* rows, float* out) {
  __shared__ alignas(1024) unsigned char tile[128 * 128];
  __shared__ alignas(8) uint64_t bar;
  __shared__ uint32_t tmem_base;
  const int warp = threadIdx.x / 32;
  if (warp == 0) {
    tmem_alloc(&tmem_base, 128);
    tmem_relinquish();
  }
  if (threadIdx.x == 32) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(tc_smem_u32(&bar)));
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(tc_smem_u32(&bar)), "r"(128 * 128));
    for (int i = 0; i < 128; i += 4) {
      tma_load_2d_gather4(tile + i * 128, &map, &bar, 0, rows[i], rows[i + 1], rows[i + 2], rows[i + 3]);
    }
  }
  tc05_fence_before_sync();
  __syncthreads();
  tc05_fence_after_sync();
  asm volatile("{\n\t.reg .pred p;\n\twait:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n\t"
               "@!p bra wait;\n\t}" ::"r"(tc_smem_u32(&bar)) : "memory");
  if (threadIdx.x == 0) {
    const uint64_t a = tc_desc_kmajor_sw128(tile);
    tc05_mma_f8_ss(tmem_base, a, a, make_idesc_f8_f32(128, 128), 0);
    tc05_mma_f8_ss(tmem_base, a + 2, a + 2, make_idesc_f8_f32(128, 128, kFmtE5M2, kFmtE5M2), 1);
    tc05_commit(&bar);
  }
  asm volatile("{\n\t.reg .pred p;\n\twait:\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%0], 1;\n\t"
               "@!p bra wait;\n\t}" ::"r"(tc_smem_u32(&bar)) : "memory");
  tc05_fence_after_sync();
  uint32_t r[16];
  tmem_ld_32x32b_x16(tmem_addr(tmem_base, 32 * (warp % 4), 0), r);
  tmem_wait_ld();
  fence_regs(r);
  out[threadIdx.x] = __uint_as_float(r[0]);
  tc05_fence_before_sync();
  __syncthreads();
  if (warp == 0) {
    tc05_fence_after_sync();
    tmem_dealloc(tmem_base, 128);
  }
}
