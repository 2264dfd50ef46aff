"""Every symbol TVM-FFI (the pinned apache-tvm-ffi) can bring into a kernel's library, classified.

A kernel in the TVM-FFI ABI includes its headers (the umbrella `<tvm/ffi/tvm_ffi.h>` or narrower ones)
and so imports whatever their inline code calls in `libtvm_ffi.so`. Each C function the public headers
declare, and each C++ function the library exports under `tvm::ffi`, has a rule here: allowed, or
denied with its reason, what to write instead, and whether a refusal is `banned` (what a cheater does:
reach functions Python or a library registered, replace what the harness uses) or `unsupported` (an
honest construct the workbench does not run). `tests/test_tvm_ffi_symbols.py` fails when the pinned
package declares or exports a symbol this table does not classify, so a version bump cannot silently
refuse honest kernels.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum


class Refusal(StrEnum):
    """Which status a denied construct gets: the two words a person reads very differently."""

    banned = "banned"
    unsupported = "unsupported"


@dataclass(frozen=True)
class SymbolRule:
    allowed: bool
    why: str
    refusal: Refusal | None = None  # None exactly when allowed
    instead: str = ""


def _allow(why: str) -> SymbolRule:
    return SymbolRule(True, why)


def _ban(why: str, instead: str) -> SymbolRule:
    return SymbolRule(False, why, Refusal.banned, instead)


def _unsupported(why: str, instead: str) -> SymbolRule:
    return SymbolRule(False, why, Refusal.unsupported, instead)


_EXPORT_RUN = "export `run` with TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, …); the workbench calls nothing else"
_REFLECTION = (
    "walks objects through the type registry's reflection, whose entries may be functions Python registered"
)

# The C API (c_api.h, extra/c_env_api.h): every TVM_FFI_DLL function of the pinned headers.
C_API: dict[str, SymbolRule] = {
    # Objects, values and errors: what the headers' inline code calls for tensors, shapes, strings,
    # arrays, optionals, dtypes and TVM_FFI_ICHECK/THROW.
    "TVMFFIAnyViewToOwnedAny": _allow(
        "converts an argument view to an owned value (typed function arguments)"
    ),
    "TVMFFIBacktrace": _allow("the backtrace TVM_FFI_THROW/ICHECK attach to an error"),
    "TVMFFIBigIntFromByteArray": _allow("builds a value from the kernel's own bytes"),
    "TVMFFIBigIntGetContentByteArray": _allow("reads a value the kernel holds"),
    "TVMFFIBytesFromByteArray": _allow("builds a Bytes object from the kernel's own bytes"),
    "TVMFFIStringFromByteArray": _allow("builds a String object from the kernel's own bytes"),
    "TVMFFIDataTypeFromString": _allow('parses a dtype name (DLDataType from "bfloat16")'),
    "TVMFFIDataTypeToString": _allow("prints a dtype in an error message"),
    "TVMFFIErrorCreate": _allow("creates the error TVM_FFI_THROW raises"),
    "TVMFFIErrorCreateWithCauseAndExtraContext": _allow("creates a chained error"),
    "TVMFFIErrorMoveFromRaised": _allow("takes a raised error back (error propagation in typed calls)"),
    "TVMFFIErrorSetRaised": _allow("raises an error to the caller (TVM_FFI_THROW, ICHECK)"),
    "TVMFFIErrorSetRaisedFromCStr": _allow("raises an error from a message"),
    "TVMFFIErrorSetRaisedFromCStrParts": _allow("raises an error from message parts"),
    "TVMFFIObjectIncRef": _allow("reference counting of objects the kernel holds"),
    "TVMFFIObjectDecRef": _allow("reference counting of objects the kernel holds"),
    "TVMFFIGetTypeInfo": _allow("type checks of object references (IsInstance, casts)"),
    "TVMFFITypeKeyToIndex": _allow("looks up the type index of a type key (static type checks)"),
    "TVMFFITypeGetOrAllocIndex": _allow(
        "gives an object type defined in a header (Array, Map, Shape, AccessPath…) its runtime type index"
    ),
    "TVMFFIGetVersion": _allow("reads the library's version"),
    "TVMFFIHandleInitOnce": _allow("one-time initialisation of a header's function-local static"),
    "TVMFFIHandleDeinitOnce": _allow("the matching release of a one-time initialisation"),
    "TVMFFIGetCustomAllocator": _allow(
        "object allocation in the headers (make_object) reads which allocator to use"
    ),
    "TVMFFIFunctionCreate": _allow(
        "wraps the kernel's own C++ callable as a function object; creating one reaches nothing"
    ),
    # Tensors and the environment the evaluator sets up.
    "TVMFFITensorFromDLPack": _allow("wraps a DLPack tensor"),
    "TVMFFITensorFromDLPackVersioned": _allow("wraps a DLPack tensor"),
    "TVMFFITensorToDLPack": _allow("exports a tensor as DLPack"),
    "TVMFFITensorToDLPackVersioned": _allow("exports a tensor as DLPack"),
    "TVMFFITensorCreateUnsafeView": _allow("a view of a tensor the kernel holds"),
    "TVMFFIEnvGetStream": _allow(
        "the stream the evaluator hands out for the tensor's device: the ABI's launch stream"
    ),
    "TVMFFIEnvTensorAlloc": _allow("a workspace from the evaluator's allocator (Tensor::FromEnvAlloc)"),
    "TVMFFIEnvGetDLPackManagedTensorAllocator": _allow("reads the allocator TVMFFIEnvTensorAlloc uses"),
    "TVMFFIEnvCheckSignals": _allow("lets Ctrl-C interrupt a long host loop"),
    # Doors to code the kernel did not bring, or replacements of what the harness uses.
    "TVMFFIFunctionGetGlobal": _ban(
        "looks up a function in the global registry, where Python, torch and libraries register theirs",
        "call your own kernels; nothing registered by others may do the work",
    ),
    "TVMFFIEnvModLookupFromImports": _ban(
        "looks up a symbol in another loaded module",
        "call your own kernels and the CUDA runtime/driver directly",
    ),
    "TVMFFIEnvRegisterCAPI": _ban(
        "replaces an entry point of the C API the harness calls",
        "remove it: the environment is the evaluator's",
    ),
    "TVMFFIEnvSetStream": _ban(
        "changes the stream the evaluator times on",
        "launch on the stream TVMFFIEnvGetStream returns (or your own, joined to it)",
    ),
    "TVMFFIEnvSetDLPackManagedTensorAllocator": _ban(
        "replaces the tensor allocator the harness uses",
        "allocate workspaces with TVMFFIEnvTensorAlloc or cudaMallocAsync",
    ),
    "TVMFFISetCustomAllocator": _ban(
        "replaces the object allocator the harness uses", "remove it: the environment is the evaluator's"
    ),
    # Registration and reflection: honest elsewhere, not how a kernel is called here.
    "TVMFFIFunctionSetGlobal": _unsupported("registers a function in the process-wide registry", _EXPORT_RUN),
    "TVMFFIFunctionSetGlobalFromMethodInfo": _unsupported(
        "registers a function in the process-wide registry", _EXPORT_RUN
    ),
    "TVMFFIFunctionCall": _unsupported(
        "calls a function object; the only ones a kernel's process can reach besides its own are the harness's "
        "and Python's",
        "call your C++ functions directly",
    ),
    "TVMFFIEnvModRegisterContextSymbol": _unsupported("registers a symbol for module loading", _EXPORT_RUN),
    "TVMFFIEnvModRegisterSystemLibSymbol": _unsupported("registers a system-library symbol", _EXPORT_RUN),
    "TVMFFITypeRegisterField": _unsupported("defines reflection for an object type", _EXPORT_RUN),
    "TVMFFITypeRegisterMethod": _unsupported("defines reflection for an object type", _EXPORT_RUN),
    "TVMFFITypeRegisterMetadata": _unsupported("defines reflection for an object type", _EXPORT_RUN),
    "TVMFFITypeRegisterAttr": _unsupported("sets a type attribute the harness may read", _EXPORT_RUN),
    "TVMFFIGetTypeAttrColumn": _unsupported(
        "reads type attributes, which hold functions Python registered",
        "use the TensorView/Shape/DataType accessors",
    ),
    "TVMFFIObjectCreateOpaque": _unsupported(
        "wraps a foreign handle (a Python object) as a TVM-FFI object",
        "pass tensors and scalars through `run`",
    ),
    "TVMFFITestingDummyTarget": _unsupported("is a symbol of TVM-FFI's own tests", "remove it"),
}

# The C++ functions libtvm_ffi.so exports under tvm::ffi (TVM_FFI_EXTRA_CXX_API and the like), by
# qualified-name prefix.
CXX_API: dict[str, SymbolRule] = {
    "tvm::ffi::Module": _ban(
        "loads shared libraries from files and looks functions up in them by name",
        "bring your kernels in your own .cu file",
    ),
    "tvm::ffi::ModuleObj": _ban(
        "looks functions up in loaded modules by name", "bring your kernels in your own .cu file"
    ),
    "tvm::ffi::json": _allow("JSON text to and from values: pure data"),
    "tvm::ffi::ReprPrint": _unsupported(_REFLECTION, "print shapes and dtypes with `<<` or printf"),
    "tvm::ffi::DeepCopy": _unsupported(_REFLECTION, "copy the values you need yourself"),
    "tvm::ffi::RecursiveEq": _unsupported(_REFLECTION, "compare the values you need yourself"),
    "tvm::ffi::RecursiveLt": _unsupported(_REFLECTION, "compare the values you need yourself"),
    "tvm::ffi::RecursiveLe": _unsupported(_REFLECTION, "compare the values you need yourself"),
    "tvm::ffi::RecursiveGt": _unsupported(_REFLECTION, "compare the values you need yourself"),
    "tvm::ffi::RecursiveGe": _unsupported(_REFLECTION, "compare the values you need yourself"),
    "tvm::ffi::RecursiveHash": _unsupported(_REFLECTION, "hash the values you need yourself"),
    "tvm::ffi::StructuralHash": _unsupported(_REFLECTION, "hash the values you need yourself"),
    "tvm::ffi::StructuralEqual": _unsupported(_REFLECTION, "compare the values you need yourself"),
    "tvm::ffi::VisitErrorContext": _unsupported(_REFLECTION, "report errors with TVM_FFI_THROW"),
    "tvm::ffi::ToJSONGraph": _unsupported(_REFLECTION, "serialise the values you need yourself"),
    "tvm::ffi::FromJSONGraph": _unsupported(_REFLECTION, "parse the values you need yourself"),
}

_UNCLASSIFIED = _unsupported(
    "is a TVM-FFI symbol this version's link policy has not classified",
    "use the tensor, shape, dtype and error APIs",
)

_NAME_PART = re.compile(r"(\d+)")


def qualified_name(mangled: str) -> str | None:
    """`tvm::ffi::ModuleObj::GetFunction` from `_ZN3tvm3ffi9ModuleObj11GetFunctionE…` (also guard
    variables and function-local statics, `_ZGVZN…`, `_ZZN…`); None for names outside `_ZN…`."""
    body = re.sub(r"^_Z(GV)?Z?", "", mangled.split("@", 1)[0])
    if not body.startswith("N"):
        return None
    i, parts = 1, []
    while i < len(body) and body[i] in "KVr":  # cv-qualifiers of a member function
        i += 1
    while i < len(body):
        length = _NAME_PART.match(body, i)
        if length is None:
            break
        start = length.end()
        parts.append(body[start : start + int(length.group(1))])
        i = start + int(length.group(1))
    return "::".join(parts) if parts else None


def rule_for(symbol: str) -> SymbolRule | None:
    """The rule of a TVM-FFI symbol (C name or mangled C++ name); None for a symbol outside TVM-FFI."""
    name = symbol.split("@", 1)[0]
    if name.startswith("TVMFFI"):
        return C_API.get(name, _UNCLASSIFIED)
    qualified = qualified_name(name)
    if qualified is None or not qualified.startswith("tvm::ffi::"):
        return None
    best = max((prefix for prefix in CXX_API if _under(qualified, prefix)), key=len, default=None)
    return CXX_API[best] if best else _UNCLASSIFIED


def _under(qualified: str, prefix: str) -> bool:
    return qualified == prefix or qualified.startswith(prefix + "::")
