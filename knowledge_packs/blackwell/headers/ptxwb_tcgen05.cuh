// ptxwb_tcgen05.cuh: Tensor Memory (TMEM), tcgen05.mma (bf16 or FP8 in, fp32 accumulate in TMEM),
// tcgen05.commit to an mbarrier, tcgen05.ld/st, the 2-CTA forms and TMA's four-row gather.
// Target: sm_100a only.
// All tcgen05 instructions of one kernel must use the same cta_group (::1 or ::2).
#pragma once
#include <cuda.h>
#include <cstdint>

namespace ptxwb {

__device__ __forceinline__ uint32_t tc_smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- shared-memory descriptor for tcgen05.mma (64 bits) -------------------------------------
// bits  0-13 start address >> 4     bits 16-29 LBO >> 4     bits 32-45 SBO >> 4
// bits 46-48 fixed 0b001 (descriptor version)     bits 49-51 base offset     bit 52 LBO mode (0)
// bits 61-63 swizzle: 0 none, 1 128B with 32B atom, 2 128B, 4 64B, 6 32B
enum Tc05Swizzle : uint32_t {
  kTcSwizzleNone = 0, kTcSwizzle128B32BAtom = 1, kTcSwizzle128B = 2, kTcSwizzle64B = 4, kTcSwizzle32B = 6
};

__device__ __forceinline__ uint64_t make_tc_smem_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                                      uint32_t swizzle, uint32_t base_offset = 0) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>((lbo_bytes & 0x3FFFF) >> 4) << 16;
  desc |= static_cast<uint64_t>((sbo_bytes & 0x3FFFF) >> 4) << 32;
  desc |= static_cast<uint64_t>(1) << 46;
  desc |= static_cast<uint64_t>(base_offset & 0x7) << 49;
  desc |= static_cast<uint64_t>(swizzle & 0x7) << 61;
  return desc;
}

// K-major tile written by TMA with the 128B swizzle and a 64-element bf16 box width
// (128-byte rows, 1024-byte 8-row atoms); tile 1024-byte aligned. +32 B per k16 step.
__device__ __forceinline__ uint64_t tc_desc_kmajor_sw128(const void* tile) {
  return make_tc_smem_desc(tc_smem_u32(tile), 16, 1024, kTcSwizzle128B);
}

// ---- instruction descriptor (32 bits) for .kind::f16 with bf16 inputs, f32 accumulator -----------
// bits 4-5 D type (1 = f32), 7-9 A type (1 = bf16), 10-12 B type (1 = bf16), 13/14 negate A/B,
// 15/16 transpose A/B (0 = K-major, 1 = MN-major), 17-22 N >> 3, 24-28 M >> 4; others 0 (dense).
__host__ __device__ constexpr uint32_t make_idesc_bf16_f32(uint32_t m, uint32_t n, uint32_t a_mn_major = 0,
                                                           uint32_t b_mn_major = 0) {
  return (1u << 4) | (1u << 7) | (1u << 10) | (a_mn_major << 15) | (b_mn_major << 16) | ((n >> 3) << 17) |
         ((m >> 4) << 24);
}

// ---- instruction descriptor for .kind::f8f6f4 with 8-bit float inputs, f32 accumulator ------------
// Same fields as above; bits 7-9 / 10-12 hold the A / B format: 0 = e4m3, 1 = e5m2. Both K-major here
// (the layout every reference of this workbench uses for FP8).
constexpr uint32_t kFmtE4M3 = 0;
constexpr uint32_t kFmtE5M2 = 1;
__host__ __device__ constexpr uint32_t make_idesc_f8_f32(uint32_t m, uint32_t n, uint32_t a_fmt = kFmtE4M3,
                                                         uint32_t b_fmt = kFmtE4M3) {
  return (1u << 4) | (a_fmt << 7) | (b_fmt << 10) | ((n >> 3) << 17) | ((m >> 4) << 24);
}

// ---- Tensor Memory allocation (one full warp executes each) -----------------------------------
// Writes the TMEM base address (lane 0, first column) to *dst_smem. ncols: power of 2 in [32, 512].
__device__ __forceinline__ void tmem_alloc(uint32_t* dst_smem, uint32_t ncols) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;"
               ::"r"(tc_smem_u32(dst_smem)), "r"(ncols) : "memory");
}

// After the CTA's last alloc: lets other CTAs on the SM allocate without waiting for this one.
__device__ __forceinline__ void tmem_relinquish() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}

// Same warp as the alloc, same ncols, after every TMEM access of the CTA is complete.
__device__ __forceinline__ void tmem_dealloc(uint32_t taddr, uint32_t ncols) {
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols) : "memory");
}

