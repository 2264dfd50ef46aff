"""What each task baseline is called where a person or a model reads it: one table for the prompt and the
home screen, keyed by the catalogue's baseline names so a new one cannot be left unnamed."""

from __future__ import annotations

from typing import NamedTuple

from workbench.tasks.models import BaselineName


class BaselineTitle(NamedTuple):
    short: str  # a pane's line
    long: str  # a sentence of the model's prompt


BASELINE_TITLES: dict[BaselineName, BaselineTitle] = {
    "cublas": BaselineTitle("cuBLAS (torch.matmul)", "cuBLAS through torch.matmul"),
    "cudnn_sdpa": BaselineTitle("cuDNN SDPA", "cuDNN scaled-dot-product attention"),
    "cudnn_sdpa_backward": BaselineTitle(
        "cuDNN SDPA backward", "cuDNN scaled-dot-product attention backward"
    ),
    "torch_scaled_mm_blockwise": BaselineTitle(
        "cuBLAS block-scaled FP8 (torch scaled_mm)",
        "cuBLAS's block-scaled FP8 GEMM through torch's scaled_mm (1x128 and 128x128 scales)",
    ),
    "cudnn_sdpa_fp8": BaselineTitle(
        "cuDNN sdpa_fp8", "cuDNN's FP8 scaled-dot-product attention (sdpa_fp8 graph)"
    ),
    "flashinfer_paged_decode": BaselineTitle(
        "FlashInfer paged decode", "FlashInfer's BatchDecodeWithPagedKVCacheWrapper"
    ),
    "flashinfer_paged_prefill": BaselineTitle(
        "FlashInfer paged prefill", "FlashInfer's BatchPrefillWithPagedKVCacheWrapper, causal"
    ),
    "flashinfer_ragged_prefill": BaselineTitle(
        "FlashInfer ragged prefill", "FlashInfer's BatchPrefillWithRaggedKVCacheWrapper, causal"
    ),
    "fla_gated_delta_rule": BaselineTitle(
        "flash-linear-attention gated delta rule",
        "flash-linear-attention's fused recurrent gated delta rule (Triton)",
    ),
}
