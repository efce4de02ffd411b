"""Per-row guarantees beside the average one: the task and the aggregation of the ``perrow`` suite.

Kalman & Moscovich (2026) stop a binary forest's vote with linear programs
over randomised stopping tables, under three notions of optimality; the
optimal rule of :mod:`ensvote.optimal` covers all three (its ``guarantee``).
For one partition of one two-class problem (the split and the forest of the
Soto et al. (2016) suite, as in the ``headtohead`` suite), a third of the
test rows, drawn at random, is Kalman & Moscovich's calibration
set: the histogram of the full forest's votes on it is their estimated
distribution ("Cal"; they split 70 / 10 / 20 into training, calibration and
evaluation, so a third of the held-out rows keeps their ratio without
changing the forest).  The other test rows are scored.  Per budget δ:

=====================  ==================================================  ==================
name                   rule                                                δ bounds
=====================  ==================================================  ==================
``km-minimean-flat``   ``OptimalRule(T, δ)``: uniform prior                the average
``km-minimean-cal``    ``OptimalRule(T, δ, prior=Cal)``                    the average
``km-minimax``         ``OptimalRule(T, δ, guarantee="minimax")``          every row
``km-minimixed-cal``   ``OptimalRule(T, δ, guarantee="per-row",            every row
                       prior=Cal)``
``budget``             ``HaltingClassifier(rule="optimal",                 the average
                       disagreement=δ)``: the budget mode (out-of-bag
                       votes, cross-validated)
``per-row``            ``HaltingClassifier(rule="optimal",                 every row
                       disagreement=δ, guarantee="per-row")``: members
                       weighed by the deconvolved out-of-bag prior
=====================  ==================================================  ==================

The four ``km-`` rules are Kalman & Moscovich's definitions computed by
ensvote's own solver (their linear program, solved by HiGHS: the same optimum,
``tests/test_per_row.py``), with deterministic tables; the last two are what
:class:`ensvote.HaltingClassifier` builds from the training rows alone (no
calibration rows).  The record keeps, per rule and δ, the mean members on the
scored rows, the number of scored rows whose label differs from the full
forest's, and the largest disagreement of the rule's table over every full
vote (:func:`ensvote.optimal.row_values`: at most δ for the per-row rules).

:func:`ensvote.experiments.run` (suite ``perrow``) seeds, runs and stores the
tasks; :func:`tables` makes the tables of the chapter *A disagreement budget*.
"""

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

from .._cache import BoundedCache
from ..classifier import HaltingClassifier
from ..engine import halt
from ..optimal import OptimalRule, row_values
from ..priors import oob_prior
from ..rules import FixedRule, make_rule
from . import soto2016
from .store import keys, need, number, numbers, rng_and_ints, task_seed
from .suite import Suite, profile_params

__all__ = ["SUITE", "RULES", "PER_ROW_RULES", "BINARY_PROBLEMS", "task", "check", "tables", "summary"]

#: Rule names in the order the chapter shows them.
RULES = ("km-minimean-flat", "km-minimean-cal", "km-minimax", "km-minimixed-cal", "budget", "per-row")
#: The rules whose δ bounds every row's disagreement.
PER_ROW_RULES = ("km-minimax", "km-minimixed-cal", "per-row")
#: The two-class problems of the Soto et al. (2016) suite (Kalman & Moscovich's rules are binary).
BINARY_PROBLEMS = tuple(p for p in soto2016.PROBLEMS if p not in ("new-thyroid", "waveform", "wine"))

#: Rules that depend on T and δ only (the flat and minimax ones), the same for every task of a profile.
_PRIOR_FREE = BoundedCache("per-row suite rules without a data prior", 64)


def _prior_free(T, delta, guarantee):
    key = (T, delta, guarantee)
    hit = _PRIOR_FREE.get(key)
    if hit is None:
        hit = _PRIOR_FREE[key] = OptimalRule(T, delta, guarantee=guarantee)
    return hit


def task(dataset, realization, p):
    """One partition of one two-class problem: every rule at every δ on the scored test rows (a JSON-serialisable dict)."""
    s_fit, _ = soto2016.seeds(dataset, realization)
    Xtr, ytr, Xte, yte = soto2016.split(dataset, realization, p["n_test_synthetic"])
    T = p["T"]
    clf = HaltingClassifier(RandomForestClassifier(n_estimators=T, random_state=s_fit, n_jobs=1),
                            rule="exact").fit(Xtr, ytr)
    need(len(clf.classes_) == 2, f"{dataset}:", "Kalman & Moscovich's rules are for two classes")
    votes = clf.member_votes(Xte)
    rng, _ = rng_and_ints(task_seed("perrow", dataset, realization), 0)
    is_cal = np.zeros(len(yte), dtype=bool)
    is_cal[rng.choice(len(yte), size=max(1, round(p["calibration_fraction"] * len(yte))), replace=False)] = True
    cal, scored = votes[is_cal], votes[~is_cal]
    full = halt(scored, FixedRule(T), n_classes=2).labels
    # Kalman & Moscovich's "Cal": the histogram of the full forest's vote vectors on the calibration rows
    cal_prior = oob_prior(halt(cal, FixedRule(T), n_classes=2).counts, T, window=1)
    rules = {}
    for name in RULES:
        members, disagree, worst = [], [], []
        for delta in p["delta_grid"]:
            if name == "km-minimean-flat":
                rule = _prior_free(T, delta, "average")
            elif name == "km-minimax":
                rule = _prior_free(T, delta, "minimax")
            elif name == "km-minimean-cal":
                rule = OptimalRule(T, delta, prior=cal_prior)
            elif name == "km-minimixed-cal":
                rule = OptimalRule(T, delta, prior=cal_prior, guarantee="per-row")
            else:  # as HaltingClassifier(rule="optimal", disagreement=δ, guarantee=...) builds it at fit
                rule = make_rule("optimal", n_members=T, strength=delta, n_classes=2, prior="oob",
                                 oob_votes=lambda: clf.oob_votes_,
                                 guarantee="per-row" if name == "per-row" else "average")
            res = halt(scored, rule, n_classes=2)
            members.append(float(res.n_queried.mean()))
            disagree.append(int(np.sum(res.labels != full)))
            worst.append(float(row_values(rule).disagreement.max()))
        rules[name] = {"members": members, "disagree": disagree, "worst_row": worst}
    return {"n_train": int(len(ytr)), "n_calibration": int(is_cal.sum()), "n_scored": int(len(full)),
            "rules": rules}


