"""The sandbox's system-call filter: what a container runtime's default profile forbids, compiled by libseccomp.

bubblewrap loads a compiled filter from a file descriptor (``--seccomp FD``); this module builds it once per
process with libseccomp, through ``pyseccomp`` (its ctypes bindings), rather than by hand-written BPF. The rules
are the union of Flatpak's (``common/flatpak-run.c``, ``setup_seccomp``) and the calls Docker's default profile
(``profiles/seccomp/default.json``) leaves out of its allow-list for a container without capabilities; see
docs/sandbox.md for where it follows which and where it differs. The filter allows by default, as Flatpak's does,
and every denied call fails with an errno (never a kill), so a program that probes for a feature falls back.
"""

from __future__ import annotations

import atexit
import errno
import functools
import os
import shutil
import tempfile
from pathlib import Path

# Calls that reach what the sandbox must keep: the kernel's keyrings (shared by every process of a user), other
# processes' memory and descriptors, mounts and namespaces (a mask could come off), the kernel itself (modules,
# kexec, BPF, perf), the clock, accounting, swap, the NUMA policy of the machine, file handles that step
# outside a mount (open_by_handle_at: the "shocker" escape), userfaultfd (a race amplifier of kernel exploits),
# io_uring (its operations pass the filter unseen; Docker denies it too). Another process's priority: below.
DENIED_EPERM = (
    "add_key", "keyctl", "request_key",
    "ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "process_madvise",
    "mount", "umount", "umount2", "pivot_root", "chroot", "unshare", "setns",
    "init_module", "finit_module", "delete_module", "create_module", "query_module", "get_kernel_syms",
    "kexec_load", "kexec_file_load", "bpf", "perf_event_open", "lookup_dcookie",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "quotactl_fd", "nfsservctl", "syslog", "sysfs",
    "_sysctl", "ustat", "uselib", "vhangup",
    "clock_settime", "clock_adjtime", "settimeofday", "stime", "adjtimex",
    "iopl", "ioperm", "modify_ldt", "vm86", "vm86old",
    "move_pages", "mbind", "get_mempolicy", "set_mempolicy", "set_mempolicy_home_node", "migrate_pages",
    "name_to_handle_at", "open_by_handle_at",
    "userfaultfd", "fanotify_init",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
)  # fmt: skip
# The new mount API: ENOSYS, so that a program falls back to mount(2), which is denied above (Flatpak's choice).
DENIED_ENOSYS = ("open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr")
# clone3 passes its flags in memory, where no filter can read them: ENOSYS makes libc fall back to clone, whose
# flags it can (Docker and Flatpak alike).
CLONE3 = "clone3"
# New namespaces: a user namespace of its own would give the agent every capability over new mounts.
CLONE_NEW = {
    "CLONE_NEWNS": 0x00020000, "CLONE_NEWCGROUP": 0x02000000, "CLONE_NEWUTS": 0x04000000,
    "CLONE_NEWIPC": 0x08000000, "CLONE_NEWUSER": 0x10000000, "CLONE_NEWPID": 0x20000000,
    "CLONE_NEWNET": 0x40000000, "CLONE_NEWTIME": 0x00000080,
}  # fmt: skip
# Typing into the controlling terminal (TIOCSTI) or the console (TIOCLINUX): input the harness would act on. The
# command is compared on its low 32 bits, as the kernel reads it (CVE-2019-10063: the high bits hid it).
TIOCSTI, TIOCLINUX = 0x5412, 0x541C
# personality(2): only the default; READ_IMPLIES_EXEC or ADDR_NO_RANDOMIZE would weaken the agent's own
# processes for an exploit (Flatpak allows PER_LINUX alone; Docker also the PER_LINUX32 and UNAME26 variants).
PER_LINUX = 0
# socket(2): the families a CLI, a shell and an MCP server use; the rest (AF_PACKET, AF_VSOCK, AF_ALG, Bluetooth,
# …) are kernel surface nothing here needs (Flatpak's list).
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK = 1, 2, 10, 16
SOCKET_FAMILIES = (AF_UNIX, AF_INET, AF_INET6, AF_NETLINK)
AF_MAX = 64
# Another process's scheduling: renicing (or re-prioritising) the CLI, the relay or the sandbox's init would starve
# the processes that watch the agent, which Landlock's signal scoping does not cover. A process may change its own
# (``nice``: the target 0, "the caller"); (call, argument holding the target, argument holding its kind or None,
# the one kind allowed: a process, never a group or a user).
OTHER_SCHEDULING = (("setpriority", 1, 0, 0), ("ioprio_set", 1, 0, 1), ("sched_setscheduler", 0, None, 0),
                    ("sched_setparam", 0, None, 0), ("sched_setattr", 0, None, 0))  # fmt: skip


