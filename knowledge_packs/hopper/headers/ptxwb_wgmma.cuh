// ptxwb_wgmma.cuh: wgmma shared-memory descriptors, wgmma.mma_async (bf16 in, fp32 accumulate),
// setmaxnreg and stmatrix for the epilogue. Target: sm_90a only (wgmma needs the "a" target).
#pragma once
#include <cstdint>

namespace ptxwb {

__device__ __forceinline__ uint32_t wg_smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// ---- shared-memory matrix descriptor (64 bits) ----------------------------------------------
// bits  0-13  start address >> 4        bits 16-29  leading-dimension byte offset >> 4
// bits 32-45  stride-dimension byte offset >> 4
// bits 49-51  base offset (0 when the swizzle pattern starts on its repeat boundary)
// bits 62-63  swizzle: 0 none, 1 128B, 2 64B, 3 32B
enum WgmmaSwizzle : uint32_t { kSwizzleNone = 0, kSwizzle128B = 1, kSwizzle64B = 2, kSwizzle32B = 3 };

__device__ __forceinline__ uint64_t make_smem_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                                   uint32_t swizzle, uint32_t base_offset = 0) {
  uint64_t desc = 0;
  desc |= static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4);
  desc |= static_cast<uint64_t>((lbo_bytes & 0x3FFFF) >> 4) << 16;
  desc |= static_cast<uint64_t>((sbo_bytes & 0x3FFFF) >> 4) << 32;
  desc |= static_cast<uint64_t>(base_offset & 0x7) << 49;
  desc |= static_cast<uint64_t>(swizzle & 0x3) << 62;
  return desc;
}

// K-major tile written by TMA with CU_TENSOR_MAP_SWIZZLE_128B and a 64-element (128-byte) bf16
// box width: rows are 128 B apart, 8-row atoms 1024 B apart (SBO); LBO is unused (encoded 1).
// The tile must start on a 1024-byte boundary.
__device__ __forceinline__ uint64_t desc_kmajor_sw128(const void* tile) {
  return make_smem_desc(wg_smem_u32(tile), 16, 1024, kSwizzle128B);
}

// MN-major tile (e.g. V[k][n] with n contiguous) written by TMA with the 128B swizzle and a
// 64-element bf16 box width along MN: 8 K-rows of 128 B form a 1024-byte atom (SBO = 1024);
// `mn_chunk_bytes` is the distance between consecutive 64-wide MN chunks (LBO).
__device__ __forceinline__ uint64_t desc_mnmajor_sw128(const void* tile, uint32_t mn_chunk_bytes) {
  return make_smem_desc(wg_smem_u32(tile), mn_chunk_bytes, 1024, kSwizzle128B);
}

// Move the start address by `bytes` (a multiple of 16): +32 B selects the next k16 slice of a
// K-major 128B-swizzled bf16 tile, +2048 B the next 16 K-rows of an MN-major one.
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, uint32_t bytes) {
  return desc + static_cast<uint64_t>(bytes >> 4);
}

// ---- ordering -------------------------------------------------------------------------------
// Before the first wgmma, and whenever registers it reads (accumulator, A fragment) were written
// by other instructions since the last fence.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }

__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }

// Wait until at most N committed wgmma groups are pending.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

// Keeps the compiler from moving reads/writes of accumulator registers across the async window.
template <int R>
__device__ __forceinline__ void fence_accumulator(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// Accumulator fragment of m64nNk16 (f32): register i of lane `lane` in warp `w` (0..3) of the
// warpgroup holds D[row][col] with
//   row = 16*w + lane/4 + 8*((i/2)%2),   col = 8*(i/4) + 2*(lane%4) + (i%2).
__device__ __forceinline__ void acc_coord(int i, int lane, int w, int& row, int& col) {
  row = 16 * w + lane / 4 + 8 * ((i / 2) % 2);
  col = 8 * (i / 4) + 2 * (lane % 4) + (i % 2);
}

// ---- wgmma.mma_async, bf16 x bf16 -> f32 ------------------------------------------------------
// Output operand lists: "+f"(d[i]) for 32 consecutive accumulator registers.
#define PTXWB_ACC8(i) "+f"(d[i]), "+f"(d[i + 1]), "+f"(d[i + 2]), "+f"(d[i + 3]), "+f"(d[i + 4]), "+f"(d[i + 5]), "+f"(d[i + 6]), "+f"(d[i + 7])
#define PTXWB_ACC32(i) PTXWB_ACC8(i), PTXWB_ACC8(i + 8), PTXWB_ACC8(i + 16), PTXWB_ACC8(i + 24)
// scale_d = 0: D = A*B (accumulator ignored); 1: D = A*B + D. TransA/TransB: 0 = K-major,
// 1 = MN-major (only for f16/bf16 operands read through descriptors).
// D[64x64] (+)= A[64x16] * B[16x64], A and B from shared memory descriptors.
template <int TransA = 0, int TransB = 0>
__device__ __forceinline__ void wgmma_m64n64k16_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                 uint32_t scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %34, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, %35, %36;\n\t}"
      : PTXWB_ACC32(0)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransA), "n"(TransB));
}

