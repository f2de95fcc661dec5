"""Run each of the agent's shell commands in a Landlock domain of its own, out of reach of the CLI's process.

The agent's shells run as the CLI's uid, so without more they could open ``/proc/<cli>/mem`` and write into the
CLI's memory (forging what it records), or ``/proc/<cli>/fd/…``; no uid, capability or seccomp rule tells them
from the CLI. Landlock does: a process in a Landlock domain may not ptrace — nor open the ``/proc`` files that
ptrace's access check guards (``mem``, ``fd``, ``environ``, ``maps``) — a process outside its domain, or in an
ancestor of it. An agent that runs every shell command behind a prefix it reads from a variable
(``CodingAgent.shell_prefix_var``: one executable's path, the hook such an agent documents for wrapping them) gets
:func:`launcher` there from the sandbox, which enters a domain of its own, then execs bash with the command.
Everything the command starts stays in the domain; the CLI stays outside (it also runs its hooks and MCP servers
through the prefix: each in a domain of its own, which costs them nothing).

Why per command, and why Perl. A domain cannot be entered once for the whole tree: the CLI would be in it too, and
a process may reach any other of its own domain; only a domain the shell enters *after* the CLI forked it keeps
the CLI out. So every command pays the launcher's start. A Python launcher cost 15-75 ms per command (the
interpreter's start-up, ``ctypes``); this one is a Perl program of a few lines, no module loaded, whose
``syscall`` builtin makes the two Landlock calls: it starts in about a millisecond, close to bash's own start.
``/usr/bin/perl`` is part of every Debian and Ubuntu system (``perl-base`` is Essential) and of most others; where
there is none the sandbox is an error saying so (:class:`JailUnavailable`), never a sandbox without the jail.

The domain restricts nothing else on the file system: the one right it handles is making block devices, which no
process in the sandbox may do anyway (a ruleset must handle one right to exist). Where the kernel has Landlock ABI 6,
it is also scoped: its processes cannot signal (stop, kill) a process outside it — the CLI, the relay, the sandbox's
init — nor connect to an abstract Unix socket bound outside it; where it has not, the header says so
(:func:`scoping_caveat`). ``landlock_restrict_self`` needs no new
privileges, which bubblewrap always sets; the ruleset's descriptor is close-on-exec, so bash never holds it.
"""

from __future__ import annotations

import atexit
import ctypes
import functools
import os
import shutil
import tempfile
from pathlib import Path

PERL = "/usr/bin/perl"  # under /usr, which every sandbox shows read-only
REFUSED_STATUS = 126  # what a shell answers for a command it cannot run
SHELL_NAME = "bash"
# Where an agent without a prefix variable looks its shell up, so where the sandbox puts the jailed shell
# (CodingAgent.shell_from): its user's password entry (Codex), the SHELL variable (OpenCode), a `bash` on PATH
# (Gemini CLI).
PASSWD, SHELL_VAR, PATH_LOOKUP = "passwd", "SHELL", "PATH"
SHELL_SOURCES = (PASSWD, SHELL_VAR, PATH_LOOKUP)
# The variables that run code of their own in the jail's process before it enters its domain (the dynamic loader's
# preloads and audit libraries, Perl's options and module folders) or in a process the CLI starts outside any domain
# (node's options, for a Node MCP server). The harness never passes them from its environment; an agent that reads an
# environment file into its own process after start (Gemini CLI's ``.env``) must have them pinned empty
# (docs/sandbox.md, "What a turn leaves for the next"): measured, a turn's ``PERL5OPT`` made the next turn's jail
# load a module of the agent's that opened the CLI's ``/proc/<pid>/environ``.
PRE_DOMAIN_ENV = ("LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB",
                  "NODE_OPTIONS")  # fmt: skip
SCOPED_ABI = 6  # the Landlock ABI that scopes signals and abstract Unix sockets (Linux 6.12)
_LANDLOCK_CREATE_RULESET, _VERSION_FLAG = 444, 1

