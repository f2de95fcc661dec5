"""Drive the interactive Claude Code TUI in tmux and score it from its session file (``--agent-eval-mode tmux``,
docs/options.md).

The interactive arm reproduces what a person sees — the Explore subagent included — which ``claude -p``
does not. One run is one CLI process in a 230×60 pane (wide, so the TUI does not hard-wrap) of a tmux
server on a private socket, so a user's own tmux server is never touched; the server and every process
under the pane are killed when the run ends, whatever happens.

How the pane is read, and why:

* the startup dialogs (workspace trust, "use this API key?", the bypass-permissions warning) are answered by
  moving the cursor to their "Yes" option; this CLI puts the cursor on "No, exit" first, so a bare Enter
  would quit;
* with MCP servers configured, ``/mcp`` is opened and read until each shows ✔ (✘ stops the run): the TUI
  takes a question while its servers still start and sends it without their tools, which would turn a
  with-arm into a without-arm with nothing on screen to tell;
* a question is typed, then its first 24 characters must show in the input box before Enter is pressed:
  keys typed while the welcome screen or the MCP start-up redraws are lost, so typing is retried;
* a turn is over when the screen has not changed for 16 polls (about 8 s) AND the empty input box is back.
  Never a spinner string: a model that thinks shows no busy indicator while it streams its answer, and a
  spinner-based timeout kills runs mid-answer.

While a turn runs, the session file and its subagents' files are read as the CLI appends to them (one line per
whole message, tool result, or request sent): the screen cannot tell, since its spinner and timer move whether or
not anything arrives. A turn whose lines carry an API error (the CLI gave up retrying; the screen then offers
"Resend your message") ends the run at once; the longest gap between lines marks a stalled turn; a request line
that repeats the one before it (same ``requestDigest``) is a retry. The judgements are :mod:`.watch`'s, shared
with the headless driver.

Afterwards the session file (``~/.claude/projects/<escaped-cwd>/<session-id>.jsonl``) and its subagent files
are copied beside the pane text as ``run-<label>.session.jsonl`` and ``run-<label>.session/``, the layout
:func:`~pytest_agent_eval.agents.claude_code.transcript.read_session_file` reads. HOME is the agent's to change, so
every file under it is read, copied and rewritten through :mod:`pytest_agent_eval.harness.untrusted`: a link the
agent planted there (in place of the session folder, a subagent file, the state file) is refused or replaced, never
followed to a host file.

A fresh HOME would get the first-run wizard, which needs api.anthropic.com; the driver sets only its
``hasCompletedOnboarding`` flag in the CLI's state file. Approving the API key makes the CLI store the key's
last 20 characters there; the driver removes that entry when the run ends.

The environment reaches the pane as the environment of the tmux command that starts the private server (a
new server copies it as its global environment), so no variable — an API key included — is put on a
command line or written to a file by this module.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_agent_eval.agents.claude_code.events import describe, turn_api_error
from pytest_agent_eval.agents.claude_code.headless import HeadlessOptions, settings_flags, tool_flags
from pytest_agent_eval.agents.claude_code.transcript import belongs_to
from pytest_agent_eval.harness.drivers import AgentInfraError, RunRecord, TurnError
from pytest_agent_eval.harness.drivers.stream import event_of, exit_reason
from pytest_agent_eval.harness.drivers.watch import Silences
from pytest_agent_eval.harness.process import watched
from pytest_agent_eval.harness.untrusted import UntrustedFile, copy_file, copy_tree, open_dir, read_bytes, replace_file

TYPED_PROBE_CHARS = 24  # how much of a question must be on screen before Enter: proof the TUI took the typing
_TMUX_SESSION = "agent"
_TMUX_CALL_S = 10.0
_KILL_WAIT_S = 3.0
_SEP = "\x1f"  # between the screen and the pane state in one tmux call's output
# tmux 3.3 often marks a pane dead without ever filling #{pane_dead_status}, so the pane's shell prints it.
_EXIT_MARK = "agent-eval: exited with status"
_EXIT_RE = re.compile(re.escape(_EXIT_MARK) + r" (\d+)")

_RULE_RE = re.compile(r"^\s*[╭╰]?[─━]{8,}")
_PROMPT_GLYPHS = ("❯", ">")
_CURSOR_RE = re.compile(r"^\s*❯\s*(?:\d+\.\s+)?(\S.*?)\s*$")
_OPTION_RE = re.compile(r"^\s*(?:❯\s*)?(?:\d+\.\s+)?(\S.*?)\s*$")
_CONFIRM = ("Enter to confirm", "Enter to select")
_ACCEPT_RE = re.compile(r"^Yes\b")
_MCP_STATES = {"✔": "connected", "✓": "connected", "✘": "failed", "✗": "failed"}  # anything else: still starting
_FATAL_SCREENS = ("Unable to connect to Anthropic services", "Invalid API key", "Please run /login")
# Session-file lines that say what the CLI did (each with its ISO timestamp); the rest (mode, last-prompt,
# file-history-snapshot, cost-state, request blobs, …) is bookkeeping, which must not name what a silence waited on.
_TRANSCRIPT_KINDS = frozenset({"user", "assistant", "system", "attachment", "api-request"})


@dataclass(frozen=True)
class TmuxOptions:
    """The run settings shared with headless (``run``) and how the pane is watched; ``run.timeout_s`` is per
    turn, as in headless."""

    run: HeadlessOptions
    width: int = 230
    height: int = 60
    poll_s: float = 0.5
    stable_polls: int = 16
    startup_timeout_s: float = 120.0
    ready_polls: int = 4  # an empty input box this many polls running means the TUI takes keys
    type_attempts: int = 5
    type_check_s: float = 3.0
    exit_grace_s: float = 10.0


@dataclass
class TmuxRunRecord(RunRecord):
    """A :class:`RunRecord` of one interactive process: ``segments`` is ``[session copy]``, ``exit_codes`` and
    ``hung_after_result`` have one entry (the process, and whether ``/exit`` failed to end it).

    ``wall_s`` is per turn, from Enter to the last change of the conversation on screen (the settle wait,
    ``settle_s``, excluded); ``turn_s`` is the CLI's own ``turn_duration`` per turn from the session file;
    ``longest_silence_s``, ``silence_after`` and ``api_retries`` are per turn from the session files as they
    grew (see :class:`TurnWatch`).
    """

    pane: Path | None = None
    dialogs: list[str] = field(default_factory=list)
    typing_attempts: list[int] = field(default_factory=list)
    startup_s: float = 0.0
    mcp_s: float = 0.0
    settle_s: list[float] = field(default_factory=list)
    turn_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            **super().to_dict(),
            "driver": "tmux",
            "pane": str(self.pane) if self.pane else None,
            "dialogs": self.dialogs,
            "typing_attempts": self.typing_attempts,
            "startup_s": round(self.startup_s, 3),
            "mcp_s": round(self.mcp_s, 3),
            "settle_s": [round(s, 3) for s in self.settle_s],
            "turn_s": [round(s, 3) for s in self.turn_s],
        }


def build_command(options: TmuxOptions, session_id: str) -> list[str]:
    """The interactive CLI's argv; ``--session-id`` names the session file before it exists."""
    run = options.run
    # Headless's flags less the ``-p``-only ones: ``run.max_budget_usd`` is not passed, the interactive CLI
    # refuses ``--max-budget-usd`` (and ``run.result_grace_s`` is a ``-p`` watchdog setting).
    return [
        run.claude,
        "--permission-mode",
        "bypassPermissions",
        "--model",
        run.model,
        "--effort",
        run.effort,
        *settings_flags(run),
        *tool_flags(run),
        "--session-id",
        session_id,
    ]


