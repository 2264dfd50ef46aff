"""Seccomp filters for the candidate's processes: the doors a kernel could use to reach past its call.

Two filters, both applied to every thread of the process (SECCOMP_FILTER_FLAG_TSYNC), each denied call
failing with EPERM (never killing: a broken harness must show up as an error, not as a silent death):
- `DOORS`, installed before the candidate's library is loaded, so its constructors already run under it:
  no ptrace or process_vm_*, no exec, no new process (clone only as a thread), no signals to other
  processes, no leaving the process group, no new namespaces, no io_uring (it bypasses seccomp), no perf
  or bpf; with `no_writes`, no opening a file for writing, creating or truncating it (so no /proc/self/mem,
  and no other process's descriptors through /proc/PID/fd), no changing a name in the file system (rename,
  link, unlink, mkdir, chmod...: a report file another process reads could otherwise be swapped for one
  the candidate wrote into its own source) and no sockets.
- `NO_NEW_CODE`, installed once the library is loaded: no mapping or protecting memory as executable,
  so code the candidate writes at run time can never run.

Linux on x86-64 only (the system call numbers below); elsewhere `available()` is False and the caller
says so in the verdict. Standard library and ctypes only: this runs in every candidate process.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from dataclasses import dataclass, field

# x86-64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl).
NR = {
    "mmap": 9, "mprotect": 10, "open": 2, "socket": 41, "socketpair": 53, "clone": 56, "fork": 57,
    "vfork": 58, "execve": 59, "kill": 62, "shmat": 30, "creat": 85, "ptrace": 101, "setpgid": 109,
    "setsid": 112, "personality": 135, "pivot_root": 155, "chroot": 161, "mount": 165, "umount2": 166,
    "swapon": 167, "swapoff": 168, "reboot": 169, "init_module": 175, "delete_module": 176, "tkill": 200,
    "remap_file_pages": 216, "tgkill": 234, "kexec_load": 246, "add_key": 248, "request_key": 249,
    "keyctl": 250, "migrate_pages": 256, "openat": 257, "unshare": 272, "move_pages": 279,
    "perf_event_open": 298, "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308,
    "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "finit_module": 313,
    "memfd_create": 319, "kexec_file_load": 320, "bpf": 321, "execveat": 322, "userfaultfd": 323,
    "pkey_mprotect": 329, "pidfd_send_signal": 424, "io_uring_setup": 425, "io_uring_enter": 426,
    "io_uring_register": 427, "pidfd_open": 434, "clone3": 435, "openat2": 437, "pidfd_getfd": 438,
    "process_madvise": 440,
    "truncate": 76, "rename": 82, "mkdir": 83, "rmdir": 84, "link": 86, "unlink": 87, "symlink": 88,
    "chmod": 90, "chown": 92, "lchown": 94, "utime": 132, "mknod": 133, "setxattr": 188, "lsetxattr": 189,
    "removexattr": 197, "lremovexattr": 198, "utimes": 235, "mkdirat": 258, "mknodat": 259, "fchownat": 260,
    "futimesat": 261, "unlinkat": 263, "renameat": 264, "linkat": 265, "symlinkat": 266, "fchmodat": 268,
    "utimensat": 280, "renameat2": 316, "fchmodat2": 452,
}  # fmt: skip
ALWAYS_DENIED = (
    "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "kcmp", "execve", "execveat",
    "fork", "vfork", "tkill", "setsid", "setpgid", "unshare", "setns", "mount", "umount2", "chroot",
    "pivot_root", "swapon", "swapoff", "reboot", "init_module", "finit_module", "delete_module",
    "kexec_load", "kexec_file_load", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
    "io_uring_enter", "io_uring_register", "personality", "add_key", "request_key", "keyctl",
    "pidfd_open", "pidfd_send_signal", "pidfd_getfd", "migrate_pages", "move_pages",
    "name_to_handle_at", "open_by_handle_at",
)  # fmt: skip
WRITE_DOORS = (
    "creat", "openat2", "socket", "socketpair", "memfd_create",
    "truncate", "rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat", "unlink",
    "unlinkat", "rmdir", "mkdir", "mkdirat", "mknod", "mknodat", "chmod", "fchmodat", "fchmodat2", "chown",
    "lchown", "fchownat", "utime", "utimes", "utimensat", "futimesat", "setxattr", "lsetxattr", "removexattr",
    "lremovexattr",
)  # fmt: skip
CODE_DOORS = ("shmat", "remap_file_pages")

AUDIT_ARCH_X86_64 = 0xC000003E
X32_SYSCALL_BIT = 0x40000000
CLONE_THREAD = 0x00010000
PROT_EXEC = 0x4
# O_WRONLY | O_RDWR | O_CREAT | O_TRUNC: O_TRUNC truncates even with O_RDONLY, O_CREAT makes a name.
OPEN_WRITE_FLAGS = 0x3 | 0x40 | 0x200
SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
PR_SET_NO_NEW_PRIVS = 38
SYS_SECCOMP = 317
RET_ALLOW = 0x7FFF0000
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000

# Classic BPF opcodes.
LD_W_ABS = 0x20
JEQ_K = 0x15
JGE_K = 0x35
JSET_K = 0x45
RET_K = 0x06

# Offsets in struct seccomp_data: nr (u32), arch (u32), instruction_pointer (u64), args[6] (u64 each).
NR_OFFSET, ARCH_OFFSET, ARGS_OFFSET = 0, 4, 16


def _arg_low(index: int) -> int:
    return ARGS_OFFSET + 8 * index  # little-endian: the low 32 bits come first


def _arg_high(index: int) -> int:
    return ARGS_OFFSET + 8 * index + 4


@dataclass
class _Program:
    """Classic BPF with symbolic jump targets, resolved to the relative offsets BPF wants."""

    code: list[tuple[int, str | int, str | int, int]] = field(default_factory=list)
    labels: dict[str, int] = field(default_factory=dict)

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def op(self, code: int, k: int = 0, jt: str | int = 0, jf: str | int = 0) -> None:
        self.code.append((code, jt, jf, k))

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (code, jt, jf, k) in enumerate(self.code):
            offsets = []
            for target in (jt, jf):
                offset = target if isinstance(target, int) else self.labels[target] - index - 1
                if not 0 <= offset <= 255:
                    raise ValueError(f"seccomp jump out of range at {index}")
                offsets.append(offset)
            out += struct.pack("<HBBI", code, offsets[0], offsets[1], k & 0xFFFFFFFF)
        return bytes(out)


def doors_program(own_pid: int, no_writes: bool) -> bytes:
    """The `DOORS` filter for a process whose pid is `own_pid`."""
    program = _Program()
    program.op(LD_W_ABS, ARCH_OFFSET)
    program.op(JEQ_K, AUDIT_ARCH_X86_64, 0, "kill")  # int 0x80 and other ABIs arrive with another arch
    program.op(LD_W_ABS, NR_OFFSET)
    program.op(JGE_K, X32_SYSCALL_BIT, "deny", 0)
    denied = list(ALWAYS_DENIED) + (list(WRITE_DOORS) if no_writes else [])
    for name in denied:
        program.op(JEQ_K, NR[name], "deny", 0)
    program.op(JEQ_K, NR["clone"], "clone", 0)
    program.op(JEQ_K, NR["clone3"], "enosys", 0)  # glibc falls back to clone, whose flags we can read
    program.op(JEQ_K, NR["kill"], "own_pid", 0)
    program.op(JEQ_K, NR["tgkill"], "own_pid", 0)
    if no_writes:
        program.op(JEQ_K, NR["open"], "open_flags_1", 0)
        program.op(JEQ_K, NR["openat"], "open_flags_2", 0)
    program.op(RET_K, RET_ALLOW)
    program.label("clone")
    program.op(LD_W_ABS, _arg_low(0))
    program.op(JSET_K, CLONE_THREAD, "allow", "deny")
    program.label("own_pid")
    program.op(LD_W_ABS, _arg_high(0))
    program.op(JEQ_K, 0, 0, "deny")
    program.op(LD_W_ABS, _arg_low(0))
    program.op(JEQ_K, own_pid, "allow", "deny")
    if no_writes:
        for position in (1, 2):
            program.label(f"open_flags_{position}")
            program.op(LD_W_ABS, _arg_low(position))
            program.op(JSET_K, OPEN_WRITE_FLAGS, "deny", "allow")
    program.label("allow")
    program.op(RET_K, RET_ALLOW)
    program.label("enosys")
    program.op(RET_K, RET_ERRNO | errno.ENOSYS)
    program.label("deny")
    program.op(RET_K, RET_ERRNO | errno.EPERM)
    program.label("kill")
    program.op(RET_K, RET_KILL_PROCESS)
    return program.assemble()


def no_new_code_program() -> bytes:
    """The `NO_NEW_CODE` filter: mmap, mprotect and pkey_mprotect never with PROT_EXEC."""
    program = _Program()
    program.op(LD_W_ABS, ARCH_OFFSET)
    program.op(JEQ_K, AUDIT_ARCH_X86_64, 0, "kill")
    program.op(LD_W_ABS, NR_OFFSET)
    for name in CODE_DOORS:
        program.op(JEQ_K, NR[name], "deny", 0)
    for name in ("mmap", "mprotect", "pkey_mprotect"):
        program.op(JEQ_K, NR[name], "prot", 0)
    program.op(RET_K, RET_ALLOW)
    program.label("prot")
    program.op(LD_W_ABS, _arg_low(2))
    program.op(JSET_K, PROT_EXEC, "deny", 0)
    program.op(RET_K, RET_ALLOW)
    program.label("deny")
    program.op(RET_K, RET_ERRNO | errno.EPERM)
    program.label("kill")
    program.op(RET_K, RET_KILL_PROCESS)
    return program.assemble()


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class SandboxError(RuntimeError):
    """The kernel refused the filter."""


def available() -> bool:
    return platform.system() == "Linux" and platform.machine() in ("x86_64", "AMD64")


def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def _no_new_privileges(libc: ctypes.CDLL) -> None:
    """Required before an unprivileged process may install seccomp filters or Landlock rules."""
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SandboxError(f"prctl(PR_SET_NO_NEW_PRIVS): {os.strerror(ctypes.get_errno())}")


def install(program: bytes) -> None:
    """Install `program` on every thread of this process; irreversible."""
    if not available():
        raise SandboxError(f"seccomp filters are built for Linux on x86-64, not {platform.machine()}")
    libc = _libc()
    _no_new_privileges(libc)
    buffer = ctypes.create_string_buffer(program)
    fprog = _SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    result = libc.syscall(
        ctypes.c_long(SYS_SECCOMP),
        ctypes.c_long(SECCOMP_SET_MODE_FILTER),
        ctypes.c_long(SECCOMP_FILTER_FLAG_TSYNC),
        ctypes.byref(fprog),
    )
    if result != 0:
        detail = (
            os.strerror(ctypes.get_errno()) if result < 0 else f"thread {result} could not be synchronised"
        )
        raise SandboxError(f"seccomp: {detail}")


# Landlock (Linux 5.13+): file system access rules any process may put on itself, root included.
LANDLOCK_CREATE_RULESET, LANDLOCK_ADD_RULE, LANDLOCK_RESTRICT_SELF = 444, 445, 446
LANDLOCK_CREATE_RULESET_VERSION = 1
LANDLOCK_RULE_PATH_BENEATH = 1
# WRITE_FILE, REMOVE_DIR, REMOVE_FILE and MAKE_{CHAR,DIR,REG,SOCK,FIFO,BLOCK,SYM} (ABI 1), REFER (ABI 2:
# renames and links across folders), TRUNCATE (ABI 3).
LANDLOCK_WRITES = {1: 0b1_1111_1111_0010, 2: 0b11_1111_1111_0010, 3: 0b111_1111_1111_0010}
LANDLOCK_READS = 0b1101  # EXECUTE, READ_FILE, READ_DIR
# What a rule on a file (not a folder) may grant: EXECUTE, WRITE_FILE, READ_FILE, TRUNCATE.
LANDLOCK_FILE_RIGHTS = 0b100_0000_0000_0111
PR_SET_DUMPABLE = 8
SYS_CAPSET = 126
LINUX_CAPABILITY_VERSION_3 = 0x20080522


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (an old kernel, or Landlock off)."""
    if not available():
        return 0
    result = _libc().syscall(ctypes.c_long(LANDLOCK_CREATE_RULESET), None, ctypes.c_size_t(0),
                             ctypes.c_uint32(LANDLOCK_CREATE_RULESET_VERSION))  # fmt: skip
    return max(int(result), 0)


