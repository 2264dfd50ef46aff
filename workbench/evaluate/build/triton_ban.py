"""Triton ban: an AST check of a candidate `kernel.py`, before any of it runs.

A Triton candidate does its work in its own `@triton.jit` kernels. The host code around them (`run`,
its helpers, module constants) may read tensor metadata, take views, allocate uninitialised scratch,
build TMA descriptors and launch; nothing else. Device code (the bodies of `@triton.jit` functions) is
Triton's language and is judged by the compiler, but the rules on names, imports and dynamic code hold
there too. Every finding names its line and rule, as the CUDA scan (`ban.py`) does.

PTXBench's Triton rules are the floor: no CUTLASS/CuTe DSL import, no `from torch import`, `import torch`
without an alias, no rebinding of torch/triton, no `@`, no dynamic import, no `getattr` on torch, no
torch call but `torch.cuda.*`, none of its library-compute method names (matmul, mm, bmm, einsum,
linear, sdpa, softmax, conv, addmm, baddbmm, addbmm) anywhere, a `run` and a `@triton.jit` kernel.
Stricter here: only allowed imports, no `getattr`/`exec`/`eval`/dunders (but `__name__` read, and an
export list `__all__` of strings), host methods from an allow-list (no `.to`, `.copy_`, `.sum`, `.item`,
...; a logger's report methods are among them, `logging.getLogger` and `warnings.warn` the one call of
each reporting module), `@torch.no_grad`/`inference_mode` only on host functions, no item or attribute
writes in host code but a TMA descriptor's `block_shape` and the items of a dict, list or set the
function made itself, only a few `torch.cuda` queries and `synchronize` (no jiterator,
graphs, streams or events), only the Triton host API that launching needs and the driver's queries, no autotune hooks (they run
host code or torch copies: `restore_value` clones) but `reset_to_zero` (a constant fill of the named
arguments while tuning, which runs once, in the runner's first, unjudged call) and a config's `pre_hook` naming a host function of
the file (checked as host code), a `launch_metadata` function of the file for profilers (checked as host
code), a host function of the file as a decorator of host code (a library's `ensure_contiguous`; never
of a kernel), `@functools.cache` only on a helper that launches nothing, no launch
option that changes the compiler (`ptx_options`, `ir_override`, `extern_libs`), no class but a
`torch.autograd.Function` of static methods (the tutorials' wrapper, called through `.apply`; only its
context is written) and a record of constant fields (`@dataclass`, `NamedTuple`), and `run` must launch
one of the file's kernels (directly, through a helper, or through an autograd Function's forward). Two
deliberate differences: a top-level `if __name__ == "__main__":` block (a self-test, with no `else`) is
not checked, since the evaluator imports the file under a module
name of its own and the block never runs; and allocation (`torch.empty`, `empty_like`,
`empty_strided`, `.new_empty`) and constant fills (`zeros`, `ones`, `full`, their `_like` and `.new_`
forms, `.zero_()`, `.fill_()`) are allowed anywhere, not only in a `triton.set_allocator` function:
backward kernels need scratch (Delta, fp32 dQ), split-K sums a zeroed workspace, and a fill reads
nothing (its kernel is the candidate's own work on a GPU; a fill of an input is caught there as a
changed input). Values made otherwise (`arange`, `rand`, `tensor`) are not allowed.

The check is static and can be outrun (a value that is a tensor cannot always be told from one that is
an int): the build's trace of `run` (`triton_trace`) records every torch operation `run` performs, and
on a GPU every kernel a call launches must be one the module compiled.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from workbench.evaluate.build.ban import BanFinding

# typing's names for annotations and casts; not its helpers that evaluate annotation strings
# (get_type_hints, ForwardRef), which would run code no check has read.
TYPING_NAMES = frozenset(
    {"Any", "Callable", "ClassVar", "Dict", "Final", "FrozenSet", "Iterable", "Iterator", "List", "Literal",
     "Mapping", "NamedTuple", "NoReturn", "Optional", "Sequence", "Set", "Tuple", "Type", "TypeVar", "Union",
     "TYPE_CHECKING", "cast", "overload"}
)  # fmt: skip
# Modules a candidate may import (`import X` or `import X as Y` for the triton ones).
ALLOWED_MODULES = frozenset(
    {
        "torch",
        "triton",
        "triton.language",
        "triton.language.extra",
        "triton.language.extra.cuda",
        "triton.language.extra.libdevice",
        "triton.language.extra.cuda.libdevice",
        "triton.tools.tensor_descriptor",
        "math",
        "typing",
        "itertools",
        "functools",
        "warnings",
        "logging",
        "dataclasses",
    }
)
# `from M import name` where M is one of these: None = any name of it.
ALLOWED_FROM: dict[str, frozenset[str] | None] = {
    "__future__": frozenset({"annotations"}),
    "math": None,
    "typing": TYPING_NAMES,
    "itertools": None,
    "functools": None,
    "triton": frozenset({"language", "jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2"}),
    "triton.language": None,
    "triton.language.extra": frozenset({"libdevice", "cuda"}),
    "triton.language.extra.cuda": frozenset({"libdevice"}),
    "triton.tools.tensor_descriptor": frozenset({"TensorDescriptor"}),
    "triton.runtime": frozenset({"driver"}),
    "warnings": frozenset({"warn"}),
    "logging": frozenset({"getLogger"}),
    "dataclasses": frozenset({"dataclass"}),
}
# From the modules that only report, the one call each: a warning, or a logger (whose report methods are
# host methods below); not their filters, handlers or configuration, which reach files and the harness's.
_REPORTING = frozenset({"warnings.warn", "logging.getLogger"})
_REPORTING_MODULES = frozenset(name.split(".")[0] for name in _REPORTING)
# Modules that are doors (loading code, other processes, memory, the interpreter's insides, another GPU
# API, torch's or Triton's internals): importing one is `banned`. Any other module off the list is an
# honest import this workbench does not run (`unsupported`: numpy, os's environment toggles, time).
_DOOR_MODULES = frozenset(
    {"ctypes", "cffi", "importlib", "imp", "pkgutil", "subprocess", "sys", "builtins", "inspect", "gc",
     "pickle", "marshal", "types", "code", "codeop", "runpy", "socket", "multiprocessing", "threading",
     "_thread", "concurrent", "signal", "mmap", "operator", "ast", "dis", "sysconfig", "site", "shutil",
     "pty", "resource", "posix", "io", "tempfile", "pathlib", "cuda", "cupy", "pycuda", "numba", "nvidia",
     "jax", "torch", "triton"}
)  # fmt: skip
_DSL_ROOTS = frozenset({"cutlass", "cute", "nvidia_cutlass_dsl"})

# torch calls that compute nothing: allocation, a constant fill (a workspace zeroed for a split-K sum or
# a tile counter: torch's fill kernel, which reads nothing; on a GPU it is the candidate's own work,
# `kernel_names.TritonOwn`) and metadata.
TORCH_CALLS = frozenset(
    {"torch.empty", "torch.empty_like", "torch.empty_strided", "torch.zeros", "torch.zeros_like", "torch.ones",
     "torch.ones_like", "torch.full", "torch.full_like", "torch.device", "torch.finfo", "torch.iinfo",
     "torch.Size", "torch.no_grad", "torch.inference_mode"}
)  # fmt: skip
# Grad modes: a context or a decorator that only turns autograd's recording off for what it wraps (the
# candidate's inputs need none), restored on the way out.
_GRAD_MODES = frozenset({"torch.no_grad", "torch.inference_mode"})
# torch.cuda queries a launch may need, and a wait for the device (a debugging habit left in, as a CUDA
# candidate's cudaDeviceSynchronize is; it only costs the candidate time); the rest of torch.cuda
# (jiterator, graphs, streams, events, memory, cudart) is not allowed.
TORCH_CUDA_CALLS = frozenset(
    {"current_device", "current_stream", "set_device", "device", "get_device_properties",
     "get_device_capability", "get_device_name", "device_count", "is_available", "synchronize"}
)  # fmt: skip
# Tensors made with values that are not one constant: each a torch kernel or a host copy.
_TORCH_MAKERS = frozenset(
    {"arange", "rand", "randn", "randint", "rand_like", "randn_like", "tensor", "as_tensor", "from_numpy", "eye",
     "linspace"}
)  # fmt: skip
TORCH_DTYPES = frozenset(
    {"bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64", "short", "int", "long",
     "float16", "half", "bfloat16", "float32", "float", "float64", "double", "float8_e4m3fn", "float8_e5m2",
     "float8_e4m3fnuz", "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2"}
)  # fmt: skip
_TORCH_TYPES = frozenset({"Tensor", "dtype", "device", "Size"})

# What host code may call on a value (a tensor, a tuple, a dict): metadata, views, allocation, and the
# containers' own methods. A view that must copy (`.reshape`, `.contiguous` of a strided tensor) is
# caught by the trace.
HOST_METHODS = frozenset(
    {"stride", "size", "numel", "nelement", "dim", "ndimension", "element_size", "is_contiguous", "data_ptr",
     "get_device", "storage_offset", "is_floating_point", "is_complex",
     "view", "view_as", "reshape", "transpose", "permute", "t", "unsqueeze", "squeeze", "expand", "expand_as",
     "as_strided", "unflatten", "flatten", "narrow", "select", "split", "chunk", "unbind", "contiguous",
     "detach", "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "zero_", "fill_",
     "append", "extend", "insert", "pop", "index", "count", "items", "keys", "values", "get", "setdefault",
     "update", "copy", "format", "join", "bit_length",
     "debug", "info", "warning", "error", "critical", "exception",
     # a wait for the current stream (`torch.cuda.current_stream().synchronize()`), as torch.cuda's own
     "synchronize"}
)  # fmt: skip
# The names PTXBench rejects as library compute wherever they are called (`tl.softmax` included).
LIBRARY_COMPUTE = frozenset(
    {"addbmm", "addmm", "baddbmm", "bmm", "conv1d", "conv2d", "conv3d", "einsum", "linear", "matmul", "mm",
     "scaled_dot_product_attention", "softmax"}
)  # fmt: skip
# The Triton host API a launch needs; `triton.language.*` is device language and always allowed.
TRITON_HOST_API = frozenset(
    {"jit", "autotune", "heuristics", "Config", "cdiv", "next_power_of_2", "set_allocator", "language", "tools"}
)  # fmt: skip
_TRITON_TOOLS = "triton.tools.tensor_descriptor.TensorDescriptor"
# The driver's queries Triton's own tutorials make (the torch device, the target, the SM count): each
# only answers, and only called.
TRITON_DRIVER_QUERIES = frozenset(
    f"triton.runtime.driver.active.{query}"
    for query in ("get_active_torch_device", "get_current_device", "get_current_target",
                  "utils.get_device_properties")
)  # fmt: skip
_JIT_OPTIONS = frozenset({"do_not_specialize", "do_not_specialize_on_alignment", "noinline", "debug"})
_AUTOTUNE_HOOKS = frozenset(
    {"restore_value", "pre_hook", "post_hook", "do_bench", "use_cuda_graph", "cache_results"}
)  # fmt: skip
# Config hooks: a pre_hook that names a host function of the file is allowed (its body is host code, checked
# as such); any other is not.
_CONFIG_HOOKS = frozenset({"pre_hook", "ir_override"})
# The one attribute host code may set: a TMA descriptor's block shape, which a config's pre_hook fits to its
# tile (on a tensor it would only add a Python attribute).
_HOST_WRITABLE = frozenset({"block_shape"})
# Launch options that only shape the kernel; the rest (ptx_options, ir_override, extern_libs, debug,
# arch, ...) change what the compiler is or does.
LAUNCH_OPTIONS = frozenset(
    {"num_warps", "num_stages", "num_ctas", "maxnreg", "enable_fp_fusion", "launch_pdl",
     "launch_cooperative_grid"}
)  # fmt: skip
_CACHING_DECORATORS = frozenset({"functools.cache", "functools.lru_cache"})
_DYNAMIC = frozenset(
    {"exec", "eval", "compile", "globals", "locals", "vars", "open", "breakpoint", "type", "memoryview",
     "importlib"}
)  # fmt: skip
_ATTRIBUTE_BY_NAME = frozenset({"getattr", "setattr", "delattr"})
# The displays whose items host code may write: a container made here holds no tensor's storage.
_CONTAINERS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)
# Classes: the wrapper Triton's tutorials put around a kernel (a torch.autograd.Function of static methods,
# called through `.apply`; its backward never runs here, and is host code like the rest) and records of
# constant fields (a @dataclass, a NamedTuple) holding tile shapes. Nothing else in a class body runs.
_AUTOGRAD_BASE = "torch.autograd.Function"
_RECORD_BASE = "typing.NamedTuple"
_RECORD_DECORATOR = "dataclasses.dataclass"
# What a method may ask of its autograd context besides setting and reading its attributes.
_CTX_METHODS = frozenset({"save_for_backward", "mark_non_differentiable", "set_materialize_grads"})
# The methods autograd calls with a context first (forward only where no setup_context takes it); only
# `.apply` calls them, so their first argument is always a context, never a tensor of the candidate's.
_CONTEXT_METHODS = frozenset({"forward", "backward", "setup_context"})
# What autograd's own helpers may add under a method's @staticmethod, and on which methods: autocast's
# (a no-op outside an autocast region, which a candidate cannot open, beyond noting it on the context)
# and backward's once-only wrapper (backward never runs here); the grad modes go on any method.
_METHOD_DECORATORS: dict[str, frozenset[str]] = {
    "torch.amp.custom_fwd": frozenset({"forward"}),
    "torch.amp.custom_bwd": frozenset({"backward"}),
    "torch.cuda.amp.custom_fwd": frozenset({"forward"}),
    "torch.cuda.amp.custom_bwd": frozenset({"backward"}),
    "torch.autograd.function.once_differentiable": frozenset({"backward"}),
}
_AUTOCAST_OPTIONS = frozenset({"device_type", "cast_inputs"})
_CLASSES = (
    "classes are only a torch.autograd.Function of @staticmethod methods and a record (@dataclass or "
    "NamedTuple) of constant fields"
)
_DUNDER = re.compile(r"^__\w+__$")


@dataclass
class _Module:
    """What the imports bound: local name -> what it stands for (`torch`, `triton.language`, ...)."""

    names: dict[str, str] = field(default_factory=dict)
    modules: set[str] = field(default_factory=set)  # the local names that stand for a module
    kernels: dict[str, ast.FunctionDef] = field(default_factory=dict)  # top-level @triton.jit functions
    functions: dict[str, ast.FunctionDef] = field(default_factory=dict)  # every top-level function
    # top-level functions under @functools.cache / lru_cache, each with that decorator
    cached: list[tuple[ast.FunctionDef, ast.AST]] = field(default_factory=list)
    # top-level torch.autograd.Function classes: name -> their static methods by name
    autograd: dict[str, dict[str, ast.FunctionDef]] = field(default_factory=dict)
    applies: dict[str, str] = field(default_factory=dict)  # top-level `name = Class.apply` -> Class

    def resolve(self, node: ast.AST) -> str | None:
        """`tl.dot` -> `triton.language.dot` for a pure attribute chain over an imported name."""
        if isinstance(node, ast.Name):
            return self.names.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.resolve(node.value)
            return f"{base}.{node.attr}" if base else None
        return None


def _parameters(arguments: ast.arguments) -> list[ast.arg]:
    """Every parameter a function or lambda names, `*args` and `**kwargs` included."""
    rest = [a for a in (arguments.vararg, arguments.kwarg) if a is not None]
    return [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, *rest]


def _scope_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of `scope`'s own body: not those of the functions, lambdas and classes inside it."""
    found: list[ast.AST] = []
    waiting = list(ast.iter_child_nodes(scope))
    while waiting:
        node = waiting.pop()
        found.append(node)
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            waiting.extend(ast.iter_child_nodes(node))
    return found