# -- reading a screen ------------------------------------------------------------------------------------------
def input_text(screen: str) -> str | None:
    """The text in the TUI's input box (``""`` when empty), or None when no input box is on screen.

    The box is the last line that starts with the prompt glyph right under a horizontal rule; the rule
    tells it from the ``❯ question`` lines of the history and the cursor of a menu.
    """
    lines = screen.splitlines()
    box = _box_line(lines)
    return None if box is None else lines[box].strip().strip("│").strip()[1:].strip().rstrip("│").strip()


def _box_line(lines: list[str]) -> int | None:
    for i in range(len(lines) - 1, 0, -1):
        if lines[i].strip().strip("│").strip().startswith(_PROMPT_GLYPHS) and _RULE_RE.match(lines[i - 1]):
            return i
    return None


def conversation(screen: str) -> str:
    """The screen without the TUI's notices, trailing blanks dropped: what the agent's work changes.

    Seconds after a turn the CLI clears a notice in the row above the input box (``● high · /effort``) and a
    hint in the status line below it; either would otherwise count as the turn's last change.
    """
    lines = [line.rstrip() for line in screen.splitlines()]
    box = _box_line(lines)
    if box is None:
        return "\n".join(lines)
    end = next((i for i in range(box + 1, len(lines)) if _RULE_RE.match(lines[i])), box)
    return "\n".join(lines[: max(box - 2, 0)] + lines[box - 1 : end + 1])


