"""The A/B evaluation shipped with the package: ``pytest --pyargs pytest_agent_eval.evals`` runs it anywhere."""
