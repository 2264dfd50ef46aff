"""The exchange on a CPU device: a tensor the runner exports is copied by the judge exactly, and an export
that names anything else, or reaches past its file, is refused."""

from __future__ import annotations

import pytest
import torch

from workbench.evaluate.gpu.exchange import ExchangeError, Exporter, Importer


def test_an_exported_tensor_reaches_the_judge_exactly() -> None:
    exporter = Exporter("cpu")
    try:
        tensor, export = exporter.empty([3, 5], torch.float32)
        tensor.copy_(torch.arange(15, dtype=torch.float32).view(3, 5))
        copy = Importer("cpu").copy(export, [3, 5], torch.float32)
        assert torch.equal(copy, tensor)
        tensor.zero_()  # the judge's copy is its own
        assert copy.sum() == 105
    finally:
        exporter.close()


@pytest.mark.parametrize(
    "forged",
    [
        {"kind": "cpu", "name": "../../etc/passwd", "offset": 0},
        {"kind": "cpu", "name": "not-ours", "offset": 0},
        {"kind": "cuda", "handle": "00", "offset": 0},
        {"kind": "cpu", "offset": -1},
    ],
)
def test_a_forged_export_is_refused(forged: dict) -> None:
    with pytest.raises(ExchangeError):
        Importer("cpu").copy(forged, [2], torch.float32)


def test_an_export_reaching_past_its_file_is_refused() -> None:
    exporter = Exporter("cpu")
    try:
        _, export = exporter.empty([4], torch.float32)
        with pytest.raises(ExchangeError, match="reaches"):
            Importer("cpu").copy(export, [400], torch.float32)
    finally:
        exporter.close()
