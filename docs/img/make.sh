#!/usr/bin/env bash
# Re-make docs/img/report.png, the picture of report.html on README's front page: the offline main job (both arms
# on express, the scripted stand-in model) writes a campaign, and headless Chromium takes a screenshot of its
# report.html. Run from anywhere, in the checkout's venv (`pip install -e '.[test]'`); needs: chromium.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
checkout="$(cd "$here/../.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

cd "$checkout"
pytest evals -k express --agent-eval-backend scripted --agent-eval-offline -q -p no:cacheprovider \
  --agent-eval-out "$work/out" >"$work/pytest.log" || { tail -40 "$work/pytest.log"; exit 1; }
report="$(ls "$work"/out/*/report.html)"
browser="$(command -v chromium || command -v chromium-browser)"
"$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$work/profile" \
  --window-size=1280,1050 --screenshot="$here/report.png" "file://$report" 2>/dev/null
echo "wrote $here/report.png from $report"
