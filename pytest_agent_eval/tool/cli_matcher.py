"""Does a shell command RUN a given CLI? The command matcher, a fast first layer (docs/metrics/contamination.md,
"The command matcher").

Agents reach a hidden binary by absolute path, through wrappers (env, sudo, timeout, xargs,
find -exec), package runners (npx), quoting (``code''graph``), globs (``c?degraph``), a symlink
or copy, a ``cd`` and a relative path, the package's node shim or its bundled runtime, so the
check parses the command line and walks every command position instead of matching a word.
Naming the CLI as an argument (grep, ls, which) is a mention and never counts. It cannot be
complete (base64 piped to sh, a name built at run time): the contamination metric judges what
the agent SAW, from the tool's output fingerprints; this only names the calls that tried.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

_MAX_DEPTH = 8
_OPERATORS = ("&&", "||", ";;", "|&", ";", "|", "&", "(", ")")
_REDIRECTS = ("<<<", "<<-", "&>>", "<<", ">>", "<>", ">|", "&>", ">&", "<&", "<", ">")
_ASSIGN_RE = re.compile(r"^[A-Za-z_]\w*(?:\[[^]]*\])?\+?=")
_VAR_RE = re.compile(r"\$(?:\{(\w+)\}|(\w+))")
_SKIP_WORDS = frozenset({"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "fi", "done"})
_NOT_COMMANDS = frozenset({"for", "case", "select", "[[", "[", "test", "declare", "local", "readonly", "typeset"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh"})
_NODES = frozenset({"node", "nodejs", "bun", "deno", "tsx", "ts-node"})
_RUNNER_VERBS = {"npm": {"exec", "x"}, "pnpm": {"dlx", "exec"}, "yarn": {"dlx", "exec"}, "bun": {"x"}}
_EXEC_SUFFIXES = ("", ".js", ".mjs", ".cjs", ".cmd", ".exe", ".ts")
# Options of wrapper commands that take the next word as their value (the value is not the command).
_VALUE_OPTS = {
    "sudo": {"-u", "-g", "-h", "-C", "-D", "-p", "-r", "-t", "-U", "-T", "-R"},
    "doas": {"-u", "-C"},
    "env": {"-u", "--unset", "-C", "--chdir"},
    "timeout": {"-s", "--signal", "-k", "--kill-after"},
    "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n", "-p", "--class", "--classdata"},
    "stdbuf": {"-i", "-o", "-e", "--input", "--output", "--error"},
    "exec": {"-a"},
    "xargs": {"-I", "-i", "-n", "-L", "-l", "-P", "-s", "-d", "-E", "-e", "-a", "--arg-file", "--delimiter"},
    "watch": {"-n", "--interval", "-d"},
    "time": {"-f", "--format", "-o", "--output"},
    "node": {"-r", "--require", "--import", "--loader", "--experimental-loader", "-C", "--conditions", "--title"},
}
# ``node -e``: the CLI's package required, or the CLI spawned, from inline code.
_EVAL_CALL_RE = re.compile(r"\b(?:require|import|exec\w*|spawn\w*)\s*\(\s*[\[\"'`]")
_PLAIN_WRAPPERS = frozenset({"nohup", "setsid", "builtin", "caffeinate", "chronic", "unbuffer"})
# Interpreters whose inline code (``python3 -c``, ``perl -e``) may spawn the CLI by name.
_INTERPRETERS = frozenset({"python", "python3", "python2", "perl", "ruby", "php"})
_SPAWN_RE = re.compile(r"\b(?:subprocess|system|popen|Popen|exec\w*|spawn\w*|check_output|run|call)\b|`")
# Commands that make a new name for a file: ``ln -s …/codegraph x`` makes ``./x`` the CLI.
_LINKERS = frozenset({"ln", "cp", "install", "mv"})
_GLOB_CHARS = frozenset("*?[")
_GLOB_RE = re.compile(r"\[[^]]*\]|[*?]")
# Runs of characters the lexer only copies into the current word: taken whole, not a character at a time.
_PLAIN_RUN_RE = re.compile(r"[^\\'\"$`#\n \t\r<>&|;()]+")
_QUOTED_RUN_RE = re.compile(r'[^"\\`$]+')


@dataclass
class _Word:
    text: str  # the word with quoting removed; $( … ) and `…` kept as written
    subs: list[str]  # the command strings of its command/process substitutions


@dataclass
class _Command:
    words: list[_Word]
    stdin: list[str]  # heredoc bodies and here-strings fed to it: a script when the command is a shell
    piped: bool = False  # its stdin is the output of the command before it (``a | b``)


@dataclass
class _Scope:
    """What earlier commands of the script set: variables, names made for the CLI, the working folder."""

    variables: dict[str, _Word] = field(default_factory=dict)
    aliases: set[str] = field(default_factory=set)
    cwd: str = ""


def invokes_cli(command: str, cli: str) -> bool:
    """True when the shell ``command`` runs ``cli`` in some command position (not just names it)."""
    if not cli or not _may_name(command, cli):
        return False
    if _leads(command, cli):  # the commonest attempt (``codegraph explore …``): no need to read the rest
        return True
    return _script_runs(command, cli, 0)


def _leads(command: str, cli: str) -> bool:
    """The script's first word is the CLI's plain name: its first command runs it, whatever follows. A name the
    lexer would split, a glob, a path or a shell keyword is left to :func:`_script_runs`."""
    return (
        command.startswith(cli + " ")
        and _PLAIN_RUN_RE.fullmatch(cli) is not None
        and _GLOB_CHARS.isdisjoint(cli)
        and "=" not in cli
        and "/" not in cli
        and cli not in _SKIP_WORDS
        and cli not in _NOT_COMMANDS
        and cli not in ("export", "readonly", "function")
    )


def _may_name(command: str, cli: str) -> bool:
    """The cheap shortcut, taken only after quotes, backslashes and line continuations are gone (``code''graph``,
    ``\\codegraph``, ``code\\<newline>graph``); a glob or a variable can spell the name without containing it."""
    return cli in re.sub(r"\\\n|[\"'\\]", "", command) or any(ch in _GLOB_CHARS or ch == "$" for ch in command)


def _script_runs(script: str, cli: str, depth: int) -> bool:
    if depth > _MAX_DEPTH:
        return False
    scope = _Scope()
    commands, subs = _lex(script)
    printed: list[str] = []  # the literal output of the previous command, as far as it is known
    for command in commands:
        stdin = command.stdin + printed if command.piped else command.stdin
        if _command_runs(command, cli, depth, scope, stdin):
            return True
        printed = _literal_output(command.words, stdin)
    return any(_script_runs(sub, cli, depth + 1) for sub in subs)


def _command_runs(command: _Command, cli: str, depth: int, scope: _Scope, stdin: list[str]) -> bool:
    """One simple command: skip keywords, assignments and wrappers, then judge the command word."""
    words = command.words
    if all(_ASSIGN_RE.match(w.text) for w in words):  # `CG=$(which codegraph)` alone sets a variable
        for word in words:
            _assign(word, scope)
        return False
    i = 0
    while i < len(words) and (words[i].text in _SKIP_WORDS or _ASSIGN_RE.match(words[i].text)):
        i += 1
    if i < len(words) and words[i].text in ("export", "readonly") and len(words) > i + 1:
        for word in words[i + 1 :]:
            if _ASSIGN_RE.match(word.text):
                _assign(word, scope)
        return False
    if i < len(words) and words[i].text == "function":
        i += 2
    _remember(words[i:], cli, depth, scope)
    return _runs_from(words[i:], cli, depth, scope, stdin)


def _assign(word: _Word, scope: _Scope) -> None:
    """``name=value`` sets the variable; ``name+=value`` appends to what it holds, as bash does
    (``CG=codegraph; CG+=""`` still holds the CLI's name)."""
    target, _, value = word.text.partition("=")
    name = target.removesuffix("+")
    assigned = _expand(_Word(value, word.subs), scope)
    held = scope.variables.get(name) if target.endswith("+") else None
    scope.variables[name] = _Word(held.text + assigned.text, held.subs + assigned.subs) if held else assigned


def _remember(words: list[_Word], cli: str, depth: int, scope: _Scope) -> None:
    """``cd`` moves the working folder; ``ln``/``cp`` of the CLI and ``alias`` make new names for it."""
    if not words:
        return
    name = _basename(_expand(words[0], scope).text)
    operands = [_expand(w, scope).text for w in words[1:] if not w.text.startswith("-")]
    if name in ("cd", "pushd") and operands:
        scope.cwd = _resolve(scope.cwd, operands[0])
    elif name in _LINKERS and len(operands) >= 2:
        if any(_names_cli_path(_resolve(scope.cwd, o), cli, any_folder=True) for o in operands[:-1]):
            scope.aliases.add(_basename(operands[-1]))
    elif name == "alias":
        for operand in operands:
            alias, _, value = operand.partition("=")
            if value and _script_runs(value, cli, depth + 1):
                scope.aliases.add(alias)


def _resolve(cwd: str, path: str) -> str:
    return posixpath.normpath(posixpath.join(cwd, path)) if cwd and not path.startswith(("/", "~")) else path


def _runs_from(words: list[_Word], cli: str, depth: int, scope: _Scope, stdin: Sequence[str] = ()) -> bool:
    while words:
        head = _expand(words[0], scope)
        name = _basename(head.text)
        rest = words[1:]
        if name in _NOT_COMMANDS or head.text in _SKIP_WORDS:
            return name not in _NOT_COMMANDS and _runs_from(rest, cli, depth, scope, stdin)
        if _is_cli_word(head, cli, scope):
            return True
        if name in _PLAIN_WRAPPERS:
            words = rest
        elif name == "command":
            if any(w.text.startswith("-") and ("v" in w.text or "V" in w.text) for w in _leading_options(rest)):
                return False  # `command -v codegraph` only looks it up
            words = rest[len(_leading_options(rest)) :]
        elif name == "env":
            words, split_string = _skip_env(rest)
            if split_string is not None:
                return _script_runs(split_string, cli, depth + 1)
        elif name == "timeout":
            words = _skip_options(rest, _VALUE_OPTS["timeout"])[1:]  # then the duration
        elif name in ("sudo", "doas", "nice", "ionice", "stdbuf", "exec", "xargs", "time"):
            words = _skip_options(rest, _VALUE_OPTS[name])
        elif name == "watch":
            return _script_runs(" ".join(w.text for w in _skip_options(rest, _VALUE_OPTS["watch"])), cli, depth + 1)
        elif name == "eval":
            return _script_runs(" ".join(_expand(w, scope).text for w in rest), cli, depth + 1)
        elif name in _SHELLS:
            return _shell_runs(rest, cli, depth, stdin, scope)
        elif name in _NODES and not (name == "bun" and rest and rest[0].text == "x"):
            return _node_runs([_expand(w, scope) for w in rest], cli, name, scope)
        elif name in _INTERPRETERS or re.fullmatch(r"python3\.\d+", name):
            return _interpreter_runs([_expand(w, scope) for w in rest], cli, stdin)
        elif name in ("npx", "bunx", "pnpx") or (rest and rest[0].text in _RUNNER_VERBS.get(name, ())):
            args = rest if name in ("npx", "bunx", "pnpx") else rest[1:]
            return _runner_runs(args, cli, depth)
        elif name == "find":
            return _find_exec_runs(rest, cli, depth, scope)
        else:
            return False
    return False


def _is_cli_word(word: _Word, cli: str, scope: _Scope) -> bool:
    """The command word names the CLI by any path, a name made for it, its bundled runtime, or a lookup of it."""
    if any(cli in sub for sub in word.subs) and word.text.startswith(("$(", "`")):
        return True
    # A bare name is looked up on PATH, never in the working folder; a path with a slash is relative to it.
    path = _resolve(scope.cwd, word.text) if "/" in word.text else word.text
    if _basename(path) in scope.aliases or _names_cli_path(path, cli, any_folder=False):
        return True
    # The package's bundled runtime (…/codegraph-linux-x64/node) runs nothing but the CLI's own code.
    folders = [p for p in path.split("/") if p][:-1]
    return _basename(path) in _NODES and any(f.startswith(cli + "-") for f in folders)


def _names_cli_path(path: str, cli: str, any_folder: bool) -> bool:
    """``…/codegraph``, ``codegraph.js``, a glob matching either; with ``any_folder``, also a file inside a
    ``codegraph`` (or ``codegraph-<platform>``) folder."""
    parts = [p for p in path.split("/") if p]
    if not parts:
        return False
    if any(_part_is(cli + suffix, parts[-1]) for suffix in _EXEC_SUFFIXES):
        return True
    folders = parts[:-1]
    if any_folder:
        return any(_part_is(cli, f) or f.startswith(cli + "-") for f in folders)
    # A package's own bin script run directly: node_modules/[@scope/]codegraph/…
    return "node_modules" in folders and any(_part_is(cli, f) for f in folders[folders.index("node_modules") :])


def _part_is(name: str, pattern: str) -> bool:
    """One path part equals ``name``, or is a glob that spells most of it (``c?degraph``, ``[c]odegraph``);
    a glob that would match anything (``*.js``, ``*``) names nothing in particular."""
    if name == pattern:
        return True
    if not any(ch in _GLOB_CHARS for ch in pattern):
        return False
    literal = _GLOB_RE.sub("", pattern)
    return 2 * len(literal) >= len(name) and fnmatchcase(name, pattern)


def _expand(word: _Word, scope: _Scope) -> _Word:
    """Every ``$name``/``${name}`` set earlier in the script put in (``a=code; b=graph; $a$b``)."""
    if "$" not in word.text:
        return word
    subs = list(word.subs)

    def value(match: re.Match[str]) -> str:
        known = scope.variables.get(match.group(1) or match.group(2))
        if known is None:
            return match.group(0)
        subs.extend(known.subs)
        return known.text

    return _Word(_VAR_RE.sub(value, word.text), subs)


def _basename(text: str) -> str:
    return text.rstrip("/").rsplit("/", 1)[-1]


def _leading_options(words: list[_Word]) -> list[_Word]:
    count = 0
    while count < len(words) and words[count].text.startswith("-") and words[count].text != "-":
        count += 1
        if words[count - 1].text == "--":
            break
    return words[:count]


def _skip_options(words: list[_Word], with_value: set[str]) -> list[_Word]:
    """Drop leading options (and the values of those that take one) up to the first operand."""
    i = 0
    while i < len(words):
        text = words[i].text
        if text == "--":
            return words[i + 1 :]
        if not text.startswith("-") or text == "-":
            break
        i += 2 if text in with_value else 1
    return words[i:]


def _skip_env(words: list[_Word]) -> tuple[list[_Word], str | None]:
    i = 0
    while i < len(words):
        text = words[i].text
        if text in ("-S", "--split-string") and i + 1 < len(words):
            return [], " ".join(w.text for w in words[i + 1 :])
        if text.startswith("--split-string="):
            return [], " ".join([text.partition("=")[2]] + [w.text for w in words[i + 1 :]])
        if text == "--":  # the options end; the assignments still come before the command
            i += 1
            while i < len(words) and _ASSIGN_RE.match(words[i].text):
                i += 1
            break
        if text in _VALUE_OPTS["env"]:
            i += 2
        elif text.startswith("-") or _ASSIGN_RE.match(text):  # a lone `-` is `-i` (POSIX env)
            i += 1
        else:
            break
    return words[i:], None


def _shell_runs(words: list[_Word], cli: str, depth: int, stdin: Sequence[str], scope: _Scope) -> bool:
    """``bash -c 'script'`` runs the script, ``sh path/to/codegraph`` that file, ``bash`` or ``bash -s`` its stdin."""
    i = 0
    inline = from_stdin = False
    while i < len(words) and words[i].text.startswith(("-", "+")) and words[i].text not in ("-", "--"):
        text = words[i].text
        if text in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
            i += 1
        elif text.startswith("-") and not text.startswith("--"):
            inline = inline or "c" in text
            from_stdin = from_stdin or "s" in text  # -s: the operands are arguments, the script is stdin
        i += 1
    if i < len(words) and words[i].text == "--":
        i += 1
    if inline and i < len(words):
        return _script_runs(words[i].text, cli, depth + 1)
    if from_stdin or i >= len(words) or words[i].text in ("-", "/dev/stdin"):
        return any(_script_runs(script, cli, depth + 1) for script in stdin)
    script = _resolve(scope.cwd, _expand(words[i], scope).text)
    return _basename(script) in scope.aliases or _names_cli_path(script, cli, any_folder=False)


def _literal_output(words: list[_Word], stdin: list[str]) -> list[str]:
    """What ``echo``, ``printf`` or a bare ``cat`` print: the script a shell reads in ``echo 'cli x' | sh``."""
    texts = [w.text for w in words]
    while texts and _ASSIGN_RE.match(texts[0]):
        texts = texts[1:]
    if not texts:
        return []
    name, args = _basename(texts[0]), texts[1:]
    if name == "echo":
        while args and re.fullmatch(r"-[neE]+", args[0]):
            args = args[1:]
        # dash's and zsh's echo decode escapes; decoding them errs on the side of seeing an invocation.
        return [_unescape(" ".join(args))]
    if name == "printf" and args and args[0] != "-v":  # -v assigns a variable instead of printing
        args = args[1:] if args[0] == "--" else args
        return [_printf(args[0], args[1:])] if args else []
    if name == "cat" and all(a == "-" for a in args):
        return stdin
    return []


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\"}
_FORMAT_RE = re.compile(r"%[-+ #0-9.]*([a-zA-Z%])")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), text, flags=re.S)


