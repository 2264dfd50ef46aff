"""Throughput of a sweep against the number of GPUs, on paper, from measured per-evaluation costs.

No machine with several GPUs has been lent yet, so this is an analysis, not a measurement. Each
evaluation holds its GPU for the GPU tiers plus the worker's per-candidate process start-up it cannot
hide; its build runs on CPU cores beside the GPU (one nvcc per core); the driver spends a fixed time per
turn (model call bookkeeping, session writing, the store). With G GPUs and C cores a sweep of E
evaluations is bounded by the slowest of the three pools:

    time = max(E * gpu_s / G, E * build_s / C, E * driver_s)

Measured inputs (one H200, 2026-12-01; benchmarks/results/2026-12-01_integrity_costs_h200.log and
2026-12-01_bench_sweep.txt): the headline GEMM's GPU tiers 2.4 s and 7.1 s beyond its build when
evaluated back to back (the upper figure includes starting the next candidate's processes); its cold
nvcc build 6.1 s on one core; the sweep driver's 0.04 s a turn. Cores per GPU: 16 (the lent kinds have
16 CPU cores per H200).

`python benchmarks/ray_scaling_model.py`
"""

from __future__ import annotations

GPU_S = {"tiers only (2.4 s)": 2.4, "back to back (7.1 s)": 7.1}
BUILD_S = 6.1
DRIVER_S = 0.04
CORES_PER_GPU = 16
EVALUATIONS = 1000


def sweep_hours(gpus: int, gpu_s: float, cache_hit: float = 0.0) -> float:
    cores = CORES_PER_GPU * gpus
    builds = EVALUATIONS * (1 - cache_hit)
    seconds = max(EVALUATIONS * gpu_s / gpus, builds * BUILD_S / cores, EVALUATIONS * DRIVER_S)
    return seconds / 3600


def main() -> None:
    print(
        f"{EVALUATIONS} evaluations of the headline GEMM; builds {BUILD_S} s on one core, {CORES_PER_GPU} cores a GPU"
    )
    for label, gpu_s in GPU_S.items():
        print(f"\nGPU time per evaluation: {label}")
        print("GPUs  evaluations/hour  per GPU  efficiency vs 1 GPU  bound by")
        single = EVALUATIONS / sweep_hours(1, gpu_s)
        for gpus in (1, 2, 4, 8, 16, 32):
            hours = sweep_hours(gpus, gpu_s)
            rate = EVALUATIONS / hours
            bound = max(
                ("GPU", EVALUATIONS * gpu_s / gpus),
                ("build", EVALUATIONS * BUILD_S / (CORES_PER_GPU * gpus)),
                ("driver", EVALUATIONS * DRIVER_S),
                key=lambda item: item[1],
            )[0]
            print(f"{gpus:>4}  {rate:>16.0f}  {rate / gpus:>7.0f}  {rate / gpus / single:>19.2f}  {bound}")
    print(
        "\nThe driver's 0.04 s a turn caps one driver at 90,000 evaluations an hour: past about "
        f"{int(GPU_S['tiers only (2.4 s)'] / DRIVER_S)} GPUs (tiers only) one driver, not the GPUs, sets the pace."
    )


if __name__ == "__main__":
    main()
