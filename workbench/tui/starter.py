"""Where a person's first kernel starts: the task's own `run` signature, ready to fill in."""

from __future__ import annotations

import re

from workbench.evaluate.build.abi import expected_parameters
from workbench.tasks.models import Definition

# The POD type a 0-d spec's dtype arrives as.
_SCALARS = {"int32": "int32_t", "int64": "int64_t", "float32": "float", "float64": "double", "bool": "bool"}


def _identifier(name: str) -> str:
    cleaned = re.sub(r"\W", "_", name)
    return cleaned if re.match(r"[A-Za-z_]", cleaned) else f"t_{cleaned}"


def starter_kernel(definition: Definition) -> str:
    """A `.cu` file that builds and takes exactly what the task passes; the kernel itself is the person's."""
    specs = {**definition.inputs, **definition.outputs}
    parameters = []
    for name, kind, _ in expected_parameters(definition):
        type_ = (
            "tvm::ffi::TensorView" if kind == "tensor" else _SCALARS.get(str(specs[name].dtype), "int64_t")
        )
        parameters.append(f"{type_} {_identifier(name)}")
    tensors = [_identifier(n) for n, kind, _ in expected_parameters(definition) if kind == "tensor"]
    device = f"{tensors[0]}.device()" if tensors else "DLDevice{kDLCUDA, 0}"
    shapes = "\n".join(
        f"// {label}: " + ", ".join(f"{n}[{', '.join(s.shape)}] {s.dtype}" for n, s in group.items())
        for label, group in (("inputs", definition.inputs), ("outputs", definition.outputs))
    )
    signature = ",\n         ".join(parameters)
    return f"""// {definition.name}
{shapes}
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/container/tensor.h>
#include <tvm/ffi/error.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/function.h>

namespace {{

__global__ void kernel() {{
  // Your kernel: the architecture's own instructions (inline PTX) do the work.
}}

// Inputs in definition order, then the outputs (allocated by the evaluator): write the outputs.
void run({signature}) {{
  const DLDevice device = {device};
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(device.device_type, device.device_id));
  kernel<<<1, 128, 0, stream>>>();
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "launch failed: " << cudaGetErrorString(err);
}}

}}  // namespace

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
"""
