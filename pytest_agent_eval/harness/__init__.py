"""The harness: provision the tools, index the repo, isolate the arms, drive the agent."""
