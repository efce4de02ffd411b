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


def _rows(tool, variant, classes=2):
    with open((tool.OUTS if classes == 2 else tool.OUTS_THREE)[variant], newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("variant", ["default", "no_uniform", "rescaled"])
def test_file_covers_every_problem_budget_and_dataset(tool, variant, classes):
    rows = _rows(tool, variant, classes)
    assert rows[0] == tool.COLUMNS
    body = rows[1:]
    problems = tool.problems(classes)
    assert problems  # two-class: 13 problems; three-class: new-thyroid and wine
    assert len(body) == len(problems) * len(tool.DELTAS) * tool.N_DATASETS[classes]
    assert [r[0] for r in body[::len(tool.DELTAS) * tool.N_DATASETS[classes]]] == problems
    for r in body:
        delta, budget = float(r[3]), float(r[5])
        assert 0 < budget <= delta  # the cross-validated budget is never looser than δ
        assert all(0 <= float(x) < 0.5 for x in r[6:9])
        assert all(1 <= float(x) <= tool.T for x in r[9:11])


@pytest.mark.parametrize("problem, classes, reps", [("labor", 2, (0, 1)), ("wine", 3, (0,))])
@pytest.mark.parametrize("variant", ["default", "no_uniform", "rescaled"])
def test_first_datasets_reproduce(tool, variant, problem, classes, reps):
    # the smallest problem of each kind: quick to recompute (a three-class dataset takes about half a minute)
    mix, n_rows = tool.truth(problem)
    assert mix.grid.shape[1] == classes
    prior = mix.prior(tool.T)
    oracle = {d: tool.OptimalRule(tool.T, d, prior=prior) for d in tool.DELTAS}
    stored = [r for r in _rows(tool, variant, classes)[1:] if r[0] == problem]
    for rep in reps:
        again = [[str(x) for x in r] for r in tool.one_dataset(problem, mix, n_rows, rep, prior, oracle, variant)]
        assert again == [r for r in stored if int(r[4]) == rep]


@pytest.mark.parametrize("classes", [2, 3])
def test_the_variants_share_truths_datasets_and_oracle(tool, classes):
    files = [_rows(tool, v, classes) for v in tool.VARIANTS]
    key = [0, 1, 2, 3, 4, 8, 10]  # problem, sizes, δ, dataset; the optimum's disagreement and members
    for other in files[1:]:
        assert [[r[i] for i in key] for r in other] == [[r[i] for i in key] for r in files[0]]


def _oracle(tool):
    with open(tool.OUT_ORACLE, newline="") as f:
        return list(csv.reader(f))


def test_oracle_file_covers_every_problem_and_agrees_with_the_simulations(tool):
    rows = _oracle(tool)
    assert rows[0] == tool.ORACLE_COLUMNS
    body = rows[1:]
    problems = tool.problems(2) + tool.problems(3)
    assert [r[0] for r in body] == [p for p in problems for _ in tool.DELTAS]
    assert [float(r[2]) for r in body] == [d for _ in problems for d in tool.DELTAS]
    table = {(r[0], r[2]): r for r in body}
    for r in body:
        delta, members, disagreement, exact = float(r[2]), float(r[3]), float(r[4]), float(r[5])
        assert disagreement <= delta * (1 + 1e-6)  # the table meets its budget under the truth
        assert 1 <= exact <= members * (1 + 1e-6)  # the randomised optimum never needs more than the table
    # the simulations' optimum_members is this table's expected members, the same truth and budget
    for classes in (2, 3):
        for variant in tool.VARIANTS:
            for r in _rows(tool, variant, classes)[1:]:
                assert r[10] == table[(r[0], r[3])][3]


@pytest.mark.parametrize("problem", ["labor", "wine"])
def test_oracle_rows_reproduce(tool, problem):
    stored = [r for r in _oracle(tool)[1:] if r[0] == problem]
    assert [[str(x) for x in r] for r in tool.oracle_rows(problem)] == stored


def test_a_stopped_run_resumes_at_the_problem_it_stopped_in(tool, tmp_path, monkeypatch):
    # the tool's arithmetic replaced by a stand-in: what is tested is which problems are computed and the bytes written
    calls = []

    def one_dataset(problem, mix, n_rows, rep, prior, oracle, variant="default"):
        calls.append((problem, rep))
        return [[problem, n_rows, rep, variant]]

    out = tmp_path / "budget_calibration.csv"
    monkeypatch.setattr(tool, "OUTS", {**tool.OUTS, "default": out})
    monkeypatch.setattr(tool, "PARTS", tmp_path / "parts")
    monkeypatch.setattr(tool, "N_DATASETS", {2: 2, 3: 2})
    monkeypatch.setattr(tool, "one_dataset", one_dataset)
    monkeypatch.setattr(tool, "truth", lambda problem: (type("Mix", (), {"prior": lambda self, T: None})(), 7))
    monkeypatch.setattr(tool, "OptimalRule", lambda *a, **k: None)
    monkeypatch.setattr("sys.argv", ["budget_calibration.py", "--problems", "labor,sonar"])
    tool.main()
    first = out.read_bytes()
    assert calls == [("labor", 0), ("labor", 1), ("sonar", 0), ("sonar", 1)]
    assert first.splitlines()[0].decode() == ",".join(tool.COLUMNS)
    # stopped after labor: sonar's rows are lost, labor's are kept
    (tmp_path / "parts" / "budget_calibration" / "sonar.csv").unlink()
    out.unlink()
    calls.clear()
    tool.main()
    assert calls == [("sonar", 0), ("sonar", 1)]
    assert out.read_bytes() == first
    assert not list(tmp_path.rglob("*.tmp"))
    # --restart computes everything again
    calls.clear()
    monkeypatch.setattr("sys.argv", ["budget_calibration.py", "--problems", "labor,sonar", "--restart"])
    tool.main()
    assert len(calls) == 4 and out.read_bytes() == first
