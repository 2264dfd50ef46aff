"""What a candidate's build may reach: nvcc and all it runs read only the toolkit, the system's compilers
and libraries, TVM-FFI and the build folder, and write only the build folder.

The source scan refuses the ways a source asks to read a file while it is built (`#include` off the
list, `#embed`, `.incbin`), but the preprocessor can put an assembler directive together from pieces no
scan follows, and what the build reads lands in the library or in the compiler's messages, which the agent
reads: a key under the user's home, another candidate's source in the build cache, another process's
environment under /proc. Landlock closes them whatever the source does. nvcc runs behind this module as
a launcher (`python -m workbench.evaluate.build.confined --read P … --write P … -- nvcc …`), which
confines itself and then becomes nvcc, so nothing runs in a forked child of the caller's threads. Where
the kernel has no Landlock the build runs as before. Standard library only.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from workbench.evaluate.gpu import sandbox

# The system's compilers, assembler, linker, headers and libraries, and the few files beyond them that
# nvcc and gcc open (the loader's cache, the time zone, malloc's setting, random bytes).
SYSTEM_READS = (
    "/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin",
    "/etc/ld.so.cache", "/etc/localtime", "/proc/sys/vm/overcommit_memory", "/dev/urandom",
)  # fmt: skip


def launcher(work: Path, toolchain: list[Path]) -> list[str]:
    """The command words that run what follows them confined to `work` and the `toolchain` folders (the
    toolkit's root, TVM-FFI's headers and library), or none where this kernel has no Landlock."""
    if sandbox.landlock_abi() < 1:
        return []
    readable = [path for path in (*SYSTEM_READS, *map(str, toolchain)) if os.path.exists(path)]
    words = [sys.executable, "-m", __name__]
    for path in readable:
        words += ["--read", path]
    for path in (str(work), "/dev/null"):
        words += ["--write", path]
    return [*words, "--"]


def main(argv: list[str]) -> int:
    readable: list[str] = []
    writable: list[str] = []
    while argv and argv[0] != "--":
        flag, path, argv = argv[0], argv[1], argv[2:]
        (readable if flag == "--read" else writable).append(path)
    command = argv[1:]
    try:
        sandbox.confine_reads(readable, writable)
    except sandbox.SandboxError as exc:
        print(f"the build could not be confined: {exc}", file=sys.stderr)
        return 125
    os.execvp(command[0], command)
    return 127  # not reached: exec replaced this process


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
