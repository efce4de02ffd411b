"""The budget mode's validation on the committed head-to-head records (the paper profile).

What the chapter "A disagreement budget" reports,
checked on the records themselves, so that a re-run that changes the
verdict fails here and not only in the prose:

* the committed tables are the records aggregated (same bytes);
* pooled over every problem's test rows, the realized disagreement is at
  most δ at every budget of the sweep;
* the pass criterion: per problem, the exact one-sided binomial test of
  "realized rate ≤ δ" on the pooled rows, Holm's correction across the
  problems of one δ — no problem fails at any budget, nor with every
  problem/budget pair as one family;
* on the pairs the simulation against a known truth covers, the budget mode
  lands above δ no more often than the optimum under the truth is expected to;
* wherever HYPER at α = 1 − δ realizes significantly less than δ, the budget
  mode queries fewer members, unless both stop every row after one member.
"""

import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.multitest import multipletests

from ensvote import experiments
from ensvote.experiments import soto2016

ROOT = Path(__file__).resolve().parents[1]
PAPER = ROOT / "results" / "headtohead" / "paper"
CALIB = ROOT / "results" / "budget-calibration" / "book"  # the known-truth simulation


@pytest.fixture(scope="module")
def budget():
    return pd.read_csv(PAPER / "budget.csv")


def test_committed_tables_are_the_records_aggregated(tmp_path):
    target = tmp_path / "headtohead" / "paper"
    target.mkdir(parents=True)
    os.symlink(PAPER / "tasks", target / "tasks")
    written = experiments.aggregate("headtohead", "paper", out=tmp_path)
    assert {p.name for p in written} == {"curves.csv", "at_disagreement.csv", "under_prior.csv", "budget.csv"}
    for p in written:
        assert p.read_bytes() == (PAPER / p.name).read_bytes(), p.name


def test_every_problem_and_budget_is_there(budget):
    params = experiments.SUITES["headtohead"].params["paper"]
    # the budgets of the sweep for which HYPER's sweep has the matching α = 1 − δ
    grid = [d for d in params["delta_grid"] if np.isclose(params["alpha_grid"], 1 - d, rtol=0, atol=1e-12).any()]
    assert len(grid) >= 9
    assert set(budget.problem) == set(soto2016.PROBLEMS)
    for _, g in budget.groupby("problem"):
        assert np.allclose(sorted(g.delta_pct / 100), sorted(grid))
    assert (budget.n_realizations == experiments.SUITES["headtohead"].realizations["paper"]).all()


def test_pooled_over_the_problems_the_budget_is_met(budget):
    for delta_pct, g in budget.groupby("delta_pct"):
        assert g.opt_disagree.sum() <= delta_pct / 100 * g.n_test.sum(), delta_pct


def test_no_problem_is_significantly_above_its_budget(budget):
    from scipy import stats

    # the columns are the test they say (written to 4 decimals)
    p = [stats.binomtest(int(k), int(n), d / 100, alternative="greater").pvalue
         for k, n, d in zip(budget.opt_disagree, budget.n_test, budget.delta_pct)]
    assert np.allclose(budget.opt_pvalue_over, p, rtol=0, atol=5e-5)
    holm = budget.groupby("delta_pct").opt_pvalue_over.transform(lambda q: multipletests(q, method="holm")[1])
    assert np.allclose(budget.opt_pvalue_holm, holm, rtol=0, atol=2e-3)
    assert (budget.significantly_over == (budget.opt_pvalue_holm < 0.05)).all()
    assert not budget.significantly_over.any(), budget[budget.significantly_over][["problem", "delta_pct"]]
    everything = multipletests(p, method="holm")[1]  # every problem/budget pair as one family
    assert everything.min() >= 0.05, budget.loc[everything.argmin(), ["problem", "delta_pct"]].tolist()


def test_misses_are_no_more_than_a_rule_that_knows_the_truth_has(budget):
    sim = pd.concat([pd.read_csv(CALIB / "budget_calibration.csv"),
                     pd.read_csv(CALIB / "budget_calibration_three_classes.csv")], ignore_index=True)
    sim["delta"] = sim.delta.round(6)
    expected = sim.groupby(["problem", "delta"]).apply(
        lambda m: (m.oracle_rows > m.name[1]).mean(), include_groups=False)
    real = budget.assign(delta=(budget.delta_pct / 100).round(6)).set_index(["problem", "delta"])
    above = real.above_budget.reindex(expected.index)
    assert above.notna().all() and len(expected) >= 80
    # the verdict column is what it says
    assert (real.above_budget == (real.opt_disagree > real.delta_pct / 100 * real.n_test * (1 + 1e-12))).all()
    assert int(above.astype(bool).sum()) <= expected.sum()


def test_fewer_members_than_hyper_where_hyper_is_well_below(budget):
    well = budget[budget.hyper_well_below]
    assert len(well) >= 40
    one = np.isclose(well.opt_members, 1.0) & np.isclose(well.hyper_members, 1.0)
    assert (well.fewer_than_hyper | one).all()
    assert (well.fewer_than_hyper == (well.opt_members < well.hyper_members)).all()