def dialog_choice(screen: str) -> tuple[str, str, int] | None:
    """A confirmation dialog on screen as ``(title, option to choose, cursor moves)``, or None.

    The option is the first one starting with "Yes"; ``moves`` is how far the cursor must go down (up when
    negative). A dialog without such an option raises AgentInfraError: the run cannot go on unattended.
    """
    if not any(marker in screen for marker in _CONFIRM) or input_text(screen) is not None:
        return None
    lines = screen.splitlines()
    cursor = next((i for i in range(len(lines) - 1, -1, -1) if _CURSOR_RE.match(lines[i])), None)
    if cursor is None:
        return None
    start = cursor
    while start > 0 and lines[start - 1].strip():
        start -= 1
    end = cursor
    while end + 1 < len(lines) and lines[end + 1].strip() and not any(m in lines[end + 1] for m in _CONFIRM):
        end += 1
    options = [_OPTION_RE.match(line).group(1) for line in lines[start : end + 1]]  # type: ignore[union-attr]
    title = next((ln.strip() for ln in lines if ln.strip() and not _RULE_RE.match(ln)), "")
    target = next((i for i, label in enumerate(options) if _ACCEPT_RE.match(label)), None)
    if target is None:
        raise AgentInfraError(f"a dialog the driver cannot answer is on screen: {title!r} (options {options})")
    return title, options[target], target - (cursor - start)


def mcp_states(screen: str, names: Sequence[str]) -> dict[str, str]:
    """Each server's state in the ``/mcp`` panel: ``connected`` (✔), ``failed`` (✘) or ``pending`` (… or absent)."""
    states = {}
    for name in names:
        match = re.search(rf"^\s*(?:❯\s*)?(\S)\s+{re.escape(name)}(?:\s|$)", screen, re.M)
        states[name] = _MCP_STATES.get(match.group(1), "pending") if match else "pending"
    return states


def mcp_server_names(config: Path) -> list[str]:
    """The servers an ``--mcp-config`` file declares; none when it cannot be read (the CLI will say why)."""
    try:
        servers = json.loads(Path(config).read_text(encoding="utf-8")).get("mcpServers")
    except (OSError, ValueError, AttributeError):
        return []
    return list(servers) if isinstance(servers, dict) else []


def _one_line(text: str) -> str:
    """A question as it can be typed: a newline would be an Enter, so line breaks become spaces."""
    return " ".join(text.split())


