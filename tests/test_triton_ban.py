"""The Triton ban (`workbench.evaluate.build.triton_ban`): hand-written ways around it, one rule each, and
honest kernels that must pass untouched."""

from __future__ import annotations

from pathlib import Path

import pytest

from workbench.evaluate.build.triton_ban import scan

KERNELS = Path(__file__).parent / "data" / "triton"
HONEST_TRITON = Path(__file__).parent / "data" / "honest" / "triton"

# An honest file: the data kernel, with the imports the bad cases below use.
BASE = "import math\nimport typing\n\nimport torch\n" + (KERNELS / "copy_no_dot.py").read_text()


def rules(source: str) -> list[str]:
    return [finding.rule for finding in scan(source)]


@pytest.mark.parametrize("path", sorted(KERNELS.glob("*.py")), ids=lambda p: p.stem)
def test_honest_kernels_pass(path: Path) -> None:
    assert scan(path.read_text()) == []


def test_the_base_passes_and_host_glue_is_allowed() -> None:
    glue = BASE.replace(
        "    n = C.numel()\n",
        "    n = C.numel()\n"
        "    assert A.is_contiguous() and A.dtype == torch.bfloat16, 'contiguous bf16'\n"
        "    assert A.is_floating_point() and not A.is_complex()\n"
        "    scratch = torch.empty((n,), device=A.device, dtype=torch.float32)\n"
        "    like = torch.empty_like(A)\n"
        "    flat = A.view(-1)\n"
        "    sms = torch.cuda.get_device_properties(A.device).multi_processor_count\n"
        "    shape = [d for d in A.shape]\n"
        "    shape.append(math.ceil(n / 2))\n"
        "    eps = torch.finfo(torch.float32).eps\n"
        "    torch.cuda.current_stream().synchronize()\n"
        # constant fills: a split-K workspace, a tile counter, the output zeroed for atomic adds
        "    partial = torch.zeros((n,), device=A.device, dtype=torch.float32)\n"
        "    counter = torch.full((1,), 0, device=A.device, dtype=torch.int32)\n"
        "    ones = torch.ones_like(A)\n"
        "    more = A.new_zeros((n,))\n"
        "    C.zero_()\n"
        "    partial.fill_(0.0)\n",
    )
    assert scan(glue) == []
    allocator = BASE + (
        "\n\ndef alloc(size, alignment, stream):\n"
        "    return torch.empty(size, device='cuda', dtype=torch.int8)\n\n\n"
        "triton.set_allocator(alloc)\n"
    )
    assert scan(allocator) == []


