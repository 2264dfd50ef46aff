// ptxwb_tma.cuh: tensor maps on the host, TMA loads/stores/prefetch on the device.
// Targets: sm_90a and sm_100a. The host part needs only the CUDA runtime: the driver's
// cuTensorMapEncodeTiled is fetched with cudaGetDriverEntryPointByVersion, so nothing links
// against libcuda.
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>
#include <cstdint>

namespace ptxwb {

// ---- host ---------------------------------------------------------------------------------
// The driver's encoder, asked for by its 12.0 ABI; nullptr if the driver lacks it.
inline PFN_cuTensorMapEncodeTiled_v12000 get_encode_tiled() {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult query;
  cudaError_t err =
      cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &query);
  if (err != cudaSuccess || query != cudaDriverEntryPointSuccess) return nullptr;
  return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
}

// A 2-D map over a row-major matrix with `rows` rows of `cols` elements, rows `row_stride_bytes`
// apart (a multiple of 16). The box is box_cols x box_rows elements (each <= 256); with a swizzle,
// box_cols * elem_bytes must not exceed the swizzle span (32, 64 or 128 bytes).
inline CUresult make_tmap_2d(CUtensorMap* map, const void* base, CUtensorMapDataType dtype,
                             uint64_t cols, uint64_t rows, uint64_t row_stride_bytes,
                             uint32_t box_cols, uint32_t box_rows, CUtensorMapSwizzle swizzle) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = get_encode_tiled();
  if (encode == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  cuuint64_t dims[2] = {cols, rows};                 // innermost dimension first
  cuuint64_t strides[1] = {row_stride_bytes};        // rank-1 strides, in bytes
  cuuint32_t box[2] = {box_cols, box_rows};
  cuuint32_t elem_strides[2] = {1, 1};
  return encode(map, dtype, 2, const_cast<void*>(base), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// A 3-D map: dims/strides innermost first, e.g. a [B*H, S, D] tensor is {D, S, B*H}.
inline CUresult make_tmap_3d(CUtensorMap* map, const void* base, CUtensorMapDataType dtype,
                             const uint64_t dims_in[3], const uint64_t stride_bytes[2],
                             const uint32_t box_in[3], CUtensorMapSwizzle swizzle) {
  PFN_cuTensorMapEncodeTiled_v12000 encode = get_encode_tiled();
  if (encode == nullptr) return CUDA_ERROR_NOT_SUPPORTED;
  cuuint64_t dims[3] = {dims_in[0], dims_in[1], dims_in[2]};
  cuuint64_t strides[2] = {stride_bytes[0], stride_bytes[1]};
  cuuint32_t box[3] = {box_in[0], box_in[1], box_in[2]};
  cuuint32_t elem_strides[3] = {1, 1, 1};
  return encode(map, dtype, 3, const_cast<void*>(base), dims, strides, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

// ---- device -------------------------------------------------------------------------------
// `map` is the address of a `const __grid_constant__ CUtensorMap` kernel parameter (or of a
// 64-byte aligned copy in global memory). `dst`/`src` shared buffers are 128-byte aligned,
// 1024-byte aligned for the 128B swizzle. Coordinates are in elements, innermost first, and may
// be out of range: those elements are zero-filled on load and dropped on store.

__device__ __forceinline__ uint32_t tma_smem(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Hide the descriptor fetch latency: call once early from the issuing thread.
__device__ __forceinline__ void prefetch_tensormap(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Load one box; the full box size in bytes is signalled as complete_tx on `bar`.
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t c0, int32_t c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];"
      ::"r"(tma_smem(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(tma_smem(bar)), "r"(c0), "r"(c1)
      : "memory");
}

__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t c0, int32_t c1, int32_t c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5}], [%2];"
      ::"r"(tma_smem(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(tma_smem(bar)), "r"(c0), "r"(c1),
        "r"(c2)
      : "memory");
}

// Multicast: the box lands at the same shared offset in every CTA whose bit is set in
// `cta_mask` (bit i = %cluster_ctarank i) and each of those CTAs' barrier at `bar`'s offset
// receives the complete_tx bytes.
__device__ __forceinline__ void tma_load_2d_multicast(void* dst, const CUtensorMap* map, uint64_t* bar,
                                                      int32_t c0, int32_t c1, uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%4, %5}], [%2], %3;"
      ::"r"(tma_smem(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(tma_smem(bar)), "h"(cta_mask),
        "r"(c0), "r"(c1)
      : "memory");
}

// Warm L2 with a box (no shared memory, no barrier).
__device__ __forceinline__ void tma_prefetch_2d(const CUtensorMap* map, int32_t c0, int32_t c1) {
  asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global [%0, {%1, %2}];"
               ::"l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1) : "memory");
}

// Store a shared box to global. Before it: every writer thread ran fence_proxy_async_smem()
// and the writers synchronised; then one thread issues the store, commit and a wait.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* src, int32_t c0, int32_t c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
               ::"l"(reinterpret_cast<uint64_t>(map)), "r"(tma_smem(src)), "r"(c0), "r"(c1) : "memory");
}

// Element-wise add of a shared box into global (e.g. split-K or dQ accumulation in fp32).
__device__ __forceinline__ void tma_reduce_add_2d(const CUtensorMap* map, const void* src, int32_t c0,
                                                  int32_t c1) {
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.bulk_group [%0, {%2, %3}], [%1];"
               ::"l"(reinterpret_cast<uint64_t>(map)), "r"(tma_smem(src)), "r"(c0), "r"(c1) : "memory");
}

__device__ __forceinline__ void tma_store_commit() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}

// Wait until at most N committed store groups are still reading their shared source.
template <int N>
__device__ __forceinline__ void tma_store_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
}

// Wait until at most N committed store groups are still pending (writes done).
template <int N>
__device__ __forceinline__ void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace ptxwb
