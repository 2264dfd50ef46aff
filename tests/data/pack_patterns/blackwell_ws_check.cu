// Compiles the kernel of knowledge_packs/blackwell/patterns/warp_specialization.md (extracted by the
// test into pattern_kernel.cuh) for sm_100a with the Blackwell pack's headers.
#include <cuda_bf16.h>

#include "ptxwb_barrier.cuh"
#include "ptxwb_tma.cuh"
#include "ptxwb_tcgen05.cuh"

using namespace ptxwb;

#include "pattern_kernel.cuh"
