"""ensvote.experiments.aggregate against values computed by hand from a tiny set of records."""

import math

import numpy as np
import pandas as pd
import pytest

from ensvote import experiments
from ensvote.experiments import soto2016
from ensvote.experiments.store import write_atomic

SUITE, PROFILE = "soto2016", "smoke"
T = experiments.SUITES[SUITE].params[PROFILE]["T"]


def _result(error_rf, error_hyper, trees_hyper, trees_siba, prior_at):
    """A two-class soto2016 result; the calibration at α = 0.99 repeats the headline numbers, as the task's does."""
    prior = [0.0] * (T + 1)
    prior[prior_at] = 1.0
    cal = [{"alpha": a, "n_fixed": max(1, round(trees_hyper)), "disagree_hyper": 1.0, "disagree_siba": 0.5,
            "disagree_fixed": 2.0, "trees_hyper": trees_hyper, "trees_siba": trees_siba} for a in soto2016.ALPHAS]
    return {"n_train": 90, "n_test": 10, "n_classes": 2,
            "error_rf": error_rf, "error_siba": error_rf, "error_hyper": error_hyper,
            "disagree_siba": 0.5, "disagree_hyper": 1.0,
            "trees_rfstar": 50.0, "trees_siba": trees_siba, "trees_hyper": trees_hyper,
            "trees_mc_estimate": trees_hyper, "trees_mc_sem": 0.5, "trees_exact_estimate": trees_hyper,
            "prior": prior, "calibration": cal}


@pytest.fixture
def tiny(tmp_path):
    """Two records of sonar (votes has none): error 10 and 20 % (HYPER 20 and 34), HYPER 20.2 and 40.4 trees."""
    for r, res in enumerate([_result(10.0, 20.0, 20.2, 30.0, 0), _result(20.0, 34.0, 40.4, 30.0, T)]):
        rec = {"suite": SUITE, "profile": PROFILE, "dataset": "sonar", "realization": r,
               "params": experiments.SUITES[SUITE].params[PROFILE], "result": res}
        write_atomic(experiments.record_path(tmp_path, SUITE, PROFILE, "sonar", r), rec)
    return tmp_path


def test_aggregate_matches_hand_computed_values(tiny):
    with pytest.warns(experiments.RecordWarning, match="2 of 4 records missing"):
        experiments.aggregate(SUITE, PROFILE, out=tiny, allow_missing=True)
    d = tiny / SUITE / PROFILE
    t1 = pd.read_csv(d / "table1_error_disagreement.csv").set_index("problem")
    t2 = pd.read_csv(d / "table2_trees_speedup.csv").set_index("problem")
    sonar = t1.loc["Sonar"]
    assert sonar["error_rf_mean"] == 15.0  # (10 + 20) / 2
    assert sonar["error_rf_std"] == pytest.approx(math.sqrt(50), abs=5e-5)  # sqrt((25 + 25) / 1), 4 decimals
    assert sonar["error_hyper_mean"] == 27.0 and sonar["n_realizations"] == 2
    # paired t-test of the differences 10 and 14: t = 12 / (sqrt(8) / sqrt(2)) = 6 with 1 degree of freedom,
    # a Cauchy variable: p = 2 P(|t| > 6) = 1 - 2 atan(6) / pi
    assert sonar["pvalue_error_siba_vs_hyper"] == pytest.approx(1 - 2 * math.atan(6) / math.pi, abs=5e-5)
    assert np.isnan(t1.loc["Votes", "error_rf_mean"]) and t1.loc["Votes", "n_realizations"] == 0
    row = t2.loc["Sonar"]
    assert row["trees_hyper_mean"] == pytest.approx(30.3)  # (20.2 + 40.4) / 2
    assert row["speedup_hyper"] == pytest.approx(round(T / 30.3, 4))  # T / mean trees
    assert row["speedup_siba"] == pytest.approx(round(T / 30.0, 4)) and row["speedup_rfstar"] == pytest.approx(T / 50)
    assert row["trees_siba_std"] == 0.0
    cal = pd.read_csv(d / "fig1_calibration.csv")
    assert list(cal["alpha"]) == list(soto2016.ALPHAS) and (cal["disagree_fixed_mean"] == 2.0).all()
    pri = pd.read_csv(d / "fig1_priors.csv")
    # the mean of a point mass at 0 and one at T: one half at each end
    assert pri["prior_mean"].iloc[0] == 0.5 and pri["prior_mean"].iloc[-1] == 0.5 and pri["prior_mean"].sum() == 1.0


def test_speedup_uses_the_profiles_ensemble_size(tiny):
    recs = experiments.scan_records(SUITE, PROFILE, out=tiny).records
    for size in (T, 51):
        t2 = soto2016.tables(recs, {**experiments.SUITES[SUITE].params[PROFILE], "T": size})[
            "table2_trees_speedup.csv"].set_index("problem")
        assert t2.loc["Sonar", "speedup_hyper"] == pytest.approx(size / 30.3)
