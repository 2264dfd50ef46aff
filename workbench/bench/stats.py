"""Small statistics: Wilson intervals, the unbiased pass@k, geometric means, a seeded bootstrap."""

from __future__ import annotations

import math
import random
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


def quantile(ordered: Sequence[float], q: float) -> float:
    """Linear interpolation between order statistics (numpy's default), of sorted values."""
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def bootstrap_geomean(
    values: Sequence[float], seed: int, resamples: int = 2000, level: float = 0.95
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of the geometric mean; the same seed gives the same interval."""
    if not values:
        return None
    rng = random.Random(seed)
    logs = [math.log(v) for v in values]
    n = len(logs)
    means = sorted(math.exp(sum(rng.choices(logs, k=n)) / n) for _ in range(resamples))
    tail = (1 - level) / 2
    return (quantile(means, tail), quantile(means, 1 - tail))
