"""Published peak rates of the GPUs the workbench reports against (datasheet figures, dense).

These are leads for the speed-of-light time; the GPU tier measures the real ceilings on the device
it runs on and flags a result faster than those.
"""

from __future__ import annotations

from pydantic import BaseModel


class DevicePeaks(BaseModel, frozen=True):
    name: str
    bf16_dense_tflops: float
    hbm_tbps: float
    sms: int
    l2_mib: int
    source: str


DEVICES: dict[str, DevicePeaks] = {
    "H100": DevicePeaks(
        name="H100 SXM5 80GB",
        bf16_dense_tflops=989.4,
        hbm_tbps=3.35,
        sms=132,
        l2_mib=50,
        source="NVIDIA H100 Tensor Core GPU datasheet (SXM5)",
    ),
    "H200": DevicePeaks(
        name="H200 SXM 141GB",
        bf16_dense_tflops=989.4,
        hbm_tbps=4.8,
        sms=132,
        l2_mib=60,
        source="NVIDIA H200 Tensor Core GPU datasheet (SXM)",
    ),
    "B200": DevicePeaks(
        name="B200 180GB",
        bf16_dense_tflops=2250.0,
        hbm_tbps=8.0,
        sms=148,
        l2_mib=126,
        source="NVIDIA Blackwell (HGX B200) datasheet, dense BF16",
    ),
}


def speed_of_light_ms(flops: float, min_bytes: float, device: DevicePeaks) -> float:
    """The larger of compute time at peak and memory time at peak bandwidth, in milliseconds."""
    compute_ms = flops / (device.bf16_dense_tflops * 1e12) * 1e3
    memory_ms = min_bytes / (device.hbm_tbps * 1e12) * 1e3
    return max(compute_ms, memory_ms)