class _Checker:
    def __init__(self, source: str, tree: ast.Module) -> None:
        self.lines = source.splitlines()
        self.tree = tree
        self.module = _Module()
        self.findings: list[BanFinding] = []
        self.parents: dict[ast.AST, ast.AST] = {
            child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)
        }

    # ------------------------------------------------------------------ helpers

    def add(self, node: ast.AST, rule: str, why: str) -> None:
        line = getattr(node, "lineno", 1)
        text = self.lines[line - 1].strip() if 0 < line <= len(self.lines) else ""
        self.findings.append(BanFinding(line, rule, text, why))

    def is_jit(self, decorator: ast.AST) -> bool:
        target = decorator.func if isinstance(decorator, ast.Call) else decorator
        return self.module.resolve(target) == "triton.jit"

    def device_nodes(self) -> set[int]:
        """ids of every node inside a `@triton.jit` function's body (device code)."""
        inside: set[int] = set()
        for kernel in self.module.kernels.values():
            for statement in kernel.body:
                inside.update(id(n) for n in ast.walk(statement))
        return inside

    # ------------------------------------------------------------------ passes

    def check(self) -> list[BanFinding]:
        self.imports()
        self.top_level()
        device = self.device_nodes()
        for node in ast.walk(self.tree):
            self.node(node, id(node) in device)
        self.entry()
        self.cached_helpers()
        return sorted(self.findings, key=lambda f: f.line)

    def imports(self) -> None:
        for node in ast.walk(self.tree):
            if not isinstance(node, (ast.Import, ast.ImportFrom)):
                continue
            if self.parents.get(node) is not self.tree:
                self.add(node, "import_not_allowed", "imports belong at the top level of the file")
            if isinstance(node, ast.Import):
                for alias in node.names:
                    self.import_module(node, alias)
            else:
                self.import_from(node)

    def import_module(self, node: ast.Import, alias: ast.alias) -> None:
        name = alias.name
        if name.split(".")[0] in _DSL_ROOTS:
            self.add(node, "cutlass_dsl", "CUTLASS/CuTe DSL is not allowed")
        elif name == "torch" and alias.asname not in (None, "torch"):
            self.add(node, "torch_import", "import torch without an alias, so its use can be checked")
        elif name not in ALLOWED_MODULES:
            self.import_refused(node, name)
        elif alias.asname:
            self.bind_import(alias.asname, name)
        else:
            self.bind_import(name.split(".")[0], name.split(".")[0])

    def import_refused(self, node: ast.Import | ast.ImportFrom, name: str) -> None:
        # typing's names off the list are its evaluators of annotation strings: doors too.
        if name.split(".")[0] in _DOOR_MODULES or name.startswith((".", "typing.")):
            self.add(node, "import_not_allowed", f"{name} is not on the import allow-list")
        else:
            self.add(node, "import_unsupported", f"{name} is not on the import allow-list")

    def bind_import(self, local: str, target: str) -> None:
        self.module.names[local] = target
        # The driver is used only through the queries named above, like a module through its attributes.
        if target in ALLOWED_MODULES or target == "triton.runtime.driver":
            self.module.modules.add(local)

    def import_from(self, node: ast.ImportFrom) -> None:
        module = "." * node.level + (node.module or "")
        if module.split(".")[0] in _DSL_ROOTS:
            self.add(node, "cutlass_dsl", "CUTLASS/CuTe DSL is not allowed")
            return
        if module == "torch":
            # torch's types and dtypes (annotations, comparisons) are judged as `torch.` names; its
            # functions are used through `torch.`, so every use can be checked.
            for alias in node.names:
                if alias.name in _TORCH_TYPES or alias.name in TORCH_DTYPES:
                    self.bind_import(alias.asname or alias.name, f"torch.{alias.name}")
                else:
                    self.add(node, "torch_import", f"`from torch import {alias.name}`: use `torch.` names")
            return
        if module.startswith("torch."):
            self.add(node, "torch_import", "`from torch ... import` is not allowed: use `torch.` names")
            return
        allowed = ALLOWED_FROM.get(module, frozenset())
        for alias in node.names:
            if alias.name == "*":  # names no check could follow
                self.add(node, "import_not_allowed", f"`from {module} import *` is not allowed")
            elif allowed is not None and alias.name not in allowed:
                self.import_refused(node, f"{module}.{alias.name}")
            elif module != "__future__":
                self.bind_import(alias.asname or alias.name, f"{module}.{alias.name}")

    def top_level(self) -> None:
        for statement in self.tree.body:
            if isinstance(statement, ast.FunctionDef):
                self.module.functions[statement.name] = statement
                if any(self.is_jit(d) for d in statement.decorator_list):
                    self.module.kernels[statement.name] = statement
                for decorator in statement.decorator_list:
                    self.decorator(statement, decorator)
            elif isinstance(statement, ast.ClassDef) and self.is_autograd(statement):
                self.module.autograd[statement.name] = {
                    f.name: f for f in statement.body if isinstance(f, ast.FunctionDef)
                }
            elif (
                isinstance(statement, ast.Assign)
                and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)
                and isinstance(statement.value, ast.Attribute)
                and statement.value.attr == "apply"
                and isinstance(statement.value.value, ast.Name)
            ):
                self.module.applies[statement.targets[0].id] = statement.value.value.id

    def decorator(self, function: ast.FunctionDef, decorator: ast.AST) -> None:
        call = decorator if isinstance(decorator, ast.Call) else None
        name = self.module.resolve(call.func if call else decorator)
        if name in _CACHING_DECORATORS:
            self.module.cached.append((function, decorator))
            return
        kernel = any(self.is_jit(d) for d in function.decorator_list)
        if name in _GRAD_MODES and not kernel:
            return
        if self.host_function(decorator) and not kernel:
            return  # the file's own wrapper (a library's `ensure_contiguous`): its body is host code, checked
        if name not in ("triton.jit", "triton.autotune", "triton.heuristics"):
            self.add(
                decorator,
                "decorator",
                "only @triton.jit, @triton.autotune, @triton.heuristics, @torch.no_grad, a host function of "
                "the file on host code and, on a helper, @functools.cache",
            )
            return
        for keyword in call.keywords if call else []:
            if (
                name == "triton.jit"
                and keyword.arg == "launch_metadata"
                and self.host_function(keyword.value)
            ):
                continue  # a host function of the file, checked as host code: profilers' FLOPs and bytes
            if name == "triton.jit" and keyword.arg not in _JIT_OPTIONS:
                self.add(keyword, "launch_option", f"@triton.jit({keyword.arg}=...) is not allowed")
            elif name == "triton.autotune" and keyword.arg in _AUTOTUNE_HOOKS:
                self.add(
                    keyword,
                    "autotune_hook",
                    f"autotune's {keyword.arg} runs host work around the kernel (a torch fill or copy)",
                )

    def is_autograd(self, node: ast.ClassDef) -> bool:
        return [self.module.resolve(base) for base in node.bases] == [_AUTOGRAD_BASE]

    def class_def(self, node: ast.ClassDef) -> None:
        """A top-level autograd Function of static methods, or a record of constant fields; no other class."""
        self.binding(node, node.name)  # a dunder name or a rebinding refused there
        body = node.body[1:] if node.body and _docstring(node.body[0]) else node.body
        if self.parents.get(node) is not self.tree or node.keywords:
            self.add(node, "class", _CLASSES)
        elif self.is_autograd(node) and not node.decorator_list:
            for statement in body:
                if not (isinstance(statement, ast.FunctionDef) and self.static_method(statement)):
                    self.add(
                        statement,
                        "class",
                        f"{_CLASSES}: every method a @staticmethod, under it at most autocast's custom_fwd on "
                        "forward, custom_bwd or once_differentiable on backward, @torch.no_grad and a host "
                        "function of the file",
                    )
        elif self.is_record(node):
            for statement in body:
                if not (
                    isinstance(statement, ast.AnnAssign)
                    and isinstance(statement.target, ast.Name)
                    and (statement.value is None or self.constant(statement.value))
                ):
                    self.add(statement, "class", f"{_CLASSES}: a record holds `name: type = constant` only")
        else:
            self.add(node, "class", _CLASSES)

    def static_method(self, method: ast.FunctionDef) -> bool:
        """`@staticmethod` first, then only what `method_decorator` allows."""
        if not method.decorator_list:
            return False
        first, *rest = method.decorator_list
        return (
            isinstance(first, ast.Name)
            and first.id == "staticmethod"
            and all(self.method_decorator(method, d) for d in rest)
        )

    def method_decorator(self, method: ast.FunctionDef, decorator: ast.AST) -> bool:
        """A grad mode, or autograd's helper allowed on this method (`_METHOD_DECORATORS`) with constant
        autocast options."""
        name = self.module.resolve(_decorated(decorator))
        if name in _GRAD_MODES or self.host_function(decorator):
            return True
        if name is None or method.name not in _METHOD_DECORATORS.get(name, frozenset()):
            return False
        if not isinstance(decorator, ast.Call):
            return True
        return not name.endswith("once_differentiable") and (
            not decorator.args
            and all(k.arg in _AUTOCAST_OPTIONS and self.constant(k.value) for k in decorator.keywords)
        )

    def is_record(self, node: ast.ClassDef) -> bool:
        """A NamedTuple class, or a plain class under one @dataclass whose options are constants."""
        bases = [self.module.resolve(base) for base in node.bases]
        if bases == [_RECORD_BASE]:
            return not node.decorator_list
        if bases or len(node.decorator_list) != 1:
            return False
        decorator = node.decorator_list[0]
        call = decorator if isinstance(decorator, ast.Call) else None
        return self.module.resolve(_decorated(decorator)) == _RECORD_DECORATOR and (
            call is None or (not call.args and all(self.constant(k.value) for k in call.keywords))
        )

    def constant(self, node: ast.AST) -> bool:
        """A literal, a tuple of them, or a torch dtype: a value no code computes."""
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return isinstance(node.operand, ast.Constant)
        if isinstance(node, ast.Tuple):
            return all(self.constant(element) for element in node.elts)
        full = self.module.resolve(node)
        return full is not None and full.startswith("torch.") and full.split(".", 1)[1] in TORCH_DTYPES

    def context_of(self, node: ast.AST) -> str | None:
        """The name of the autograd context of the method `node` lies in, if that method takes one."""
        while (node := self.parents.get(node)) is not None:  # type: ignore[assignment]
            owner = self.parents.get(node)
            if isinstance(node, ast.FunctionDef) and isinstance(owner, ast.ClassDef):
                methods = self.module.autograd.get(owner.name, {})
                takes = node.name in _CONTEXT_METHODS and not (
                    node.name == "forward" and "setup_context" in methods
                )
                first = [*node.args.posonlyargs, *node.args.args][:1]
                return first[0].arg if takes and methods and first else None
        return None

    def own_container(self, node: ast.AST) -> bool:
        """Whether `node` names a dict, list or set its function (or the module) made itself: every binding
        of the name there is such a display or comprehension, so an item written into it is no tensor's
        (launch options gathered in a dict, a profiler's metadata)."""
        if not isinstance(node, ast.Name):
            return False
        scope: ast.AST = node
        while not isinstance(scope, (ast.FunctionDef, ast.Lambda, ast.Module)):
            scope = self.parents[scope]
        if isinstance(scope, (ast.FunctionDef, ast.Lambda)) and any(
            argument.arg == node.id for argument in _parameters(scope.args)
        ):
            return False
        made = False
        for inner in _scope_nodes(scope):
            if (
                isinstance(inner, ast.Name)
                and inner.id == node.id
                and isinstance(inner.ctx, (ast.Store, ast.Del))
            ):
                owner = self.parents.get(inner)
                if not (
                    isinstance(owner, ast.Assign)
                    and owner.targets == [inner]
                    and isinstance(owner.value, _CONTAINERS)
                ):
                    return False
                made = True
            elif isinstance(inner, (ast.Global, ast.Nonlocal)) and node.id in inner.names:
                return False
        return made

    def on_context(self, node: ast.AST) -> bool:
        """Whether `node` is the autograd context (the first argument) of the method it lies in."""
        return isinstance(node, ast.Name) and self.context_of(node) == node.id

    def host_function(self, value: ast.AST) -> bool:
        """Whether `value` names a top-level host function of the file (not a kernel)."""
        return (
            isinstance(value, ast.Name)
            and value.id in self.module.functions
            and value.id not in self.module.kernels
        )

    def cached_helpers(self) -> None:
        """A cached helper answers a repeat without running: fine for the SM count or a config list, not for
        a kernel, `run`, or a helper that launches (its repeats would launch nothing)."""
        for function, decorator in self.module.cached:
            if function.name in self.module.kernels or function.name == "run" or self.launches_from(function):
                self.add(decorator, "decorator", f"`{function.name}` launches kernels: it cannot be cached")

    def node(self, node: ast.AST, device: bool) -> None:
        if isinstance(node, ast.Name):
            self.name(node)
        elif isinstance(node, ast.Attribute):
            self.attribute(node)
        elif isinstance(node, ast.Call):
            self.call(node, device)
        elif isinstance(node, (ast.BinOp, ast.AugAssign)) and isinstance(node.op, ast.MatMult):
            self.add(
                node, "matmul_operator", "the `@` operator is not allowed: multiply in your kernel (tl.dot)"
            )
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            self.add(node, "global_state", "global and nonlocal state are not allowed")
        elif isinstance(node, ast.ClassDef):
            self.class_def(node)
        elif isinstance(node, (ast.AsyncFunctionDef, ast.Await, ast.AsyncFor, ast.AsyncWith)):
            self.add(node, "async", "async code is not allowed: run is a plain function")
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)):
            self.function(node)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)) and not device:
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                for part in ast.walk(target):
                    if isinstance(part, ast.Attribute) and (
                        part.attr in _HOST_WRITABLE or self.on_context(part.value)
                    ):
                        continue
                    if isinstance(part, ast.Subscript) and self.own_container(part.value):
                        continue
                    if isinstance(part, (ast.Attribute, ast.Subscript)) and isinstance(
                        part.ctx, (ast.Store, ast.Del)
                    ):
                        self.add(
                            node,
                            "host_write",
                            "host code writes no item or attribute (a tensor item write is a torch copy)",
                        )
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self.binding(node, node.name)
        elif isinstance(node, ast.alias) and node.asname:
            self.import_binding(node)

    def name(self, node: ast.Name) -> None:
        if node.id == "__name__" and isinstance(node.ctx, ast.Load):
            return  # the module's name, read (a logger's name): a string, not the interpreter's insides
        if _DUNDER.match(node.id):
            self.add(node, "dunder", f"`{node.id}` is not allowed (dunder names reach the interpreter)")
        elif node.id in _ATTRIBUTE_BY_NAME:
            self.add(node, "getattr", f"`{node.id}` reaches attributes by a computed name")
        elif node.id in _DYNAMIC:
            self.add(
                node, "dynamic_code", f"`{node.id}` is not allowed (dynamic code, files or introspection)"
            )
        elif isinstance(node.ctx, (ast.Store, ast.Del)):
            self.binding(node, node.id)
        elif node.id in self.module.modules and not isinstance(self.parents.get(node), ast.Attribute):
            self.add(
                node, "module_alias", f"`{node.id}` is used only through its attributes (no alias of it)"
            )
        elif (self.module.names.get(node.id) or "").startswith("torch.") and not isinstance(
            self.parents.get(node), ast.Attribute
        ):
            # A torch type or dtype imported by name: judged as its `torch.` name (a longer chain is
            # judged whole, as an attribute).
            parent = self.parents.get(node)
            called = isinstance(parent, ast.Call) and parent.func is node
            self.torch_reference(node, self.module.names[node.id], called)

    def binding(self, node: ast.AST, name: str) -> None:
        # A dunder bound where no `ast.Name` is (`except ... as`) is refused here; the rest at their names.
        if _DUNDER.match(name):
            self.add(node, "dunder", f"`{name}` is not allowed (dunder names reach the interpreter)")
        elif name in self.module.names or name in ("torch", "triton", "tl"):
            self.add(node, "rebinding", f"rebinding `{name}` is not allowed")

    def import_binding(self, node: ast.alias) -> None:
        if node.asname is not None and _DUNDER.match(node.asname):
            self.add(node, "dunder", f"`{node.asname}` is not allowed (dunder names reach the interpreter)")
        elif node.asname in ("torch", "triton") and node.name != node.asname:
            self.add(node, "rebinding", f"rebinding `{node.asname}` is not allowed")
        elif node.asname == "tl" and node.name not in ("triton.language", "language"):
            self.add(node, "rebinding", "rebinding `tl` is not allowed")

    def function(self, node: ast.FunctionDef | ast.Lambda) -> None:
        for argument in _parameters(node.args):
            if _DUNDER.match(argument.arg):
                self.add(argument, "dunder", f"`{argument.arg}` is not allowed")
            else:
                self.binding(argument, argument.arg)
        if isinstance(node, ast.FunctionDef):
            if _DUNDER.match(node.name):
                self.add(node, "dunder", f"`{node.name}` is not allowed")
            self.binding(node, node.name)
            if self.parents.get(node) is not self.tree and any(self.is_jit(d) for d in node.decorator_list):
                self.add(node, "jit_placement", "@triton.jit functions are top-level functions of the file")

    def attribute(self, node: ast.Attribute) -> None:
        if _DUNDER.match(node.attr):
            self.add(
                node, "dunder", f"`.{node.attr}` is not allowed (dunder attributes reach the interpreter)"
            )
            return
        parent = self.parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return  # judged as part of the longer chain
        full = self.module.resolve(node)
        if full is None:
            return
        called = isinstance(parent, ast.Call) and parent.func is node
        if full.startswith("torch."):
            self.torch_reference(node, full, called)
        elif full in TRITON_DRIVER_QUERIES and called:
            return
        elif full.split(".")[0] in _REPORTING_MODULES:
            if full not in _REPORTING or not called:
                self.add(
                    node,
                    "reporting_api",
                    f"{full}: from {full.split('.')[0]} only {_reporting()} are allowed",
                )
        elif full.startswith("dataclasses.") and full != _RECORD_DECORATOR:
            self.add(node, "class", f"{full}: from dataclasses only the @dataclass decorator is allowed")
        elif full.startswith("typing.") and full.split(".")[1] not in TYPING_NAMES:
            self.add(node, "typing_api", f"{full} is not one of typing's names for annotations")
        elif full.startswith(_TRITON_TOOLS):
            if full not in (_TRITON_TOOLS, f"{_TRITON_TOOLS}.from_tensor"):
                self.add(node, "triton_api", f"{full} is not part of the Triton API a candidate may use")
        elif (
            full.startswith("triton.")
            and not full.startswith("triton.language")
            and (full.split(".")[1] not in TRITON_HOST_API or full.startswith("triton.tools."))
        ):
            self.add(node, "triton_api", f"{full} is not part of the Triton API a candidate may use")

    def torch_reference(self, node: ast.AST, full: str, called: bool) -> None:
        parts = full.split(".")
        if full in _GRAD_MODES and isinstance(self.parents.get(node), ast.FunctionDef):
            return  # a bare @torch.no_grad, judged with the other decorators
        parent = self.parents.get(node)
        if full == _AUTOGRAD_BASE and isinstance(parent, ast.ClassDef) and node in parent.bases:
            return  # the base of an autograd Function, judged with its class
        if full in _METHOD_DECORATORS and self.decorates_method(node):
            return  # autograd's helper on a method, judged with its class
        if called:
            if full in TORCH_CALLS or (
                len(parts) == 3 and parts[1] == "cuda" and parts[2] in TORCH_CUDA_CALLS
            ):
                return
            if len(parts) == 2 and parts[1] in _TORCH_MAKERS:
                why = f"{full} makes its values outside your kernels: allocate with torch.empty and write it in your kernel"
            elif parts[1] == "cuda":
                queries = ", ".join(sorted(TORCH_CUDA_CALLS))
                why = f"{full}(...) is not one of the torch.cuda queries a launch may make ({queries})"
            else:
                why = f"{full}(...) is torch compute: do the work in your @triton.jit kernels"
            self.add(node, "torch_compute", why)
        elif not (len(parts) == 2 and (parts[1] in TORCH_DTYPES or parts[1] in _TORCH_TYPES)):
            self.add(
                node, "torch_alias", f"{full} is used without being called (an alias of a torch function)"
            )

    def call(self, node: ast.Call, device: bool) -> None:
        func = node.func
        name = self.module.resolve(func)
        if name in ("triton.jit", "triton.autotune", "triton.heuristics") and not self.is_decorator(node):
            self.add(node, "jit_placement", f"{name} is used only as a decorator of a top-level function")
        if name == "triton.Config":
            for keyword in node.keywords:
                if keyword.arg == "pre_hook" and self.host_function(keyword.value):
                    continue  # a host function of the file, checked as host code: the tutorials' block shapes
                if keyword.arg in _CONFIG_HOOKS:
                    self.add(keyword, "autotune_hook", f"triton.Config({keyword.arg}=...) is not allowed")
        if isinstance(func, ast.Attribute) and name is None and not self.class_call(func):
            if func.attr in LIBRARY_COMPUTE:
                self.add(
                    node,
                    "library_compute",
                    f"`.{func.attr}(...)` is library compute: write it in your kernel (tl.dot, tl.max, tl.sum, tl.exp)",
                )
            elif not device and func.attr not in HOST_METHODS:
                self.add(
                    node,
                    "tensor_method",
                    f"`.{func.attr}(...)` in host code: only metadata, view and allocation methods run outside "
                    "your kernels",
                )
        elif (
            isinstance(func, ast.Attribute)
            and name is not None
            and func.attr in LIBRARY_COMPUTE
            and not name.startswith("torch.")
        ):
            self.add(node, "library_compute", f"{name}(...) is library compute: write it in your kernel")
        if (
            isinstance(func, ast.Subscript)
            and isinstance(func.value, ast.Name)
            and func.value.id in self.module.kernels
        ):
            self.launch(node, self.module.kernels[func.value.id])

    def class_call(self, func: ast.Attribute) -> bool:
        """`Class.apply(...)` or a helper `Class.method(...)` of an autograd Function of the file (not one
        that takes a context: `.apply` gives it a real one), or a context's `ctx.save_for_backward(...)`."""
        if isinstance(func.value, ast.Name) and func.value.id in self.module.autograd:
            methods = self.module.autograd[func.value.id]
            return func.attr == "apply" or (func.attr in methods and func.attr not in _CONTEXT_METHODS)
        return func.attr in _CTX_METHODS and self.on_context(func.value)

    def decorates_method(self, node: ast.AST) -> bool:
        """Whether `node` is (the function called by) a decorator of an autograd Function's method."""
        parent = self.parents.get(node)
        decorator = parent if isinstance(parent, ast.Call) and parent.func is node else node
        method = self.parents.get(decorator)
        owner = self.parents.get(method) if method is not None else None
        return (
            isinstance(method, ast.FunctionDef)
            and decorator in method.decorator_list
            and isinstance(owner, ast.ClassDef)
            and self.is_autograd(owner)
        )

    def is_decorator(self, node: ast.Call) -> bool:
        parent = self.parents.get(node)
        return isinstance(parent, ast.FunctionDef) and node in parent.decorator_list

    def launch(self, node: ast.Call, kernel: ast.FunctionDef) -> None:
        params = {a.arg for a in [*kernel.args.posonlyargs, *kernel.args.args, *kernel.args.kwonlyargs]}
        for keyword in node.keywords:
            if keyword.arg is not None and keyword.arg not in params and keyword.arg not in LAUNCH_OPTIONS:
                self.add(
                    keyword,
                    "launch_option",
                    f"launch option {keyword.arg}= is not allowed (allowed: {', '.join(sorted(LAUNCH_OPTIONS))})",
                )

    def entry(self) -> None:
        run = self.module.functions.get("run")
        if not self.module.kernels:
            self.add(self.tree, "no_kernel", "the file defines no @triton.jit kernel")
        if run is None:
            self.add(self.tree, "entry", "the file defines no top-level `def run(...)`")
            return
        if any(self.module.resolve(_decorated(d)) not in _GRAD_MODES for d in run.decorator_list):
            self.add(run, "entry", "`run` is a plain host function, decorated at most by @torch.no_grad")
            return
        if self.module.kernels and not self.launches_from(run):
            self.add(
                run, "no_launch", "`run` launches none of the file's @triton.jit kernels (kernel[grid](...))"
            )

    def launches_from(self, run: ast.FunctionDef) -> bool:
        """Whether `run`, or a host function of the file it calls (`callee`), launches a kernel of the file."""
        seen: set[int] = set()
        todo = [run]
        while todo:
            function = todo.pop()
            for node in _calls(function):
                func = node.func
                if (
                    isinstance(func, ast.Subscript)
                    and isinstance(func.value, ast.Name)
                    and func.value.id in self.module.kernels
                ):
                    return True
                callee = self.callee(func)
                if callee is not None and id(callee) not in seen:
                    seen.add(id(callee))
                    todo.append(callee)
        return False

    def callee(self, func: ast.AST) -> ast.FunctionDef | None:
        """The host function of the file a call runs: a top-level one by name, an autograd Function's
        forward through `.apply` (or a name bound to it), or its static method by name."""
        methods = self.module.autograd
        if isinstance(func, ast.Name):
            if func.id in self.module.functions and func.id not in self.module.kernels:
                return self.module.functions[func.id]
            return methods.get(self.module.applies.get(func.id, ""), {}).get("forward")
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id in methods:
            return methods[func.value.id].get("forward" if func.attr == "apply" else func.attr)
        return None