// D[64x128] (+)= A[64x16] * B[16x128], A and B from shared memory descriptors.
template <int TransA = 0, int TransB = 0>
__device__ __forceinline__ void wgmma_m64n128k16_ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b,
                                                 uint32_t scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %66, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, %67, %68;\n\t}"
      : PTXWB_ACC32(0), PTXWB_ACC32(32)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransA), "n"(TransB));
}

// D[64x256] (+)= A[64x16] * B[16x256], A and B from shared memory descriptors.
template <int TransA = 0, int TransB = 0>
__device__ __forceinline__ void wgmma_m64n256k16_ss(float (&d)[128], uint64_t desc_a, uint64_t desc_b,
                                                 uint32_t scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %130, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, "
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, "
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, %131, %132;\n\t}"
      : PTXWB_ACC32(0), PTXWB_ACC32(32), PTXWB_ACC32(64), PTXWB_ACC32(96)
      : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TransA), "n"(TransB));
}

// D[64x64] (+)= A[64x16] * B[16x64], A from registers (mma-style fragment), B from shared memory.
template <int TransB = 0>
__device__ __forceinline__ void wgmma_m64n64k16_rs(float (&d)[32], const uint32_t (&a)[4], uint64_t desc_b,
                                                 uint32_t scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %37, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n\t}"
      : PTXWB_ACC32(0)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TransB));
}

// D[64x128] (+)= A[64x16] * B[16x128], A from registers (mma-style fragment), B from shared memory.
template <int TransB = 0>
__device__ __forceinline__ void wgmma_m64n128k16_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b,
                                                 uint32_t scale_d) {
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "setp.ne.b32 p, %69, 0;\n\t"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
      "{"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n\t}"
      : PTXWB_ACC32(0), PTXWB_ACC32(32)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TransB));
}

// ---- register budget ------------------------------------------------------------------------
// All four warps of a warpgroup execute the same setmaxnreg; N in [24, 256], multiple of 8.
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}

template <int N>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}

// Warp index that the compiler knows is uniform across the warp.
__device__ __forceinline__ int warp_idx_uniform() { return __shfl_sync(0xffffffff, threadIdx.x / 32, 0); }

// ---- epilogue -------------------------------------------------------------------------------
// Two floats to one bf16x2 register: `lo` in bits 0-15, `hi` in bits 16-31 (round to nearest).
// (Also in ptxwb_tcgen05.cuh; the guard lets both headers share a translation unit.)
#ifndef PTXWB_PACK_BF16X2
#define PTXWB_PACK_BF16X2
__device__ __forceinline__ uint32_t pack_bf16x2(float lo, float hi) {
  uint32_t out;
  asm("cvt.rn.bf16x2.f32 %0, %2, %1;" : "=r"(out) : "f"(lo), "f"(hi));
  return out;
}
#endif

// Four 8x8 b16 matrices to shared memory. Lanes 8j..8j+7 give the addresses of rows 0..7 of
// matrix j; register rj of lane l holds row l/4, columns 2*(l%4) and 2*(l%4)+1 of matrix j
// (the same distribution as a wgmma accumulator quad after pack_bf16x2).
__device__ __forceinline__ void stmatrix_x4(void* row_addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
               ::"r"(wg_smem_u32(row_addr)), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

// Same, each 8x8 matrix transposed on the way out (to write a column-major tile).
__device__ __forceinline__ void stmatrix_x4_trans(void* row_addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                                  uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};"
               ::"r"(wg_smem_u32(row_addr)), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}

}  // namespace ptxwb