HOST = "\n\ndef helper(A, B, C):\n    {}\n"
BAD_CASES = [
    # PTXBench's floor
    ("import cutlass.cute as cute", "cutlass_dsl"),
    ("from cutlass import cute", "cutlass_dsl"),
    ("from torch import matmul", "torch_import"),
    ("import torch as T", "torch_import"),
    (HOST.format("return torch.matmul(A, B)"), "torch_compute"),
    (HOST.format("return A.mm(B)"), "library_compute"),
    (HOST.format("return A @ B"), "matmul_operator"),
    (HOST.format("C @= B"), "matmul_operator"),
    (HOST.format("return __import__('torch').matmul(A, B)"), "dunder"),
    (HOST.format("return getattr(torch, 'mat' + 'mul')(A, B)"), "getattr"),
    (HOST.format("torch = A"), "rebinding"),
    # torch compute, by any name
    (HOST.format("return torch.bmm(A, B)"), "torch_compute"),
    (HOST.format("return torch.einsum('ij,kj->ik', A, B)"), "torch_compute"),
    (HOST.format("return torch.nn.functional.linear(A, B)"), "torch_compute"),
    (HOST.format("return torch.nn.functional.scaled_dot_product_attention(A, B, C)"), "torch_compute"),
    (HOST.format("return torch.softmax(A, -1)"), "torch_compute"),
    (HOST.format("return torch.ops.aten.mm.default(A, B)"), "torch_compute"),
    (HOST.format("return torch._C._nn.linear(A, B)"), "torch_compute"),
    (HOST.format("return torch.Tensor.add(A, B)"), "torch_compute"),
    (HOST.format("return torch.arange(C.numel())"), "torch_compute"),
    (HOST.format("return torch.tensor([1.0, 2.0])"), "torch_compute"),
    (HOST.format("return A.add_(B)"), "tensor_method"),
    (
        HOST.format(
            "return torch.cuda.jiterator._create_jit_fn('template <typename T> T f(T x) { return x; }')"
        ),
        "torch_compute",
    ),
    (HOST.format("return torch.cuda.CUDAGraph()"), "torch_compute"),
    (HOST.format("return torch.compile(helper)"), "torch_compute"),
    (HOST.format("f = torch.matmul"), "torch_alias"),
    (HOST.format("return list(map(torch.mul, [A], [B]))"), "torch_alias"),
    (HOST.format("t = torch"), "module_alias"),
    (HOST.format("return C.copy_(A)"), "tensor_method"),
    (HOST.format("return A.float().sum()"), "tensor_method"),
    (HOST.format("return A.to(torch.float32)"), "tensor_method"),
    (HOST.format("return A.item()"), "tensor_method"),
    (HOST.format("return A.softmax(-1)"), "library_compute"),
    (HOST.format("C[:] = A"), "host_write"),
    (HOST.format("C.data = A"), "host_write"),
    # dynamic code and introspection
    ("import importlib", "import_not_allowed"),
    ("import ctypes", "import_not_allowed"),
    ("import operator", "import_not_allowed"),
    ("import torch.nn.functional as F", "import_not_allowed"),
    ("from triton.compiler import compile", "import_not_allowed"),
    ("from . import helpers", "import_not_allowed"),
    ("from math import *", "import_not_allowed"),
    ("from typing import get_type_hints", "import_not_allowed"),
    (HOST.format("return typing.get_type_hints(helper)"), "typing_api"),
    # honest elsewhere, not run here: `unsupported`, not `banned`
    ("import os", "import_unsupported"),
    ("import numpy as np", "import_unsupported"),
    (HOST.format("return eval('A @ B')"), "dynamic_code"),
    (HOST.format("exec('import os')"), "dynamic_code"),
    (HOST.format("return compile('x', 'f', 'eval')"), "dynamic_code"),
    (HOST.format("return globals()['torch']"), "dynamic_code"),
    (HOST.format("return open('/etc/passwd').read()"), "dynamic_code"),
    (HOST.format("return type(A).__mro__"), "dynamic_code"),
    (HOST.format("return A.__class__"), "dunder"),
    (HOST.format("setattr(A, 'x', B)"), "getattr"),
    (HOST.format("global STATE"), "global_state"),
    ("import math as __name__", "dunder"),
    ("from math import pi as __doc__", "dunder"),
    (HOST.format("try:\n        pass\n    except Exception as __name__:\n        pass"), "dunder"),
    ("class Fake:\n    pass", "class"),
    ("async def run_later(A):\n    return A", "async"),
    (HOST.format("import math"), "import_not_allowed"),
    # rebinding and shadowing
    ("import math as torch", "rebinding"),
    ("import math as tl", "rebinding"),
    ("triton = None", "rebinding"),
    ("def helper(torch):\n    return torch", "rebinding"),
    (HOST.format("for tl in range(3):\n        pass"), "rebinding"),
    # the Triton API
    (HOST.format("return triton.testing.do_bench(lambda: None)"), "triton_api"),
    (HOST.format("triton.knobs.nvidia.ptxas_options = '-O0'"), "triton_api"),
    (HOST.format("return triton.compiler.compile"), "triton_api"),
    (HOST.format("return triton.runtime.driver.active.utils.load_binary"), "triton_api"),
    # reporting: a warning and a logger's report methods, not their filters, handlers or configuration
    ("import logging\n" + HOST.format("logging.basicConfig(filename='run.log')"), "reporting_api"),
    ("import logging\n" + HOST.format("return logging.FileHandler('run.log')"), "reporting_api"),
    ("import logging\n" + HOST.format("f = logging.getLogger"), "reporting_api"),
    ("import logging\n" + HOST.format("logging.getLogger('torch').addHandler(C)"), "tensor_method"),
    ("import logging\n" + HOST.format("logging.getLogger().setLevel(0)"), "tensor_method"),
    ("import warnings\n" + HOST.format("warnings.simplefilter('ignore')"), "reporting_api"),
    ("from logging import FileHandler", "import_unsupported"),
    ("__all__ = [name for name in ('run',)]", "dunder"),
    ("__all__ = ['run']\n__all__ += [A.__class__]", "dunder"),
    # grad modes: on host functions, not kernels; turning recording back on or leaving it off is not one
    (HOST.format("torch.set_grad_enabled(False)"), "torch_compute"),
    ("@torch.enable_grad()" + HOST.format("return A"), "decorator"),
    (HOST.format("d = triton.runtime.driver.active"), "triton_api"),
    (HOST.format("query = triton.runtime.driver.active.get_current_target"), "triton_api"),
    ("from triton.runtime import driver\n" + HOST.format("return helper(driver)"), "module_alias"),
    (HOST.format("return copy_kernel.run(A, B, 1, BLOCK=8, grid=(1,), warmup=False)"), "tensor_method"),
    (HOST.format("k = triton.jit(helper)"), "jit_placement"),
    (HOST.format("copy_kernel[(1,)](A, B, 1, BLOCK=8, ptx_options='-O0')"), "launch_option"),
    (HOST.format("copy_kernel[(1,)](A, B, 1, BLOCK=8, extern_libs={'x': '/tmp/x.bc'})"), "launch_option"),
]