// TMEM address of (lane, column) relative to a base: lane in bits 31-16, column in bits 15-0.
__device__ __forceinline__ uint32_t tmem_addr(uint32_t base, uint32_t lane, uint32_t col) {
  return base + (lane << 16) + col;
}

// ---- ordering ------------------------------------------------------------------------------
// Around thread synchronisation (bar.sync, mbarrier) that orders tcgen05 work across threads:
// before_thread_sync on the signalling side, after_thread_sync on the waiting side.
__device__ __forceinline__ void tc05_fence_before_sync() {
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
}

__device__ __forceinline__ void tc05_fence_after_sync() {
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
}

// ---- MMA (issued by ONE thread) ---------------------------------------------------------------
// D[tmem] (+)= A[smem desc] * B[smem desc]; accumulate = 0 overwrites D.
__device__ __forceinline__ void tc05_mma_bf16_ss(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                                 uint32_t accumulate) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %4, 0;\n\t"
      "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n\t}"
      ::"r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate) : "memory");
}

// A from Tensor Memory (e.g. P of attention kept in TMEM), B from shared memory.
__device__ __forceinline__ void tc05_mma_bf16_ts(uint32_t d_tmem, uint32_t a_tmem, uint64_t b_desc, uint32_t idesc,
                                                 uint32_t accumulate) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %4, 0;\n\t"
      "tcgen05.mma.cta_group::1.kind::f16 [%0], [%1], %2, %3, p;\n\t}"
      ::"r"(d_tmem), "r"(a_tmem), "l"(b_desc), "r"(idesc), "r"(accumulate) : "memory");
}

// FP8: K is 32 per instruction (32 bytes of a row, as for bf16's 16), so a k-step advances a K-major
// descriptor by the same 32 bytes. SASS: UTCQMMA.
__device__ __forceinline__ void tc05_mma_f8_ss(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc,
                                               uint32_t accumulate) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %4, 0;\n\t"
      "tcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n\t}"
      ::"r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate) : "memory");
}

// The mbarrier receives one arrive when all tcgen05 ops issued so far by this thread complete
// (their smem operands are then free and D is final).
__device__ __forceinline__ void tc05_commit(uint64_t* bar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];"
               ::"r"(tc_smem_u32(bar)) : "memory");
}

// Two floats to one bf16x2 register: `lo` in bits 0-15, `hi` in bits 16-31 (round to nearest).
// (Also in ptxwb_wgmma.cuh; the guard lets both headers share a translation unit.)
#ifndef PTXWB_PACK_BF16X2
#define PTXWB_PACK_BF16X2
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t out;
  asm("cvt.rn.bf16x2.f32 %0, %2, %1;" : "=r"(out) : "f"(lo), "f"(hi));
  return out;
}
#endif

// ---- TMEM <-> registers (warp-collective; a warp may touch only lanes 32*(warpid%4) .. +31) -------
__device__ __forceinline__ void tmem_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory"); }

