"""Running: what composes the packages below it into one item's life (item, the block probe, check-agent's
conformance run) and one session's campaign (evaluation, merge). It sits above the harness, the model server,
the agents, settings, campaign and report, none of which imports it (docs/architecture.md)."""