@pytest.mark.parametrize(
    ("addition", "rule"), BAD_CASES, ids=[f"{r}-{i}" for i, (_, r) in enumerate(BAD_CASES)]
)
def test_each_way_around_is_named(addition: str, rule: str) -> None:
    found = scan(BASE + "\n" + addition + "\n")
    assert rule in [f.rule for f in found], [f.describe() for f in found]
    line = next(f for f in found if f.rule == rule)
    # One line per finding, the CUDA scan's format: where, which rule, why, the line itself.
    assert line.describe().startswith(f"line {line.line}: [{rule}] ")
    assert line.text and line.text in (BASE + "\n" + addition).splitlines()[line.line - 1]


@pytest.mark.parametrize(
    ("decorators", "rule"),
    [
        (
            "@triton.autotune(configs=[triton.Config({'BLOCK': 64})], key=['n'], restore_value=['Y'])\n",
            "autotune_hook",
        ),
        (
            "@triton.autotune(configs=[triton.Config({'BLOCK': 64}, pre_hook=print)], key=['n'])\n",
            "autotune_hook",
        ),
        (
            "@triton.autotune(configs=[triton.Config({'BLOCK': 64}, ir_override='k.ptx')], key=['n'])\n",
            "autotune_hook",
        ),
        ("@triton.jit(launch_metadata=print)\n", "launch_option"),
        ("@torch.compile\n", "decorator"),
    ],
)
def test_decorators_and_autotune_hooks(decorators: str, rule: str) -> None:
    source = BASE.replace("@triton.jit\n", decorators + "@triton.jit\n", 1)
    assert rule in rules(source)


def test_device_code_is_triton_language() -> None:
    """Tensor methods are Triton's inside a kernel; PTXBench's library names are not allowed there either."""
    device = BASE.replace(
        "    tl.store(Y + offsets, tl.load(X + offsets, mask=mask), mask=mask)\n",
        "    x = tl.load(X + offsets, mask=mask).to(tl.float32)\n"
        "    tl.store(Y + offsets, x.to(tl.bfloat16), mask=mask)\n",
    )
    assert scan(device) == []
    softmax = device.replace("x.to(tl.bfloat16)", "tl.softmax(x).to(tl.bfloat16)")
    assert rules(softmax) == ["library_compute"]
    nested = BASE + "\n\ndef outer():\n    @triton.jit\n    def inner(X):\n        pass\n    return inner\n"
    assert "jit_placement" in rules(nested)


def test_the_entry_point() -> None:
    assert rules("import triton\n\ndef run(x, y):\n    return None\n") == ["no_kernel"]
    no_run = BASE.replace("def run(A, B, C):", "def launch(A, B, C):")
    assert rules(no_run) == ["entry"]
    decoy = BASE.replace(
        "    copy_kernel[(triton.cdiv(n, 1024),)](A, C, n, BLOCK=1024)\n", "    return None\n"
    )
    assert rules(decoy) == ["no_launch"]
    through_helper = (
        BASE.replace("def run(A, B, C):", "def launch(A, B, C):")
        + "\n\ndef run(A, B, C):\n    launch(A, B, C)\n"
    )
    assert scan(through_helper) == []


