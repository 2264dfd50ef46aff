"""FlashInfer-Trace Definition and Workload models, plus the workbench's own facts about a task.

The Definition and Workload models accept the ecosystem's JSON unchanged (unknown keys are kept, so a
file round-trips). Workbench-only facts (headline flag, baseline, tolerances, seeds) live in the
sidecar `tasks/workbench.json`, described by `TaskFacts`.
"""

from __future__ import annotations

from types import CodeType
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, field_validator, model_validator

DType = Literal[
    "float32",
    "float16",
    "bfloat16",
    "float8_e4m3",
    "float8_e4m3fn",
    "float8_e5m2",
    "float4_e2m1",
    "int64",
    "int32",
    "int16",
    "int8",
    "bool",
]

DTYPE_BYTES: dict[str, float] = {
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "float8_e4m3": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float4_e2m1": 0.5,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "bool": 1,
}


def _is_expression(text: str) -> bool:
    try:
        compile(text, "<expression>", "eval", dont_inherit=True)
    except SyntaxError:
        return False
    return True


def _defines_function(module: CodeType, name: str) -> bool:
    """Whether a module's code binds `name` at top level to a function of that name."""
    bodies = (c for c in module.co_consts if isinstance(c, CodeType))
    return name in module.co_names and any(body.co_name == name for body in bodies)


class _Open(BaseModel):
    # Keys this version does not know are kept, so external files load and re-save unchanged.
    model_config = ConfigDict(extra="allow")


class AxisConst(_Open):
    type: Literal["const"]
    value: PositiveInt
    description: str | None = None


class AxisVar(_Open):
    type: Literal["var"]
    parent: str | None = None
    description: str | None = None


Axis = Annotated[AxisConst | AxisVar, Field(discriminator="type")]


class TensorSpec(_Open):
    shape: list[str]
    dtype: DType
    description: str | None = None


class Definition(_Open):
    name: str = Field(min_length=1)
    op_type: str = Field(min_length=1)
    axes: dict[str, Axis]
    inputs: dict[str, TensorSpec]
    outputs: dict[str, TensorSpec]
    reference: str
    description: str | None = None
    tags: list[str] | None = None
    constraints: list[str] | None = None

    @field_validator("axes", "inputs", "outputs")
    @classmethod
    def _not_empty(cls, value: dict) -> dict:
        if not value:
            raise ValueError("must not be empty")
        return value

    @field_validator("reference")
    @classmethod
    def _reference_defines_run(cls, source: str) -> str:
        # Compiled to bytecode, never to ast objects: CPython 3.11's ast conversion is not thread-safe
        # and definitions load in the TUI's worker threads.
        try:
            code = compile(source, "<reference>", "exec", dont_inherit=True)
        except SyntaxError as exc:
            raise ValueError(f"is not valid Python: {exc.msg} (line {exc.lineno})") from exc
        if not _defines_function(code, "run"):
            raise ValueError("must define a top-level function `run`")
        return source

    @field_validator("constraints")
    @classmethod
    def _constraints_are_expressions(cls, items: list[str] | None) -> list[str] | None:
        for item in items or []:
            if not _is_expression(item):
                raise ValueError(f"{item!r} is not a Python expression")
        return items

    @model_validator(mode="after")
    def _shapes_name_axes(self) -> Definition:
        for group, specs in (("inputs", self.inputs), ("outputs", self.outputs)):
            for tensor, spec in specs.items():
                for axis in spec.shape:
                    if axis not in self.axes:
                        raise ValueError(f"{group}.{tensor}.shape names unknown axis {axis!r}")
        return self

    def to_trace_json(self) -> dict:
        """The definition as FlashInfer-Trace JSON: the keys it was given, nothing added."""
        return self.model_dump(mode="json", exclude_unset=True)

    def var_axes(self) -> list[str]:
        return [name for name, axis in self.axes.items() if isinstance(axis, AxisVar)]

    def const_axes(self) -> dict[str, int]:
        return {name: axis.value for name, axis in self.axes.items() if isinstance(axis, AxisConst)}

    def axis_values(self, var_values: dict[str, int]) -> dict[str, int]:
        missing = [name for name in self.var_axes() if name not in var_values]
        if missing:
            raise ValueError(f"workload gives no value for variable axis {', '.join(missing)}")
        return {**self.const_axes(), **{k: v for k, v in var_values.items() if k in self.axes}}

    def shapes(self, var_values: dict[str, int], which: Literal["inputs", "outputs"]) -> dict[str, list[int]]:
        values = self.axis_values(var_values)
        specs = self.inputs if which == "inputs" else self.outputs
        return {name: [values[a] for a in spec.shape] for name, spec in specs.items()}


class RandomInput(_Open):
    type: Literal["random"]


