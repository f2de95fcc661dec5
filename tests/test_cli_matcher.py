"""The command matcher alone (docs/metrics/contamination.md, "The command matcher"): each form below pins one branch
of ``invokes_cli``, most in pairs, a command that runs the CLI beside a near one that only names it, so a rule
made looser or stricter fails here. tests/test_cli_block.py holds the forms the hook, the matcher and the metric
must all agree on; these are the matcher's own parsing, fast enough to run on every mutant
(``python bench/mutation.py tool/cli_matcher.py``, docs/benchmarks.md, "Mutation testing")."""

from __future__ import annotations

import pytest
from support.cli_forms import INVOCATIONS, MENTIONS

from pytest_agent_eval.tool import CODEGRAPH
from pytest_agent_eval.tool.cli_matcher import _MAX_DEPTH, invokes_cli

RUNS = [
    # assignments: `+=` appends to what the variable holds, as bash does; export and readonly set it as well
    'CG=codegraph; CG+=""; $CG explore x',
    "CG=code; CG+=graph; $CG explore x",
    "export CG=code; export CG+=graph; $CG x",
    "readonly CG=codegraph; $CG x",
    "CG=codegraph; ${CG} x",
    # package runners: the package option, the inline command, the operand after `--`, a scoped and versioned name
    "npx -p @colbymchenry/codegraph cg explore x",
    "npx --package @colbymchenry/codegraph@1.6.1 cg x",
    "npx --package=codegraph@latest cg x",
    "npx -c 'codegraph explore x'",
    "npx --call 'codegraph explore x'",
    "npx --call='codegraph explore x'",
    "npx -y -- @colbymchenry/codegraph explore x",
    "npx ./node_modules/.bin/codegraph explore x",
    "npm exec codegraph explore x",
    "npm x codegraph x",
    "pnpm dlx codegraph x",
    "yarn exec codegraph x",
    "bunx codegraph x",
    "pnpx codegraph x",
    "bun x codegraph x",
    # node, deno and bun: the script after `run` and the options that take a value; inline code that spawns it
    "deno run --allow-all /opt/cg/codegraph.js explore x",
    "bun run /opt/cg/codegraph.js explore x",
    "bun /opt/cg/codegraph.js explore x",
    "node -r ts-node/register /opt/cg/codegraph.js explore x",
    "node --require=tsx /opt/cg/codegraph.js x",
    "node -- /opt/cg/codegraph.js x",
    "node $(which codegraph) explore x",
    "node -e \"require('child_process').execSync('codegraph explore x')\"",
    "node --print \"require('codegraph')\"",
    "node /opt/codegraph/dist/cli.js x",  # a file inside the package's folder
    # other interpreters' inline code, and a script fed on stdin
    "perl -E 'system(\"codegraph explore x\")'",
    "php -r 'exec(\"codegraph explore x\");'",
    "ruby -e '`codegraph explore x`'",
    "python3.12 -c \"import os; os.system('codegraph explore x')\"",
    "echo \"import os; os.system('codegraph x')\" | python3",
    "echo \"import os; os.system('codegraph x')\" | python3 -",
    # shells: options with a value, combined flags, a script path, stdin
    "bash -o pipefail -c 'codegraph explore x'",
    "bash --rcfile /dev/null -c 'codegraph x'",
    "sh -ec 'codegraph explore x'",
    "bash -- /opt/cg/bin/codegraph explore x",
    "sh /dev/stdin <<< 'codegraph x'",
    "cp /opt/cg/bin/codegraph ./cg.sh; bash ./cg.sh x",
    # wrappers and their options that take a value
    "xargs -I {} codegraph explore {}",
    "find . -name '*.ts' | xargs -n 1 codegraph explore",
    "sudo -u root codegraph x",
    "timeout -s KILL 10 codegraph x",
    "timeout 10 codegraph x",
    "nice -n 5 codegraph x",
    "stdbuf -o L codegraph x",
    "exec -a name codegraph x",
    "time -f %e codegraph x",
    "watch -n 1 codegraph x",
    "command codegraph x",
    "command -p codegraph x",
    "nohup codegraph x &",
    "env -u HOME codegraph x",
    "env -C /tmp codegraph x",
    "env -- codegraph x",
    "env --split-string='codegraph explore x'",
    "env --split-string 'codegraph explore x'",
    "find . -exec codegraph explore {} \\;",
    "find . -exec ls {} + -exec codegraph x \\;",
    "function f { codegraph x; }",
    "! codegraph x",
    "case x in a) codegraph x;; esac",
    "eval codegraph x",
    # names made for it
    "pushd /opt/cg/bin && ./codegraph x",
    "install -m 755 /opt/cg/bin/codegraph /usr/local/bin/cg; cg x",
    "mv codegraph cg; ./cg x",
    "ln -s /opt/codegraph/cli.js y; ./y x",
    "alias cg='codegraph'; cg x",
    "node_modules/@colbymchenry/codegraph/dist/bin/cli.js x",
    # the lexer: a substitution after an escape, a heredoc followed by more commands, line continuations, quoting
    "echo $(echo \\( ; codegraph x)",
    "cat <<EOF\nhello\nEOF\ncodegraph explore y",
    "cat <<-EOF\n\tcodegraph x\n\tEOF\ncodegraph explore y",
    "cat <<A <<B\na\nA\nb\nB\ncodegraph x",
    "code\\\ngraph explore x",
    "$'codegraph' explore x",
    '$"codegraph" explore x',
    "echo $((1+2)); codegraph x",
    'echo "$(codegraph x)"',
    'echo "`codegraph x`"',
    'echo "\\$HOME $(codegraph x)"',
    "2>/dev/null codegraph x",
    "&>/dev/null codegraph x",
    "codegraph x &>/dev/null",
    # what echo / printf / cat print, piped to a shell
    "printf -- 'codegraph x' | sh",
    "echo -n 'codegraph x' | sh",
    "printf '%s %s\\n' codegraph x | sh",
    "printf '%s\\n' 'echo hi' 'codegraph x' | sh",  # the format is used again while arguments remain
    "printf '%b' 'echo\\ncodegraph x' | sh",
    "printf '100%%\\ncodegraph x' | sh",
    "echo 'codegraph\\tx' | sh",
    "echo 'echo a\\\\b\\ncodegraph x' | sh",
    "echo 'codegraph x' | cat - | sh",
    "A=1 echo 'codegraph x' | sh",
    # the lexer's quoting inside a substitution: a ")" quoted, escaped or nested does not close it
    "echo $(echo ')'; codegraph x)",
    'echo $(echo ")"; codegraph x)',
    'echo "$(echo $(echo a); codegraph x)"',
    'echo "$(echo \\); codegraph x)"',
    'echo "`printf \\`; codegraph x`"',
    'echo "`true`"; codegraph x',
    'echo "$(true)"; codegraph x',
    "A=code; CG=${A}graph; $CG x",
    "CG=/opt/a=b/codegraph; $CG x",
    # wrappers' and runners' options, once more each way
    "env -S codegraph explore",
    "env --split-string=codegraph explore x",
    "env '--split-string=A=1 codegraph x'",
    "env --split-string=exec codegraph x",
    "env -i -- codegraph x",
    "env -i -u HOME codegraph x",
    "env -i codegraph x",
    "sudo -- codegraph x",
    "command -p -p codegraph x",
    "command -- codegraph x",
    "node --eval \"require('child_process').exec('codegraph x')\"",
    "node -p \"require('codegraph')\"",
    "node -e \"require('child_process').exec('codegraph x')\" arg",
    "node --inspect -r x /opt/cg/codegraph.js",
    "node /opt/codegraph-linux-x64/lib/main.js",
    "npx -p other-pkg codegraph x",
    "npx --package other-pkg codegraph x",
    "npx -y -p other codegraph x",
    "npx --call='A=1 codegraph x'",
    "npx -y --package=other codegraph x",
    "npx -y -- codegraph x",
    "bash +o posix -c 'codegraph x'",
    "bash -O extglob -c 'codegraph x'",
    "bash +O extglob -c 'codegraph x'",
    "bash --init-file /dev/null -c 'codegraph x'",
    "bash -e -o pipefail -c 'codegraph x'",
    "bash +x -c 'codegraph x'",
    "bash --posix /opt/cg/bin/codegraph",
    "cd /opt/node_modules && bash codegraph/bin/x.js",
    "CG=/opt/cg/bin/codegraph; bash $CG",
    "find . -ok codegraph {} \\;",
    "find . -okdir codegraph {} +",
    "find . -exec bash -c 'codegraph x' \\;",
    "echo \"import os; os.system('codegraph x')\" | python3 -u",
    "echo \"import os; os.system('codegraph x')\" | python3 - arg",
    "cd /opt/codegraph-linux-x64 && ./node x.js",
    "npx codegraph@1@2 x",
    "echo -E 'codegraph x' | sh",
    "printf '%% ; %s x\\n' codegraph | sh",
    "printf '%scodegraph x' | sh",
    "python3 -c \"import os; os.system('codegraph x')\" arg",
    "export CG=codegraph X=1; $CG x",
    "! function f { codegraph x; }",
    "cd -P /opt/codegraph-linux-x64 && ./node x.js",
    "pushd /opt/codegraph-linux-x64 && ./node x.js",
    "cd /opt/codegraph-linux-x64/lib && cd .. && ./node x.js",
    "cd /opt/codegraph && cp ./cli.js /tmp/y && /tmp/y x",
    "alias q='A=1 codegraph x'; q",
    "! bash -c 'codegraph x'",
    "echo 'codegraph x' | { sh; }",
    "echo `codegraph x",  # unterminated: read to the end
    "echo $(codegraph x",
    "echo a#b; codegraph x",  # a # inside a word starts no comment
    "echo ${X}; codegraph x }",
    "CG=codegraph; $CG x # run it",
    # escapes in double quotes: `\``, `\$`, `\"` and `\\` are decoded, another keeps its backslash; eval reads the
    # decoded text again
    'eval "\\`codegraph x\\`"',
    'CG="\\$(codegraph)"; eval $CG',
    'eval "\\"codegraph\\""',
    'eval "\\\\codegraph"',
    'eval "code\\graph"',
    'X="a\\"b"; codegraph x',
    '"a\\"" ; codegraph x',
    'echo "$(echo \\")"; codegraph x',
    'echo "\\\\`codegraph x`"',
    # a variable's value read by eval, node, an interpreter; wrappers by name; an escaped word is still a word
    'X=codegraph; eval "$X" x',
    "X=/opt/cg/codegraph.js; node $X",
    "X=codegraph; perl -e \"system('$X')\"",
    "doas -u root codegraph x",
    "ionice -c 3 codegraph x",
    "timeout \\5 codegraph x",
    "echo $'x'; codegraph x",
    "npx -y -q codegraph x",
    "bash -x -- /opt/cg/bin/codegraph",
    "cd /opt/node_modules && codegraph/bin/x.js",  # relative to the folder cd moved to
    # the lexer: a `}` before a `${…}` closes nothing; a comment ends at its line's end
    "echo }; echo ${X}; codegraph x",
    "echo hi\n# c\ncodegraph x",
    "echo 'code\\graph x' | sh",  # echo keeps the unknown escape; sh drops the backslash
    # env: a lone `-` is `-i`, and assignments still come after `--`
    "env - codegraph x",
    "env -- A=1 codegraph x",
    "env -i -- A=1 codegraph x",
    # a substitution's text as written, read again by eval: what follows it is not swallowed
    "eval $(echo a)\\;codegraph",
    "eval `echo a`\\;codegraph",
    "eval $((1))\\;codegraph",
    'eval "$(echo a)"\\;codegraph',
    'eval "`echo a`"\\;codegraph',
    "echo \"$(')'; codegraph x)\"",
    'echo $(echo "$(ls)"); codegraph x',
    "echo x; codegrap\\h",
    "# c\ncodegraph x\necho b",
    "cat <<\"'\"\nx\n'\ncodegraph x",
    "python3 -c \"import os; os.system('codegraph x')\" -",
    "time ! eval codegraph x",
    "echo 'codegraph x' | time ! sh",
]

