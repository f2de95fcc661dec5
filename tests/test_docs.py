"""The documentation's generated page matches its source: docs/options.md is rendered from the option table."""

from __future__ import annotations

import runpy
from pathlib import Path

from pytest_agent_eval.settings.options import OPTIONS

ROOT = Path(__file__).resolve().parents[1]


def test_options_page_is_the_option_table_rendered_again():
    generator = runpy.run_path(str(ROOT / "docs" / "make_options.py"))
    page = (ROOT / "docs" / "options.md").read_text(encoding="utf-8")
    assert page == generator["render"](), "docs/options.md is stale: run `python docs/make_options.py`"
    for option in OPTIONS:  # every option, with its ini key, on a row of its own
        assert f"| `{option.flag}`" in page and f"| `{option.ini}` |" in page
