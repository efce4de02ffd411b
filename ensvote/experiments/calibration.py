"""Suite ``budget-calibration``: the budget mode against a known truth (the chapter "A disagreement budget").

On real data the budget mode (:meth:`ensvote.OptimalRule.from_oob_votes`) can
only be checked on the rows a problem has; here the distribution of a member's
class probabilities is known, so the disagreement a fitted rule will have on
all future rows is computed exactly.  The suite's datasets are the problems of
Soto et al. (2016) with at most ``max_rows`` rows (two and three classes); a
task is one simulated dataset of one problem (its realization):

1. *The truth* (once per problem, kept per process: :func:`truth`).  A
   1,001-tree random forest (scikit-learn defaults) is grown on all the rows;
   the distribution ``G`` of a member's class probabilities is estimated from
   its out-of-bag votes (about 368 a row) by the deconvolution of
   :func:`ensvote.priors.deconvolved_oob_prior`.  From here on ``G`` is taken
   as the truth.
2. *A dataset.*  As many training rows as the experiment's folds have (nine
   tenths of the problem): each row's ``p`` is drawn from ``G``, its number of
   out-of-bag members of a ``T``-tree forest from the bootstrap's
   Binomial(T, (1 - 1/n)^n), and its out-of-bag votes from Multinomial(that
   number, ``p``).  With three classes ``p`` is a point of ``G``'s grid (so the
   rows' own urns are a reweighting of ``G``).
3. *The rule*, per budget δ and per variant: ``OptimalRule.from_oob_votes(votes,
   T, δ)`` as ``HaltingClassifier(rule="optimal", disagreement=δ)`` builds it
   (``default``), or with one of its choices taken back: ``no_uniform`` mixes
   no uniform prior into the deconvolved ones (``uniform_rows=0``), and
   ``rescaled`` also scores the held-out rows under their rescaled out-of-bag
   votes (``heldout="rescaled"``).
4. *Its disagreement on future rows*, exactly under the truth
   (:func:`ensvote.policy_value` under ``G``'s urn prior), with its expected
   members; beside it the disagreement on the dataset's own rows (each with its
   own ``p``: what a realized disagreement measured on a problem's rows
   estimates) and that of the optimum under the truth on those rows.

Each record also keeps the optimum under its problem's truth at every budget
(its table's members and disagreement, and the members of the exact,
randomised optimum): the same in every record of a problem.  Values are kept at
the six significant digits the tables show.  Tables: ``budget_calibration.csv``
(and ``_no_uniform``, ``_rescaled``; ``_three_classes`` for the three-class
problems), one row per (problem, δ, dataset), and ``budget_calibration_oracle.csv``.
Three-class problems have ``THREE_CLASS_DATASETS`` datasets, not 100: a fit of
the budget mode takes about 30 times as long.
"""

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.ensemble import RandomForestClassifier

from .. import datasets as _datasets
from .._cache import BoundedCache
from .._utils import significant
from ..classifier import HaltingClassifier
from ..optimal import UNIFORM_ROWS, OptimalRule, policy_value
from ..priors import DECONVOLUTION_RESOLUTION, VoteMixture
from . import soto2016
from .store import keys, need, number, numbers, rng_and_ints, task_seed
from .suite import Suite, profile_params

__all__ = ["SUITE", "VARIANTS", "COLUMNS", "ORACLE_COLUMNS", "problems", "truth", "task", "check", "tables"]

#: The budget mode's settings per variant: the package's defaults, and two of its choices taken back.
VARIANTS = {"default": {"heldout": "deconvolved", "uniform_rows": UNIFORM_ROWS},
            "no_uniform": {"heldout": "deconvolved", "uniform_rows": 0.0},
            "rescaled": {"heldout": "rescaled", "uniform_rows": 0.0}}
#: Columns of the per-dataset tables.
COLUMNS = ["problem", "n_rows", "n_train", "delta", "dataset", "budget", "disagreement", "disagreement_rows",
           "oracle_rows", "members", "optimum_members"]