def _decorated(decorator: ast.AST) -> ast.AST:
    """What a decorator names: `f` of `@f` and of `@f(...)`."""
    return decorator.func if isinstance(decorator, ast.Call) else decorator


def _docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _reporting() -> str:
    return " and ".join(f"{name}(...)" for name in sorted(_REPORTING))


def _calls(function: ast.FunctionDef) -> Iterator[ast.Call]:
    for node in ast.walk(function):
        if isinstance(node, ast.Call):
            yield node


def _export_list(statement: ast.stmt) -> bool:
    """`__all__ = [...]` (or a tuple) of string constants at the top level: the names a star import would
    take, which only a star import reads."""
    return (
        isinstance(statement, ast.Assign)
        and [getattr(target, "id", None) for target in statement.targets] == ["__all__"]
        and isinstance(statement.value, (ast.List, ast.Tuple))
        and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in statement.value.elts)
    )


def _main_guard(statement: ast.stmt) -> bool:
    """`if __name__ == "__main__":` at the top level, with no `else`: a self-test that never runs where the
    evaluator imports the file (under a module name of its own, `triton_runtime`/`triton_trace`)."""
    if not isinstance(statement, ast.If) or statement.orelse:
        return False
    test = statement.test
    return (
        isinstance(test, ast.Compare)
        and isinstance(test.left, ast.Name)
        and test.left.id == "__name__"
        and [type(op) for op in test.ops] == [ast.Eq]
        and len(test.comparators) == 1
        and isinstance(test.comparators[0], ast.Constant)
        and test.comparators[0].value == "__main__"
    )


def scan(source: str) -> list[BanFinding]:
    """Every ban finding in a Triton candidate, in line order (a syntax error is the one finding). A
    top-level main guard's block is left out: it is not the candidate's code when judged; so is an export
    list, which only a star import reads."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        line = exc.lineno or 1
        text = (exc.text or "").strip()
        return [BanFinding(line, "syntax", text, f"not valid Python: {exc.msg}")]
    tree.body = [
        statement for statement in tree.body if not (_main_guard(statement) or _export_list(statement))
    ]
    return _Checker(source, tree).check()
