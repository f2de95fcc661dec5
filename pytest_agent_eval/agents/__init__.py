"""The coding agents the harness drives: how each is provisioned, driven, given a model and an MCP server,
denied a tool, and read back into the common Session."""
