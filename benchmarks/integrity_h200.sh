#!/usr/bin/env bash
# The hardened verdict on a Hopper host, one step per argument, each with its own time limit, logs under $OUT:
#   tests       the GPU tests (fault corpus, hostile corpus, honest kernels through every tier; the context settings)
#   honest      the honest corpus (CUDA and Triton) through every tier, into honest.log (with each kernel's profiled/timed ratio;
#               210 s for the 22 CUDA kernels on the H200 at 2bfb18e; the Triton ones build in the run: give it a call of its own)
#   files       the GPU tests of $TEST_FILES (e.g. tests/gpu/test_gpu_triton.py), into gpu_files.log
#   costs       benchmarks/integrity_costs.py (references: stage costs, speedups against 2026-11-29)
#   pm          benchmarks/pm_sampling_probe.py (can tensor work be counted in the timed process?)
#   signature   benchmarks/tensor_signature_probe.py (which sampled counters tell wgmma from mma.sync, per call)
#   sessions    the shipped sessions recorded again (scripted models under references/scripts/)
#   asynccopy   benchmarks/async_copy_bytes_probe.py --verdict (the bytes ordinary loads and the copy engine
#               fetched, on every memory-bound task's references, the honest libcu++ decode and the decoy;
#               each verdict: the decoy's must be `decoy`)
#   flashinfer  FlashInfer's GQA baselines from the carried .fi/flashinfer_site.tar.xz (benchmarks/flashinfer_carry.sh):
#               each batch wrapper checked against its task (--warm-batch) and the single prefill at each head dim
#               against torch SDPA (--warm), then the GQA references and the attention forward reference timed against them
#   pmtiming    benchmarks/pm_sampling_timing_probe.py (does sampling a timed call's counters move its time?)
#   warm        benchmarks/ncu_warm_overlap_probe.py (can ncu's one-time set-up run beside a PM-sampled
#               timing loop or another profile, so that it leaves the dynamic tier? WARM_OPEN=1: beside the
#               sampling's set-up instead)
#   latency     benchmarks/latency.py, every mode, 3 rounds (one-shot, back to back, author; own worker and
#               service), into latency.{log,json}
#   sweep       benchmarks/latency.py --sweep 24 through the service (cold builds), into sweep.{log,json}
#   references  the call counters' and the references suite's GPU tests, into references.log
#   lock        the GPU lock's GPU tests (a fresh worker waits for another's candidate), into lock.log
#   bwdcosts    4 evaluations of attention backward's reference through the warm service: the round-3
#               checks' and counters' seconds, into bwd_costs.log
# Run from the checkout root after installing the GPU wheels (see shared/tools/device-wheels).
set -u
known="tests honest files costs sessions signature asynccopy warm flashinfer pmtiming pm latency sweep references lock bwdcosts"
for step in "$@"; do  # every step named is known before any runs
  [[ " $known " == *" $step "* ]] || { echo "integrity_h200.sh: unknown step '$step' (steps: $known)" >&2; exit 2; }
