"""The ``perrow`` suite: Kalman & Moscovich's four LP rules and ensvote's per-row and budget modes on one forest."""

import copy

import numpy as np
import pandas as pd
import pytest

from ensvote import OptimalRule, datasets, experiments
from ensvote.experiments import perrow, soto2016

SMOKE = experiments.SUITES["perrow"].params["smoke"]


def test_the_suite_is_registered_with_the_two_class_problems_only():
    assert experiments.SUITES["perrow"] is perrow.SUITE
    assert set(perrow.BINARY_PROBLEMS) < set(soto2016.PROBLEMS)
    for name in soto2016.PROBLEMS:
        kw = {"n_samples": 60, "random_state": 0} if name in experiments.suite.SYNTHETIC else {}
        _, y = datasets.load(name, **kw)
        assert (len(np.unique(y)) == 2) == (name in perrow.BINARY_PROBLEMS), name


@pytest.fixture(scope="module")
def result():
    res = experiments.run_task("perrow", "smoke", "votes", 0)["result"]
    perrow.check(res, SMOKE)
    return res


def test_per_row_rules_meet_delta_for_every_full_vote(result):
    for rule in perrow.PER_ROW_RULES:
        assert all(w <= d for w, d in zip(result["rules"][rule]["worst_row"], SMOKE["delta_grid"]))
    # the average rules do not: a near tie disagrees far more often than δ
    for rule in ("km-minimean-flat", "budget"):
        assert all(w > 5 * d for w, d in zip(result["rules"][rule]["worst_row"], SMOKE["delta_grid"]))


def test_the_flat_rules_are_the_prior_free_optimal_rules(result):
    delta = SMOKE["delta_grid"][0]
    flat = OptimalRule(SMOKE["T"], delta)
    from ensvote.optimal import row_values
    assert result["rules"]["km-minimean-flat"]["worst_row"][0] == pytest.approx(row_values(flat).disagreement.max())
    minimax = OptimalRule(SMOKE["T"], delta, guarantee="minimax")
    assert result["rules"]["km-minimax"]["worst_row"][0] == pytest.approx(minimax.worst_disagreement)


def test_calibration_and_scored_rows_partition_the_test_rows(result):
    *_, yte = soto2016.split("votes", 0, SMOKE["n_test_synthetic"])
    assert result["n_calibration"] + result["n_scored"] == len(yte)
    assert result["n_calibration"] == round(SMOKE["calibration_fraction"] * len(yte))


def test_check_refuses_a_per_row_rule_over_delta(result):
    bad = copy.deepcopy(result)
    bad["rules"]["per-row"]["worst_row"][0] = SMOKE["delta_grid"][0] * 1.01
    with pytest.raises(ValueError, match=r"per-row\.worst_row must be at most δ"):
        perrow.check(bad, SMOKE)
    bad = copy.deepcopy(result)
    del bad["rules"]["km-minimax"]
    with pytest.raises(ValueError, match="no key"):
        perrow.check(bad, SMOKE)


def test_tables_pool_the_partitions(result):
    other = copy.deepcopy(result)
    other["rules"]["budget"]["disagree"] = [d + 1 for d in other["rules"]["budget"]["disagree"]]
    records = [{"dataset": "votes", "realization": r, "result": res} for r, res in enumerate((result, other))]
    out = perrow.tables(records, SMOKE)
    per, summary = out["rules.csv"], out["summary.csv"]
    row = per[(per.rule == "budget") & (per.delta_pct == 100 * SMOKE["delta_grid"][0])].iloc[0]
    wrong = result["rules"]["budget"]["disagree"][0] * 2 + 1
    assert row.disagreement_pct == pytest.approx(100 * wrong / (2 * result["n_scored"]))
    assert list(summary.rule.unique()) == list(perrow.RULES)
    assert summary.columns.tolist() == ["rule", "delta_pct", "members", "pooled_ratio", "worst_ratio", "worst_row_pct"]
    pooled = summary[(summary.rule == "budget") & (summary.delta_pct == row.delta_pct)].pooled_ratio.iloc[0]
    assert pooled == pytest.approx(wrong / (2 * result["n_scored"] * SMOKE["delta_grid"][0]))
    assert perrow.summary(pd.DataFrame(columns=per.columns)).empty
