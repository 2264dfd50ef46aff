"""Checks made before the workbench opens a screen or makes a session file (light: no Textual)."""

from __future__ import annotations

from workbench.errors import UserError


def refuse_without_gpu(executor: str) -> None:
    """`--executor local` on a machine without an NVIDIA GPU is refused in one line before a screen
    opens, a session file is made or anything is built (the worker would refuse it only once started).
    """
    if executor != "local":
        return
    from workbench.evaluate.gpu.worker import list_gpus

    if not list_gpus():
        raise UserError(
            "--executor local: no NVIDIA GPU on this machine (nvidia-smi lists none); use --executor "
            "static for the build and static tiers only, or ssh://HOST with a GPU"
        )
