// Family probe (sm_90a): one PTX instruction of each Hopper family, compiled with -cubin by
// tests/test_sass.py to check the SASS family tables against real cuobjdump output. Not a kernel to run.
#include <cuda.h>
#include <stdint.h>
__global__ void __launch_bounds__(256, 1) probe(const __grid_constant__ CUtensorMap tmap, float* out, uint64_t da, uint64_t db, const float* src) {
  __shared__ alignas(128) float smem[1024];
  __shared__ alignas(8) uint64_t bar;
  uint32_t s = (uint32_t)__cvta_generic_to_shared(smem);
  uint32_t b = (uint32_t)__cvta_generic_to_shared(&bar);
  float f[8] = {0}; int i8[8] = {0};
  if (threadIdx.x >= 128) asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n"); else asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");
  asm volatile("wgmma.fence.sync.aligned;\n");
  asm volatile("wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e4m3 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, 1, 1, 1;\n"
    : "+f"(f[0]),"+f"(f[1]),"+f"(f[2]),"+f"(f[3]),"+f"(f[4]),"+f"(f[5]),"+f"(f[6]),"+f"(f[7]) : "l"(da), "l"(db));
  asm volatile("wgmma.mma_async.sync.aligned.m64n16k32.s32.s8.s8 {%0,%1,%2,%3,%4,%5,%6,%7}, %8, %9, 1;\n"
    : "+r"(i8[0]),"+r"(i8[1]),"+r"(i8[2]),"+r"(i8[3]),"+r"(i8[4]),"+r"(i8[5]),"+r"(i8[6]),"+r"(i8[7]) : "l"(da), "l"(db));
  asm volatile("wgmma.commit_group.sync.aligned;\n");
  asm volatile("wgmma.wait_group.sync.aligned 0;\n");
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 256, [%2];\n" :: "r"(s), "l"(src), "r"(b) : "memory");
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];\n" :: "l"(&tmap), "r"(0), "r"(0), "r"(s) : "memory");
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];\n" :: "l"(&tmap), "r"(0), "r"(0) : "memory");
    asm volatile("prefetch.tensormap [%0];\n" :: "l"(&tmap) : "memory");
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], 256;\n" :: "l"(out), "r"(s) : "memory");
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], 256;\n" :: "l"(src) : "memory");
    asm volatile("cp.async.bulk.commit_group;\n");
    asm volatile("cp.async.bulk.wait_group 0;\n");
  }
  for (int i = 0; i < 8; ++i) out[threadIdx.x * 8 + i] = f[i] + i8[i];
}
