"""The frozen data of the budget mode's known-truth check: the files are what their script makes."""

import csv
import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tool():
    spec = importlib.util.spec_from_file_location("budget_calibration", ROOT / "tools" / "budget_calibration.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _rows(tool, heldout):
    with open(tool.OUTS[heldout], newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("heldout", ["rescaled", "deconvolved"])
def test_file_covers_every_problem_budget_and_dataset(tool, heldout):
    rows = _rows(tool, heldout)
    assert rows[0] == tool.COLUMNS
    body = rows[1:]
    problems = tool.problems()
    assert len(body) == len(problems) * len(tool.DELTAS) * tool.N_DATASETS
    assert [r[0] for r in body[::len(tool.DELTAS) * tool.N_DATASETS]] == problems
    for r in body:
        delta, budget = float(r[3]), float(r[5])
        assert 0 < budget <= delta  # the cross-validated budget is never looser than δ
        assert all(0 <= float(x) < 0.5 for x in r[6:9])
        assert all(1 <= float(x) <= tool.T for x in r[9:11])


@pytest.mark.parametrize("heldout", ["rescaled", "deconvolved"])
def test_first_datasets_reproduce(tool, heldout):
    problem = "labor"  # the smallest: quick to recompute
    mix, n_rows = tool.truth(problem)
    prior = mix.prior(tool.T)
    oracle = {d: tool.OptimalRule(tool.T, d, prior=prior) for d in tool.DELTAS}
    stored = [r for r in _rows(tool, heldout)[1:] if r[0] == problem]
    for rep in (0, 1):
        again = [[str(x) for x in r] for r in tool.one_dataset(problem, mix, n_rows, rep, prior, oracle, heldout)]
        assert again == [r for r in stored if int(r[4]) == rep]


def test_the_two_files_share_truths_datasets_and_oracle(tool):
    a, b = _rows(tool, "rescaled"), _rows(tool, "deconvolved")
    key = [0, 1, 2, 3, 4, 8, 10]  # problem, sizes, δ, dataset; the optimum's disagreement and members
    assert [[r[i] for i in key] for r in a] == [[r[i] for i in key] for r in b]
