#!/usr/bin/env bash
# Builds and runs the Hopper pack's GPU checks with nothing but nvcc (no Python environment needed):
#   pack_gemm_tile       mbarrier ring, TMA loads/store with tensor maps, K-major descriptors, SS wgmma
#   pack_rs_mnmajor      SS wgmma -> accumulator to A fragments -> RS wgmma with MN-major V (exact)
#   pattern_ws_harness   the kernel of knowledge_packs/hopper/patterns/warp_specialization.md
# Run from the checkout root on a Hopper host: bash tests/gpu/data/run_pack_programs.sh
# Writes each program's output to $OUT/<name>.txt when OUT is set. Exit status 0 only if all PASS.
set -u
root="$(cd "$(dirname "$0")/../../.." && pwd)"
data="$root/tests/gpu/data"
work="$(mktemp -d)"
nvcc_bin="${NVCC:-nvcc}"
# The pattern's kernel is the first ```cuda block of its markdown file.
awk '/^```cuda$/ {inside = 1; next} /^```$/ {if (inside) exit} inside' \
  "$root/knowledge_packs/hopper/patterns/warp_specialization.md" > "$work/pattern_kernel.cuh"
status=0
for name in pack_gemm_tile pack_rs_mnmajor pattern_ws_harness; do
  echo "== $name"
  if ! "$nvcc_bin" -std=c++17 -O2 -gencode arch=compute_90a,code=sm_90a \
      -I "$root/knowledge_packs/common/headers" -I "$root/knowledge_packs/hopper/headers" -I "$work" \
      -o "$work/$name" "$data/$name.cu"; then
    echo "FAIL: build"; status=1; continue
  fi
  output="$(timeout 120 "$work/$name" 2>&1)"; code=$?
  echo "$output"
  if [ -n "${OUT:-}" ]; then printf '%s\n' "$output" > "$OUT/$name.txt"; fi
  if [ $code -ne 0 ] || [ "$(printf '%s\n' "$output" | tail -n 1)" != "PASS" ]; then status=1; fi
done
rm -rf "$work"
exit $status
