"""The defaults: a project's own corpus and thresholds at rootdir win, else the ones shipped in the package; a
config's own settings start at the built-in defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_agent_eval.corpus.cases import Arm
from pytest_agent_eval.corpus.load import load_corpus
from pytest_agent_eval.metrics.gates import load_thresholds
from pytest_agent_eval.settings.config import PACKAGED, AgentEvalConfig, resolve

REPO = Path(__file__).resolve().parents[1]


def _resolve(rootpath: Path, **ini: str):
    return resolve(lambda attr: None, lambda key: ini.get(key, ""), rootpath)


def test_an_empty_folder_gets_the_packaged_corpus_and_thresholds(tmp_path: Path) -> None:
    config = _resolve(tmp_path)
    assert (config.corpus, config.thresholds_file) == (PACKAGED / "corpus.json", PACKAGED / "agent-eval.yaml")
    assert any(entry.name == "express" for entry in load_corpus(config.corpus))
    assert load_thresholds(config.thresholds_file).arms["with"]  # the shipped file parses and gates the with-arm


def test_a_projects_own_files_win(tmp_path: Path) -> None:
    (tmp_path / "corpus.json").write_text("[]")
    (tmp_path / "agent-eval.yaml").write_text("")
    config = _resolve(tmp_path)
    assert (config.corpus, config.thresholds_file) == (tmp_path / "corpus.json", tmp_path / "agent-eval.yaml")


def test_packaged_thresholds_do_not_gate_a_projects_own_corpus(tmp_path: Path) -> None:
    (tmp_path / "corpus.json").write_text("[]")
    assert _resolve(tmp_path).thresholds_file is None
    assert _resolve(tmp_path, agent_eval_thresholds="gates.yaml").thresholds_file == tmp_path / "gates.yaml"


@pytest.mark.parametrize("name", ["corpus.json", "agent-eval.yaml", "evals/test_ab.py"])
def test_the_checkouts_top_level_files_are_the_packaged_ones(name: str) -> None:
    # Links in the checkout, copies in the sdist: either way one content, the package's.
    shipped = {"evals/test_ab.py": REPO / "pytest_agent_eval/evals/test_ab.py"}.get(name, PACKAGED / name)
    assert (REPO / name).read_bytes() == shipped.read_bytes()


def test_a_config_takes_only_settings_it_has_and_shares_no_list() -> None:
    with pytest.raises(TypeError, match="'rnus'"):
        AgentEvalConfig(rnus=3)
    first, second = AgentEvalConfig(runs=3), AgentEvalConfig()
    first.arms.append(Arm("with", "1.6.0"))
    first.cassettes.append(Path("a.jsonl"))
    assert (first.runs, second.runs) == (3, 2)
    assert second.arms == [Arm("with"), Arm("without")] and second.cassettes == []
