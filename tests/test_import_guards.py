"""Guards, not promises: what the GPU side may import, and no import circle anywhere in the package.

The GPU worker, the candidate's process (runner and its child), the judge and the tool processes run on
a bare GPU host with the standard library, torch, TVM-FFI, CUPTI and the optional baseline libraries:
never pydantic, typer, rich, textual, litellm or the catalogue (`workbench.tasks`), and no door to them:
an ssh executor's GPU host builds with `python -m workbench.evaluate.remote_build`, a process of its own
that nothing on the GPU side imports. Every import counts, the lazy ones inside functions too: the static
walk below follows them.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from workbench.evaluate.gpu import worker as worker_module

ROOT = Path(worker_module.__file__).resolve().parents[3]
GPU_SIDE = (
    "workbench.evaluate.gpu.worker",
    "workbench.evaluate.gpu.runner",
    "workbench.evaluate.gpu.candidate_entry",
    "workbench.evaluate.gpu.judge",
    "workbench.evaluate.gpu.tool_process",
)
REMOTE_BUILD = "workbench.evaluate.remote_build"
FORBIDDEN = ("pydantic", "typer", "rich", "textual", "litellm", "click", "workbench.tasks")


def _file(module: str) -> Path | None:
    base = ROOT / module.replace(".", "/")
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _imports(path: Path) -> set[str]:
    """Every module a file imports at run time, at top level or inside a function (not under
    `if TYPE_CHECKING:`), each `from M import name` also as `M.name` in case `name` is a module."""
    found: set[str] = set()
    todo: list[ast.AST] = [ast.parse(path.read_text())]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        todo.extend(ast.iter_child_nodes(node))
    return found


def _closure(roots: tuple[str, ...]) -> tuple[set[str], dict[str, set[str]]]:
    """The package modules reachable from `roots` and, per outside package, which of them import it."""
    seen: set[str] = set()
    outside: dict[str, set[str]] = {}
    todo = list(roots)
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = _file(module)
        if path is None:
            continue
        for name in _imports(path):
            if name.startswith("workbench"):
                if _file(name) is not None:
                    todo.append(name)
            else:
                outside.setdefault(name.split(".")[0], set()).add(module)
    return {m for m in seen if _file(m) is not None}, outside


def test_nothing_the_gpu_side_can_reach_imports_the_host_stack() -> None:
    modules, outside = _closure(GPU_SIDE)
    assert "workbench.evaluate.gpu.worker" in modules and "workbench.evaluate.gpu.sandbox" in modules
    reached = {name: sorted(outside[name]) for name in FORBIDDEN if name in outside}
    reached.update({m: ["(a package module)"] for m in modules if m.startswith("workbench.tasks")})
    assert reached == {}
    assert "torch" in outside and "tvm_ffi" in outside  # the walk does see the real imports


def test_the_gpu_side_never_reaches_the_remote_build() -> None:
    modules, _ = _closure(GPU_SIDE)
    assert REMOTE_BUILD not in modules and not any(m.startswith("workbench.evaluate.build") for m in modules)
    gpu_texts = [path.read_text() for path in (ROOT / "workbench" / "evaluate" / "gpu").glob("*.py")]
    assert not any(REMOTE_BUILD in text.replace(f"python -m {REMOTE_BUILD}", "") for text in gpu_texts)


def test_a_fresh_interpreter_importing_the_gpu_side_loads_none_of_the_host_stack() -> None:
    probe = (
        "import sys\n"
        f"for name in {GPU_SIDE!r}:\n"
        "    __import__(name)\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {FORBIDDEN!r} or m.startswith('workbench.tasks'))\n"
        "print(','.join(bad))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], check=True, capture_output=True, text=True, timeout=300
    )
    assert done.stdout.strip() == ""


def _cycles() -> list[list[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted((ROOT / "workbench").rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        graph[module] = {name for name in _imports(path) if name.startswith("workbench") and _file(name)}
    # A module's own packages are imported before it, always: an edge up to them is no circle of design.
    graph = {
        module: {m for m in _resolved(names, graph) if not (module + ".").startswith(m + ".")}
        for module, names in graph.items()
    }
    found: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for other in sorted(graph.get(module, ())):
            if state.get(other) == 1:
                found.append([*stack[stack.index(other) :], other])
            elif other not in state:
                visit(other)
        stack.pop()
        state[module] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    return found


def _resolved(names: set[str], graph: dict[str, set[str]]) -> set[str]:
    """The modules `names` denote: `workbench.x.y` is module x.y, or module x when y is a name inside it."""
    modules = set()
    for name in names:
        if name in graph:
            modules.add(name)
        elif name.rpartition(".")[0] in graph:
            modules.add(name.rpartition(".")[0])
    return modules


def test_no_import_circle_inside_the_package() -> None:
    assert _cycles() == []