done
out=${OUT:-/tmp/integrity_h200}
mkdir -p "$out"
export PYTHONUNBUFFERED=1 PTXWB_CACHE=/tmp/ptxwb-cache
# No console script on a bare host: the CLI through python (a command, so `timeout` can run it).
ptxwb=(python3 -c 'from workbench.cli.main import main; main()')
echo "# integrity_h200: $(date -u +%FT%TZ), git ${PTXWB_GIT_SHA:-?}, $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)" | tee -a "$out/summary.log"
for step in "$@"; do
  case "$step" in
    tests)
      timeout "${TESTS_S:-420}" python3 -m pytest -m gpu -n 0 -v -s -p no:cacheprovider tests/gpu/test_gpu_eval.py tests/gpu/test_context_settings_gpu.py ${PYTEST_K:+-k "$PYTEST_K"} >"$out/gpu_tests.log" 2>&1
      echo "gpu tests exit $?" | tee -a "$out/summary.log"
      grep -E 'PASSED|FAILED|ERROR|passed|failed' "$out/gpu_tests.log" | tail -45 | tee -a "$out/summary.log" ;;
    honest)
      timeout "${HONEST_S:-420}" python3 -m pytest -m gpu -n 0 -v -s -p no:cacheprovider tests/gpu/test_honest_gpu.py >"$out/honest.log" 2>&1
      echo "honest corpus exit $?" | tee -a "$out/summary.log"
      grep -E 'profiled/timed|FAILED|ERROR|passed|failed' "$out/honest.log" | cut -c1-400 | tail -25 | tee -a "$out/summary.log" ;;
    files)
      timeout "${FILES_S:-300}" python3 -m pytest -m gpu -n 0 -v -s -p no:cacheprovider $TEST_FILES >"$out/gpu_files.log" 2>&1
      echo "gpu tests of $TEST_FILES exit $?" | tee -a "$out/summary.log"
      grep -E 'PASSED|FAILED|ERROR|passed|failed' "$out/gpu_files.log" | tail -30 | tee -a "$out/summary.log" ;;
    costs)
      timeout "${COSTS_S:-400}" python3 benchmarks/integrity_costs.py "$out/integrity_costs.json" ${COSTS_ONLY:+--only "$COSTS_ONLY"} ${COSTS_PAUSE:+--pause "$COSTS_PAUSE"} >"$out/integrity_costs.log" 2>&1
      echo "costs exit $?" | tee -a "$out/summary.log"
      tail -20 "$out/integrity_costs.log" | tee -a "$out/summary.log" ;;
    sessions)
      timeout 150 "${ptxwb[@]}" run --task gemm_n7168_k5120 --model scripted:references/scripts/gemm_ladder.json \
        --turns 4 --target-speedup 5 --executor local --headless --out "$out/gemm_n7168_k5120_ladder_h200.jsonl" >"$out/sessions.log" 2>&1
      echo "ladder exit $?" | tee -a "$out/summary.log"
      timeout 120 "${ptxwb[@]}" run --task mha_with_lse_d128_causal --model scripted:references/scripts/mha_causal_fix.json \
        --turns 2 --target-speedup 5 --executor local --headless --out "$out/mha_with_lse_d128_causal_fix_h200.jsonl" >>"$out/sessions.log" 2>&1
      echo "attention exit $?" | tee -a "$out/summary.log"
      tail -12 "$out/sessions.log" | tee -a "$out/summary.log" ;;
    signature)
      timeout "${SIGNATURE_S:-150}" python3 benchmarks/tensor_signature_probe.py >"$out/tensor_signature.log" 2>&1
      echo "signature probe exit $?" | tee -a "$out/summary.log"
      tail -60 "$out/tensor_signature.log" | tee -a "$out/summary.log" ;;
    asynccopy)
      timeout "${ASYNCCOPY_S:-420}" python3 benchmarks/async_copy_bytes_probe.py --verdict --out "$out/async_copy_bytes.json" >"$out/async_copy_bytes.log" 2>&1
      echo "async copy probe exit $?" | tee -a "$out/summary.log"
      tail -60 "$out/async_copy_bytes.log" | tee -a "$out/summary.log" ;;
    warm)
      timeout "${WARM_S:-300}" python3 benchmarks/ncu_warm_overlap_probe.py --repeats "${WARM_REPEATS:-1}" ${WARM_OPEN:+--open} >"$out/ncu_warm_overlap.log" 2>&1
      echo "warm probe exit $?" | tee -a "$out/summary.log"
      cut -c1-600 "$out/ncu_warm_overlap.log" | tail -14 | tee -a "$out/summary.log" ;;
    flashinfer)
      mkdir -p /tmp/fisite && tar -xJf .fi/flashinfer_site.tar.xz -C /tmp/fisite
      (export PYTHONPATH=/tmp/fisite:$PYTHONPATH FLASHINFER_CUDA_ARCH_LIST=9.0a FLASHINFER_DISABLE_JIT=1
       timeout 90 python3 -m workbench.evaluate.gpu.flashinfer_baseline --warm-batch >"$out/flashinfer.log" 2>&1
       echo "flashinfer warm-batch exit $?" | tee -a "$out/summary.log"
       timeout 90 python3 -m workbench.evaluate.gpu.flashinfer_baseline --warm --head-dim 64 --head-dim 128 \
         --head-dim 256 >>"$out/flashinfer.log" 2>&1
       echo "flashinfer warm (single prefill, D=64/128/256) exit $?" | tee -a "$out/summary.log"
       timeout "${FLASHINFER_S:-150}" python3 -m pytest -m gpu -n 0 -v -s -p no:cacheprovider tests/gpu/test_references_suite.py \
         -k "paged_decode_reference or prefill_references" >>"$out/flashinfer.log" 2>&1
       echo "gqa references exit $?" | tee -a "$out/summary.log"
       timeout 90 python3 -c 'from workbench.cli.main import main; main()' eval references/attention/mha_fwd_d128.cu \
         --task mha_with_lse_d128 --executor local --json >"$out/attention_forward.json" 2>>"$out/flashinfer.log"
       echo "attention forward exit $?" | tee -a "$out/summary.log"
       python3 -c 'import json,sys; print("timing:", json.load(open(sys.argv[1]))["stages"]["timing"]["message"])' \
         "$out/attention_forward.json" >>"$out/flashinfer.log" 2>&1)
      grep -E 'ready in|failed:|timing:|PASSED|FAILED|passed|failed' "$out/flashinfer.log" | cut -c1-500 | tail -14 | tee -a "$out/summary.log" ;;
    pmtiming)
      timeout "${PMTIMING_S:-90}" python3 benchmarks/pm_sampling_timing_probe.py >"$out/pm_sampling_timing.log" 2>&1
      echo "pm timing probe exit $?" | tee -a "$out/summary.log"
      tail -10 "$out/pm_sampling_timing.log" | tee -a "$out/summary.log" ;;
    pm)
      timeout 120 python3 benchmarks/pm_sampling_probe.py >"$out/pm_sampling.log" 2>&1
      echo "pm probe exit $?" | tee -a "$out/summary.log"
      tail -40 "$out/pm_sampling.log" | tee -a "$out/summary.log" ;;
    latency)
      timeout "${LATENCY_S:-500}" python3 benchmarks/latency.py "$out/latency.json" --rounds 3 --only one_shot back_to_back author >"$out/latency.log" 2>&1
      echo "latency exit $?" | tee -a "$out/summary.log"
      grep figure "$out/latency.log" | cut -c1-200 | tee -a "$out/summary.log"
      "${ptxwb[@]}" worker stop >/dev/null 2>&1 ;;
    sweep)
      timeout "${SWEEP_S:-300}" python3 benchmarks/latency.py "$out/sweep.json" --sweep 24 --only sweep --service-only >"$out/sweep.log" 2>&1
      echo "sweep exit $?" | tee -a "$out/summary.log"
      grep figure "$out/sweep.log" | cut -c1-300 | tee -a "$out/summary.log"
      "${ptxwb[@]}" worker stop >/dev/null 2>&1 ;;
    references)
      timeout "${REFERENCES_S:-420}" python3 -m pytest -m gpu -n 0 -v -s -p no:cacheprovider tests/gpu/test_call_counters_gpu.py \
        tests/gpu/test_references_suite.py >"$out/references.log" 2>&1
      echo "references exit $?" | tee -a "$out/summary.log"
      grep -E 'FAILED|ERROR|passed|failed' "$out/references.log" | tail -10 | cut -c1-250 | tee -a "$out/summary.log" ;;
    lock)
      timeout "${LOCK_S:-150}" python3 -m pytest -m gpu -n 0 -v -p no:cacheprovider tests/gpu/test_gpu_lock_gpu.py >"$out/lock.log" 2>&1
      echo "lock exit $?" | tee -a "$out/summary.log"
      grep -E 'opened the GPU|FAILED|ERROR|passed|failed' "$out/lock.log" | tail -5 | cut -c1-600 | tee -a "$out/summary.log" ;;
    bwdcosts)
      for n in 1 2 3 4; do
        timeout 90 "${ptxwb[@]}" eval references/attention/mha_bwd_d128.cu --task mha_bwd_d128 --executor local --json \
          >"$out/bwd_$n.json" 2>>"$out/bwd_costs.log"
        python3 - "$out/bwd_$n.json" "$n" <<'PY' | tee -a "$out/bwd_costs.log"
import json, sys
try:
    stages = json.load(open(sys.argv[1]))["stages"]
except Exception as exc:  # a step that died leaves no JSON: say so and go on
    print(f"{sys.argv[2]}: no result ({exc})"); sys.exit()
timing = stages["timing"]
parts = {k: round(v, 3) for k, v in (timing.get("parts_s") or {}).items() if k.startswith(("checks", "counters", "timed_rounds", "profiler"))}
print(sys.argv[2], timing["status"], stages["dynamic"]["status"], "speedup", round(timing.get("speedup") or 0, 4), parts)
PY
      done
      "${ptxwb[@]}" worker stop >/dev/null 2>&1
      tail -4 "$out/bwd_costs.log" | cut -c1-400 | tee -a "$out/summary.log" ;;
  esac
done