def _printf(form: str, args: list[str]) -> str:
    """printf's output: the format with escapes decoded and the arguments put in, reused while arguments remain."""
    form = _unescape(form)
    out: list[str] = []
    while True:
        used = last = 0
        for match in _FORMAT_RE.finditer(form):
            out.append(form[last : match.start()])
            last = match.end()
            if match.group(1) == "%":
                out.append("%")
                continue
            value = args[used] if used < len(args) else ""
            out.append(_unescape(value) if match.group(1) == "b" else value)
            used += 1
        out.append(form[last:])
        args = args[used:]
        if not args or not used:
            return "".join(out)


def _node_runs(words: list[_Word], cli: str, runtime: str, scope: _Scope) -> bool:
    """node's script is the CLI when it is named like it, lives in a folder of that name (the package's
    ``npm-shim.js``, its ``dist/bin/codegraph.js``), or is a name made for it."""
    if runtime in ("deno", "bun") and words and words[0].text == "run":
        words = words[1:]
    i = 0
    while i < len(words) and words[i].text.startswith("-") and words[i].text not in ("-", "--"):
        if words[i].text in ("-e", "--eval", "-p", "--print") and i + 1 < len(words):
            code = words[i + 1].text
            return cli in code and bool(_EVAL_CALL_RE.search(code))
        i += 2 if words[i].text in _VALUE_OPTS["node"] else 1
    i += i < len(words) and words[i].text == "--"
    if i >= len(words):
        return False
    script = words[i]
    path = _resolve(scope.cwd, script.text)
    if _basename(path) in scope.aliases or _names_cli_path(path, cli, any_folder=True):
        return True
    return any(cli in sub for sub in script.subs)


