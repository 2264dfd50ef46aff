// Instantiates every helper of the common headers (barrier, TMA) so ptxas sees each one.
#include "ptxwb_barrier.cuh"
#include "ptxwb_tma.cuh"

using namespace ptxwb;

__global__ void __cluster_dims__(2, 1, 1) barrier_and_tma_helpers(const __grid_constant__ CUtensorMap map,
                                                                  const __grid_constant__ CUtensorMap map3,
                                                                  float* out) {
  __shared__ alignas(1024) unsigned char tile[8192];
  __shared__ alignas(8) uint64_t bars[2];
  float* ftile = reinterpret_cast<float*>(tile);
  if (threadIdx.x == 0) {
    mbar_init(&bars[0], 1);
    mbar_init(&bars[1], blockDim.x);
    fence_mbarrier_init();
  }
  cluster_sync();
  if (threadIdx.x < 32 && elect_one()) {
    prefetch_tensormap(&map);
    tma_prefetch_2d(&map, 0, 0);
    mbar_arrive_expect_tx(&bars[0], 4096);
    mbar_expect_tx(&bars[0], 4096);
    tma_load_2d(tile, &map, &bars[0], 0, 0);
    tma_load_3d(tile + 4096, &map3, &bars[0], 0, 0, 0);
    tma_load_2d_multicast(tile, &map, &bars[0], 64, 0, uint16_t(0x3));
  }
  mbar_wait(&bars[0], 0);
  mbar_wait_cluster(&bars[1], 1);
  out[threadIdx.x] = ftile[threadIdx.x] + (mbar_try_wait(&bars[1], 1) ? 1.f : 0.f);
  mbar_arrive(&bars[1]);
  mbar_arrive_cluster(&bars[1], cluster_ctarank() ^ 1u);
  uint32_t peer = mapa_shared(ftile, (cluster_ctarank() + 1) % cluster_nctarank());
  st_dsmem_f32(peer + 4 * threadIdx.x, 1.0f);
  out[blockDim.x + threadIdx.x] = ld_dsmem_f32(peer);
  fence_proxy_async_smem();
  named_bar_sync(1, blockDim.x);
  named_bar_arrive(2, 32 * ((blockDim.x + 31) / 32));
  if (threadIdx.x == 0) {
    tma_store_2d(&map, tile, 0, 0);
    tma_reduce_add_2d(&map, tile, 0, 0);
    tma_store_commit();
    tma_store_wait_read<0>();
    tma_store_wait<0>();
  }
  out[(smem_u32(tile) ^ tma_smem(tile)) & 1] = 0.f;
  cluster_sync();
}

// Host helpers must compile too (they are not run here).
int host_helpers(void* base) {
  CUtensorMap map2, map3;
  CUresult a = make_tmap_2d(&map2, base, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4096, 4096, 8192, 64, 128,
                            CU_TENSOR_MAP_SWIZZLE_128B);
  const uint64_t dims[3] = {128, 4096, 192};
  const uint64_t strides[2] = {256, 256 * 4096};
  const uint32_t box[3] = {64, 128, 1};
  CUresult b = make_tmap_3d(&map3, base, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, dims, strides, box,
                            CU_TENSOR_MAP_SWIZZLE_128B);
  return int(a) + int(b) + (get_encode_tiled() != nullptr);
}
