"""Wilson intervals, unbiased pass@k, geometric means and the seeded bootstrap, on hand-computed cases."""

from __future__ import annotations

import math

import pytest

from workbench.bench.stats import bootstrap_geomean, geomean, pass_at_k, wilson


def test_wilson_matches_the_hand_computed_interval() -> None:
    # p = 0.75, n = 12, z = 1.96: centre 0.6894, half-width 0.2217 (worked by hand).
    low, high = wilson(9, 12)  # type: ignore[misc]
    assert low == pytest.approx(0.4677, abs=5e-4) and high == pytest.approx(0.9111, abs=5e-4)
    # No success in 3: the interval starts at 0 and reaches z²/(n+z²)·… = 0.5615.
    assert wilson(0, 3) == (0.0, pytest.approx(0.5615, abs=5e-4))
    low, high = wilson(3, 3)  # type: ignore[misc]
    assert high == 1.0 and low == pytest.approx(1 - 0.5615, abs=5e-4)
    assert wilson(0, 0) is None


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(12, 3, 1) == pytest.approx(3 / 12)  # pass@1 is the rate
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(4, 3, 2) == 1.0  # fewer failures than k: every draw holds a success
    assert pass_at_k(10, 4, 5) == pytest.approx(1 - math.comb(6, 5) / math.comb(10, 5))
    with pytest.raises(ValueError):
        pass_at_k(3, 1, 4)


def test_geomean() -> None:
    assert geomean([1.0, 4.0]) == pytest.approx(2.0)
    assert geomean([0.5, 2.0, 1.0]) == pytest.approx(1.0)
    assert geomean([]) is None
    with pytest.raises(ValueError):
        geomean([1.0, 0.0])


def test_bootstrap_is_reproducible_and_brackets_the_estimate() -> None:
    values = [0.5, 0.9, 1.1, 2.0, 0.7]
    first = bootstrap_geomean(values, seed=7)
    assert first == bootstrap_geomean(values, seed=7)
    assert first != bootstrap_geomean(values, seed=8)
    low, high = first  # type: ignore[misc]
    estimate = geomean(values)
    assert min(values) <= low < estimate < high <= max(values)
    assert bootstrap_geomean([1.3], seed=1) == (pytest.approx(1.3), pytest.approx(1.3))
    assert bootstrap_geomean([], seed=1) is None