# Landlock's calls have one number on every architecture (Linux 5.13+): 444 landlock_create_ruleset, 446
# landlock_restrict_self; 2048 is LANDLOCK_ACCESS_FS_MAKE_BLOCK, the first field of struct landlock_ruleset_attr.
# From ABI 6 (Linux 6.12) its third field, ``scoped``, takes LANDLOCK_SCOPE_ABSTRACT_UNIX_SOCKET (1) and
# LANDLOCK_SCOPE_SIGNAL (2): the domain's processes can then neither signal a process outside it (the CLI, the
# relay, the sandbox's init: kill, tgkill, a pidfd's signal, SIGIO) nor connect to an abstract Unix socket bound
# outside it. The ABI is asked first (flag 1, LANDLOCK_CREATE_RULESET_VERSION); below 6 the domain is made without
# the scope, and the report's header says so (:func:`scoping_caveat`). A string argument of Perl's syscall is
# passed as a pointer to its bytes, a number as it is (0: a null pointer).
_DOMAIN = r"""my $abi = syscall(444, 0, 0, 1);
my $attr = $abi >= @SCOPED_ABI@ ? pack("QQQ", 2048, 0, 3) : pack("Q", 2048);  # a variable: syscall may write into it
my $ruleset = syscall(444, $attr, length($attr), 0);
if ($ruleset < 0) {
    print STDERR "agent-eval: landlock: no ruleset ($!); the kernel needs Landlock (5.13+); the command was not run\n";
    exit @REFUSED@;
}
if (syscall(446, $ruleset, 0) != 0) {
    print STDERR "agent-eval: landlock: the domain was refused ($!); the command was not run\n";
    exit @REFUSED@;
}
"""
# The launcher: a prefix's one argument is the command, which bash -c runs.
_LAUNCHER = (
    "#!@PERL@\n"
    + r"""if (@ARGV != 1) { print STDERR "usage: jail 'COMMAND'\n"; exit 2 }
"""
    + _DOMAIN
    + r"""exec { "@BASH@" } "@BASH@", "-c", $ARGV[0];
print STDERR "agent-eval: the jail could not start @BASH@ ($!)\n";
exit @REFUSED@;
"""
)
# The jailed shell: bash itself, with whatever arguments it is given (-lc, -c, a script, none) and under the name
# it was run by (a login shell's ``-bash`` too), in a domain of its own.
_SHELL = (
    "#!@PERL@\n"
    + _DOMAIN
    + r"""exec { "@BASH@" } $0, @ARGV;
print STDERR "agent-eval: the jailed shell could not start @BASH@ ($!)\n";
exit @REFUSED@;
"""
)


class JailUnavailable(RuntimeError):
    """The machine lacks what the jail runs on (Perl); the message says what to install."""


_launcher: list[str] = []  # the one launcher of this process, once written (a test empties it to write another)


def launcher() -> str:
    """The jail's executable (a Perl program, see the module's doc), written once per process into a folder of
    its own (removed at exit) beside the jailed shell (:func:`jailed_shell`), readable by all as the sandbox may
    run as another user; :class:`JailUnavailable` without ``/usr/bin/perl``."""
    if _launcher:
        return _launcher[0]
    if not os.access(PERL, os.X_OK):
        raise JailUnavailable(
            f"the jail that keeps the agent's commands out of the CLI's reach runs on Perl, and {PERL} is missing "
            "(Debian/Ubuntu: `apt-get install perl-base`, Fedora: `dnf install perl-interpreter`)"
        )
    bash = next((path for path in ("/bin/bash", "/usr/bin/bash") if os.path.exists(path)), "/bin/bash")
    folder = Path(tempfile.mkdtemp(prefix="agent-eval-jail-"))
    atexit.register(shutil.rmtree, folder, True)
    folder.chmod(0o755)
    (folder / "shell").mkdir(mode=0o755)  # the jailed shell alone in its folder, which may go on PATH
    for name, program in (("jail", _LAUNCHER), (f"shell/{SHELL_NAME}", _SHELL)):
        script = folder / name
        text = program.replace("@PERL@", PERL).replace("@BASH@", bash).replace("@REFUSED@", str(REFUSED_STATUS))
        text = text.replace("@SCOPED_ABI@", str(SCOPED_ABI))
        script.write_text(text, encoding="utf-8")
        script.chmod(0o555)
    _launcher.append(str(folder / "jail"))
    return _launcher[0]


def jailed_shell() -> str:
    """The jailed shell, in a folder of its own beside :func:`launcher`: bash, entering a Landlock domain of its
    own first, for an agent that looks its shell up rather than behind a prefix (``CodingAgent.shell_from``). Its
    name is ``bash``: an agent may pick the shell's syntax by the file's name (Codex does), or look ``bash`` up."""
    return str(Path(launcher()).parent / "shell" / SHELL_NAME)


@functools.cache
def landlock_abi() -> int:
    """The kernel's Landlock ABI version (0 where it has none): the version the jail's domains are made under."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        version = libc.syscall(_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_VERSION_FLAG))
    except (OSError, AttributeError):
        return 0
    return max(0, int(version))


def scoping_caveat(abi: int | None = None) -> str | None:
    """What the report's header says where the kernel's Landlock cannot scope signals and abstract Unix sockets
    (ABI below :data:`SCOPED_ABI`): the agent's shells could then stop or kill the CLI, the relay and the sandbox's
    init. None where it can (or where there is no Landlock at all: the sandbox is then an error naming the layer)."""
    abi = landlock_abi() if abi is None else abi
    if abi == 0 or abi >= SCOPED_ABI:
        return None
    return (
        f"agent-eval: landlock: signal scoping refused by this kernel (Landlock ABI {abi}, {SCOPED_ABI} needed: "
        "Linux 6.12+): the agent's shells can signal (stop, kill) the CLI, the relay and the sandbox's init, and "
        "connect to abstract Unix sockets outside their domain; renice stays refused (seccomp)"
    )