#: Columns of the table of the optimum under each truth.
ORACLE_COLUMNS = ["problem", "n_classes", "delta", "table_members", "table_disagreement", "optimum_members"]
#: Largest problem (rows) of the suite.
MAX_ROWS = 1000
#: Simulated datasets of a three-class problem (two-class ones have the profile's realizations).
THREE_CLASS_DATASETS = 50
#: Significant digits of every value a record keeps (the tables' own).
DIGITS = 6


def problems(classes):
    """Real problems of Soto et al. (2016) with ``classes`` classes and at most ``MAX_ROWS`` rows, in its order."""
    cat = _datasets.catalog().set_index("name")
    real = [p for p in soto2016.PROBLEMS if p in cat.index and p not in soto2016.SYNTHETIC]
    return tuple(p for p in real
                 if int(cat.loc[p, "n_classes"]) == classes and int(cat.loc[p, "n_samples"]) <= MAX_ROWS)


_TWO, _THREE = problems(2), problems(3)
#: Per problem: ``(G, number of rows, {δ: the optimal rule under G})``, kept while a worker runs its tasks.
_TRUTHS = BoundedCache("budget-calibration truths", 4)


def truth(problem, p):
    """``(G, n_rows, oracle)``: ``G`` (a :class:`~ensvote.priors.VoteMixture`, its ``grid`` and ``weights``)
    fitted to a ``truth_trees``-tree forest's out-of-bag votes of all the rows, the number of rows, and per
    budget the optimal rule under ``G`` itself."""
    key = (problem, p["T"], p["truth_trees"], tuple(p["delta_grid"]))
    hit = _TRUTHS.get(key)
    if hit is None:
        X, y = _datasets.load(problem)
        _, (seed,) = rng_and_ints(task_seed("budget-calibration", problem, -1), 1)
        rf = RandomForestClassifier(n_estimators=p["truth_trees"], random_state=seed, n_jobs=1)
        votes = HaltingClassifier(rf, rule="exact").fit(X, y).oob_votes_  # the votes only: no prior, no table
        mix = VoteMixture(votes[votes.sum(1) > 0], DECONVOLUTION_RESOLUTION[votes.shape[1]])
        prior = mix.prior(p["T"])
        hit = _TRUTHS[key] = (mix, len(y), {d: OptimalRule(p["T"], d, prior=prior) for d in p["delta_grid"]})
    return hit


def task(problem, realization, p):
    """One simulated dataset of ``problem``: the budget mode of every variant at every δ, scored under the truth."""
    T = p["T"]
    mix, n_rows, oracle = truth(problem, p)
    prior = mix.prior(T)
    rng, (fold_seed,) = rng_and_ints(task_seed("budget-calibration", problem, realization), 1)
    n = int(round(0.9 * n_rows))
    at = rng.choice(len(mix.grid), size=n_rows, p=mix.weights)  # each row's point of G's grid
    m = rng.binomial(T, (1.0 - 1.0 / n) ** n, size=n)
    if mix.grid.shape[1] == 2:
        p_all = mix.grid[at, 0]
        k = rng.binomial(m, p_all[:n])  # the training rows
        votes = np.column_stack([k, m - k])
        # the dataset's own rows: the urn of a row with class-0 probability p has Binomial(T, p) class-0 votes
        own = stats.binom.pmf(np.arange(T + 1)[:, None], T, p_all[None, :]).mean(axis=1)
        own = own / own.sum()
    else:
        votes = rng.multinomial(m, mix.grid[at[:n]])
        own = mix.prior(T, weights=np.bincount(at, minlength=len(mix.grid)) / n_rows)  # G on the rows' points
    out = {}
    for variant in p["variants"]:
        cols = {c: [] for c in COLUMNS[5:]}
        for delta in p["delta_grid"]:
            rule = OptimalRule.from_oob_votes(votes, T, delta, random_state=fold_seed, **VARIANTS[variant])
            v = policy_value(rule, prior)
            cols["budget"].append(rule.disagreement)
            cols["disagreement"].append(v.disagreement)
            cols["disagreement_rows"].append(policy_value(rule, own).disagreement)
            cols["oracle_rows"].append(policy_value(oracle[delta], own).disagreement)
            cols["members"].append(v.members)
            cols["optimum_members"].append(oracle[delta].expected_members)
        out[variant] = cols
    opt = {"table_members": [oracle[d].expected_members for d in p["delta_grid"]],
           "table_disagreement": [oracle[d].expected_disagreement for d in p["delta_grid"]],
           "optimum_members": [oracle[d].optimum_members for d in p["delta_grid"]]}
    return significant({"n_classes": int(mix.grid.shape[1]), "n_rows": n_rows, "n_train": n,
                        "variants": out, "oracle": opt}, DIGITS)


