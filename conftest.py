"""evals/ runs real agents and spends money: collect it only when it is named on the command line."""

from pathlib import Path


def pytest_ignore_collect(collection_path: Path, config) -> bool | None:
    evals = config.rootpath / "evals"
    if collection_path != evals:
        return None
    named = (Path(arg.split("::")[0]).resolve() for arg in config.args)
    return None if any(path == evals or evals in path.parents for path in named) else True