def check(res, p):
    """The schema of a result of :func:`task` (ValueError saying what is wrong)."""
    T, n = p["T"], len(p["delta_grid"])
    keys(res, {"n_train", "n_calibration", "n_scored", "rules"}, "result")
    number(res["n_train"], "result.n_train", 1, float("inf"), integer=True)
    number(res["n_calibration"], "result.n_calibration", 1, float("inf"), integer=True)
    n_scored = number(res["n_scored"], "result.n_scored", 1, float("inf"), integer=True)
    keys(res["rules"], set(RULES), "result.rules")
    for rule in RULES:
        r, w = res["rules"][rule], f"result.rules.{rule}"
        keys(r, {"members", "disagree", "worst_row"}, w)
        numbers(r["members"], f"{w}.members", n, 1, T)
        numbers(r["disagree"], f"{w}.disagree", n, 0, n_scored, integer=True)
        numbers(r["worst_row"], f"{w}.worst_row", n, 0, 1)
        if rule in PER_ROW_RULES:
            need(all(x <= d for x, d in zip(r["worst_row"], p["delta_grid"])), f"{w}.worst_row",
                 "must be at most δ (a per-row guarantee)")


def tables(records, params):
    """``rules.csv``: per problem, rule and δ, the mean members, the realized disagreement (pooled over the
    partitions) and the largest per-row disagreement of the tables; ``summary.csv``: :func:`summary`."""
    rows = []
    by = {}
    for r in records:
        by.setdefault(r["dataset"], []).append(r["result"])
    for dataset, results in sorted(by.items()):
        n_scored = sum(res["n_scored"] for res in results)
        for rule in RULES:
            for k, delta in enumerate(params["delta_grid"]):
                members = np.mean([res["rules"][rule]["members"][k] for res in results])
                wrong = sum(res["rules"][rule]["disagree"][k] for res in results)
                rows.append({"dataset": dataset, "rule": rule, "delta_pct": 100.0 * delta, "members": members,
                             "disagree": wrong, "n_scored": n_scored, "disagreement_pct": 100.0 * wrong / n_scored,
                             "worst_row_pct": 100.0 * max(res["rules"][rule]["worst_row"][k] for res in results),
                             "n_partitions": len(results)})
    per = pd.DataFrame(rows, columns=["dataset", "rule", "delta_pct", "members", "disagree", "n_scored",
                                      "disagreement_pct", "worst_row_pct", "n_partitions"])
    return {"rules.csv": per, "summary.csv": summary(per)}


def summary(per):
    """Per rule and δ, from ``rules.csv``: the mean members over the problems, the realized disagreement pooled
    over the problems' scored rows as a multiple of δ, the largest problem's realized disagreement as a multiple
    of δ, and the largest per-row disagreement of any of the rule's tables."""
    columns = ["rule", "delta_pct", "members", "pooled_ratio", "worst_ratio", "worst_row_pct"]
    if per.empty:
        return pd.DataFrame(columns=columns)
    per = per.assign(ratio=per.disagreement_pct / per.delta_pct, budget=per.n_scored * per.delta_pct / 100.0)
    g = per.groupby(["rule", "delta_pct"], sort=False)
    out = g.agg(members=("members", "mean"), disagree=("disagree", "sum"), budget=("budget", "sum"),
                worst_ratio=("ratio", "max"), worst_row_pct=("worst_row_pct", "max")).reset_index()
    out["pooled_ratio"] = out.disagree / out.budget
    out = out[columns]
    return out.sort_values(["delta_pct", "rule"], ascending=[False, True],
                           key=lambda c: c.map(RULES.index) if c.name == "rule" else c).reset_index(drop=True)


SUITE = Suite(
    "perrow", BINARY_PROBLEMS, {"smoke": 2, "book": 10, "paper": 100},
    profile_params({"T": 101, "n_test_synthetic": 1000, "calibration_fraction": 1 / 3,
                    "delta_grid": (0.05, 0.02, 0.01, 0.005, 0.002, 0.001)},
                   n_test_synthetic=300, delta_grid=(0.01, 0.001)),
    task=task, check=check, tables=tables,
    smoke_datasets=("sonar", "votes"), book_datasets=("german", "pima", "spam", "twonorm", "votes"))