def check(res, p):
    """The schema of a result of :func:`task` (ValueError saying what is wrong)."""
    T, k = p["T"], len(p["delta_grid"])
    keys(res, {"n_classes", "n_rows", "n_train", "variants", "oracle"}, "result")
    number(res["n_classes"], "result.n_classes", 2, 3, integer=True)
    n_rows = number(res["n_rows"], "result.n_rows", 2, MAX_ROWS, integer=True)
    number(res["n_train"], "result.n_train", 1, n_rows, integer=True)
    keys(res["variants"], set(p["variants"]), "result.variants")
    for variant, cols in res["variants"].items():
        keys(cols, set(COLUMNS[5:]), f"result.variants.{variant}")
        budget = numbers(cols["budget"], f"result.variants.{variant}.budget", k, 0, 0.5)
        need(all(0 < b <= d for b, d in zip(budget, p["delta_grid"])), f"result.variants.{variant}.budget",
             "must lie in (0, δ]: the cross-validated budget is never looser than δ")
        for c in ("disagreement", "disagreement_rows", "oracle_rows"):
            numbers(cols[c], f"result.variants.{variant}.{c}", k, 0, 0.5)
        for c in ("members", "optimum_members"):
            numbers(cols[c], f"result.variants.{variant}.{c}", k, 1, T)
    keys(res["oracle"], set(ORACLE_COLUMNS[3:]), "result.oracle")
    numbers(res["oracle"]["table_members"], "result.oracle.table_members", k, 1, T)
    numbers(res["oracle"]["table_disagreement"], "result.oracle.table_disagreement", k, 0, 0.5)
    numbers(res["oracle"]["optimum_members"], "result.oracle.optimum_members", k, 1, T)


def _g(x):
    return f"{x:.{DIGITS}g}"


def tables(records, params):
    """Per variant and number of classes, one row per (problem, δ, dataset); and the optimum under each truth."""
    order = {d: i for i, d in enumerate(SUITE.datasets)}
    records = sorted(records, key=lambda r: (order[r["dataset"]], r["realization"]))
    deltas = params["delta_grid"]
    out = {}
    for variant in params["variants"]:
        suffix = "" if variant == "default" else f"_{variant}"
        for classes, tail in ((2, ""), (3, "_three_classes")):
            rows = []
            for r in records:
                res = r["result"]
                if res["n_classes"] != classes:
                    continue
                cols = res["variants"][variant]
                for i, delta in enumerate(deltas):
                    rows.append([r["dataset"], res["n_rows"], res["n_train"], str(delta), r["realization"],
                                 *(_g(cols[c][i]) for c in COLUMNS[5:])])
            out[f"budget_calibration{suffix}{tail}.csv"] = pd.DataFrame(rows, columns=COLUMNS)
    rows, seen = [], set()
    for r in records:
        if r["dataset"] in seen:
            continue
        seen.add(r["dataset"])
        o = r["result"]["oracle"]
        for i, delta in enumerate(deltas):
            rows.append([r["dataset"], r["result"]["n_classes"], str(delta),
                         *(_g(o[c][i]) for c in ORACLE_COLUMNS[3:])])
    out["budget_calibration_oracle.csv"] = pd.DataFrame(rows, columns=ORACLE_COLUMNS)
    return out


SUITE = Suite(
    "budget-calibration", _TWO + _THREE, {"smoke": 2, "book": 100, "paper": 100},
    profile_params({"T": 101, "truth_trees": 1001, "delta_grid": (0.002, 0.005, 0.01, 0.02, 0.05, 0.1),
                    "variants": tuple(VARIANTS)},
                   truth_trees=201, delta_grid=(0.01, 0.1), variants=("default",)),
    task=task, check=check, tables=tables, smoke_datasets=("labor",),
    fewer_realizations={p: THREE_CLASS_DATASETS for p in _THREE})
