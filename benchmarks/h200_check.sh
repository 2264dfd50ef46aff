#!/usr/bin/env bash
# One call on a Hopper host checks everything GPU-side in one go, each step with its own time limit:
#   1. the knowledge pack's standalone GPU programs (GEMM tile, RS/MN-major path, warp-specialisation pattern);
#   2. the GPU tests of the evaluator (fault corpus through one worker, headline GEMM, SIMT control);
#   3. the five headline reference kernels through `ptxwb eval --executor local` (all five tiers).
# Run from the checkout root with the GPU wheels on PYTHONPATH; writes logs under $OUT.
# `--references-only` runs step 3 alone.
set -u
out=${OUT:-/tmp/h200_check}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PTXWB_CACHE=/tmp/ptxwb-cache
# No console script on a bare host: the CLI through python (a command, so `timeout` can run it).
ptxwb=(python3 -c 'from workbench.cli.main import main; main()')
refs=(
  "references/gemm/04_ws_persistent.cu gemm_n7168_k5120"
  "references/attention/mha_fwd_d128.cu mha_with_lse_d128"
  "references/attention/mha_fwd_d128_causal.cu mha_with_lse_d128_causal"
  "references/attention/mha_bwd_d128.cu mha_bwd_d128"
  "references/attention/mha_bwd_d128_causal.cu mha_bwd_d128_causal"
)
{ echo "# h200_check: $(date -u +%FT%TZ), git ${PTXWB_GIT_SHA:-$(git rev-parse --short HEAD 2>/dev/null || echo "?")}, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"; } | tee "$out/summary.log"
# Warm the build cache for the references in the background while the GPU runs the other steps.
for ref in "${refs[@]}"; do
  read -r file task <<<"$ref"
  "${ptxwb[@]}" eval "$file" --task "$task" --executor static --json >/dev/null 2>&1 &
done
if [[ "${1:-}" == "--references-only" ]]; then wait; skip_early=1; else skip_early=0; fi
if (( ! skip_early )); then
echo "== pack programs" | tee -a "$out/summary.log"
mkdir -p /tmp/pack_out; OUT=/tmp/pack_out timeout 150 bash tests/gpu/data/run_pack_programs.sh >"$out/pack_programs.log" 2>&1
echo "pack programs exit $?" | tee -a "$out/summary.log"
grep -E '^(==|PASS|FAIL)' "$out/pack_programs.log" | tee -a "$out/summary.log"
echo "== evaluator GPU tests" | tee -a "$out/summary.log"
timeout 260 python3 -m pytest -m gpu -n 0 -v -s -p no:cacheprovider tests/gpu/test_gpu_eval.py >"$out/gpu_tests.log" 2>&1
echo "gpu tests exit $?" | tee -a "$out/summary.log"
grep -E 'PASSED|FAILED|ERROR|passed|failed' "$out/gpu_tests.log" | tail -25 | tee -a "$out/summary.log"
fi
wait
echo "== references through ptxwb eval --executor local" | tee -a "$out/summary.log"
for ref in "${refs[@]}"; do
  read -r file task <<<"$ref"
  timeout 120 "${ptxwb[@]}" eval "$file" --task "$task" --executor local --json >"$out/ref_$task.json" 2>>"$out/summary.log"
  python3 - "$out/ref_$task.json" "$task" <<'PY' | tee -a "$out/summary.log"
import json, sys
try:
    r = json.load(open(sys.argv[1]))
except Exception as exc:  # a step that died leaves no JSON: say so and go on
    print(f"{sys.argv[2]}: no result ({exc})"); sys.exit()
s = r["stages"]; t = s["timing"]; d = s["dynamic"]
spill = max((k["spill_stores_bytes"] + k["spill_loads_bytes"] for k in s["build"]["resources"]), default=0)
print(f"{r['task']}: {r['status']} | " + " ".join(f"{n}={s[n]['status']}" for n in ("build", "static", "correctness", "dynamic", "timing"))
      + f" | share={d.get('tensor_share')} spills={spill} speedup={t.get('speedup')} | {t.get('message', '')}")
PY
done