def confine_writes(beneath: list[str]) -> None:
    """From now on this process (and what it starts) writes, creates, removes, renames, links and
    truncates files only beneath the folders in `beneath`; reading stays open. Irreversible."""
    writes = LANDLOCK_WRITES[min(_landlock(), 3)]
    _restrict(writes, [(folder, writes) for folder in beneath])


def confine_reads(readable: list[str], writable: list[str]) -> None:
    """From now on this process (and what it starts) reads and runs files only beneath `readable` and
    `writable`, and writes only beneath `writable` (folders or single files). Irreversible."""
    handled = LANDLOCK_READS | LANDLOCK_WRITES[min(_landlock(), 3)]
    _restrict(handled, [(path, LANDLOCK_READS) for path in readable] + [(path, handled) for path in writable])


def _landlock() -> int:
    abi = landlock_abi()
    if abi < 1:
        raise SandboxError("this kernel has no Landlock (Linux 5.13 or later, with Landlock enabled)")
    return abi


def _restrict(handled: int, rules: list[tuple[str, int]]) -> None:
    """A Landlock ruleset over the `handled` rights, each path in `rules` granted its rights beneath it
    (a file only those a file can have), enforced on this process."""
    libc = _libc()
    _no_new_privileges(libc)
    attr = struct.pack("<Q", handled)  # handled_access_fs only: networking and scopes are left alone
    ruleset = libc.syscall(ctypes.c_long(LANDLOCK_CREATE_RULESET), ctypes.c_char_p(attr),
                           ctypes.c_size_t(len(attr)), ctypes.c_uint32(0))  # fmt: skip
    if ruleset < 0:
        raise SandboxError(f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        for path, rights in rules:
            fd = os.open(path, os.O_PATH)
            try:
                if not os.path.isdir(path):
                    rights &= LANDLOCK_FILE_RIGHTS
                rule = struct.pack("<Qi", rights & handled, fd)  # struct landlock_path_beneath_attr is packed
                if libc.syscall(ctypes.c_long(LANDLOCK_ADD_RULE), ctypes.c_int(ruleset),
                                ctypes.c_int(LANDLOCK_RULE_PATH_BENEATH), ctypes.c_char_p(rule),
                                ctypes.c_uint32(0)) != 0:  # fmt: skip
                    raise SandboxError(f"landlock_add_rule({path}): {os.strerror(ctypes.get_errno())}")
            finally:
                os.close(fd)
        if (
            libc.syscall(ctypes.c_long(LANDLOCK_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0))
            != 0
        ):
            raise SandboxError(f"landlock_restrict_self: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)


def drop_capabilities() -> None:
    """No capability left in this process, so running as root reaches no more than a user does: the
    descriptors and memory of processes that are not dumpable (the worker, the judge) stay out of reach."""
    header = struct.pack("<Ii", LINUX_CAPABILITY_VERSION_3, 0)
    data = bytes(24)  # two struct __user_cap_data_struct (effective, permitted, inheritable), all zero
    if _libc().syscall(ctypes.c_long(SYS_CAPSET), ctypes.c_char_p(header), ctypes.c_char_p(data)) != 0:
        raise SandboxError(f"capset: {os.strerror(ctypes.get_errno())}")


def not_dumpable() -> None:
    """Other processes of this user (a candidate's among them) can no longer open this process's
    descriptors or memory through /proc; only a process holding CAP_SYS_PTRACE still could."""
    if available() and _libc().prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise SandboxError(f"prctl(PR_SET_DUMPABLE): {os.strerror(ctypes.get_errno())}")


def close_doors(no_writes: bool) -> None:
    install(doors_program(os.getpid(), no_writes))


def forbid_new_code() -> None:
    install(no_new_code_program())