DOES_NOT_RUN = [
    "CG=codegraph; CG=''; $CG explore x",  # `=` replaces
    "CG=code; CG+=graph; echo $CG",
    "npx -p other-tool other codegraph",
    "npx --call 'echo codegraph'",
    "npx other codegraph",
    "npm run codegraph",
    "npm exec -- other codegraph",
    "node --version",
    "node -e \"console.log('codegraph')\"",
    "node -r codegraph.js app.js",  # the option's value is a module, not the script
    "deno run app.js codegraph",
    "vendor/codegraph/cli.js x",  # a file in a folder of that name, outside node_modules, is not its bin script
    "ruby -e 'puts \"codegraph\"'",
    "python3 -c 'print(\"codegraph\")'",
    "echo \"import os; os.system('codegraph x')\" | python3 script.py",
    "bash script.sh codegraph",
    "bash -o codegraph script.sh",
    "sh -e script.sh 'codegraph x'",
    "xargs -I codegraph echo codegraph",
    "sudo -u codegraph whoami",
    "timeout -s codegraph 10 ls",
    "timeout 10 echo codegraph",
    "watch -n 1 ls codegraph",
    "command -V codegraph",
    "env -u codegraph ls",
    "env -S",
    "env --split-string='echo codegraph'",
    "env FOO=codegraph ls",
    "find . -exec grep codegraph {} \\;",
    "find . -name codegraph",
    "function codegraph { ls; }",
    "test -x codegraph && echo ok",
    "[ -x codegraph ]",
    "cp notes.txt backup; backup x codegraph",
    "alias ll='ls -l'; ll codegraph",
    "ls $(which codegraph)",
    "echo $(echo \\)) codegraph",
    "echo hi # codegraph x",
    "echo 2>codegraph",
    "cat <<EOF\ncodegraph x\nEOF\necho done",
    "printf -v var 'codegraph x' | sh",
    "printf | sh",
    "cat file | sh",
    "echo 'codegraph x' | cat notes | sh",
    "echo 'echo codegraph' | sh",
    "env -i CODEGRAPH_X=codegraph",
    "sudo -u codegraph",
    "X=codegraph command -p",
    "CG=codegraph node -e",
    "CG=codegraph npx -p",
    "CG=codegraph bash -c",
    "bash /opt/codegraph/install.sh",
    "x$(which codegraph) arg",
    "$(echo ls) codegraph",
    "npx @codegraph",
    "npx @scope/codegraph/extra",
    'echo "$((codegraph + 1))"',
    'echo "codegraph\\',
    '"code\\graph" x',
    "cat <<EOF\n\tEOF\ncodegraph x\nEOF",
    "cat <<-EOF\n  EOF\ncodegraph x\nEOF",
    "cat <<-EOF\nXEOF\ncodegraph x\nEOF",
    "printf '%s' 'echo a\\ncodegraph x' | sh",
    "printf '%s %s\\n' echo codegraph | sh",
    "printf -- | CG=codegraph sh",
    "echo 'a\\qb codegraph x' | sh",
    "echo \"'code\\graph' x\" | sh",  # an unknown escape is kept: single-quoted, it stays in the name
    "echo hi # ; codegraph x",
    "echo ${X:-;} codegraph x",
    "echo $((codegraph + 1))",
    "$((1+2)) codegraph",
    "echo 'codegraph x'\nsh",  # a line break is no pipe
    "echo codegraph\\",
    "${codegraph} x",  # a variable no earlier command set
    "| CG=codegraph sh",
    "python3 -c \"print('hi')\" \"os.system('codegraph x')\"",  # the code is -c's value, not what follows it
    # a substitution's end found past an escape, quoted or not: what follows it is an argument
    "echo `echo \\x` codegraph",
    'echo "`echo \\x` codegraph"',
    'echo "a\\"; codegraph x"',
    'echo "\\$(codegraph x)"',
    'echo "\\`codegraph x\\`"',
    '"\\codegraph" x',  # in double quotes `\c` keeps its backslash
    # eval runs the substitution's output, here a word before the CLI's name
    'eval "`echo hi`" codegraph',
    'eval "$(echo hi)" codegraph',
    "eval `echo hi` codegraph",
    "eval $(echo hi) codegraph",
    'eval "$(echo ")")" codegraph',
    "eval $(echo ')') codegraph",
    'eval "a\\$b" codegraph',
    'eval "\\q" codegraph',
    'eval "\\qcodegraph"',
    'eval "x\\"; codegraph"',
    "eval <(true)codegraph",
    "eval >(true)codegraph",
    # a `)` or a quote inside the substitution
    "echo $(echo 'a'b) codegraph",
    "echo $('') codegraph",
    'echo $(echo "\\"") codegraph',
    'echo $(echo "a"b) codegraph',
    "echo $(echo '; codegraph y)",  # unterminated: bash refuses it
    "echo ${X; codegraph x",
    "echo a\n# codegraph x",
    "echo hi &>out codegraph x",
    "sh <<< 'echo hi' > codegraph",
    "printf 'codegraph%% x' | sh",
    "printf '%s%%' codegraph | sh",
    "echo '\\qcodegraph x' | sh",
    # a lone `-` or an option after `--` is an operand: the command
    "node - codegraph",
    "node - - codegraph",
    "bash - codegraph",
    "bash -- -c 'codegraph x'",
    "npx -- -y codegraph",
    "npx -y -q other codegraph",
    "xargs - codegraph",
    "env -- -i codegraph x",
    "env -- A=codegraph",  # assignments alone: nothing runs
    "command - codegraph x",
    "command -- -p codegraph",
    "timeoutX 10 codegraph x",
    "ln -s /opt/cg/bin/codegraph ./cgX; ./cg x",
    "$ codegraph",
    'echo "``" codegraph',
    "echo `` codegraph",
    "echo $(echo 'a') codegraph 'b'",
    "node -- -e \"require('codegraph')\"",
    "nice -- -x codegraph",
    "cd /opt/node_modules/codegraph && ~/cli.js",
]


