"""nvcc's report read into the build stage: ptxas -v's resources per kernel (registers, spills, stack,
shared and constant memory) and the compiler's warnings, those that matter to a Hopper kernel named by
kind (setmaxnreg ignored, wgmma serialised, warpgroup waits injected).
"""

from __future__ import annotations

import re

from workbench.evaluate.result import CompilerWarning, KernelResources

_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)'")
_PROPERTIES = re.compile(r"ptxas info\s*: Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers(.*)")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[(\d+)\]")
# ptxas prints its performance advisories at info level with a code: `ptxas info : (C7508) ...`.
_PTXAS_CODED = re.compile(r"^ptxas (?:info|warning)\s*: \((C\d{4})\)\s*(.*)$")
_PTXAS_WARNING = re.compile(r"^ptxas\b.*?\bwarning\s*:\s*(.*)$")
_FRONTEND_WARNING = re.compile(r"^\S+\(\d+\): warning #?([\w-]*):?\s*(.*)$")
_FUNCTION_IN_WARNING = re.compile(r"function '([^']+)'")

# Matched on the text, which ptxas 13.0 words the same way for every reason it gives ('setmaxnreg' ignored
# ...; wgmma.mma_async instructions are serialized due to ...; warpgroup.wait/arrive is injected ...).
# Codes seen in tests/test_build.py: C7508 (setmaxnreg), C7514 (wgmma serialised), C7517/C7519 (injected).
_WARNING_KINDS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"setmaxnreg.*ignored", re.IGNORECASE), "setmaxnreg_ignored"),
    (re.compile(r"wgmma.*serialized", re.IGNORECASE), "wgmma_serialized"),
    (re.compile(r"warpgroup\.(wait|arrive) is injected", re.IGNORECASE), "wgmma_sync_injected"),
)


def _warning(code: str | None, text: str) -> CompilerWarning:
    kind = next((k for pattern, k in _WARNING_KINDS if pattern.search(text)), "other")
    function = _FUNCTION_IN_WARNING.search(text)
    return CompilerWarning(code=code, kind=kind, kernel=function.group(1) if function else None, text=text)


def parse_ptxas(output: str) -> tuple[list[KernelResources], list[CompilerWarning]]:
    """ptxas -v's per-kernel resources and the compiler's warnings, from nvcc's combined output.

    Only entry functions (kernels) get resources; device functions' properties are skipped.
    """
    by_kernel: dict[str, KernelResources] = {}
    current: KernelResources | None = None
    warnings: list[CompilerWarning] = []
    for raw in output.splitlines():
        line = raw.strip()
        if match := _ENTRY.search(line):
            current = by_kernel.setdefault(match.group(1), KernelResources(kernel=match.group(1)))
        elif match := _PROPERTIES.search(line):
            current = by_kernel.get(match.group(1))
        elif (match := _FRAME.search(line)) and current is not None:
            current.stack_frame_bytes, current.spill_stores_bytes, current.spill_loads_bytes = map(
                int, match.groups()
            )
        elif (match := _USED.search(line)) and current is not None:
            current.registers = int(match.group(1))
            rest = match.group(2)
            if smem := _SMEM.search(rest):
                current.shared_bytes = int(smem.group(1))
            current.constant_bytes = sum(int(size) for size, bank in _CMEM.findall(rest) if bank == "0")
        elif match := _PTXAS_CODED.match(line):
            warnings.append(_warning(match.group(1), match.group(2).strip()))
        elif match := _PTXAS_WARNING.match(line):
            warnings.append(_warning(None, match.group(1).strip()))
        elif match := _FRONTEND_WARNING.match(line):
            warnings.append(_warning(match.group(1) or None, line))
    return list(by_kernel.values()), warnings


def warning_summary(warnings: list[CompilerWarning]) -> str:
    """`; ptxas: wgmma_serialized (C7514), setmaxnreg_ignored (C7508)` for the warnings that matter."""
    seen: dict[str, set[str]] = {}
    for warning in warnings:
        if warning.kind != "other":
            seen.setdefault(warning.kind, set()).add(warning.code or "?")
    if not seen:
        return ""
    return "; ptxas: " + ", ".join(f"{kind} ({'/'.join(sorted(codes))})" for kind, codes in seen.items())