SELF_TEST = (
    "\n\nif __name__ == '__main__':\n"
    "    a = torch.randn(256, 256, device='cuda')\n"
    "    b = torch.empty_like(a)\n"
    "    run(a, a, b)\n"
    "    assert torch.allclose(b, a @ a)\n"
    "    print(triton.testing.do_bench(lambda: run(a, a, b)))\n"
)


def test_a_self_test_under_the_main_guard_is_not_the_candidates_code() -> None:
    """The evaluator imports kernel.py under a module name of its own, so a top-level main guard's block
    never runs: torch compute there is a self-test's, not the candidate's."""
    assert scan(BASE + SELF_TEST) == []
    # Any other guard is checked as code: one with an `else` (which runs on import), a negated or reversed
    # test, one inside a function. Reading `__name__` is allowed (a logger's name); binding it is not.
    with_else = BASE + SELF_TEST + "else:\n    print(torch.matmul(A, B))\n"
    assert {"torch_compute", "matmul_operator"} <= set(rules(with_else))
    negated = BASE + SELF_TEST.replace("==", "!=")
    assert {"torch_compute", "matmul_operator"} <= set(rules(negated))
    nested = BASE + HOST.format("if __name__ == '__main__':\n        return torch.matmul(A, B)")
    assert "torch_compute" in rules(nested)
    reversed_operands = BASE + SELF_TEST.replace("__name__ == '__main__'", "'__main__' == __name__")
    assert {"torch_compute", "matmul_operator"} <= set(rules(reversed_operands))
    assert "dunder" in rules(BASE + "\n__name__ = '__main__'\n" + SELF_TEST)


def test_torch_cuda_beyond_the_queries_is_named_as_such() -> None:
    assert scan(BASE + HOST.format("torch.cuda.synchronize()")) == []  # a wait left in, as in CUDA
    found = scan(BASE + HOST.format("torch.cuda.empty_cache()"))
    assert [f.rule for f in found] == ["torch_compute"]
    assert "torch.cuda.empty_cache(...) is not one of the torch.cuda queries" in found[0].why
    assert "current_device" in found[0].why


def test_a_syntax_error_is_one_finding() -> None:
    found = scan("def run(:\n")
    assert [f.rule for f in found] == ["syntax"]
    assert found[0].describe().startswith("line 1: [syntax] not valid Python")


def test_findings_come_in_line_order_with_every_one_named() -> None:
    source = BASE + HOST.format("x = torch.matmul(A, B)\n    return A @ B")
    found = scan(source)
    assert [f.rule for f in found] == ["torch_compute", "matmul_operator"]
    assert [f.line for f in found] == sorted(f.line for f in found)


def test_refused_imports_are_banned_only_for_doors() -> None:
    def refusal(line: str) -> str:
        [finding] = [f for f in scan(BASE + "\n" + line + "\n") if f.rule.startswith("import")]
        return finding.refusal.value

    assert refusal("import numpy as np") == refusal("import os") == "unsupported"
    assert refusal("import ctypes") == refusal("from importlib import import_module") == "banned"


def test_the_tutorials_header_passes() -> None:
    """Triton's own tutorials: the torch device and the SM count from the driver, configs built with
    itertools, a helper cached with functools, typing's annotations."""
    header = (
        "import functools\nimport itertools\nfrom typing import Final, Literal\n"
        "DEVICE = triton.runtime.driver.active.get_active_torch_device()\n"
        "TARGET = triton.runtime.driver.active.get_current_target()\n"
        "LAYOUT: Final[Literal['row']] = 'row'\n\n"
        "@functools.lru_cache(maxsize=None)\n"
        "def num_sms() -> int:\n"
        "    return triton.runtime.driver.active.utils.get_device_properties(DEVICE.index)['multiprocessor_count']\n\n"
        "@functools.cache\n"
        "def block_sizes() -> list:\n"
        "    return [a * b for a, b in itertools.product([64, 128], [1, 2])]\n"
    )
    assert scan(BASE + "\n" + header) == []