class SeccompError(RuntimeError):
    """libseccomp is missing or could not build the filter; the message says which."""


def build_filter() -> bytes:
    """The compiled filter (BPF) for this machine's architecture; other architectures' calls are killed."""
    try:
        import pyseccomp as seccomp
    except ImportError as exc:  # the package is a dependency; its absence is a broken install
        raise SeccompError(f"the pyseccomp package is not installed ({exc})") from None
    try:
        rules = seccomp.SyscallFilter(seccomp.ALLOW)
    except (OSError, AttributeError) as exc:  # ctypes could not load libseccomp.so.2
        raise SeccompError(f"libseccomp could not be loaded ({exc}); install libseccomp2") from None

    def deny(code: int, name: str, *args: object) -> None:
        try:
            number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, name)
        except (OSError, ValueError):
            return
        if number < 0:  # no such call on this architecture (vm86 on x86-64): nothing to deny
            return
        rules.add_rule(seccomp.ERRNO(code), name, *args)

    for name in DENIED_EPERM:
        deny(errno.EPERM, name)
    for name in DENIED_ENOSYS:
        deny(errno.ENOSYS, name)
    deny(errno.ENOSYS, CLONE3)
    for flag in CLONE_NEW.values():
        deny(errno.EPERM, "clone", seccomp.Arg(_clone_flags_arg(), seccomp.MASKED_EQ, flag, flag))
    for request in (TIOCSTI, TIOCLINUX):
        deny(errno.EPERM, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, request))
    deny(errno.EPERM, "personality", seccomp.Arg(0, seccomp.NE, PER_LINUX))
    for name, target, kind, process in OTHER_SCHEDULING:
        deny(errno.EPERM, name, seccomp.Arg(target, seccomp.NE, 0))
        if kind is not None:
            deny(errno.EPERM, name, seccomp.Arg(kind, seccomp.NE, process))
    for family in range(AF_MAX):
        if family not in SOCKET_FAMILIES:
            deny(errno.EAFNOSUPPORT, "socket", seccomp.Arg(0, seccomp.EQ, family))
    deny(errno.EAFNOSUPPORT, "socket", seccomp.Arg(0, seccomp.GE, AF_MAX))
    with tempfile.TemporaryFile() as out:
        rules.export_bpf(out)
        out.seek(0)
        return out.read()


def _clone_flags_arg() -> int:
    """Which argument of clone(2) holds the flags: the second on s390, the first everywhere else."""
    return 1 if os.uname().machine.startswith("s390") else 0


@functools.cache
def filter_file() -> Path:
    """The compiled filter in a folder of this process's own (removed at exit), for bubblewrap to read through a
    descriptor; built once per process. Nothing in it is secret, and only its owner can change it: readable by
    all, so a sandbox started as another user (``setpriv``, ``runuser``) reads it too."""
    folder = Path(tempfile.mkdtemp(prefix="agent-eval-seccomp-"))
    atexit.register(shutil.rmtree, folder, True)
    folder.chmod(0o755)
    path = folder / "filter.bpf"
    path.write_bytes(build_filter())
    path.chmod(0o444)
    return path
