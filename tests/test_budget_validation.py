"""The budget mode's validation on the committed head-to-head records (the paper profile).

What the chapter "A disagreement budget" reports,
checked on the records themselves, so that a re-run that changes the
verdict fails here and not only in the prose:

* the committed tables are the records aggregated (same bytes);
* pooled over every problem's test rows, the realized disagreement is at
  most δ at every budget of the sweep;
* per problem, no excess over δ + 0.3 points is significant after Holm's
  adjustment for all the problem/budget pairs;
* on the pairs the simulation against a known truth covers, the budget mode
  misses δ + 0.3 points no more often than the optimum under the truth is
  expected to;
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
DATA = ROOT / "book" / "data"
MARGIN = 0.003  # δ + 0.3 points


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


def test_no_excess_over_the_margin_is_significant(budget):
    holm = multipletests(budget.opt_pvalue_over, method="holm")[1]
    assert holm.min() >= 0.05, budget.loc[holm.argmin(), ["problem", "delta_pct"]].tolist()


def test_misses_are_no_more_than_a_rule_that_knows_the_truth_has(budget):
    sim = pd.concat([pd.read_csv(DATA / "budget_calibration.csv"),
                     pd.read_csv(DATA / "budget_calibration_three_classes.csv")], ignore_index=True)
    sim["delta"] = sim.delta.round(6)
    expected = sim.groupby(["problem", "delta"]).apply(
        lambda m: (m.oracle_rows > m.name[1] + MARGIN).mean(), include_groups=False)
    real = budget.assign(delta=(budget.delta_pct / 100).round(6)).set_index(["problem", "delta"])
    within = real.within_margin.reindex(expected.index)
    assert within.notna().all() and len(expected) >= 80
    # the verdict column is what it says
    limit = (real.delta_pct / 100 + MARGIN) * real.n_test
    assert (real.within_margin == (real.opt_disagree <= limit * (1 + 1e-12))).all()
    assert int((~within.astype(bool)).sum()) <= expected.sum()


def test_fewer_members_than_hyper_where_hyper_is_well_below(budget):
    well = budget[budget.hyper_well_below]
    assert len(well) >= 40
    one = np.isclose(well.opt_members, 1.0) & np.isclose(well.hyper_members, 1.0)
    assert (well.fewer_than_hyper | one).all()
    assert (well.fewer_than_hyper == (well.opt_members < well.hyper_members)).all()
