"""What two runs of one campaign never share, masked, so that the rest of their summary.json and report.html can be
held equal byte for byte (docs/report.md, "Two runs of one campaign"): times and durations, the campaign's name and
folder, the model server's port, the agent CLI's own session id, and the temporary folder the items ran in."""

from __future__ import annotations

import difflib
import json
import re
from pathlib import Path

TIME_KEY = re.compile(r"(_s|_ms|_at|time|times|started|ended|generated|duration|durations)$")
CLI_OWN = {"session_id"}  # what the agent's CLI makes up anew each run (Claude Code's session uuid)


def timeless(data: object) -> object:
    """``data`` without what no two sessions share: every key naming a time or a duration (a figure, a driver's
    timings, a verdict's duration_s), at any depth; the CLI's own ids masked."""
    if isinstance(data, dict):
        return {k: "CLI" if k in CLI_OWN else timeless(v) for k, v in data.items() if not TIME_KEY.search(str(k))}
    if isinstance(data, list):  # a verdict's better_on / the_other_way name figures: duration_s among them
        return [timeless(v) for v in data if not (isinstance(v, str) and TIME_KEY.search(v))]
    return data


def masked(text: str, campaign: Path, temp: Path | None = None) -> str:
    """A summary or report with the campaign's name and folder masked (and ``temp``, where its items' workspaces
    were), and what no two sessions share: times and durations (in summary.json by key; in report.html the values
    they print as, and each duration's change)."""
    text = text.replace(str(campaign), "CAMPAIGN").replace(campaign.name, "CAMPAIGN")
    if temp is not None:
        text = text.replace(str(temp), "TEMP")
    text = re.sub(r"127\.0\.0\.1:\d+", "127.0.0.1:PORT", text)  # each session's model server listens anew
    text = re.sub(r"popen-gw\d/repo\d+", "REPO", text)  # a pytester repository fixture: a worker's own copy
    if text.startswith("{"):
        return json.dumps(timeless(json.loads(text)), indent=1)
    text = re.sub(r"\b\d{4}-\d\d-\d\dT[\d:.+-]+Z?", "T", text)  # timestamps
    text = re.sub(r"\b\d+(?:\.\d+)?m?s\b|\b\d+m \d+s\b", "Ns", text)  # durations as printed
    text = re.sub(r'(data-figure="duration_s">)[^<]*', r"\1D", text)  # a duration's change, and its words
    text = re.sub(r"(duration \d+ · )|(duration_s&quot;: )[^,]*", "D", text)
    text = re.sub(r"(?:; the other way:)? duration(?=[,<])|,? duration(?=[;<])", "", text)  # what a verdict rests on
    return text


def differences(first: str, second: str) -> str:
    """The lines two masked texts do not share, as a diff."""
    return "\n".join(difflib.unified_diff(first.splitlines(), second.splitlines(), lineterm="", n=1))
