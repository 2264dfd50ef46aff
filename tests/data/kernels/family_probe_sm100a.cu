// Family probe (sm_100a): one PTX instruction of each tcgen05 kind, compiled with -cubin by
// tests/test_sass.py to check the SASS family tables against real cuobjdump output. Not a kernel to run.
#include <stdint.h>
__global__ void probe(float* out, uint64_t da, uint64_t db, uint32_t idesc, uint32_t tmem, uint64_t sdesc) {
  uint32_t v = threadIdx.x;
  if (threadIdx.x == 0) {
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\ntcgen05.mma.cta_group::1.kind::f8f6f4 [%0], %1, %2, %3, p;\n}\n" :: "r"(tmem), "l"(da), "l"(db), "r"(idesc), "r"(v));
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\ntcgen05.mma.cta_group::1.kind::i8 [%0], %1, %2, %3, p;\n}\n" :: "r"(tmem), "l"(da), "l"(db), "r"(idesc), "r"(v));
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\ntcgen05.mma.cta_group::1.kind::mxf4.block_scale [%0], %1, %2, %3, [%5], [%6], p;\n}\n" :: "r"(tmem), "l"(da), "l"(db), "r"(idesc), "r"(v), "r"(tmem + 64), "r"(tmem + 96));
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\ntcgen05.mma.cta_group::1.kind::tf32 [%0], %1, %2, %3, p;\n}\n" :: "r"(tmem), "l"(da), "l"(db), "r"(idesc), "r"(v));
    asm volatile("tcgen05.cp.cta_group::1.128x256b [%0], %1;\n" :: "r"(tmem), "l"(sdesc));
    asm volatile("tcgen05.shift.cta_group::1.down [%0];\n" :: "r"(tmem));
  }
  asm volatile("tcgen05.st.sync.aligned.32x32b.x1.b32 [%0], {%1};\n" :: "r"(tmem), "r"(v));
  asm volatile("tcgen05.wait::st.sync.aligned;\n");
  out[threadIdx.x] = v;
}
