"""Shared test fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
# The fixtures the project did not write lie beside the checkout (CI lays shared/ there too).
SHARED_FIXTURES = ROOT.parent / "shared" / "fixtures"


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    if not SHARED_FIXTURES.is_dir():
        pytest.skip(f"shared fixtures not found at {SHARED_FIXTURES}")
    return SHARED_FIXTURES