class ScalarInput(_Open):
    type: Literal["scalar"]
    value: int | float | bool


class SafetensorsInput(_Open):
    type: Literal["safetensors"]
    path: str
    tensor_key: str


InputSpec = Annotated[RandomInput | ScalarInput | SafetensorsInput, Field(discriminator="type")]


class Workload(_Open):
    uuid: str = Field(min_length=1)
    axes: dict[str, Annotated[int, Field(ge=0)]]
    inputs: dict[str, InputSpec]


class WorkloadRow(_Open):
    """One line of a FlashInfer-Trace workloads JSONL file (a Trace with only the workload set)."""

    definition: str
    workload: Workload
    solution: object | None = None
    evaluation: object | None = None


Family = Literal[
    "gemm",
    "attention_forward",
    "attention_backward",
    "fp8_gemm",
    "fp8_attention_forward",
    "gqa_paged_decode",
    "gqa_paged_prefill",
    "gqa_ragged_prefill",
    "gdn_decode",
    "gdn_mtp",
]
BaselineName = Literal[
    "cublas",
    "cudnn_sdpa",
    "cudnn_sdpa_backward",
    "torch_scaled_mm_blockwise",
    "cudnn_sdpa_fp8",
    "flashinfer_paged_decode",
    "flashinfer_paged_prefill",
    "flashinfer_ragged_prefill",
    "fla_gated_delta_rule",
]


class OutputTolerance(BaseModel):
    """One output's tolerances in place of its task's."""

    model_config = ConfigDict(extra="forbid")

    atol: float = Field(gt=0)
    rtol: float = Field(gt=0)


class TaskFacts(BaseModel):
    """What the workbench knows about a task beyond the Definition (the sidecar's entry)."""

    model_config = ConfigDict(extra="forbid")

    family: Family
    causal: bool = False
    headline: bool = False
    headline_workload: str | None = None
    baseline: BaselineName
    derived_inputs: list[str] = Field(
        default_factory=list,
        description="inputs computed by the forward reference from the random ones (O and LSE of a backward task)",
    )
    atol: float = 1e-2
    rtol: float = 1e-2
    matched_ratio: float = Field(
        default=1.0,
        gt=0,
        le=1,
        description="share of elements that must be within atol/rtol (PTXBench's required_matched_ratio)",
    )
    outlier_bound: float | None = Field(
        default=None,
        gt=1,
        description="where matched_ratio < 1: how many times atol/rtol an element outside them may reach "
        "(absent: any finite value)",
    )
    output_tolerances: dict[str, OutputTolerance] = Field(
        default_factory=dict,
        description="output -> its atol/rtol in place of the task's (an output whose honest ways of "
        "computing differ by more than the task's tolerance: FP8 attention's e4m3 O)",
    )
    seeds: dict[str, int] = Field(default_factory=dict, description="workload uuid -> base seed")
    required: dict[Literal["hopper", "blackwell"], str] = Field(
        default_factory=dict,
        description="target -> the instruction family the task must prove (absent: the target's default)",
    )
    compute_dtype: Literal["bfloat16", "float8_e4m3"] = Field(
        default="bfloat16", description="the tensor-core rate the speed of light counts FLOPs against"
    )
    flops: str | None = Field(
        default=None, description="Python expression over the axes (absent: the family's own convention)"
    )
    min_bytes: str | None = Field(
        default=None,
        description="Python expression over the axes (absent: every input read, every output written once)",
    )
    rationale: dict[str, str] = Field(
        default_factory=dict, description="why: the required family, the tolerances, the baseline, the inputs"
    )

    @field_validator("flops", "min_bytes")
    @classmethod
    def _expression(cls, text: str | None) -> str | None:
        if text is not None and not _is_expression(text):
            raise ValueError(f"{text!r} is not a Python expression")
        return text

    def tolerance_text(self) -> str:
        """The correctness rule in one line, as a person or a model reads it."""
        text = f"atol {self.atol}, rtol {self.rtol}"
        if self.matched_ratio < 1:
            text += f", met by at least {self.matched_ratio * 100:g} % of each output's elements"
            if self.outlier_bound is not None:
                text += f" (the rest within {self.outlier_bound:g} times them)"
        for name, own in self.output_tolerances.items():
            text += f"; output {name}: atol {own.atol}, rtol {own.rtol}"
        return text

    def output_tolerances_json(self) -> dict[str, dict[str, float]]:
        """The outputs' own tolerances as plain JSON (the worker's spec, `ptxwb tasks --json`)."""
        return {name: tolerance.model_dump() for name, tolerance in self.output_tolerances.items()}


class Sidecar(BaseModel):
    model_config = ConfigDict(extra="forbid")

    schema_version: Literal[1]
    tasks: dict[str, TaskFacts]