# -- the tmux server -------------------------------------------------------------------------------------------
class _Tmux:
    """One private tmux server with one pane; :meth:`close` kills it and everything under the pane."""

    def __init__(self, env: Mapping[str, str]) -> None:
        binary = shutil.which("tmux")
        if binary is None:
            raise AgentInfraError("tmux not found on PATH (CI installs it with `apt-get install -y tmux`)")
        self.socket = f"agent-eval-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.base = [binary, "-u", "-L", self.socket, "-f", os.devnull]
        # The server copies this environment as its global one, and the pane inherits it.
        self.env = {k: v for k, v in env.items() if k not in ("TMUX", "TMUX_PANE")}
        self.env.setdefault("TERM", "xterm-256color")
        self.pane_pid: int | None = None
        self.server_pid: int | None = None

    def call(self, *args: str) -> str:
        try:
            done = subprocess.run(
                [*self.base, *args], env=self.env, capture_output=True, text=True, timeout=_TMUX_CALL_S
            )
        except subprocess.TimeoutExpired:
            raise AgentInfraError(f"tmux {args[0]} did not answer within {_TMUX_CALL_S:g}s") from None
        if done.returncode != 0:
            raise AgentInfraError(f"tmux {args[0]} failed: {done.stderr.strip() or done.returncode}")
        return done.stdout

    def start(self, command: Sequence[str], cwd: Path, width: int, height: int) -> None:
        # remain-on-exit keeps a crashed CLI's last screen readable; focus-events silences the CLI's tmux hint;
        # the shell around the command prints its exit status on that last screen.
        self.call(
            "set-option", "-g", "remain-on-exit", "on", ";",
            "set-option", "-g", "focus-events", "on", ";",
            "new-session", "-d", "-s", _TMUX_SESSION, "-x", str(width), "-y", str(height), "-c", str(cwd),
            "--", "sh", "-c", f'"$@"; echo "{_EXIT_MARK} $?"', "sh", *command,
        )  # fmt: skip
        pids = self.call("display-message", "-p", "-t", _TMUX_SESSION, "#{pid} #{pane_pid}").split()
        self.server_pid, self.pane_pid = int(pids[0]), int(pids[1])

    def read(self) -> tuple[str, int | None, bool]:
        """The visible screen, and whether the CLI exited and with what status, in one tmux call."""
        out = self.call(
            "capture-pane", "-p", "-t", _TMUX_SESSION, ";",
            "display-message", "-p", "-t", _TMUX_SESSION, f"{_SEP}#{{pane_dead}}",
        )  # fmt: skip
        screen, _, dead = out.rpartition(_SEP)
        status = _EXIT_RE.findall(screen)
        return screen.rstrip("\n"), int(status[-1]) if status else None, dead.strip() == "1"

    def screen(self) -> str:
        return self.read()[0]

    def type(self, text: str) -> None:
        self.call("send-keys", "-t", _TMUX_SESSION, "-l", text)

    def key(self, *keys: str) -> None:
        self.call("send-keys", "-t", _TMUX_SESSION, *keys)

    def close(self) -> None:
        """Kill the server and every process that was under the pane, even those that left its group; returns
        once they are gone (kill-server alone returns while the server is still exiting)."""
        doomed = _descendants(self.pane_pid) if self.pane_pid else []
        doomed += [self.server_pid] if self.server_pid else []
        try:
            subprocess.run([*self.base, "kill-server"], env=self.env, capture_output=True, timeout=_TMUX_CALL_S)
        except subprocess.TimeoutExpired:
            pass
        _kill_all(doomed)


def _descendants(root: int) -> list[int]:
    """``root`` and every process below it, from ``ps`` (Linux and macOS alike)."""
    try:
        out = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "ppid="], capture_output=True, text=True).stdout
    except OSError:
        return [root]
    children: dict[int, list[int]] = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            children.setdefault(int(parts[1]), []).append(int(parts[0]))
    found, queue = [], [root]
    while queue:
        pid = queue.pop()
        found.append(pid)
        queue += children.get(pid, [])
    return found


def _kill_all(pids: list[int]) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        alive = [pid for pid in pids if _signal(pid, sig)]
        deadline = time.monotonic() + _KILL_WAIT_S
        while alive and time.monotonic() < deadline:
            time.sleep(0.1)
            alive = [pid for pid in alive if _signal(pid, 0)]
        if not alive:
            return
        pids = alive


def _signal(pid: int, sig: int) -> bool:
    """Send ``sig``; False when the process is gone (or a zombie a parent will reap)."""
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as handle:
            return handle.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return True  # no /proc (macOS): trust kill()


# -- watching a turn ------------------------------------------------------------------------------------------
@dataclass
class SessionLine:
    """One whole line the CLI appended: to the main session file or a subagent's, and whether it sent a request
    again."""

    main: bool
    raw: bytes
    event: dict | None
    retry: bool = False


class SessionTail:
    """The session file and its subagents' files as the CLI appends to them; :meth:`poll` returns the whole lines
    added since the last poll. The main file is looked for until it exists (the CLI creates it at the first
    question)."""

    def __init__(self, config_dir: Path, cwd: Path, session_id: str, root: Path | None = None) -> None:
        """``root``: the folder above ``config_dir`` the harness made (HOME), from which the files are walked
        without following links; ``config_dir`` itself when not given."""
        self.config_dir, self.cwd, self.session_id = config_dir, cwd, session_id
        self.root = root or config_dir
        self.main: Path | None = None
        self._read_to: dict[Path, int] = {}
        self._partial: dict[Path, bytes] = {}
        self._last_digest: dict[Path, str] = {}  # per file: the last request line's requestDigest

    def files(self) -> list[Path]:
        if self.main is None:
            self.main = find_session_source(self.config_dir, self.cwd, self.session_id)
            if self.main is None:
                return []
        nested = sorted((self.main.parent / self.main.stem / "subagents").glob("*.jsonl"))
        flat = [p for p in sorted(self.main.parent.glob("agent-*.jsonl")) if belongs_to(p, self.session_id)]
        return [self.main, *nested, *flat]

    def poll(self) -> list[SessionLine]:
        lines = []
        for path in self.files():
            for raw in self._new_lines(path):
                event = event_of(raw)
                lines.append(SessionLine(path == self.main, raw, event, self._is_retry(path, event)))
        return lines

    def _new_lines(self, path: Path) -> list[bytes]:
        try:  # the agent writes here while it runs: a link or FIFO in place of a file is never read
            data = read_bytes(self.root, path.relative_to(self.root), self._read_to.get(path, 0))
        except (OSError, ValueError):
            return []
        self._read_to[path] = self._read_to.get(path, 0) + len(data)
        *whole, self._partial[path] = (self._partial.get(path, b"") + data).split(b"\n")
        return [line for line in whole if line.strip()]

    def _is_retry(self, path: Path, event: dict | None) -> bool:
        """A request line with the same digest as the file's previous one: the same request sent again."""
        if event is None or event.get("type") != "api-request" or not isinstance(event.get("requestDigest"), str):
            return False
        again = self._last_digest.get(path) == event["requestDigest"]
        self._last_digest[path] = event["requestDigest"]
        return again


