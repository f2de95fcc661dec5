"""Sourcegraph's MCP server as a retrieval tool, for bench/score_diff.py's "sourcegraph" form (the tests'
transcripts use it): codegraph's description under Sourcegraph's names, since a tool is only what it declares
(docs/extending.md)."""

from __future__ import annotations

from dataclasses import replace

from pytest_agent_eval.tool import CODEGRAPH

SOURCEGRAPH = replace(CODEGRAPH, name="sourcegraph", explore="sg_keyword_search", cli="sourcegraph")