@pytest.mark.parametrize(
    "cached",
    [
        "@functools.cache\ndef launch(A, B, C):\n    copy_kernel[(1,)](A, C, 1, BLOCK=8)\n",  # launches
        (  # through a helper
            "@functools.cache\ndef again(A, B, C):\n    launch(A, B, C)\n\n"
            "def launch(A, B, C):\n    copy_kernel[(1,)](A, C, 1, BLOCK=8)\n"
        ),
        "@functools.partial(print)\ndef helper():\n    return 1\n",  # not a cache
    ],
)
def test_a_cached_helper_may_not_launch(cached: str) -> None:
    assert "decorator" in rules(
        BASE.replace("import math\n", "import functools\nimport math\n", 1) + "\n" + cached
    )


def test_a_library_modules_habits_pass() -> None:
    """An export list, a module logger and a warning, and autograd's recording turned off around run or a
    helper (as a decorator, bare or called, or a with-block)."""
    source = BASE.replace("import math\n", "import logging\nimport math\nimport warnings\n", 1) + (
        "\n__all__ = ['run', 'helper']\nlog = logging.getLogger(__name__)\n\n\n"
        "@torch.no_grad\ndef helper(A):\n    log.debug('helper %s', A.shape)\n"
        "    if A.numel() % 1024:\n        warnings.warn('a partial last block')\n"
        "    with torch.inference_mode():\n        return A.numel()\n"
    )
    assert scan(source) == []
    decorated = source.replace("def run(A, B, C):", "@torch.no_grad()\ndef run(A, B, C):")
    assert scan(decorated) == []
    assert "entry" in rules(source.replace("def run(A, B, C):", "@torch.enable_grad()\ndef run(A, B, C):"))
    assert "decorator" in rules(source.replace("@triton.jit\n", "@torch.no_grad()\n@triton.jit\n", 1))


def test_run_and_kernels_are_not_cached() -> None:
    source = BASE.replace("import math\n", "import functools\nimport math\n", 1)
    assert "entry" in rules(source.replace("def run(A, B, C):", "@functools.cache\ndef run(A, B, C):"))
    assert "decorator" in rules(source.replace("@triton.jit\n", "@functools.cache\n@triton.jit\n", 1))


def test_a_configs_pre_hook_is_a_host_function_of_the_file() -> None:
    """The tutorials fit host TMA descriptors to each config's tile in a pre_hook: a function of the file,
    whose body is checked as host code, and the descriptor's block shape the one attribute it may set."""
    hook = "\n\ndef fit(nargs):\n    nargs['desc'].block_shape = [nargs['BLOCK'], 64]\n"
    tuned = (
        "@triton.autotune(configs=[triton.Config({'BLOCK': 64}, pre_hook=HOOK)], key=['n'])\n@triton.jit\n"
    )

    def source(value: str, body: str = hook) -> str:
        return BASE.replace("@triton.jit\n", tuned.replace("HOOK", value), 1) + body

    assert scan(source("fit")) == []
    assert "autotune_hook" in rules(source("lambda nargs: None"))
    assert "autotune_hook" in rules(source("copy_kernel"))
    assert "host_write" in rules(source("fit", hook.replace(".block_shape", ".data")))
    assert "tensor_method" in rules(source("fit", hook + "    nargs['C'].add_(1)\n"))
    assert scan(source("fit", hook + "    nargs['C'].zero_()\n")) == []  # a constant fill, as anywhere
    # autotune's own constant fill of a split-K output while it tunes
    tuned_zeroed = tuned.replace("key=['n']", "key=['n'], reset_to_zero=['Y']")
    assert scan(BASE.replace("@triton.jit\n", tuned_zeroed.replace("HOOK", "fit"), 1) + hook) == []


# The wrapper of Triton's tutorials around the base's kernel: an autograd Function whose forward launches.
AUTOGRAD = (
    "\n\nclass _Copy(torch.autograd.Function):\n"
    "    '''The base's copy, through autograd.'''\n\n"
    "    @staticmethod\n"
    "    def forward(ctx, A, C):\n"
    "        ctx.save_for_backward(A)\n"
    "        ctx.n = C.numel()\n"
    "        copy_kernel[(triton.cdiv(ctx.n, 1024),)](A, C, ctx.n, BLOCK=1024)\n"
    "        return C\n\n"
    "    @staticmethod\n"
    "    def backward(ctx, grad):\n"
    "        (A,) = ctx.saved_tensors\n"
    "        return torch.empty_like(A), None\n"
)
THROUGH_APPLY = BASE.replace("def run(A, B, C):", "def unused(A, B, C):") + AUTOGRAD