@dataclass
class TurnWatch:
    """One turn as the session files tell it: its silences up to the CLI's ``turn_duration`` line (after it the
    turn is over, whatever the screen still does), the requests sent again, and the API error it ended in."""

    started: float
    silences: Silences = field(init=False)
    api_retries: int = 0
    api_error: str | None = None
    over: bool = False
    _label_stamp: str = ""  # the timestamp of the line that names what the CLI last did

    def __post_init__(self) -> None:
        self.silences = Silences(self.started)

    def see(self, lines: Sequence[SessionLine], now: float) -> None:
        for line in lines:
            if self.over:
                break
            event = line.event or {}
            self.silences.line(now, self._label(event))
            self.api_retries += line.retry
            if line.main and event.get("type") == "system" and event.get("subtype") == "turn_duration":
                self.over = True
        main = [line.raw for line in lines if line.main]
        if main and self.api_error is None:
            self.api_error = turn_api_error(main)

    def _label(self, event: dict) -> str | None:
        """What a line says the CLI did, if it is the latest thing it did: the CLI appends lines out of order
        (the request line before the attachments of the prompt it sends), so its own timestamps decide."""
        stamp = event.get("timestamp")
        if event.get("type") not in _TRANSCRIPT_KINDS or not isinstance(stamp, str) or stamp < self._label_stamp:
            return None
        self._label_stamp = stamp
        return describe(event)


