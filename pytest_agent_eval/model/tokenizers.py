"""The counting models a stand-in server can count a prompt with (docs/metrics/occupancy.md, "Accuracy against the
truth"): occupancy is measured from the outside, so its method must hold whatever tokenizer the model behind the
CLI has, and the truth is made under more than one.

* ``stand-in`` (the default): the stand-in's own model (:mod:`.usage`): BPE-style pieces, letters six to a token,
  each JSON value's structure counted apart;
* ``uniform``: every character of the serialised request costs the same, :data:`UNIFORM_CHARS_PER_TOKEN` to a
  token;
* ``o200k_base``, ``cl100k_base``: real BPE tokenizers, the serialised request encoded with ``tiktoken`` on the ranks
  the npm package ``js-tiktoken`` ships (read offline from its ``dist/ranks/<name>.js``; :func:`provision_ranks`
  installs it into the provisioning cache, as the CLIs are).

Which one a process counts with: ``AGENT_EVAL_TOKENIZER`` (default ``stand-in``), read when a count is asked, so
the prompt and the output a server declares are always counted alike.
"""

from __future__ import annotations

import base64
import json
import math
import os
import re
from functools import cache
from pathlib import Path
from typing import Any, Protocol

TOKENIZER_ENV = "AGENT_EVAL_TOKENIZER"
RANKS_ENV = "AGENT_EVAL_TIKTOKEN_RANKS"  # a directory holding <name>.js; default: the provisioned js-tiktoken's
JS_TIKTOKEN_VERSION = "1.0.21"
UNIFORM_CHARS_PER_TOKEN = 4.0
BPE_NAMES = ("o200k_base", "cl100k_base")
TOKENIZER_NAMES = ("stand-in", "uniform", *BPE_NAMES)

# The stand-in's pieces: a run of letters (LETTERS_PER_TOKEN to a token), up to three digits, one other character,
# or a run of whitespace, each optionally led by a space.
LETTERS_PER_TOKEN = 6
_PIECE_RE = re.compile(r" ?[A-Za-z]+| ?\d{1,3}| ?[^\sA-Za-z\d]|\s+")
_LONG_WORD_RE = re.compile(rf"[A-Za-z]{{{LETTERS_PER_TOKEN + 1},}}")


class Tokenizer(Protocol):
    name: str

    def text(self, text: str) -> int:
        """Tokens of a piece of text."""
        ...

    def value(self, value: Any) -> int:
        """Tokens of a JSON value, structure included."""
        ...


