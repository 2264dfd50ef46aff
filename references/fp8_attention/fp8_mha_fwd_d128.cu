// FP8 attention forward, head dim 128, plain or causal (tasks fp8_mha_with_lse_d128, fp8_mha_with_lse_d128_causal).
//
// Q, K, V [B, H, L, 128] e4m3 with per-tensor fp32 descales (device tensors [1,1,1,1], read in the
// kernel). S = Q K^T * dq * dk / sqrt(128); O = softmax(S) V * dv written as e4m3 (saturating at
// +-448, no output scale); LSE = logsumexp of S (natural log), fp32 [B, H, L]. Causal: key j is
// visible to query i iff j <= i. L must be a multiple of 128 (every workload is).
//
// Structure (one CTA per 128 query rows of one (batch, head), 384 threads, ~193 KB of shared memory):
//  * warpgroup 0 (producer, setmaxnreg 24): thread 0 loads Q once and K, V blocks of 128 keys by TMA
//    (128-byte swizzle, two stages, one block ahead); then all 128 threads prepare each block in
//    shared memory: K is split in place into "small" and "big" entries (below), and V [keys x d] is
//    transposed into V^T [d x keys] (K-major, the only layout FP8 wgmma reads a B operand in) by a
//    4x4-byte transpose per thread whose lane mapping makes every 4-byte read and write bank-conflict
//    free. fence.proxy.async, then an mbarrier arrival per thread publishes the block.
//  * warpgroups 1 and 2 (consumers, setmaxnreg 240) own 64 query rows each. Per block of 128 keys:
//    S = Q Ks^T and Q Kb^T with wgmma m64n128k32 e4m3 (SASS QGMMA) into two fresh fp32 fragments,
//    added in fp32; online softmax with exp2; P written to shared memory as three e4m3 tiles (below);
//    O_block = P V with the same instruction, added into the fp32 O registers once per block.
//    Keys sit in P's and V^T's rows in a permuted order (key 8j + 2c + e at position 32c + 2j + e),
//    the same in both operands, so a thread writes its 32 probabilities of a row as two 16-byte stores.
//  * causal: a CTA visits its diagonal block (the only masked one) first, then the blocks below it;
//    CTAs are launched heaviest first.
//
// Numerics. This kernel was written against the tasks' first rule: e4m3 O within atol = rtol = 1e-2 of
// the fp32 reference on 99.5 % of the elements (they now judge O at atol 0.1, rtol 0.125, LSE at 1e-2; see
// references/README.md), so its precision is more than the tasks ask. With their inputs (N(0,1) plus rare N(0,100) spikes) most rows are dominated by a few
// keys and ~89 % of |O| exceed 0.125, where one e4m3 step (>= 0.0156) is already outside, so O must be
// right to ~1e-4 relative before its last rounding. An ad-hoc CPU model of this kernel (not in the
// repository; QGMMA as in references/fp8_gemm/qgmma_precision_model.py: each k32 group's products
// aligned to the largest and kept to 14 bits) against the task's own fp32 reference gave these choices:
//  * S: one Q K^T chain put ~2 % of O outside: a spike product (|K| up to 448) wipes the low bits of
//    the other 31 products of its group and of the incoming accumulator. K is split per element into
//    Ks (|x| < 8: the N(0,1) bulk) and Kb (|x| >= 8: the spikes; Ks + Kb = K exactly), and
//    S = [Q Ks^T] + [Q Kb^T], two fresh chains added in fp32 (Q Kb^T has ~1 nonzero product per
//    group, so it is exact). Splitting Q the same way (a third chain) lowered the hardest modelled head
//    from 0.13 % to 0.04 % of O outside and left the others unchanged; not done.
//  * P: p = 2^(t - m) in (0, 1], exactly 1 at the row max (t - m is exact, ex2(0) = 1). One e4m3 P
//    (3 mantissa bits, FlashAttention-3's choice) put 2-3 % of O outside. x = 256 p is written as
//    three e4m3 terms: hi = e4m3(x), lo = e4m3(16 (x - hi)), lo2 = e4m3(16 (16 (x - hi) - lo)) (each
//    residual exact in fp32; the factors 16 keep lo and lo2 out of e4m3's subnormals), and
//    O_block = hi V + lo V / 16 + lo2 V / 256: three wgmma chains into fresh fragments, scaled and
//    added in fp32. Two terms doubled the count outside (up to 0.25 % on the hardest heads).
//  * Normalisation: the row sum l is the fp32 sum of the exact p (with three terms the quantities
//    multiplied agree with p to ~2^-12, and exact p is what LSE needs). The reference forms
//    w = exp(s - lse) with lse = max + log(sum) rounded to fp32, so in a row dominated by one key that
//    key's weight is exactly 1 whenever log(sum) is below half an ulp of the max, and O is exactly
//    v * dv; with a descale such as 434 / 448 = 31/32 (1 in 7 calls), ~12 % of those values sit
//    exactly on an e4m3 rounding tie. Plain O / l lands a hair below the tie there (0.2-0.4 % of O
//    outside), so this kernel rounds lse the same way (lse = m ln2 + log1p(l - 1) in fp32) and scales
//    O by exp(m ln2 - lse) / 256 (a power of two) before dv: a weight of exactly 1 then gives exactly
//    v * dv, one rounding, as in the reference.
//  Model result for this kernel (L = 512 .. 8192, plain and causal, several seeds and heads): at most
//  0.13 % of O outside (heads with a tie-prone descale), <= 0.06 % otherwise; LSE inside everywhere.
//  A FlashAttention-3-style kernel (one S chain, one e4m3 P, O / l) was at 1.2-3.5 %.
//  Cost: 2 S chains + 3 P V chains = 2.5x the task's tensor FLOPs (tensor share ~2.5; ~2.58 causal at
//  L = 4096 with the full diagonal block), and the softmax spends ~17 CUDA-core instructions per score.
//
// Measured on the H200 (233cdb6, under the 1e-2 rule; benchmarks/results/
// 2026-12-03_fp8_attention_reference_233cdb6_h200.log): every tier passed, plain and causal, with
// 0.001-0.002 % of O outside 1e-2 in each trial, fewer than the model's bound.
//
// -DFP8_ATTN_PLAIN=1 builds FlashAttention-3's own scheme instead, which the tasks' present rule
// allows: K is not split (one S chain), P is one e4m3 term (256 p), O is divided by the sum of the
// quantised P it multiplied and LSE takes the sum of the exact p, as the Blackwell file does. That is
// the task's tensor FLOPs once (tensor share ~1.0) and no K split in the producer. A CPU model of these
// numerics (fa3_scheme_model.py, exact products) put 99.90-99.92 % of O inside the tasks' 0.1 and every
// LSE inside 1e-2; QGMMA's own alignment is not in that model. Built and static-checked here; not yet
// run on a GPU.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <cstdint>