@pytest.mark.parametrize("command", RUNS + INVOCATIONS)
def test_runs_the_cli(command):
    assert invokes_cli(command, cli=CODEGRAPH.cli)


@pytest.mark.parametrize("command", DOES_NOT_RUN + MENTIONS)
def test_only_names_the_cli(command):
    assert not invokes_cli(command, cli=CODEGRAPH.cli)


def test_an_appending_assignment_is_not_a_replacing_one():
    """bash runs ``$CG`` as the CLI after ``CG+=""``: the matcher must too (it read ``+=`` as ``=``)."""
    assert invokes_cli('CG=codegraph; CG+=""; $CG explore x', cli=CODEGRAPH.cli)
    assert not invokes_cli('CG=codegraph; CG=""; $CG explore x', cli=CODEGRAPH.cli)


def test_nesting_is_followed_to_its_depth_limit_and_no_further():
    """The depth limit bounds the recursion on hostile input (a command nested without end): the last level it
    follows still counts, the next is left to the contamination metric (docs/metrics/contamination.md)."""
    assert invokes_cli("eval " * _MAX_DEPTH + "codegraph x", cli=CODEGRAPH.cli)
    assert not invokes_cli("eval " * (_MAX_DEPTH + 1) + "codegraph x", cli=CODEGRAPH.cli)