# -- driving the CLI -------------------------------------------------------------------------------------------
class _Driver:
    def __init__(self, tmux: _Tmux, options: TmuxOptions, record: TmuxRunRecord, tail: SessionTail) -> None:
        self.tmux = tmux
        self.options = options
        self.record = record
        self.tail = tail
        self.last_screen = ""

    def poll(self) -> str:
        screen, status, dead = self.tmux.read()
        self.last_screen = screen
        if dead:
            self.record.exit_codes.append(status)
            raise AgentInfraError(f"claude {exit_reason(status)}")  # a signal named as one, as headless does
        return screen

    def wait(self, timeout_s: float, done: Callable[[str], bool]) -> str | None:
        """Poll until ``done(screen)``; the screen, or None after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            screen = self.poll()
            if done(screen):
                return screen
            if time.monotonic() >= deadline:
                return None
            time.sleep(self.options.poll_s)

    def start_up(self) -> None:
        """Answer the startup dialogs until the empty input box has held for ``ready_polls``."""
        opts = self.options
        started = time.monotonic()
        deadline = started + opts.startup_timeout_s
        previous, steady = None, 0
        while time.monotonic() < deadline:
            screen = self.poll()
            # only before the first question: an answer may well quote these words
            fatal = next((text for text in _FATAL_SCREENS if text in screen), None)
            if fatal:
                raise AgentInfraError(f"claude shows {fatal!r} at startup")
            dialog = dialog_choice(screen)
            if dialog is not None:
                title, option, moves = dialog
                if moves:
                    self.tmux.key(*(["Down"] * moves if moves > 0 else ["Up"] * -moves))
                    screen = ""  # the cursor must then be seen resting on the option
                elif screen == previous:
                    # Enter only once the cursor has rested a poll: pressed right after the move, the CLI
                    # once took the old option ("No, exit") though the screen showed the new one.
                    self.confirm(screen, title, option)
                    screen = ""
                previous, steady = screen, 0
                time.sleep(opts.poll_s)
                continue
            steady = steady + 1 if screen == previous and input_text(screen) == "" else 0
            previous = screen
            if steady >= opts.ready_polls:
                self.record.startup_s = time.monotonic() - started
                return
            time.sleep(opts.poll_s)
        raise AgentInfraError(f"the CLI did not reach its input prompt within {opts.startup_timeout_s:g}s")

    def confirm(self, screen: str, title: str, option: str) -> None:
        self.tmux.key("Enter")
        self.record.dialogs.append(f"{title} → {option}")
        if self.wait(5.0, lambda s: s != screen) is None:
            raise AgentInfraError(f"the dialog {title!r} did not close after choosing {option!r}")

    def wait_for_mcp(self, names: Sequence[str]) -> None:
        """Open ``/mcp`` and wait until every server is connected, then close it.

        The TUI takes a question while its MCP servers still start, and sends it without their tools: the
        with-arm would silently run as a without-arm. Nothing else on screen tells, so the panel is read.
        """
        if not names:
            return
        started = time.monotonic()
        self.type_question("/mcp")
        self.tmux.key("Enter")
        settled = self.wait(
            self.options.startup_timeout_s,
            lambda s: "pending" not in mcp_states(s, names).values(),
        )
        if settled is None:
            raise AgentInfraError(
                f"MCP servers {', '.join(names)} did not connect within {self.options.startup_timeout_s:g}s"
            )
        failed = [name for name, state in mcp_states(settled, names).items() if state == "failed"]
        if failed:
            raise AgentInfraError(f"MCP server(s) {', '.join(failed)} failed to connect (see /mcp)")
        self.tmux.key("Escape")
        if self.wait(5.0, lambda s: input_text(s) == "") is None:
            raise AgentInfraError("the /mcp panel did not close")
        self.record.mcp_s = time.monotonic() - started

    def type_question(self, question: str) -> int:
        """Type until the question's first characters show in the input box; returns the attempts it took."""
        opts = self.options
        probe = question[:TYPED_PROBE_CHARS]
        for attempt in range(1, opts.type_attempts + 1):
            if self.wait(opts.startup_timeout_s, lambda s: input_text(s) is not None) is None:
                break
            self.tmux.key("C-u")  # whatever half a question a redraw left behind
            self.tmux.type(question)
            landed = self.wait(opts.type_check_s, lambda s: (input_text(s) or "").startswith(probe))
            if landed is not None:
                return attempt
        raise AgentInfraError(f"the question never showed in the input box after {opts.type_attempts} tries: {probe!r}")

    def submit(self, question: str) -> None:
        """Enter, again if the first one was taken by a completion menu, until the input box lets go."""
        probe = question[:TYPED_PROBE_CHARS]
        for _ in range(3):
            self.tmux.key("Enter")
            gone = self.wait(self.options.type_check_s, lambda s: not (input_text(s) or "").startswith(probe))
            if gone is not None:
                return
        raise AgentInfraError("Enter did not send the question")

    def until_done(self, turn: TurnWatch) -> tuple[str, float]:
        """Wait for ``stable_polls`` unchanged screens with the empty input box back; returns the screen and
        when the conversation part of it last changed. Raises at once when the turn's lines carry an API error."""
        opts = self.options
        deadline = turn.started + opts.run.timeout_s
        previous, steady, changed, talk = None, 0, time.monotonic(), None
        while True:
            screen = self.poll()
            turn.see(self.tail.poll(), time.monotonic())
            if turn.api_error:
                retried = f" after {turn.api_retries} API retries" if turn.api_retries else ""
                raise AgentInfraError(f"{turn.api_error}{retried}")
            if screen == previous:
                steady += 1
            else:
                previous, steady = screen, 0
                if conversation(screen) != talk:
                    talk, changed = conversation(screen), time.monotonic()
            if steady >= opts.stable_polls:
                if input_text(screen) == "":
                    return screen, changed
                if any(marker in screen for marker in _CONFIRM):
                    raise AgentInfraError("the CLI is waiting on a dialog in mid-run")
            if time.monotonic() >= deadline:
                if not turn.over:  # a turn that never finished was silent from its last line to here
                    turn.silences.until(time.monotonic())
                raise AgentInfraError(f"timed out after {opts.run.timeout_s:g}s without the prompt coming back")
            time.sleep(opts.poll_s)

    def exit(self) -> None:
        """``/exit`` so the CLI ends its session itself; killed by :meth:`_Tmux.close` when it does not."""
        try:
            self.type_question("/exit")
            self.tmux.key("Enter")
            self.wait(self.options.exit_grace_s, lambda s: False)  # poll() records the exit and raises
        except AgentInfraError:
            pass
        exited = bool(self.record.exit_codes)
        if not exited:
            self.record.exit_codes.append(None)
        self.record.hung_after_result.append(not exited)


