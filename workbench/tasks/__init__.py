"""Task catalogue: FlashInfer-Trace definitions and workloads, targets, FLOPs and speed of light."""

from workbench.tasks.catalogue import Catalogue, Task, resolve_task
from workbench.tasks.models import Definition, TaskFacts, Workload
from workbench.tasks.targets import TARGETS, Target, get_target

__all__ = [
    "TARGETS",
    "Catalogue",
    "Definition",
    "Target",
    "Task",
    "TaskFacts",
    "Workload",
    "get_target",
    "resolve_task",
]
