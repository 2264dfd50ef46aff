// Test data for the TUI: a tiny sm_90a kernel whose SASS holds one instruction of several
// Hopper families (an mbarrier init, a wgmma, a setmaxnreg). It computes nothing useful.
#include <cstdint>

__global__ void families_probe(float* out, uint64_t desc_a, uint64_t desc_b) {
  float d[4] = {0.f, 0.f, 0.f, 0.f};
  __shared__ __align__(8) uint64_t bar;
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared.b64 [%0], 1;" ::"r"((unsigned)__cvta_generic_to_shared(&bar)));
  }
  asm volatile("wgmma.fence.sync.aligned;");
  asm volatile("wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0,%1,%2,%3}, %4, %5, 1, 1, 1, 0, 0;"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "l"(desc_a), "l"(desc_b));
  asm volatile("wgmma.commit_group.sync.aligned;");
  asm volatile("wgmma.wait_group.sync.aligned 0;");
  out[threadIdx.x] = d[0] + d[1] + d[2] + d[3];
}