def _interpreter_runs(words: list[_Word], cli: str, stdin: Sequence[str]) -> bool:
    """``python3 -c``/``perl -e`` code, or a script fed on stdin, that names the CLI and spawns a process."""
    codes = [words[i + 1].text for i in range(len(words) - 1) if words[i].text in ("-c", "-e", "-E", "-r")]
    if not any(not w.text.startswith("-") for w in words) or any(w.text == "-" for w in words):
        codes += list(stdin)
    return any(cli in code and _SPAWN_RE.search(code) for code in codes)


def _runner_runs(words: list[_Word], cli: str, depth: int) -> bool:
    """npx / pnpm dlx / bunx / npm exec: the package (``-p``) or the first operand is the CLI's package."""
    i = 0
    while i < len(words):
        text = words[i].text
        value = None
        if text in ("-p", "--package", "-c", "--call") and i + 1 < len(words):
            value = words[i + 1].text
            i += 2
        elif text.startswith(("--package=", "--call=")):
            value = text.partition("=")[2]
            i += 1
        elif text == "--":
            i += 1
            break
        elif text.startswith("-"):
            i += 1
            continue
        else:
            break
        if text in ("-c", "--call") or text.startswith("--call="):
            if _script_runs(value, cli, depth + 1):
                return True
        elif _package_name(value) == cli:
            return True
    return i < len(words) and (_package_name(words[i].text) == cli or _names_cli_path(words[i].text, cli, False))