@pytest.mark.parametrize("nested", ["bash -c codegraph", "npx -c codegraph"])
def test_a_shell_or_a_runner_nests_one_level(nested):
    """``bash -c`` and ``npx -c`` each add one level, as ``eval`` does (eval passes its words on unquoted)."""
    assert invokes_cli("eval " * (_MAX_DEPTH - 1) + nested, cli=CODEGRAPH.cli)
    assert not invokes_cli("eval " * _MAX_DEPTH + nested, cli=CODEGRAPH.cli)


def test_a_glob_must_spell_at_least_half_the_name():
    """``abc*`` spells half of ``abcdef`` (literal characters ≥ half the name); ``ab*`` less."""
    assert invokes_cli("abc* x", cli="abcdef")
    assert not invokes_cli("ab* x", cli="abcdef")


def test_a_name_with_a_slash_or_an_equals_sign_is_not_taken_by_the_shortcut():
    """The first-word shortcut is only for a plain name: ``bin/cg`` as a CLI name is a path, not a command word."""
    assert not invokes_cli("bin/cg x", cli="bin/cg")
    assert not invokes_cli("a=b x", cli="a=b")
    assert not invokes_cli("if x", cli="if")
    assert not invokes_cli("test x", cli="test")
    assert not invokes_cli("export x", cli="export")
    assert not invokes_cli("readonly x", cli="readonly")
    assert not invokes_cli("function x", cli="function")
    assert not invokes_cli("a;b x", cli="a;b")  # two commands, `a` and `b x`
    assert not invokes_cli("$(ls) x", cli="")
    assert not invokes_cli("", cli="codegraph")
    assert not invokes_cli("codegraph x", cli="")


@pytest.mark.parametrize(
    "form",
    ["env -S '{}'", "watch '{}'", "echo $({})", "echo '{}' | bash", "bash <<< '{}'", "alias a='{}'; a"],
)
def test_each_nesting_form_adds_one_level(form):
    """A split string, watch's command, a substitution, a script on a shell's stdin and an alias's value are each
    one level deeper than the command that holds them."""
    assert invokes_cli(form.format("eval " * (_MAX_DEPTH - 1) + "codegraph"), cli=CODEGRAPH.cli)
    assert not invokes_cli(form.format("eval " * _MAX_DEPTH + "codegraph"), cli=CODEGRAPH.cli)


def test_a_backslash_before_an_ordinary_character_stays_in_a_double_quoted_word():
    assert not invokes_cli('"\\X" x', cli="X")
    assert invokes_cli('"\\$X" x', cli="$X")