def run_tmux(
    questions: Sequence[str],
    *,
    label: str,
    out_dir: Path,
    cwd: Path,
    env: Mapping[str, str],
    options: TmuxOptions,
) -> TmuxRunRecord:
    """Ask every turn in one interactive session; raises AgentInfraError (partial transcript and the last
    screen kept) when the CLI cannot be driven, as :class:`TurnError` when a turn times out, cannot be sent, or
    ends in an API error (later turns not started)."""
    if not questions:
        raise ValueError("no question to ask")
    if "HOME" not in env:
        raise ValueError("env has no HOME: the session file is found under it")
    out_dir.mkdir(parents=True, exist_ok=True)
    # CLAUDE_CONFIG_DIR moves both the projects folder and the CLI's state file out of HOME
    config_dir = Path(env.get("CLAUDE_CONFIG_DIR") or Path(env["HOME"]) / ".claude")
    # what the harness made, from which the agent's files are walked without following a link
    root = Path(env["CLAUDE_CONFIG_DIR"] if env.get("CLAUDE_CONFIG_DIR") else env["HOME"])
    session_id = str(uuid.uuid4())
    pane = out_dir / f"run-{label}.pane.txt"
    pane.write_text("", encoding="utf-8")
    record = TmuxRunRecord(label=label, session_id=session_id, pane=pane, stall_s=options.run.stall_s)
    _mark_onboarded(root)
    tmux = _Tmux(env)
    driver = _Driver(tmux, options, record, SessionTail(config_dir, cwd, session_id, root))
    failure: AgentInfraError | None = None
    turn, watch = 0, None
    try:
        tmux.start(watched(options.run.launch(build_command(options, session_id))), cwd, options.width, options.height)
        driver.start_up()
        driver.wait_for_mcp(mcp_server_names(options.run.mcp_config))
        for turn, question in enumerate(map(_one_line, questions), start=1):
            record.typing_attempts.append(driver.type_question(question))
            driver.tail.poll()  # what the last turn wrote after it was over is no part of this one
            watch = TurnWatch(time.monotonic())
            driver.submit(question)
            screen, changed = driver.until_done(watch)
            record.wall_s.append(changed - watch.started)
            record.settle_s.append(time.monotonic() - changed)
            record.watched(watch.silences, watch.api_retries)
            watch = None
            _save_screen(pane, f"turn {turn}", screen)
        driver.exit()
    except AgentInfraError as exc:
        _save_screen(pane, f"last screen (turn {turn or 'startup'})", driver.last_screen)
        later = f"; turns {turn + 1}-{len(questions)} not run" if turn and turn < len(questions) else ""
        failure = AgentInfraError(f"{f'turn {turn}' if turn else 'startup'}: {exc}{later} (last screen in {pane})")
        if watch is not None:  # the failed turn's time and silences are recorded as a finished turn's are
            record.wall_s.append(time.monotonic() - watch.started)
            record.watched(watch.silences, watch.api_retries)
    finally:
        tmux.close()
        if any("API key" in d for d in record.dialogs):
            _forget_key(root, env.get("ANTHROPIC_API_KEY", ""))
    source = find_session_source(config_dir, cwd, session_id)
    if source is not None:
        try:
            record.segments.append(copy_session(source, out_dir, label, root))
        except (UntrustedFile, ValueError) as exc:
            refused = f"the session files cannot be copied: {exc}"
            failure, source = AgentInfraError(f"{failure}; {refused}" if failure else refused), None
        else:
            record.turn_s = turn_durations(record.segments[0])
    if failure is not None:
        kept = f"; partial transcript kept: {record.segments[0]}" if record.segments else ""
        if turn:
            raise TurnError(f"{failure}{kept}", record) from None
        raise AgentInfraError(f"{failure}{kept}") from None
    if source is None:
        raise AgentInfraError(f"no session file {session_id}.jsonl under {config_dir / 'projects'}")
    return record


def _save_screen(path: Path, heading: str, screen: str) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(f"===== {heading} =====\n{screen.rstrip()}\n")


