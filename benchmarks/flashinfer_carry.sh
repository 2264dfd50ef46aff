#!/usr/bin/env bash
# Builds, on this CPU host, what FlashInfer's baselines (the GQA tasks' and attention forward's second) need on
# a bare Hopper host that cannot fetch anything: .fi/flashinfer_site.tar.xz (ignored by git), about 15 MB,
# to carry there beside .whl.
#
# Why not the wheel: flashinfer-python 0.7.4 is 101 MB (715 MB installed: kernel sources, CUTLASS, CCCL),
# more than one device call can carry, and its kernels are compiled on first use (minutes of nvcc there).
# So the modules those baselines load are compiled here for sm_90a with this host's nvcc and shipped as
# FlashInfer's own ahead-of-time modules (flashinfer/data/aot/NAME/NAME.so, which it loads before trying to
# compile), with the Python package less its kernel sources beside them.
#
# The modules are the ones FlashInfer's BatchDecodeWithPagedKVCacheWrapper (CUDA cores), and
# BatchPrefillWithPagedKVCacheWrapper / BatchPrefillWithRaggedKVCacheWrapper (FA3 on Hopper) load for
# the catalogue's GQA tasks (head dim 128), and the FA3 single-sequence prefill attention forward's second
# baseline calls at every head dim it serves (workbench/evaluate/gpu/flashinfer_baseline.py HEAD_DIMS: 64,
# 128, 256): bf16 in and out, int32 indices, no RoPE, window or soft cap.
# On the host: tar -xJf .fi/flashinfer_site.tar.xz -C /tmp/fisite; PYTHONPATH=/tmp/site:/tmp/fisite:$PWD;
# FLASHINFER_CUDA_ARCH_LIST=9.0a FLASHINFER_DISABLE_JIT=1 (a module missing from the carry then fails
# at once instead of compiling without its headers), then
# `python3 -m workbench.evaluate.gpu.flashinfer_baseline --warm-batch` checks each against its task (and
# `--warm`, the single prefill against torch SDPA).
# Needs: nvcc 13 at /usr/local/cuda, a C compiler, ninja, and the project's .venv; about 10 minutes on two cores (9 min 58 s, 2026-12-06).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
grep -qxF '/.fi/' "$root/.git/info/exclude" 2>/dev/null || echo '/.fi/' >> "$root/.git/info/exclude"
py=${PYTHON:-$root/.venv/bin/python}  # the project's environment: torch and TVM-FFI
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps -d "$work/wheels" flashinfer-python==0.7.4 nvidia-ml-py==13.615.71 \
  einops==0.8.2 tabulate==0.10.0 nvidia-curand==10.4.5.25
python3 -m pip install -q --no-deps --no-compile --target "$work/site" "$work"/wheels/{flashinfer,nvidia_ml,einops,tabulate}*.whl
(cd "$work" && python3 -m zipfile -e wheels/nvidia_curand-*.whl curand)
# FlashInfer links -lcuda; this host has no driver, so a stub with the driver's soname stands in (the
# modules do not call the driver directly, so the link keeps no reference to it).
mkdir -p "$work/stubs"
echo > "$work/stubs/empty.c"
cc -shared -fPIC -Wl,-soname,libcuda.so.1 -o "$work/stubs/libcuda.so" "$work/stubs/empty.c"
# The modules' generated sources and objects go under $work, never into the user's own FlashInfer cache.
export FLASHINFER_CUDA_ARCH_LIST=9.0a FLASHINFER_WORKSPACE_BASE="$work/ws" CUDA_HOME=/usr/local/cuda \
  LIBRARY_PATH="$work/stubs" CPATH="$work/curand/nvidia/cu13/include" MAX_JOBS="$(nproc)"
PYTHONPATH="$work/site" "$py" - "$work/site/flashinfer/data/aot" <<'PY'
import shutil
import sys
import time
from pathlib import Path

import torch
from flashinfer.jit.attention.modules import gen_batch_decode_module, gen_batch_prefill_module

from workbench.evaluate.gpu.flashinfer_baseline import HEAD_DIMS, prefill_spec

bf16, aot = torch.bfloat16, Path(sys.argv[1])
# The arguments FlashInfer 0.7.4's wrappers pass for the GQA tasks (decode.py's and prefill.py's plan; the
# wrappers choose them, so they are spelled out here), and the single prefill the baseline itself asks for.
specs = (
    gen_batch_decode_module(bf16, bf16, bf16, torch.int32, 128, 128, 0, False, False),
    gen_batch_prefill_module("fa3", bf16, bf16, bf16, torch.int32, 128, 128, 0, False, False, False, False),
    *(prefill_spec(head_dim) for head_dim in HEAD_DIMS),
)
for spec in specs:
    started = time.perf_counter()
    spec.build()
    (aot / spec.name).mkdir(parents=True, exist_ok=True)
    shutil.copy2(spec.get_library_path(), aot / spec.name / f"{spec.name}.so")
    print(f"{spec.name}: built in {time.perf_counter() - started:.0f} s")
PY
# Keep the Python package, the templates its module specs read, and the modules; drop kernel sources.
data="$work/site/flashinfer/data"
mkdir -p "$work/csrc"
find "$data/csrc" -maxdepth 1 -type f \( -name 'batch_*' -o -name 'single_prefill*' -o -name '*.jinja' -o -name '*.h' -o -name '*.cuh' \) \
  -exec cp {} "$work/csrc/" \;
rm -rf "$data/csrc" "$data/cutlass" "$data/cccl" "$data/spdlog" "$data/include"
mv "$work/csrc" "$data/csrc"
find "$work/site/flashinfer" -path "$data" -prune -o -type f \
  ! \( -name '*.py' -o -name '*.pyi' -o -name py.typed -o -name '*.json' -o -name '*.txt' \) -print0 | xargs -0 rm -f
find "$work/site" -name __pycache__ -prune -exec rm -rf {} +
mkdir -p "$root/.fi"
tar -C "$work/site" -cf - . | xz -T0 -6 > "$root/.fi/flashinfer_site.tar.xz"
ls -l "$root/.fi/flashinfer_site.tar.xz"
