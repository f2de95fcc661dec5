"""The corpus: ``corpus.json`` loaded and checked, and the cases (entry × arm × run) an eval is parametrized over."""