@pytest.mark.parametrize(
    "entry",
    [
        "\n\ndef run(A, B, C):\n    _Copy.apply(A, C)\n",
        "\n\ncopy = _Copy.apply\n\n\ndef run(A, B, C):\n    copy(A, C)\n",
    ],
)
def test_an_autograd_functions_forward_launches_for_run(entry: str) -> None:
    assert scan(THROUGH_APPLY + entry) == []


def test_records_of_constant_fields_pass() -> None:
    records = BASE.replace("import math\n", "import math\nfrom dataclasses import dataclass\n", 1) + (
        "\n\n@dataclass(frozen=True, slots=True)\nclass Tile:\n    '''A tile.'''\n\n    m: int = 128\n"
        "    k: int = -64\n    dtype: torch.dtype = torch.bfloat16\n    shape: tuple = (1, 2)\n    name: str\n"
        "\n\nclass Launch(typing.NamedTuple):\n    warps: int = 8\n\n\nTILE = Tile(name='t')\n"
    )
    assert scan(records) == []
    assert scan(records.replace("@dataclass(frozen=True, slots=True)", "@dataclass")) == []


def test_autograds_own_helpers_under_a_methods_staticmethod_pass() -> None:
    """autocast's custom_fwd / custom_bwd and once_differentiable, as outside autograd Functions write them
    (bare or with constant options), and a grad mode on any method."""
    forward = "    @staticmethod\n    def forward"
    backward = "    @staticmethod\n    def backward"
    helpers = THROUGH_APPLY.replace(
        forward, "    @staticmethod\n    @torch.amp.custom_fwd(device_type='cuda', cast_inputs=torch.float32)\n"
        "    def forward",
    ).replace(
        backward, "    @staticmethod\n    @torch.cuda.amp.custom_bwd\n    @torch.no_grad()\n"
        "    @torch.autograd.function.once_differentiable\n    def backward",
    )  # fmt: skip
    assert scan(helpers + "\n\ndef run(A, B, C):\n    _Copy.apply(A, C)\n") == []
    # Not on a helper method (its first argument is no context) nor on a function of the file.
    helper = "    @staticmethod\n    @torch.amp.custom_fwd(device_type='cuda')\n    def fill(out, A):\n        return A\n\n"
    assert "class" in rules(THROUGH_APPLY.replace(forward, helper + forward))
    assert "decorator" in rules(
        BASE + "\n\n@torch.amp.custom_fwd(device_type='cuda')\ndef helper(A):\n    return A\n"
    )


def test_torchs_types_and_dtypes_may_be_imported_by_name() -> None:
    named = BASE.replace("import torch\n", "import torch\nfrom torch import Tensor, bfloat16 as bf16\n", 1)
    annotated = named.replace("def run(A, B, C):", "def run(A: Tensor, B: Tensor, C: Tensor) -> None:")
    assert scan(annotated + "\n\ndef is_bf16(A):\n    return A.dtype == bf16\n") == []
    # Bound to `torch.` names, so their uses are judged as those: a tensor made by its type is compute.
    assert "torch_compute" in rules(named + "\n\ndef helper(A):\n    return Tensor(A)\n")
    assert rules(BASE + "\nfrom torch import Tensor, nn\n") == ["torch_import"]