__device__ __forceinline__ void tmem_wait_st() { asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory"); }

// Keeps the compiler from using tcgen05.ld results before tmem_wait_ld().
template <int N>
__device__ __forceinline__ void fence_regs(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// Warp-collective: lane i of the warp receives TMEM lane (taddr.lane + i), columns
// taddr.col .. taddr.col+15 (one 32-bit register each). Follow with tmem_wait_ld().
__device__ __forceinline__ void tmem_ld_32x32b_x16(uint32_t taddr, uint32_t (&r)[16]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x16.b32 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15"
      "}, [%16];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]),
        "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15])
      : "r"(taddr));
}

// Warp-collective: lane i of the warp receives TMEM lane (taddr.lane + i), columns
// taddr.col .. taddr.col+31 (one 32-bit register each). Follow with tmem_wait_ld().
__device__ __forceinline__ void tmem_ld_32x32b_x32(uint32_t taddr, uint32_t (&r)[32]) {
  asm volatile(
      "tcgen05.ld.sync.aligned.32x32b.x32.b32 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, [%32];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7]),
        "=r"(r[8]), "=r"(r[9]), "=r"(r[10]), "=r"(r[11]), "=r"(r[12]), "=r"(r[13]), "=r"(r[14]), "=r"(r[15]),
        "=r"(r[16]), "=r"(r[17]), "=r"(r[18]), "=r"(r[19]), "=r"(r[20]), "=r"(r[21]), "=r"(r[22]), "=r"(r[23]),
        "=r"(r[24]), "=r"(r[25]), "=r"(r[26]), "=r"(r[27]), "=r"(r[28]), "=r"(r[29]), "=r"(r[30]), "=r"(r[31])
      : "r"(taddr));
}

// Inverse of tmem_ld_32x32b_x16. Follow with tmem_wait_st() before the data is read by an MMA.
__device__ __forceinline__ void tmem_st_32x32b_x16(uint32_t taddr, const uint32_t (&r)[16]) {
  asm volatile(
      "tcgen05.st.sync.aligned.32x32b.x16.b32 [%0], {"
      "%1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16"
      "};"
      :: "r"(taddr),
        "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]), "r"(r[5]), "r"(r[6]), "r"(r[7]),
        "r"(r[8]), "r"(r[9]), "r"(r[10]), "r"(r[11]), "r"(r[12]), "r"(r[13]), "r"(r[14]), "r"(r[15])
      : "memory");
}

// Inverse of tmem_ld_32x32b_x32. Follow with tmem_wait_st() before the data is read by an MMA.
__device__ __forceinline__ void tmem_st_32x32b_x32(uint32_t taddr, const uint32_t (&r)[32]) {
  asm volatile(
      "tcgen05.st.sync.aligned.32x32b.x32.b32 [%0], {"
      "%1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "
      "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32"
      "};"
      :: "r"(taddr),
        "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]), "r"(r[4]), "r"(r[5]), "r"(r[6]), "r"(r[7]),
        "r"(r[8]), "r"(r[9]), "r"(r[10]), "r"(r[11]), "r"(r[12]), "r"(r[13]), "r"(r[14]), "r"(r[15]),
        "r"(r[16]), "r"(r[17]), "r"(r[18]), "r"(r[19]), "r"(r[20]), "r"(r[21]), "r"(r[22]), "r"(r[23]),
        "r"(r[24]), "r"(r[25]), "r"(r[26]), "r"(r[27]), "r"(r[28]), "r"(r[29]), "r"(r[30]), "r"(r[31])
      : "memory");
}

// ---- 2-CTA pair (cta_group::2; use in kernels whose tcgen05 ops are all ::2) ---------------------
// Both CTAs of the pair (cluster ranks 2k, 2k+1) call alloc/dealloc from one warp each.
__device__ __forceinline__ void tmem_alloc_pair(uint32_t* dst_smem, uint32_t ncols) {
  asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;"
               ::"r"(tc_smem_u32(dst_smem)), "r"(ncols) : "memory");
}

__device__ __forceinline__ void tmem_relinquish_pair() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" ::: "memory");
}

__device__ __forceinline__ void tmem_dealloc_pair(uint32_t taddr, uint32_t ncols) {
  asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(ncols) : "memory");
}

// Issued by one thread of the even (leader) CTA: M = 128 or 256 rows split across the pair's TMEM,
// A rows from each CTA's own smem (same offsets), B columns split between the two CTAs' smem.
__device__ __forceinline__ void tc05_mma_bf16_ss_pair(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc,
                                                      uint32_t idesc, uint32_t accumulate) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %4, 0;\n\t"
      "tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, p;\n\t}"
      ::"r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate) : "memory");
}

// Signal the barrier at `bar`'s offset in every CTA of `cta_mask` (e.g. 0b11: both of the pair).
__device__ __forceinline__ void tc05_commit_pair_multicast(uint64_t* bar, uint16_t cta_mask) {
  asm volatile(
      "tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
      ::"r"(tc_smem_u32(bar)), "h"(cta_mask) : "memory");
}

// TMA load for a pair: the data land in this CTA's smem, the complete_tx goes to the barrier at
// `bar_cluster_addr` (a shared::cluster address, e.g. the leader CTA's barrier from mapa).
__device__ __forceinline__ void tma_load_2d_pair(void* dst, const CUtensorMap* map, uint32_t bar_cluster_addr,
                                                 int32_t c0, int32_t c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.cta_group::2"
      " [%0], [%1, {%3, %4}], [%2];"
      ::"r"(tc_smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar_cluster_addr), "r"(c0), "r"(c1)
      : "memory");
}

// ---- TMA gather of four rows (sm_100a) ------------------------------------------------------------
// Rows r0..r3 of a 2-D tensor map whose box is one row high land one after another at `dst` (box
// width elements each, from column c0), e.g. four tokens' rows of a paged KV cache seen as
// [pages * Hkv, 128]. The swizzle follows the shared-memory address, as for tile loads. SASS:
// UTMALDG.2D.GATHER4.
__device__ __forceinline__ void tma_load_2d_gather4(void* dst, const CUtensorMap* map, uint64_t* bar, int32_t c0,
                                                    int32_t r0, int32_t r1, int32_t r2, int32_t r3) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cta.global.tile::gather4.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];"
      ::"r"(tc_smem_u32(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(tc_smem_u32(bar)), "r"(c0), "r"(r0),
        "r"(r1), "r"(r2), "r"(r3)
      : "memory");
}

}  // namespace ptxwb
