"""The evals run real agents and spend money: collect them only when they are named on the command line."""

from pathlib import Path

EVAL_FOLDERS = ("evals", "pytest_agent_eval/evals")  # evals/test_ab.py links to the packaged pytest_agent_eval/evals


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    if collection_path not in [config.rootpath / folder for folder in EVAL_FOLDERS]:
        return None
    named = {Path(arg.split("::")[0]).resolve() for arg in config.args}
    if config.option.pyargs:  # pytest --pyargs pytest_agent_eval.evals names a module, not a path
        named |= {config.rootpath.joinpath(*arg.split("::")[0].split(".")) for arg in config.args}
    return None if any(path == collection_path or collection_path in path.parents for path in named) else True
