"""What Claude Code sends the model that its records do not show, by CLI version and model: occupancy counts it
(docs/metrics/occupancy.md, "What it cannot see").

Claude Code 2.1.332 appends a tokens-left reminder to the last tool result of each user message it sends
(``totalTokensReminder``, an internal setting: by default a countdown from 15,000,000 for a model whose entry in the
CLI's model table has the ``total_tokens_reminder`` capability, else off). The reminder stays on that result in every
later request. The countdown's number has eight digits until 5,000,000 tokens have been spent (seven after, one
character less): :data:`TOKENS_LEFT` is eight. ``CLAUDE_CODE_TOTAL_TOKENS_REMINDER`` and the setting override the
default, and no record shows either: a run that set them is read as the default.
"""

from __future__ import annotations

import re

TOKENS_LEFT = "\n\n<system-reminder>\n<total_tokens>14956424 tokens left</total_tokens>\n</system-reminder>"
# Claude Code 2.1.332's model table (in the CLI itself): the models whose entry has the total_tokens_reminder
# capability. claude-sonnet-5-5, claude-opus-5-5, claude-fable-5-2 and claude-mythos-5-2 have not.
TOKENS_LEFT_MODELS = {
    "2.1.332": frozenset(
        {
            "claude-3-5-haiku", "claude-haiku-4-5", "claude-haiku-5-5", "claude-3-5-sonnet", "claude-3-7-sonnet",
            "claude-sonnet-4-0", "claude-sonnet-4-5", "claude-sonnet-4-6", "claude-sonnet-5", "claude-opus-4-0",
            "claude-opus-4-1", "claude-opus-4-5", "claude-opus-4-6", "claude-opus-4-7", "claude-opus-4-8",
            "claude-opus-5", "claude-fable-5", "claude-fable-5-1", "claude-mythos-5", "claude-mythos-5-1",
        }
    ),
}  # fmt: skip
# A model as a record names it: the table's id, or a provider's dated id ("claude-sonnet-4-5-20250929"), or either
# with a context-window suffix ("[1m]").
_DATED_RE = re.compile(r"(-\d{8})?(\[\w+\])?\Z")


def result_suffix(version: str | None, model: str | None) -> str:
    """What Claude Code ``version`` appends unseen to the last tool result of each user message it sends ``model``:
    the tokens-left reminder, where the version's model table gives the model the capability; "" where it does not,
    or where the version or the model is not known (an unknown version is read as adding nothing)."""
    if not version or not model:
        return ""
    with_reminder = TOKENS_LEFT_MODELS.get(version, frozenset())
    return TOKENS_LEFT if _DATED_RE.sub("", model) in with_reminder else ""
