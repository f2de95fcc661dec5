"""The run's settings: the option table, how each text becomes a value, and their precedence
(marker > command line > ini > default)."""