#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

#define ATTN_CAUSAL false  // this file is the plain variant
#ifndef FP8_ATTN_PLAIN
#define FP8_ATTN_PLAIN 0  // 0: split K, three P terms (above); 1: FlashAttention-3's scheme
#endif

namespace {

constexpr bool PLAIN = FP8_ATTN_PLAIN != 0;
constexpr int P_TERMS = PLAIN ? 1 : 3;

constexpr int D = 128;
constexpr int BM = 128;  // query rows per CTA (64 per consumer warpgroup)
constexpr int BN = 128;  // keys per block
constexpr int THREADS = 384;
constexpr uint32_t TILE = 128 * 128;       // one [128 rows x 128 bytes] e4m3 tile
constexpr uint32_t P_TILE = 64 * 128;      // one consumer's [64 rows x 128 keys] e4m3 P term
constexpr uint32_t OFF_Q = 0;
constexpr uint32_t OFF_K = OFF_Q + TILE;           // 2 stages; Ks after the in-place split
constexpr uint32_t OFF_KB = OFF_K + 2 * TILE;      // 2 stages of Kb (none in the plain scheme)
constexpr uint32_t OFF_V = OFF_KB + (PLAIN ? 0 : 2 * TILE);  // 2 stages of V as loaded [keys x d]
constexpr uint32_t OFF_VT = OFF_V + 2 * TILE;      // 2 stages of V^T [d x keys]
constexpr uint32_t OFF_P = OFF_VT + 2 * TILE;      // 2 consumers x P_TERMS terms
constexpr uint32_t OFF_BAR = OFF_P + 2 * P_TERMS * P_TILE;
constexpr int NUM_BARS = 1 + 4 * 2;
constexpr int SMEM_BYTES = OFF_BAR + NUM_BARS * 8 + 1024;  // + 1024: the base is rounded up to 1 KB
constexpr uint32_t SMALL_LIMIT = 0x50;  // e4m3 magnitude bits of 8.0: K entries with |x| >= 8 go to Kb

// ---- Hopper building blocks (PTX) -------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile(
      "{\n.reg .pred done;\n"
      "WAIT_LOOP:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_LOOP;\n}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, int c0, int c1, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
      "l"(map), "r"(c0), "r"(c1), "r"(bar)
      : "memory");
}
// Generic-proxy shared-memory writes become visible to the async proxy (wgmma operand reads).
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}
// Named barrier over `count` threads; the non-.aligned form tolerates a diverged warp.
__device__ __forceinline__ void named_sync(uint32_t id, uint32_t count) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}
__device__ __forceinline__ uint4 lds128(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void sts128(uint32_t addr, uint32_t a, uint32_t b, uint32_t c, uint32_t d) {
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(a), "r"(b), "r"(c), "r"(d) : "memory");
}
__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(addr) : "memory");
  return v;
}
__device__ __forceinline__ void sts32(uint32_t addr, uint32_t v) {
  asm volatile("st.shared.b32 [%0], %1;" ::"r"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel) {
  uint32_t d;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
  return d;
}

// K-major operand in the 128-byte swizzle: rows of 128 bytes, 8-row groups 1024 bytes apart (SBO).
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (1ull << 16) | (static_cast<uint64_t>(1024 >> 4) << 32) |
         (1ull << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
// Keeps the compiler from moving accesses of accumulator registers across wgmma issue/wait.
template <int R>
__device__ __forceinline__ void fence_regs(float (&d)[R]) {
#pragma unroll
  for (int i = 0; i < R; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64x128] (+)= A[64x32] * B[32x128], e4m3 operands from shared memory (both K-major), fp32 accumulators.
__device__ __forceinline__ void wgmma_m64n128k32_e4m3(float (&d)[64], uint64_t da, uint64_t db, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\n"
      "setp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 "
      "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, "
      "%64, %65, p, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(da), "l"(db), "r"(scale_d));
}
// One 64x128x128 product: four k32 steps along the 128-byte rows of A and B, the first with scale-d = 0.
__device__ __forceinline__ void gemm_chain(float (&d)[64], uint32_t a, uint32_t b) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) wgmma_m64n128k32_e4m3(d, smem_desc(a + 32 * kk), smem_desc(b + 32 * kk), kk);
}

__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// (lo, hi) -> two e4m3 in one 16-bit value, lo in the low byte (round to nearest even, saturating).
__device__ __forceinline__ uint16_t e4m3x2(float lo, float hi) {
  uint16_t r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return r;
}
// The two e4m3 of a 16-bit value back in fp32 (exact).
__device__ __forceinline__ void e4m3x2_to_f32(uint16_t v, float& lo, float& hi) {
  asm("{\n.reg .b32 h2;\n.reg .b16 l16, h16;\n"
      "cvt.rn.f16x2.e4m3x2 h2, %2;\n"
      "mov.b32 {l16, h16}, h2;\n"
      "cvt.f32.f16 %0, l16;\n"
      "cvt.f32.f16 %1, h16;\n}\n"
      : "=f"(lo), "=f"(hi)
      : "h"(v));
}
// Two values of P * 256 -> their three e4m3 terms (hi, 16 * residual, 256 * second residual).
struct Terms2 {
  uint16_t hi, lo, lo2;
};
__device__ __forceinline__ Terms2 split3(float a, float b) {
  Terms2 t;
  float ha, hb, la, lb;
  t.hi = e4m3x2(a, b);
  e4m3x2_to_f32(t.hi, ha, hb);
  a = (a - ha) * 16.f;
  b = (b - hb) * 16.f;
  t.lo = e4m3x2(a, b);
  e4m3x2_to_f32(t.lo, la, lb);
  t.lo2 = e4m3x2((a - la) * 16.f, (b - lb) * 16.f);
  return t;
}
__device__ __forceinline__ uint32_t pack2(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

template <bool CAUSAL>
__global__ void __launch_bounds__(THREADS, 1)
    fp8_attn_fwd(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                 const __grid_constant__ CUtensorMap map_v, const float* __restrict__ descale_q,
                 const float* __restrict__ descale_k, const float* __restrict__ descale_v, uint8_t* __restrict__ O,
                 float* __restrict__ LSE, int S) {
  extern __shared__ uint8_t smem_raw[];
  const uint32_t raw = smem_u32(smem_raw);
  const uint32_t base = raw + ((1024 - (raw & 1023)) & 1023);  // the 128-byte swizzle wants 1 KB alignment
  const uint32_t s_q = base + OFF_Q;
  const uint32_t bars = base + OFF_BAR;
  const uint32_t bar_q = bars;
  auto kv_full = [&](int st) { return bars + 8 * (1 + st); };   // TMA of K and V landed (tx)
  auto ready = [&](int st) { return bars + 8 * (3 + st); };     // Ks, Kb, V^T prepared (128 producer threads)
  auto k_empty = [&](int st) { return bars + 8 * (5 + st); };   // Ks, Kb read by both consumers (8 warps)
  auto vt_empty = [&](int st) { return bars + 8 * (7 + st); };  // V^T read by both consumers (8 warps)
  auto k_tile = [&](int st) { return base + OFF_K + st * TILE; };
  auto kb_tile = [&](int st) { return base + OFF_KB + st * TILE; };
  auto v_tile = [&](int st) { return base + OFF_V + st * TILE; };
  auto vt_tile = [&](int st) { return base + OFF_VT + st * TILE; };

  const int m_block = CAUSAL ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // heaviest causal rows first
  const int row_base = blockIdx.y * S;  // first row of this (batch, head) in the [B*H*S, D] view
  const int n_blocks = CAUSAL ? m_block + 1 : S / BN;

  if (threadIdx.x == 0) {
    mbar_init(bar_q, 1);
    for (int st = 0; st < 2; ++st) {
      mbar_init(kv_full(st), 1);
      mbar_init(ready(st), 128);
      mbar_init(k_empty(st), 8);
      mbar_init(vt_empty(st), 8);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  const int wg = threadIdx.x / 128;
  const int lane = threadIdx.x & 31;
  if (wg == 0) {
    // ---------------- producer warpgroup ----------------
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    const int ptid = threadIdx.x;
    // Block `it` is key block n_blocks - 1 - it (the diagonal one first when causal).
    auto issue = [&](int it) {
      const int st = it & 1;
      if (it >= 2) mbar_wait(k_empty(st), ((it >> 1) & 1) ^ 1);  // consumers finished S of block it - 2
      const int kv_row = row_base + (n_blocks - 1 - it) * BN;
      mbar_expect_tx(kv_full(st), 2 * TILE);
      tma_load_2d(k_tile(st), &map_k, 0, kv_row, kv_full(st));
      tma_load_2d(v_tile(st), &map_v, 0, kv_row, kv_full(st));
    };
    if (ptid == 0) {
      mbar_expect_tx(bar_q, TILE);
      tma_load_2d(s_q, &map_q, 0, row_base + m_block * BM, bar_q);
      issue(0);
      if (n_blocks > 1) issue(1);
    }
    // Transpose mapping: lane = position word u (positions 4u..4u+3 of a V^T row = keys
    // 16(u&7) + 2(u>>3) + {0, 1, 8, 9}); step t gives d-word w = (lane & 7) ^ t (d = 4w..4w+3).
    // Reads hit bank lane ^ t ^ 4(b&1), writes bank lane ^ 16((lane ^ t) & 1) ^ 4a: conflict free.
    const int t_first = 8 * (ptid >> 5);
    // Read side: key rows key0 = 16(lane&7) + 2(lane>>3) (+1, +8, +9); their row & 7 is 2(lane>>3)
    // (+1), so the 16-byte chunk of d-word w is (w>>2) ^ 2(lane>>3), XOR 1 for the odd rows.
    const uint32_t v_rows = (16 * (lane & 7) + 2 * (lane >> 3)) * 128;
    const int sw_read = 2 * (lane >> 3);
    for (int it = 0; it < n_blocks; ++it) {
      const int st = it & 1;
      const uint32_t par = (it >> 1) & 1;
      mbar_wait(kv_full(st), par);
      // K -> Ks (in place) and Kb: per byte, |x| >= 8 (magnitude bits >= 0x50) goes to Kb.
      if constexpr (!PLAIN) {
        const uint32_t k = k_tile(st) + 16 * ptid;
#pragma unroll 1
        for (int i = 0; i < 8; ++i) {
          const uint32_t addr = k + 2048 * i;
          uint4 x = lds128(addr);
          uint32_t w[4] = {x.x, x.y, x.z, x.w}, big[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const uint32_t t = ((w[j] & 0x7F7F7F7Fu) + (0x80808080u - SMALL_LIMIT * 0x01010101u)) & 0x80808080u;
            const uint32_t mask = t | (t - (t >> 7));  // 0xFF in every byte whose magnitude >= SMALL_LIMIT
            big[j] = w[j] & mask;
            w[j] &= ~mask;
          }
          sts128(addr, w[0], w[1], w[2], w[3]);
          sts128(addr + (OFF_KB - OFF_K), big[0], big[1], big[2], big[3]);  // same offset in Kb[st]
        }
      }
      // V [keys x d] -> V^T [d x keys], keys permuted (see the header) and 128-byte swizzled.
      if (it >= 2) mbar_wait(vt_empty(st), par ^ 1);  // consumers finished P V of block it - 2
      {
        const uint32_t v = v_tile(st);  // V^T[st] lies OFF_VT - OFF_V above it
#pragma unroll 1
        for (int tt = 0; tt < 8; ++tt) {
          const int w = (lane & 7) ^ (t_first + tt);
          const uint32_t chunk = ((((w >> 2) ^ sw_read) << 4) | ((w & 3) << 2));
          const uint32_t rd = v + v_rows;
          // x[b] = d-word w of key row key0 + {0, 1, 8, 9}[b].
          const uint32_t x0 = lds32(rd + chunk), x1 = lds32(rd + 128 + (chunk ^ 16));
          const uint32_t x2 = lds32(rd + 1024 + chunk), x3 = lds32(rd + 1152 + (chunk ^ 16));
          // 4x4 byte transpose: y[a] byte b = x[b] byte a.
          const uint32_t t0 = prmt(x0, x1, 0x5140), t1 = prmt(x0, x1, 0x7362);
          const uint32_t t2 = prmt(x2, x3, 0x5140), t3 = prmt(x2, x3, 0x7362);
          // Write side: V^T row d = 4w + a, row & 7 = 4(w&1) + a, position word u = lane.
          const uint32_t wr = v + (OFF_VT - OFF_V) + 512 * w + 4 * (lane & 3);
          const uint32_t g = ((lane >> 2) ^ (4 * (w & 1))) << 4;
          sts32(wr + g, prmt(t0, t2, 0x5410));
          sts32(wr + 128 + (g ^ 16), prmt(t0, t2, 0x7632));
          sts32(wr + 256 + (g ^ 32), prmt(t1, t3, 0x5410));
          sts32(wr + 384 + (g ^ 48), prmt(t1, t3, 0x7632));
        }
      }
      fence_proxy_async();
      mbar_arrive(ready(st));
      named_sync(1, 128);  // every producer thread is done reading K and V of this stage
      if (ptid == 0 && it + 2 < n_blocks) issue(it + 2);
    }
    return;
  }

  // ---------------- consumer warpgroups ----------------
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
  const int cw = wg - 1;
  const int warp = (threadIdx.x / 32) & 3;
  const int q0 = m_block * BM + cw * 64 + warp * 16 + lane / 4;  // this thread's rows: q0 and q0 + 8
  const float scale_log2 = __ldg(descale_q) * __ldg(descale_k) * (1.4426950408889634f / 11.313708498984761f);
  const uint32_t a_q = s_q + cw * (64 * 128);
  const uint32_t p_base = base + OFF_P + cw * (P_TERMS * P_TILE);
  // This thread's 16-byte chunks of its P rows (row r = 16 warp + lane/4 (+8), chunks 2c and 2c+1, swizzled).
  const int r7 = (lane >> 2) & 7;
  const uint32_t p_row = p_base + (warp * 16 + lane / 4) * 128;
  const uint32_t p_c0 = ((2 * (lane & 3)) ^ r7) << 4, p_c1 = ((2 * (lane & 3) + 1) ^ r7) << 4;

  float o[64], s[64], t[64];
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f}, corr[2];
  float lq_run[2] = {0.f, 0.f};  // plain scheme: this thread's sum of the e4m3 256 p (O's divisor)
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;

  mbar_wait(bar_q, 0);
  for (int it = 0; it < n_blocks; ++it) {
    const int st = it & 1;
    const uint32_t par = (it >> 1) & 1;
    const int kb = n_blocks - 1 - it;  // key block index
    mbar_wait(ready(st), par);

    // S = Q Ks^T + Q Kb^T: two fresh chains, added in fp32 (the plain scheme: S = Q K^T, one chain).
    fence_regs(s);
    fence_regs(t);
    wgmma_fence();
    gemm_chain(s, a_q, k_tile(st));
    if constexpr (!PLAIN) gemm_chain(t, a_q, kb_tile(st));
    wgmma_commit();
    wgmma_wait_all();
    fence_regs(s);
    fence_regs(t);
    if (lane == 0) mbar_arrive(k_empty(st));
    if constexpr (!PLAIN) {
#pragma unroll
      for (int i = 0; i < 64; ++i) s[i] += t[i];
    }

    // Online softmax (log2 units). Fragment: s[4j + 2i + e] = S[row q0 + 8i][key 8j + 2(lane%4) + e].
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float mx = m_run[i];
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float v = s[4 * j + 2 * i + e] * scale_log2;
          if (CAUSAL && it == 0 && kb * BN + 8 * j + 2 * (lane & 3) + e > q0 + 8 * i) v = -INFINITY;
          s[4 * j + 2 * i + e] = v;
          mx = fmaxf(mx, v);
        }
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
      corr[i] = ex2(m_run[i] - mx);  // 0 on the first block (m_run = -inf), 1 when the max is unchanged
      m_run[i] = mx;
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < 16; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float p = ex2(s[4 * j + 2 * i + e] - mx);  // exactly 1 at the row max
          sum += p;
          s[4 * j + 2 * i + e] = p * 256.f;
        }
      l_run[i] = l_run[i] * corr[i] + sum;
    }

    // P * 256 -> three e4m3 tiles. Row i's 32 probabilities of this thread go to positions
    // 32c .. 32c + 31 (c = lane % 4): word w (positions 32c + 4w ..) = keys j = 2w, 2w + 1, e = 0, 1,
    // i.e. s[8w + 2i], s[8w + 2i + 1], s[8w + 4 + 2i], s[8w + 5 + 2i].
    named_sync(2 + cw, 128);  // every warp's P V of the previous block has retired (it read these tiles)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const uint32_t row = p_row + i * 8 * 128;
      if constexpr (PLAIN) {  // one e4m3 term; its values summed as the MMA will multiply them
        lq_run[i] *= corr[i];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t hi[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int w = 4 * h + q;
            const uint16_t a = e4m3x2(s[8 * w + 2 * i], s[8 * w + 2 * i + 1]);
            const uint16_t b = e4m3x2(s[8 * w + 4 + 2 * i], s[8 * w + 5 + 2 * i]);
            float a0, a1, b0, b1;
            e4m3x2_to_f32(a, a0, a1);
            e4m3x2_to_f32(b, b0, b1);
            lq_run[i] += (a0 + a1) + (b0 + b1);
            hi[q] = pack2(a, b);
          }
          sts128(row + (h ? p_c1 : p_c0), hi[0], hi[1], hi[2], hi[3]);
        }
      } else {  // three e4m3 terms
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          uint32_t hi[4], lo[4], lo2[4];
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            const int w = 4 * h + q;
            const Terms2 a = split3(s[8 * w + 2 * i], s[8 * w + 2 * i + 1]);
            const Terms2 b = split3(s[8 * w + 4 + 2 * i], s[8 * w + 5 + 2 * i]);
            hi[q] = pack2(a.hi, b.hi);
            lo[q] = pack2(a.lo, b.lo);
            lo2[q] = pack2(a.lo2, b.lo2);
          }
          const uint32_t chunk = row + (h ? p_c1 : p_c0);
          sts128(chunk, hi[0], hi[1], hi[2], hi[3]);
          sts128(chunk + P_TILE, lo[0], lo[1], lo[2], lo[3]);
          sts128(chunk + 2 * P_TILE, lo2[0], lo2[1], lo2[2], lo2[3]);
        }
      }
    }
    fence_proxy_async();
    named_sync(2 + cw, 128);  // all 64 rows of P are written before the wgmma reads them

    // O = O * corr + hi V + lo V / 16 + lo2 V / 256, each term a fresh chain added in fp32 (the plain
    // scheme: O = O * corr + P V).
    const uint32_t vt = vt_tile(st);
    if constexpr (PLAIN) {
      fence_regs(t);
      wgmma_fence();
      gemm_chain(t, p_base, vt);
      wgmma_commit();
      wgmma_wait_all();
      fence_regs(t);
      if (lane == 0) mbar_arrive(vt_empty(st));
#pragma unroll
      for (int i = 0; i < 64; ++i) o[i] = fmaf(o[i], corr[(i >> 1) & 1], t[i]);
    } else {
      fence_regs(s);
      fence_regs(t);
      wgmma_fence();
      gemm_chain(t, p_base, vt);
      gemm_chain(s, p_base + P_TILE, vt);
      wgmma_commit();
      wgmma_wait_all();
      fence_regs(s);
      fence_regs(t);
#pragma unroll
      for (int i = 0; i < 64; ++i) o[i] = fmaf(o[i], corr[(i >> 1) & 1], fmaf(s[i], 0.0625f, t[i]));
      wgmma_fence();
      gemm_chain(t, p_base + 2 * P_TILE, vt);
      wgmma_commit();
      wgmma_wait_all();
      fence_regs(t);
      if (lane == 0) mbar_arrive(vt_empty(st));
#pragma unroll
      for (int i = 0; i < 64; ++i) o[i] = fmaf(t[i], 0.00390625f, o[i]);
    }
  }

  // Finish: row sums over the quad, lse = max + log(sum) in fp32 as the reference rounds it, O scaled by
  // exp(max - lse) / 256, then by dv (one rounding, as the reference's v = V * dv), e4m3 with
  // saturation; LSE in natural log.
  const float dv = __ldg(descale_v);
  float scale[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    float l = l_run[i];
    l += __shfl_xor_sync(0xffffffff, l, 1);
    l += __shfl_xor_sync(0xffffffff, l, 2);
    const float mnat = m_run[i] * 0.6931471805599453f;
    const float lse = mnat + log1pf(l - 1.f);  // l >= 1: the row max contributes exactly 1
    scale[i] = expf(mnat - lse) * 0.00390625f;  // / 256, exact: a weight of exactly 1 keeps o / 256 exact
    if constexpr (PLAIN) {  // O is the mean of V weighted by the quantised P it multiplied
      float lq = lq_run[i];
      lq += __shfl_xor_sync(0xffffffff, lq, 1);
      lq += __shfl_xor_sync(0xffffffff, lq, 2);
      scale[i] = lq > 0.f ? 1.f / lq : 0.f;
    }
    if ((lane & 3) == 0) LSE[static_cast<size_t>(row_base) + q0 + 8 * i] = lse;
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    uint8_t* dst = O + (static_cast<size_t>(row_base) + q0 + 8 * i) * D + 2 * (lane & 3);
#pragma unroll
    for (int j = 0; j < 16; ++j)
      *reinterpret_cast<uint16_t*>(dst + 8 * j) =
          e4m3x2((o[4 * j + 2 * i] * scale[i]) * dv, (o[4 * j + 2 * i + 1] * scale[i]) * dv);
  }
}

}  // namespace