class StandIn:
    """The stand-in's counting model (:mod:`.usage`'s docstring)."""

    name = "stand-in"

    def text(self, text: str) -> int:
        if not text:
            return 0
        extra = sum((len(word) - 1) // LETTERS_PER_TOKEN for word in _LONG_WORD_RE.findall(text))
        return len(_PIECE_RE.findall(text)) + extra

    def value(self, value: Any) -> int:
        if isinstance(value, str):
            return self.text(value) + 1
        if isinstance(value, dict):
            return 2 + sum(self.text(str(k)) + 2 + self.value(v) for k, v in value.items())
        if isinstance(value, list):
            return 2 + sum(self.value(v) for v in value)
        return 1


def _serialised(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Uniform:
    """Every character the same: the serialised JSON's length over :data:`UNIFORM_CHARS_PER_TOKEN`, rounded up."""

    name = "uniform"

    def text(self, text: str) -> int:
        return math.ceil(len(text) / UNIFORM_CHARS_PER_TOKEN)

    def value(self, value: Any) -> int:
        return math.ceil(len(_serialised(value)) / UNIFORM_CHARS_PER_TOKEN)


class Bpe:
    """A real BPE tokenizer: ``tiktoken`` on js-tiktoken's ranks; a JSON value is its compact serialisation encoded."""

    def __init__(self, name: str, ranks_file: Path) -> None:
        import tiktoken  # only the BPE counting models need it (the bench's, a test's)

        self.name = name
        self._encoding = tiktoken.Encoding(name, **read_ranks(ranks_file))

    def text(self, text: str) -> int:
        return len(self._encoding.encode_ordinary(text)) if text else 0

    def value(self, value: Any) -> int:
        return len(self._encoding.encode_ordinary(_serialised(value)))


def read_ranks(path: Path) -> dict[str, Any]:
    """``tiktoken.Encoding``'s ``pat_str``, ``mergeable_ranks`` and ``special_tokens`` from a js-tiktoken ranks module
    (``export default {"pat_str", "special_tokens", "bpe_ranks"}``; ``bpe_ranks`` is lines of ``<char> <first rank>
    <base64 token> …``, the tokens ranked in order from the first)."""
    text = Path(path).read_text(encoding="utf-8")
    start = text.find("{")
    try:
        data = json.loads(text[start : text.rindex("}") + 1])
        ranks: dict[bytes, int] = {}
        for line in data["bpe_ranks"].split("\n"):
            if not line:
                continue
            _, first, *tokens = line.split(" ")
            for offset, token in enumerate(tokens):
                ranks[base64.b64decode(token)] = int(first) + offset
        return {"pat_str": data["pat_str"], "mergeable_ranks": ranks, "special_tokens": data["special_tokens"]}
    except (ValueError, KeyError) as exc:
        raise ValueError(f"{path}: not a js-tiktoken ranks module ({exc})") from None


def ranks_dir() -> Path:
    """Where the BPE ranks are read from: ``$AGENT_EVAL_TIKTOKEN_RANKS``, else the provisioned js-tiktoken's."""
    if os.environ.get(RANKS_ENV):
        return Path(os.environ[RANKS_ENV])
    from ..harness.cache import cache_root

    return cache_root() / "js-tiktoken" / JS_TIKTOKEN_VERSION / "node_modules" / "js-tiktoken" / "dist" / "ranks"


def provision_ranks(cache: Path | None = None) -> Path:
    """js-tiktoken's ranks, ``npm install``-ed once into the provisioning cache (under a lock); their directory."""
    from filelock import FileLock

    from ..harness.cache import cache_root
    from ..harness.provision import run_tool

    root = (cache or cache_root()) / "js-tiktoken"
    prefix = root / JS_TIKTOKEN_VERSION
    ranks = prefix / "node_modules" / "js-tiktoken" / "dist" / "ranks"
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f"{JS_TIKTOKEN_VERSION}.lock")):
        if not all((ranks / f"{name}.js").is_file() for name in BPE_NAMES):
            prefix.mkdir(parents=True, exist_ok=True)
            package = f"js-tiktoken@{JS_TIKTOKEN_VERSION}"
            run_tool(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(prefix), package],
                     what=f"npm install {package}", cwd=prefix)  # fmt: skip
    return ranks


@cache
def _named(name: str, ranks: str) -> Tokenizer:
    if name == "stand-in":
        return StandIn()
    if name == "uniform":
        return Uniform()
    if name in BPE_NAMES:
        path = Path(ranks) / f"{name}.js"
        if not path.is_file():
            raise ValueError(
                f"{TOKENIZER_ENV}={name}: no ranks at {path} (provision them: python -c 'from "
                "pytest_agent_eval.model.tokenizers import provision_ranks; provision_ranks()', or set "
                f"{RANKS_ENV})"
            )
        return Bpe(name, path)
    raise ValueError(f"{TOKENIZER_ENV}={name!r}: not a counting model (one of {', '.join(TOKENIZER_NAMES)})")


def tokenizer(name: str | None = None) -> Tokenizer:
    """The counting model ``name`` (default: ``$AGENT_EVAL_TOKENIZER``, else ``stand-in``), loaded once."""
    name = name or os.environ.get(TOKENIZER_ENV) or "stand-in"
    return _named(name, str(ranks_dir()) if name in BPE_NAMES else "")


def count_with(name: str) -> Tokenizer:
    """Make ``name`` the counting model of this process (``$AGENT_EVAL_TOKENIZER``, read by every server it starts),
    the BPE ranks provisioned first where none are set; a bad name or missing ranks fail here, not in a server's
    thread."""
    if name in BPE_NAMES and not os.environ.get(RANKS_ENV):
        os.environ[RANKS_ENV] = str(provision_ranks())
    os.environ[TOKENIZER_ENV] = name
    return tokenizer(name)
