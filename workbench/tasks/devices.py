"""Published peak rates of the GPUs the workbench reports against (datasheet figures, dense).

These are leads for the speed-of-light time; the GPU tier measures the real ceilings on the device
it runs on and flags a result faster than those.
"""

from __future__ import annotations

from pydantic import BaseModel


class DevicePeaks(BaseModel, frozen=True):
    name: str
    bf16_dense_tflops: float
    fp8_dense_tflops: float
    hbm_tbps: float
    sms: int
    l2_mib: int
    source: str


DEVICES: dict[str, DevicePeaks] = {
    "H100": DevicePeaks(
        name="H100 SXM5 80GB",
        bf16_dense_tflops=989.4,
        fp8_dense_tflops=1978.9,
        hbm_tbps=3.35,
        sms=132,
        l2_mib=50,
        source="NVIDIA H100 Tensor Core GPU datasheet (SXM5): 1,979 / 3,958 TFLOP/s FP8 dense / sparse",
    ),
    "H200": DevicePeaks(
        name="H200 SXM 141GB",
        bf16_dense_tflops=989.4,
        fp8_dense_tflops=1978.9,
        hbm_tbps=4.8,
        sms=132,
        l2_mib=60,
        source="NVIDIA H200 Tensor Core GPU datasheet (SXM): 1,979 / 3,958 TFLOP/s FP8 dense / sparse",
    ),
    "B200": DevicePeaks(
        name="B200 180GB",
        bf16_dense_tflops=2250.0,
        fp8_dense_tflops=4500.0,
        hbm_tbps=8.0,
        sms=148,
        l2_mib=126,
        source="NVIDIA Blackwell (HGX B200) datasheet, dense BF16; FP8 4.5 PFLOP/s dense (9 sparse)",
    ),
}


def speed_of_light_ms(
    flops: float, min_bytes: float, device: DevicePeaks, compute_dtype: str = "bfloat16"
) -> float:
    """The larger of compute time at the tensor-core peak for `compute_dtype` (bfloat16 or
    float8_e4m3) and memory time at peak bandwidth, in milliseconds."""
    peak = device.fp8_dense_tflops if compute_dtype == "float8_e4m3" else device.bf16_dense_tflops
    compute_ms = flops / (peak * 1e12) * 1e3
    memory_ms = min_bytes / (device.hbm_tbps * 1e12) * 1e3
    return max(compute_ms, memory_ms)