// ---- host side: tensor maps through the driver entry point (no -lcuda symbol needed) ----------
static PFN_cuTensorMapEncodeTiled_v12000 encode_tiled_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    cudaError_t e = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q);
    TVM_FFI_CHECK(e == cudaSuccess && q == cudaDriverEntryPointSuccess && p != nullptr, RuntimeError)
        << "cuTensorMapEncodeTiled not available";
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// Row-major e4m3 matrix [rows, 128] as bytes, boxes of 128 rows x 128 bytes, 128-byte swizzle.
static CUtensorMap make_map_fp8(const void* ptr, uint64_t rows) {
  CUtensorMap map;
  cuuint64_t dims[2] = {static_cast<cuuint64_t>(D), rows};
  cuuint64_t strides[1] = {static_cast<cuuint64_t>(D)};
  cuuint32_t box[2] = {128, 128};
  cuuint32_t estr[2] = {1, 1};
  CUresult r = encode_tiled_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(ptr), dims, strides, box,
                                 estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TVM_FFI_CHECK(r == CUDA_SUCCESS, RuntimeError) << "cuTensorMapEncodeTiled failed: " << static_cast<int>(r);
  return map;
}

namespace {
template <bool CAUSAL>
void launch(tvm::ffi::TensorView Q, tvm::ffi::TensorView K, tvm::ffi::TensorView V, tvm::ffi::TensorView DQ,
            tvm::ffi::TensorView DK, tvm::ffi::TensorView DV, tvm::ffi::TensorView O, tvm::ffi::TensorView L) {
  const DLDataType f32{kDLFloat, 32, 1};
  for (const tvm::ffi::TensorView* x : {&Q, &K, &V, &O})
    TVM_FFI_CHECK(x->dtype().bits == 8 && x->dtype().lanes == 1, TypeError) << "Q, K, V, O must be float8_e4m3fn";
  TVM_FFI_CHECK(DQ.dtype() == f32 && DK.dtype() == f32 && DV.dtype() == f32 && L.dtype() == f32, TypeError)
      << "descales and LSE must be float32";
  TVM_FFI_CHECK(Q.ndim() == 4 && K.ndim() == 4 && V.ndim() == 4 && O.ndim() == 4 && L.ndim() == 3, ValueError)
      << "expected Q, K, V, O [B, H, L, D] and LSE [B, H, L]";
  TVM_FFI_CHECK(DQ.numel() == 1 && DK.numel() == 1 && DV.numel() == 1, ValueError) << "descales must hold one value";
  const int64_t B = Q.size(0), H = Q.size(1), S = Q.size(2);
  for (const tvm::ffi::TensorView* x : {&K, &V, &O})
    TVM_FFI_CHECK(x->size(0) == B && x->size(1) == H && x->size(2) == S && x->size(3) == D, ValueError)
        << "Q, K, V, O must share [B, H, L, 128]";
  TVM_FFI_CHECK(Q.size(3) == D, ValueError) << "head dim must be 128";
  TVM_FFI_CHECK(L.size(0) == B && L.size(1) == H && L.size(2) == S, ValueError) << "LSE must be [B, H, L]";
  TVM_FFI_CHECK(S % BM == 0, ValueError) << "L must be a multiple of 128";
  if (B * H * S == 0) return;
  const int64_t rows = B * H * S;
  const CUtensorMap mq = make_map_fp8(Q.data_ptr(), rows);
  const CUtensorMap mk = make_map_fp8(K.data_ptr(), rows);
  const CUtensorMap mv = make_map_fp8(V.data_ptr(), rows);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(kDLCUDA, Q.device().device_id));
  static const bool ready = [] {
    return cudaFuncSetAttribute(fp8_attn_fwd<CAUSAL>, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES) ==
           cudaSuccess;
  }();
  TVM_FFI_CHECK(ready, RuntimeError) << "cannot raise the shared-memory limit";
  const dim3 grid(static_cast<unsigned>(S / BM), static_cast<unsigned>(B * H));
  fp8_attn_fwd<CAUSAL><<<grid, THREADS, SMEM_BYTES, stream>>>(
      mq, mk, mv, static_cast<const float*>(DQ.data_ptr()), static_cast<const float*>(DK.data_ptr()),
      static_cast<const float*>(DV.data_ptr()), static_cast<uint8_t*>(O.data_ptr()), static_cast<float*>(L.data_ptr()),
      static_cast<int>(S));
  cudaError_t err = cudaGetLastError();
  TVM_FFI_CHECK(err == cudaSuccess, RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}
}  // namespace

void run(tvm::ffi::TensorView Q, tvm::ffi::TensorView K, tvm::ffi::TensorView V, tvm::ffi::TensorView descale_q,
         tvm::ffi::TensorView descale_k, tvm::ffi::TensorView descale_v, tvm::ffi::TensorView O,
         tvm::ffi::TensorView LSE) {
  launch<ATTN_CAUSAL>(Q, K, V, descale_q, descale_k, descale_v, O, LSE);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
