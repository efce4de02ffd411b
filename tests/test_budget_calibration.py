"""The suites ``budget-calibration`` and ``many-classes``: their committed records and tables, recomputed."""

import csv
import json
import math
from pathlib import Path

import numpy as np
import pytest

from ensvote import experiments
from ensvote.experiments import calibration, manyclasses
from ensvote.experiments.store import RECORD_DIGITS, IncompleteRecordsError
from ensvote._utils import significant

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "results"
CALIB = RESULTS / "budget-calibration" / "book"
MANY = RESULTS / "many-classes" / "book"
BOOK = calibration.SUITE.params["book"]
DELTAS = BOOK["delta_grid"]


@pytest.fixture(scope="module")
def records():
    scan = experiments.scan_records("budget-calibration", "book", out=RESULTS)
    assert not scan.bad and not scan.missing, (scan.bad[:3], scan.missing_text())
    return scan.records


def _as_stored(rec):
    """A freshly computed record as the runner stores it (floats at RECORD_DIGITS digits, tuples as lists)."""
    return json.loads(json.dumps(significant(rec, RECORD_DIGITS)))


def _rows(name, where=CALIB):
    with open(where / name, newline="") as f:
        return list(csv.reader(f))


def test_the_suite_covers_every_small_real_problem_of_soto_et_al():
    cat = experiments.soto2016  # the problems come from the Soto et al. (2016) suite, real and at most 1,000 rows
    from ensvote import datasets

    info = datasets.catalog().set_index("name")
    small = [p for p in cat.PROBLEMS if p not in cat.SYNTHETIC and info.loc[p, "n_samples"] <= calibration.MAX_ROWS]
    assert list(calibration.SUITE.datasets) == [p for p in small if info.loc[p, "n_classes"] == 2] + \
        [p for p in small if info.loc[p, "n_classes"] == 3]
    assert len(calibration.problems(2)) == 13 and calibration.problems(3) == ("new-thyroid", "wine")


def test_three_class_problems_have_fewer_datasets_in_every_listing():
    s = calibration.SUITE
    assert s.n_realizations("book", "wine") == calibration.THREE_CLASS_DATASETS
    assert s.n_realizations("book", "labor") == 100 and s.n_realizations("smoke", "wine") == 2
    tasks = experiments.list_tasks("budget-calibration", "book", datasets=["labor", "wine"])
    assert len(tasks) == 100 + calibration.THREE_CLASS_DATASETS and ("wine", 49) in tasks and ("wine", 50) not in tasks
    rec = {"suite": "budget-calibration", "profile": "book", "dataset": "wine", "realization": 50,
           "params": BOOK, "result": {}}
    with pytest.raises(ValueError, match="realization 50, outside 0..49"):
        experiments.check_record(rec)


def test_the_committed_tables_are_the_records_aggregated(records):
    # the same bytes as `python -m ensvote aggregate budget-calibration --profile book` writes
    tables = calibration.tables(records, BOOK)
    assert len(tables) == 7
    for name, df in tables.items():
        want = (CALIB / name).read_text()
        assert df.to_csv(index=False, lineterminator="\n") == want, name


@pytest.mark.parametrize("classes", [2, 3])
@pytest.mark.parametrize("variant", list(calibration.VARIANTS))
def test_tables_cover_every_problem_budget_and_dataset(variant, classes):
    suffix = ("" if variant == "default" else f"_{variant}") + ("" if classes == 2 else "_three_classes")
    rows = _rows(f"budget_calibration{suffix}.csv")
    assert rows[0] == calibration.COLUMNS
    body = rows[1:]
    problems = calibration.problems(classes)
    n = calibration.SUITE.n_realizations("book", problems[0])
    assert len(body) == len(problems) * len(DELTAS) * n
    assert [r[0] for r in body[::len(DELTAS) * n]] == list(problems)
    for r in body:
        delta, budget = float(r[3]), float(r[5])
        assert 0 < budget <= delta  # the cross-validated budget is never looser than δ
        assert all(0 <= float(x) < 0.5 for x in r[6:9])
        assert all(1 <= float(x) <= BOOK["T"] for x in r[9:11])


@pytest.mark.parametrize("problem, realizations", [("labor", (0, 1)), ("wine", (0,))])
def test_first_datasets_reproduce(records, problem, realizations):
    # the smallest problem of each kind: quick to recompute (a three-class dataset takes about a minute)
    stored = {(r["dataset"], r["realization"]): r for r in records}
    for r in realizations:
        assert _as_stored(experiments.run_task("budget-calibration", "book", problem, r)) == stored[problem, r]


