"""Small statistics: Wilson intervals, the unbiased pass@k, geometric means, a seeded bootstrap."""

from __future__ import annotations

import math
from collections.abc import Sequence

Z95 = 1.959963984540054  # the two-sided 95 % normal quantile


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a rate; None without trials."""
    if n <= 0:
        return None
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z / denominator * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return (max(0.0, centre - half), min(1.0, centre + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """The unbiased estimator 1 - C(n-c, k) / C(n, k) of n samples, c of them correct (Chen et al. 2021)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def geomean(values: Sequence[float]) -> float | None:
    if not values:
        return None
    if any(v <= 0 for v in values):
        raise ValueError("a geometric mean needs positive values")
    return math.exp(sum(math.log(v) for v in values) / len(values))


def bootstrap_geomean(
    values: Sequence[float], seed: int, resamples: int = 2000, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the geometric mean; the same seed gives the same interval."""
    if not values:
        return None
    import numpy as np  # loaded on first use: the CLI starts without it

    logs = np.log(np.asarray(values, dtype=float))
    picks = np.random.default_rng(seed).integers(0, len(logs), size=(resamples, len(logs)))
    means = np.exp(logs[picks].mean(axis=1))
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return (float(low), float(high))