def _package_name(spec: str) -> str:
    """``@scope/name@1.2`` → ``name``; ``name@latest`` → ``name``."""
    if spec.startswith("@"):
        spec = spec.split("/", 1)[1] if "/" in spec else spec
    return spec.split("@", 1)[0]


def _find_exec_runs(words: list[_Word], cli: str, depth: int, scope: _Scope) -> bool:
    for i, word in enumerate(words):
        if word.text in ("-exec", "-execdir", "-ok", "-okdir"):
            action = []
            for later in words[i + 1 :]:
                if later.text in (";", "+"):
                    break
                action.append(later)
            if _runs_from(action, cli, depth, scope):
                return True
    return False


def _lex(script: str) -> tuple[list[_Command], list[str]]:
    """Split a shell script into simple commands, plus every substitution's command string.

    Quote-aware (single, double, backslash), with operators, redirections (their target is not a
    word of the command), comments and heredocs (their body is the command's stdin, not commands).
    Malformed input (unbalanced quotes or parentheses) reads to the end instead of failing.
    """
    commands: list[_Command] = []
    subs: list[str] = []
    current = _Command([], [])
    text: list[str] = []
    word_subs: list[str] = []
    in_word = False
    target: str | None = None  # what the next word is: a redirect "target", a "heredoc" delimiter, a "herestring"
    heredoc_strip = False
    heredocs: list[tuple[str, bool, list[str]]] = []  # (delimiter, strip tabs, the stdin list to fill)
    i, n = 0, len(script)

    def end_word() -> None:
        nonlocal text, word_subs, in_word, target
        if in_word:
            word = _Word("".join(text), word_subs)
            subs.extend(word_subs)
            if target == "heredoc":
                heredocs.append((word.text, heredoc_strip, current.stdin))
            elif target == "herestring":
                current.stdin.append(word.text)
            elif target is None:
                current.words.append(word)
            target = None
        text, word_subs, in_word = [], [], False

    def end_command(piped: bool = False) -> None:
        nonlocal current, target
        end_word()
        if current.words:
            commands.append(current)
        elif current.piped:  # `a |<newline> b`: the pipe carries over the line break
            piped = True
        current, target = _Command([], [], piped), None

    while i < n:
        plain = _PLAIN_RUN_RE.match(script, i)
        if plain:
            text.append(plain.group())
            in_word = True
            i = plain.end()
            continue
        ch = script[i]
        if ch == "\\" and i + 1 < n:
            if script[i + 1] != "\n":
                text.append(script[i + 1])
                in_word = True
            i += 2
        elif ch == "'":
            end = script.find("'", i + 1)
            end = n if end < 0 else end
            text.append(script[i + 1 : end])
            in_word = True
            i = end + 1
        elif script.startswith(("$'", '$"'), i):  # ANSI-C and locale quoting: the quotes still quote
            i += 1
        elif ch == '"':
            i = _double_quoted(script, i + 1, text, word_subs)
            in_word = True
        elif ch == "`":
            end = _backtick_end(script, i + 1)
            text.append(script[i : end + 1])
            word_subs.append(script[i + 1 : end])
            in_word = True
            i = end + 1
        elif script.startswith("$((", i):  # arithmetic, not a command
            end = _paren_end(script, i + 2)
            text.append(script[i : end + 1])
            in_word = True
            i = end + 1
        elif script.startswith(("$(", "<(", ">("), i):
            end = _paren_end(script, i + 2)
            text.append(script[i : end + 1])
            word_subs.append(script[i + 2 : end])
            in_word = True
            i = end + 1
        elif script.startswith("${", i):
            end = script.find("}", i)
            end = n - 1 if end < 0 else end
            text.append(script[i : end + 1])
            in_word = True
            i = end + 1
        elif ch == "#" and not in_word:
            end = script.find("\n", i)
            i = n if end < 0 else end
        elif ch == "\n":
            end_command()
            i += 1
            for delimiter, strip, stdin in heredocs:
                body_end, i_after = _heredoc_end(script, i, delimiter, strip)
                stdin.append(script[i:body_end])
                i = i_after
            heredocs = []
        elif ch in " \t\r":
            end_word()
            i += 1
        elif ch in "<>" or script.startswith("&>", i):
            if in_word and not "".join(text).isdigit():
                end_word()
            text, word_subs, in_word = [], [], False  # a leading fd number belongs to the redirection
            op = next(r for r in _REDIRECTS if script.startswith(r, i))
            i += len(op)
            if op in ("<<", "<<-"):
                target, heredoc_strip = "heredoc", op == "<<-"
            else:
                target = "herestring" if op == "<<<" else "target"
        elif any(script.startswith(op, i) for op in _OPERATORS):
            op = next(o for o in _OPERATORS if script.startswith(o, i))
            end_command(piped=op in ("|", "|&"))
            i += len(op)
        else:
            text.append(ch)
            in_word = True
            i += 1
    end_command()
    return commands, subs