def test_the_variants_share_truths_datasets_and_oracle(records):
    for rec in records:
        v = rec["result"]["variants"]
        for other in ("no_uniform", "rescaled"):
            for col in ("oracle_rows", "optimum_members"):
                assert v[other][col] == v["default"][col]
        assert v["default"]["optimum_members"] == rec["result"]["oracle"]["table_members"]
    # one truth per problem: every record of a problem has the same oracle
    by = {}
    for rec in records:
        assert by.setdefault(rec["dataset"], rec["result"]["oracle"]) == rec["result"]["oracle"]


def test_oracle_table_meets_its_budget_and_the_randomised_optimum_is_below_it():
    rows = _rows("budget_calibration_oracle.csv")
    assert rows[0] == calibration.ORACLE_COLUMNS
    body = rows[1:]
    assert [r[0] for r in body] == [p for p in calibration.SUITE.datasets for _ in DELTAS]
    assert [float(r[2]) for r in body] == [d for _ in calibration.SUITE.datasets for d in DELTAS]
    for r in body:
        delta, members, disagreement, exact = float(r[2]), float(r[3]), float(r[4]), float(r[5])
        assert disagreement <= delta * (1 + 1e-5)  # the table meets its budget under the truth (6 digits kept)
        assert 1 <= exact <= members * (1 + 1e-5)  # the randomised optimum never needs more than the table


def test_a_result_out_of_range_is_refused():
    res = experiments.run_task("budget-calibration", "smoke", "labor", 0)["result"]
    p = calibration.SUITE.params["smoke"]
    calibration.check(res, p)
    bad = {**res, "variants": {"default": {**res["variants"]["default"], "budget": [0.02, 0.05]}}}
    with pytest.raises(ValueError, match="never looser than δ"):
        calibration.check(bad, p)
    with pytest.raises(ValueError, match="result.oracle"):
        calibration.check({**res, "oracle": {}}, p)


def test_an_incomplete_set_names_the_missing_datasets(tmp_path):
    experiments.run("budget-calibration", "smoke", out=tmp_path, realizations="0:1", progress=False)
    with pytest.raises(IncompleteRecordsError, match=r"1 of 2 records missing \(labor r001\)"):
        experiments.aggregate("budget-calibration", "smoke", out=tmp_path)


# --------------------------------------------------------------------------
# many-classes
# --------------------------------------------------------------------------
def test_many_classes_tables_are_the_records_aggregated():
    scan = experiments.scan_records("many-classes", "book", out=RESULTS)
    assert not scan.bad and not scan.missing
    for name, df in manyclasses.tables(scan.records, manyclasses.SUITE.params["book"]).items():
        assert df.to_csv(index=False, lineterminator="\n") == (MANY / name).read_text(), name


@pytest.mark.parametrize("dataset", ["l4-T30", "random"])
def test_many_classes_records_reproduce(dataset):
    stored = experiments.read_record(experiments.record_path(RESULTS, "many-classes", "book", dataset, 0))
    assert _as_stored(experiments.run_task("many-classes", "book", dataset, 0)) == stored


def test_many_classes_bound_never_exceeds_the_exact_value_beyond_rounding():
    rows = _rows("many_classes_check.csv", MANY)
    head, body = rows[0], rows[1:]
    assert [(int(r[0]), int(r[1])) for r in body[::2]] == list(manyclasses.CONFIGS.values())
    col = {c: i for i, c in enumerate(head)}
    for r in body:
        assert float(r[col["max_excess"]]) < 1e-12
        assert int(r[col["stops_extra"]]) == 0  # the bound never stops where the exact rule does not
        n = int(r[col["n_vectors"]])
        l, T = int(r[0]), int(r[1])
        assert n == math.comb(T + l, l)  # every vote vector with at most T votes
    rnd = _rows("many_classes_random.csv", MANY)[1:]
    assert len(rnd) == 80 and all(float(r[4]) <= float(r[3]) + 1e-12 for r in rnd)


def test_all_states_is_every_vote_vector_once():
    s = manyclasses.all_states(5, 3)
    assert len(s) == math.comb(8, 3) and len(np.unique(s, axis=0)) == len(s) and s.sum(1).max() == 5