CLASS_CASES = [
    # not a kind of class a candidate may write
    "class Fake:\n    pass",
    "class Sub(int):\n    pass",
    "class Meta(torch.autograd.Function, metaclass=type):\n    pass",
    "def helper():\n    class Inner(torch.autograd.Function):\n        pass\n    return Inner",
    # an autograd Function's body: static methods only
    AUTOGRAD.replace("    '''The base's copy, through autograd.'''\n", "    cache = {}\n"),
    AUTOGRAD.replace("    @staticmethod\n    def backward", "    def backward"),
    AUTOGRAD.replace(
        "    @staticmethod\n    def backward", "    @staticmethod\n    @torch.compile\n    def backward"
    ),
    "@torch.no_grad\n" + AUTOGRAD.lstrip("\n"),
    # autograd's helpers: under @staticmethod, each on its own method, with constant options only
    AUTOGRAD.replace(
        "    @staticmethod\n    def forward",
        "    @torch.amp.custom_fwd(device_type='cuda')\n    @staticmethod\n    def forward",
    ),
    AUTOGRAD.replace(
        "    @staticmethod\n    def backward",
        "    @staticmethod\n    @torch.amp.custom_fwd(device_type='cuda')\n    def backward",
    ),
    AUTOGRAD.replace(
        "    @staticmethod\n    def forward",
        "    @staticmethod\n    @torch.autograd.function.once_differentiable\n    def forward",
    ),
    AUTOGRAD.replace(
        "    @staticmethod\n    def forward",
        "    @staticmethod\n    @torch.amp.custom_fwd(device_type=str(1))\n    def forward",
    ),
    AUTOGRAD.replace(
        "    @staticmethod\n    def forward",
        "    @staticmethod\n    @torch.amp.custom_fwd('cuda')\n    def forward",
    ),
    # a record's fields: constants only, no methods, no other decorator
    "from dataclasses import dataclass\n\n@dataclass\nclass R:\n    x: int = len('ab')",
    "from dataclasses import dataclass\n\n@dataclass\nclass R:\n    x: int = 1\n\n    def twice(self):\n        return 2",
    "from dataclasses import dataclass\n\n@dataclass(init=len('x'))\nclass R:\n    x: int = 1",
    "from dataclasses import dataclass\n\n@dataclass\n@functools.cache\nclass R:\n    x: int = 1",
    "class R(typing.NamedTuple):\n    x: int = 1\n    y = 2",
    "import dataclasses\n\n\ndef helper(A):\n    return dataclasses.replace(A, x=1)",
]


@pytest.mark.parametrize("addition", CLASS_CASES, ids=[f"class-{i}" for i in range(len(CLASS_CASES))])
def test_every_other_class_is_named(addition: str) -> None:
    assert "class" in rules(BASE + "\n\n" + addition + "\n")


def test_an_autograd_functions_methods_are_host_code() -> None:
    """Inside the methods the host rules hold; only the context (the first argument) may be written and
    asked to save tensors, and only a class of the file is called through `.apply`."""
    assert "torch_compute" in rules(THROUGH_APPLY + AUTOGRAD.replace("return C\n", "return torch.mm(A, C)\n"))
    assert "host_write" in rules(THROUGH_APPLY.replace("ctx.n = C.numel()", "A.n = C.numel()"))
    assert "host_write" in rules(THROUGH_APPLY.replace("ctx.n = C.numel()", "ctx.n[0] = C.numel()"))
    assert "tensor_method" in rules(
        THROUGH_APPLY.replace("ctx.save_for_backward(A)", "A.save_for_backward(A)")
    )
    assert "host_write" in rules(BASE + "\n\ndef helper(ctx, A):\n    ctx.n = A\n")
    assert "tensor_method" in rules(BASE + "\n\ndef helper(ctx, A):\n    ctx.save_for_backward(A)\n")
    assert "tensor_method" in rules(THROUGH_APPLY + "\n\ndef run(A, B, C):\n    A.apply(C)\n")
    # Only `.apply` runs the methods that take a context, so their first argument is never a tensor of
    # the candidate's; a helper's first argument, or forward's beside a setup_context, is no context.
    assert "tensor_method" in rules(THROUGH_APPLY + "\n\ndef run(A, B, C):\n    _Copy.forward(C, A, C)\n")
    helper = "    @staticmethod\n    def fill(out, A):\n        out.data = A\n\n"
    assert "host_write" in rules(
        THROUGH_APPLY.replace(
            "    @staticmethod\n    def forward", helper + "    @staticmethod\n    def forward"
        )
    )
    setup = "    @staticmethod\n    def setup_context(ctx, inputs, output):\n        ctx.n = 1\n\n"
    with_setup = THROUGH_APPLY.replace(
        "    @staticmethod\n    def backward", setup + "    @staticmethod\n    def backward"
    )
    assert "host_write" in rules(with_setup)  # forward's `ctx.n = ...`: its first argument is A here
    assert "host_write" not in rules(with_setup.replace("        ctx.n = C.numel()\n", ""))
    # A forward that does not launch leaves run without a launch.
    idle = THROUGH_APPLY.replace(
        "        copy_kernel[(triton.cdiv(ctx.n, 1024),)](A, C, ctx.n, BLOCK=1024)\n", ""
    )
    assert rules(idle + "\n\ndef run(A, B, C):\n    _Copy.apply(A, C)\n") == ["no_launch"]