def _double_quoted(script: str, i: int, text: list[str], subs: list[str]) -> int:
    """Read a double-quoted string from ``i``; substitutions inside still run. Returns the index after it."""
    n = len(script)
    while i < n:
        plain = _QUOTED_RUN_RE.match(script, i)
        if plain:
            text.append(plain.group())
            i = plain.end()
            continue
        ch = script[i]
        if ch == '"':
            return i + 1
        if ch == "\\" and i + 1 < n:
            text.append(script[i + 1] if script[i + 1] in '"\\$`' else script[i : i + 2])
            i += 2
        elif ch == "`":
            end = _backtick_end(script, i + 1)
            text.append(script[i : end + 1])
            subs.append(script[i + 1 : end])
            i = end + 1
        elif script.startswith("$(", i) and not script.startswith("$((", i):
            end = _paren_end(script, i + 2)
            text.append(script[i : end + 1])
            subs.append(script[i + 2 : end])
            i = end + 1
        else:
            text.append(ch)
            i += 1
    return n


def _backtick_end(script: str, i: int) -> int:
    while i < len(script):
        if script[i] == "\\":
            i += 2
            continue
        if script[i] == "`":
            return i
        i += 1
    return len(script)


def _paren_end(script: str, i: int) -> int:
    """The index of the ``)`` closing a ``(`` opened just before ``i``, skipping quoted text."""
    depth = 1
    n = len(script)
    while i < n:
        ch = script[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "'":
            end = script.find("'", i + 1)
            i = n if end < 0 else end + 1
            continue
        if ch == '"':
            i = _double_quoted(script, i + 1, [], [])
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return n


def _heredoc_end(script: str, i: int, delimiter: str, strip_tabs: bool) -> tuple[int, int]:
    """Where a heredoc body starting at ``i`` ends, and the index after its delimiter line."""
    n = len(script)
    while i < n:
        end = script.find("\n", i)
        end = n if end < 0 else end
        line = script[i:end]
        if (line.lstrip("\t") if strip_tabs else line) == delimiter:
            return i, end + 1
        i = end + 1
    return n, n