STATE_FILE = ".claude.json"  # the CLI's state file, in HOME (or in CLAUDE_CONFIG_DIR when that is set)


def _mark_onboarded(root: Path) -> None:
    """A fresh HOME gets the first-run wizard, which probes api.anthropic.com and stops offline; the flag
    that the wizard was done skips it. Nothing else in the file is touched; a link in its place is replaced by
    the file, never written through."""
    try:
        state = json.loads(read_bytes(root, STATE_FILE))
    except (OSError, ValueError):
        state = {}
    if not isinstance(state, dict) or state.get("hasCompletedOnboarding") is True:
        return
    state["hasCompletedOnboarding"] = True
    root.mkdir(parents=True, exist_ok=True)
    replace_file(root, STATE_FILE, (json.dumps(state, indent=2) + "\n").encode())


def _forget_key(root: Path, key: str) -> None:
    """Approving the key makes the CLI store its last 20 characters; the driver approved it, so it removes
    that entry again rather than leave part of a key on disk (a state file the agent replaced by a link is no
    file of the CLI's: it is left alone)."""
    try:
        state = json.loads(read_bytes(root, STATE_FILE))
        approved = state["customApiKeyResponses"]["approved"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if key and isinstance(approved, list) and key[-20:] in approved:
        approved.remove(key[-20:])
        replace_file(root, STATE_FILE, (json.dumps(state, indent=2) + "\n").encode())


# -- the session file ------------------------------------------------------------------------------------------
def escape_cwd(path: str | Path) -> str:
    """The project folder name the CLI uses: every non-alphanumeric character of the path becomes ``-``."""
    return re.sub(r"[^A-Za-z0-9]", "-", str(path))


def find_session_source(config_dir: Path, cwd: Path, session_id: str) -> Path | None:
    """``<config>/projects/<escaped-cwd>/<session-id>.jsonl``; any project folder as a fallback, since the
    CLI shortens very long paths and resolves symlinks in the cwd."""
    projects = config_dir / "projects"
    for folder in dict.fromkeys((escape_cwd(cwd), escape_cwd(Path(cwd).resolve()))):
        candidate = projects / folder / f"{session_id}.jsonl"
        if candidate.is_file():
            return candidate
    return next(iter(sorted(projects.glob(f"*/{session_id}.jsonl"))), None)


def copy_session(source: Path, out_dir: Path, label: str, root: Path) -> Path:
    """Copy the session file to ``run-<label>.session.jsonl`` and its folder (``subagents/``, tool results) to
    ``run-<label>.session/``; agent files of the older flat layout go to ``run-<label>.session/subagents/``.

    ``source`` lies under ``root`` (the HOME the harness made); nothing on the way from ``root`` is followed if a
    link, and a link or special file in the session's folder refuses the copy (:class:`UntrustedFile`)."""
    relative = source.relative_to(root)
    dest = out_dir / f"run-{label}.session.jsonl"
    copy_file(root, relative, dest)
    folder = out_dir / f"run-{label}.session"
    if folder.exists():
        shutil.rmtree(folder)
    parent = open_dir(root, relative.parent)
    try:
        with os.scandir(parent) as found:
            entries = {entry.name: entry.is_dir(follow_symlinks=False) for entry in found}
    finally:
        os.close(parent)
    if entries.get(source.stem):
        copy_tree(root, relative.parent / source.stem, folder)
    for name in sorted(n for n in entries if n.startswith("agent-") and n.endswith(".jsonl")):
        subagents = folder / "subagents"
        subagents.mkdir(parents=True, exist_ok=True)
        copy_file(root, relative.parent / name, subagents / name)
        if not belongs_to(subagents / name, source.stem):  # told by the copy: what was checked is what is kept
            (subagents / name).unlink()
            continue
        meta = name.removesuffix(".jsonl") + ".meta.json"
        if meta in entries:
            copy_file(root, relative.parent / meta, subagents / meta)
    if (folder / "subagents").is_dir() and not any((folder / "subagents").iterdir()):
        (folder / "subagents").rmdir()
    return dest


def turn_durations(session_file: Path) -> list[float]:
    """Seconds of each turn as the CLI timed it (its ``system``/``turn_duration`` events)."""
    seconds = []
    with session_file.open(encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if '"turn_duration"' not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("subtype") == "turn_duration" and isinstance(event.get("durationMs"), (int, float)):
                seconds.append(event["durationMs"] / 1000)
    return seconds


# -- what parse-session.mjs prints -----------------------------------------------------------------------------