def test_a_launch_metadata_function_of_the_file_is_host_code() -> None:
    """Library kernels name FLOPs and bytes for profilers (`@triton.jit(launch_metadata=F)`, called only
    when a launch hook is on): F must be a host function of the file, its body checked as host code."""
    metadata = (
        "\n\ndef meta(grid, kernel, args):\n"
        "    found = {'name': kernel.name}\n"
        "    found['bytes'] = args['n'] * 4\n"
        "    return found\n"
    )

    def source(value: str, body: str = metadata) -> str:
        # Defined before the kernel, as it must be: the decorator reads it when the kernel is defined.
        return BASE.replace("@triton.jit\n", f"{body}\n\n@triton.jit(launch_metadata={value})\n", 1)

    assert scan(source("meta")) == []
    assert "launch_option" in rules(source("lambda grid, kernel, args: {}"))
    assert "launch_option" in rules(source("copy_kernel"))
    assert "tensor_method" in rules(source("meta", metadata.replace("args['n'] * 4", "args['C'].sum()")))


@pytest.mark.parametrize(
    ("body", "refused"),
    [
        ("options = {}\n    options['num_warps'] = 4\n    return options", False),
        ("shapes = [0, 0]\n    shapes[1] = A.shape[0]\n    return shapes", False),
        ("made = {k: 0 for k in 'ab'}\n    del made['a']\n    return made", False),
        # not a container this function made: a parameter, a name bound otherwise, an item of an item
        ("A[0] = 1", True),
        ("options = {}\n    options = A\n    options[0] = B", True),
        ("options = {'t': A}\n    options['t'][0] = B", True),
        ("for options in [{}]:\n        options[0] = B", True),
        ("C = {}\n    C[0] = B", True),
    ],
)
def test_an_item_written_into_a_container_the_function_made_is_not_a_tensor_write(
    body: str, refused: bool
) -> None:
    """Host code gathering launch options in a dict it made writes no tensor; every other item write may."""
    assert ("host_write" in rules(BASE + HOST.format(body))) is refused


WRAPPER = (
    "\n\ndef ensure_contiguous(fn):\n"
    "    @functools.wraps(fn)\n"
    "    def wrapper(*args, **kwargs):\n"
    "        args = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in args]\n"
    "        return fn(*args, **kwargs)\n\n"
    "    return wrapper\n"
)


def test_the_files_own_decorator_wraps_host_code_and_never_a_kernel() -> None:
    """A library's wrapper (`ensure_contiguous`) is a host function of the file, its body checked as host
    code; it may decorate a helper or an autograd Function's method, not a kernel nor `run`."""
    with_wrapper = BASE.replace("import torch\n", "import functools\n\nimport torch\n", 1).replace(
        "\n\n@triton.jit\n", WRAPPER + "\n\n@triton.jit\n", 1
    )
    on_run = with_wrapper + "\n\n@ensure_contiguous\ndef shapes(A, B):\n    return A.shape, B.shape\n"
    assert scan(on_run) == []
    # `run` itself stays a plain function (at most @torch.no_grad): the entry the evaluator calls.
    assert "entry" in rules(with_wrapper.replace("def run(", "@ensure_contiguous\ndef run(", 1))
    assert "decorator" in rules(with_wrapper.replace("@triton.jit\n", "@ensure_contiguous\n@triton.jit\n", 1))
    assert "decorator" in rules(on_run.replace("@ensure_contiguous", "@functools.wraps(run)"))
    assert "tensor_method" in rules(on_run.replace("a.contiguous()", "a.float()"))
    autograd = (HONEST_TRITON / "gemm_autograd_function.py").read_text()
    wrapped = autograd.replace("import torch\n", "import functools\n\nimport torch\n", 1).replace(
        "\n\nclass _Gemm(", WRAPPER + "\n\nclass _Gemm(", 1
    )
    forward = '    @torch.amp.custom_fwd(device_type="cuda")\n'
    assert scan(wrapped.replace(forward, forward + "    @ensure_contiguous\n", 1)) == []
    assert "class" in rules(wrapped.replace(forward, forward + "    @functools.wraps(run)\n", 1))
