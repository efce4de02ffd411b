"""Suite ``soto2016``: Soto, Suárez & Martínez-Muñoz (2016), §3.

Random forests of ``T = 101`` trees; RF*, SIBA, HYPER, the Monte Carlo (and
exact) expected number of trees, and the calibration of Fig. 1 for
α in {0.999, 0.995, 0.99, 0.95}.
"""

import math
import warnings

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import StratifiedKFold

from .. import datasets as _datasets
from ..classifier import HaltingClassifier
from ..engine import halt
from ..expected import expected_queries
from ..rules import ExactRule, FixedRule, UrnRule
from .store import keys, mean_std, need, number, numbers, rng_and_ints, task_seed
from .suite import SYNTHETIC, Suite, profile_params

__all__ = ["SUITE", "PROBLEMS", "ALPHAS", "seeds", "split", "task", "check", "tables"]

#: dataset name in ensvote -> problem name as printed in the paper
PROBLEMS = {
    "australian": "Australian", "breast": "Breast", "pima": "Diabetes",
    "echocardiogram": "Echocardiogram", "german": "German", "heart": "Heart",
    "horse-colic": "Horse-colic", "ionosphere": "Ionosphere", "labor": "Labor", "liver": "Liver",
    "mushroom": "Mushroom", "new-thyroid": "New-thyroid", "ringnorm": "Ringnorm", "sonar": "Sonar",
    "spam": "Spam", "threenorm": "Threenorm", "tic-tac-toe": "Tic-tac-toe", "twonorm": "Twonorm",
    "votes": "Votes", "waveform": "Waveform", "wine": "Wine",
}
ALPHAS = (0.999, 0.995, 0.99, 0.95)  # Fig. 1 of Soto et al. (2016)


def seeds(dataset, realization):
    """The seeds ``(forest, Monte Carlo)`` of a partition (the ``headtohead`` suite grows the same forest)."""
    return tuple(rng_and_ints(task_seed("soto2016", dataset, realization), 2)[1])


def split(dataset, realization, n_test_synthetic):
    """Soto et al. (2016), §3: 10 x 10-fold CV for real data (stratified), random sampling for synthetic."""
    if dataset in SYNTHETIC:
        # NOTE: this opens the task's seed sequence a second time (as :func:`seeds` does) and draws the
        # samples after one integer, which equals the forest seed.  Drawing the data from an independent
        # stream would be cleaner, but it would change every committed synthetic record, so it stays.
        rng, _ = rng_and_ints(task_seed("soto2016", dataset, realization), 1)
        Xtr, ytr = _datasets.load(dataset, n_samples=300, random_state=rng)
        Xte, yte = _datasets.load(dataset, n_samples=n_test_synthetic, random_state=rng)
        return Xtr, ytr, Xte, yte
    rep, fold = divmod(int(realization), 10)
    X, y = _datasets.load(dataset)
    # the fold assignment depends on the repetition only, so the 10 folds' tasks share it
    _, (s_cv,) = rng_and_ints(task_seed("soto2016-cv", dataset, rep), 1)
    tr, te = list(StratifiedKFold(10, shuffle=True, random_state=s_cv).split(X, y))[fold]
    return X[tr], y[tr], X[te], y[te]


def task(dataset, realization, p):
    """One partition of one problem: RF*, SIBA, HYPER, the expected number of trees, the calibration."""
    s_fit, s_mc = seeds(dataset, realization)
    Xtr, ytr, Xte, yte = split(dataset, realization, p["n_test_synthetic"])
    T, alpha = p["T"], p["alpha"]
    rf = RandomForestClassifier(n_estimators=T, random_state=s_fit, n_jobs=1)
    clf = HaltingClassifier(rf, rule="urn", prior="oob", confidence=alpha).fit(Xtr, ytr)
    prior = clf.prior_
    votes = clf.member_votes(Xte)
    l = len(clf.classes_)
    lab = clf.classes_
    full = halt(votes, FixedRule(T), n_classes=l)
    full_lab = lab[full.labels]
    star = halt(votes, ExactRule(T), n_classes=l)
    siba = halt(votes, UrnRule(T, alpha), n_classes=l)
    hyper_rule = UrnRule(T, alpha, prior=prior)
    hyper = halt(votes, hyper_rule, n_classes=l)
    mc, mc_sem = expected_queries(hyper_rule, prior, n_samples=p["n_mc"], random_state=s_mc, return_sem=True)
    exact = expected_queries(hyper_rule, prior, method="exact") if l == 2 else None
    rec = {
        "n_train": int(len(ytr)), "n_test": int(len(yte)), "n_classes": int(l),
        "error_rf": 100.0 * float(np.mean(full_lab != yte)),
        "error_siba": 100.0 * float(np.mean(lab[siba.labels] != yte)),
        "error_hyper": 100.0 * float(np.mean(lab[hyper.labels] != yte)),
        "disagree_siba": 100.0 * float(np.mean(siba.labels != full.labels)),
        "disagree_hyper": 100.0 * float(np.mean(hyper.labels != full.labels)),
        "trees_rfstar": float(star.n_queried.mean()),
        "trees_siba": float(siba.n_queried.mean()),
        "trees_hyper": float(hyper.n_queried.mean()),
        "trees_mc_estimate": float(mc), "trees_mc_sem": float(mc_sem),
        "trees_exact_estimate": None if exact is None else float(exact),
        "prior": prior.tolist() if l == 2 else None,
        "calibration": [],
    }
    for a in ALPHAS:
        h = halt(votes, UrnRule(T, a, prior=prior), n_classes=l)
        s = halt(votes, UrnRule(T, a), n_classes=l)
        n_fixed = max(1, int(round(float(h.n_queried.mean()))))
        f = halt(votes, FixedRule(n_fixed), n_classes=l)
        rec["calibration"].append({
            "alpha": a, "n_fixed": n_fixed,
            "disagree_hyper": 100.0 * float(np.mean(h.labels != full.labels)),
            "disagree_siba": 100.0 * float(np.mean(s.labels != full.labels)),
            "disagree_fixed": 100.0 * float(np.mean(f.labels != full.labels)),
            "trees_hyper": float(h.n_queried.mean()), "trees_siba": float(s.n_queried.mean()),
        })
    return rec



def check(res, p):
    """The schema of a result of :func:`task` (ValueError saying what is wrong)."""
    T = p["T"]
    pct = ("error_rf", "error_siba", "error_hyper", "disagree_siba", "disagree_hyper")
    trees = ("trees_rfstar", "trees_siba", "trees_hyper", "trees_mc_estimate")
    keys(res, {"n_train", "n_test", "n_classes", *pct, *trees, "trees_mc_sem", "trees_exact_estimate",
                "prior", "calibration"}, "result")
    number(res["n_train"], "result.n_train", 1, math.inf, integer=True)
    number(res["n_test"], "result.n_test", 1, math.inf, integer=True)
    l = number(res["n_classes"], "result.n_classes", 2, math.inf, integer=True)
    for k in pct:
        number(res[k], f"result.{k}", 0, 100)
    for k in trees:
        number(res[k], f"result.{k}", 1, T)
    number(res["trees_mc_sem"], "result.trees_mc_sem", 0, T)
    if l == 2:
        number(res["trees_exact_estimate"], "result.trees_exact_estimate", 1, T)
        prior = numbers(res["prior"], "result.prior", T + 1, 0, 1)
        need(abs(sum(prior) - 1) <= 1e-6, "result.prior", "must sum to 1")
    else:
        need(res["trees_exact_estimate"] is None, "result.trees_exact_estimate", f"must be null for {l} classes")
        need(res["prior"] is None, "result.prior", f"must be null for {l} classes")
    cal = res["calibration"]
    need(isinstance(cal, list) and len(cal) == len(ALPHAS), "result.calibration",
         f"must be a list of {len(ALPHAS)} objects")
    for i, (c, a) in enumerate(zip(cal, ALPHAS)):
        w = f"result.calibration[{i}]"
        keys(c, {"alpha", "n_fixed", "disagree_hyper", "disagree_siba", "disagree_fixed", "trees_hyper",
                  "trees_siba"}, w)
        need(c["alpha"] == a and not isinstance(c["alpha"], bool), f"{w}.alpha", f"must be {a}")
        for k in ("disagree_hyper", "disagree_siba", "disagree_fixed"):
            number(c[k], f"{w}.{k}", 0, 100)
        for k in ("trees_hyper", "trees_siba"):
            number(c[k], f"{w}.{k}", 1, T)
        need(number(c["n_fixed"], f"{w}.n_fixed", 1, T, integer=True) == max(1, int(round(c["trees_hyper"]))),
              f"{w}.n_fixed", "must be trees_hyper rounded")
        if a == p["alpha"]:  # the same halts as the headline columns
            for k in ("disagree_hyper", "disagree_siba", "trees_hyper", "trees_siba"):
                need(c[k] == res[k], f"{w}.{k}", f"must equal result.{k} (α = {a})")


def tables(records, params):
    """Table 1, Table 2, the calibration of Fig. 1 and the mean priors (``fig1_priors.csv``)."""
    T = params["T"]
    by = {}
    for r in records:
        by.setdefault(r["dataset"], []).append(r)
    t1, t2, cal, pri = [], [], [], []
    for d, prob in PROBLEMS.items():
        rs = [r["result"] for r in by.get(d, [])]
        row1, row2 = {"problem": prob}, {"problem": prob}
        for c in ("error_rf", "error_siba", "error_hyper", "disagree_siba", "disagree_hyper"):
            row1[f"{c}_mean"], row1[f"{c}_std"] = mean_std([x[c] for x in rs])
        for c in ("trees_rfstar", "trees_siba", "trees_hyper"):
            row2[f"{c}_mean"], row2[f"{c}_std"] = mean_std([x[c] for x in rs])
        row2["trees_mc_estimate"], row2["trees_mc_estimate_std"] = mean_std([x["trees_mc_estimate"] for x in rs])
        for c in ("rfstar", "siba", "hyper"):
            row2[f"speedup_{c}"] = float(T) / row2[f"trees_{c}_mean"] if rs else np.nan
        row2["trees_exact_estimate"] = mean_std([x["trees_exact_estimate"] for x in rs])[0]
        # paired t-tests SIBA vs HYPER (alpha = 0.05), as the paper marks in boldface
        for key, c in (("error", "error"), ("disagree", "disagree"), ("trees", "trees")):
            a = np.array([x[f"{c}_siba"] for x in rs], dtype=float)
            b = np.array([x[f"{c}_hyper"] for x in rs], dtype=float)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # near-constant differences
                p = stats.ttest_rel(a, b).pvalue if len(rs) > 1 and np.any(a != b) else np.nan
            (row1 if key != "trees" else row2)[f"pvalue_{key}_siba_vs_hyper"] = p
        row1["n_realizations"] = row2["n_realizations"] = len(rs)
        t1.append(row1)
        t2.append(row2)
        for a in ALPHAS:
            cs = [c for x in rs for c in x["calibration"] if c["alpha"] == a]
            if cs:
                row = {"problem": prob, "alpha": a, "n_realizations": len(rs)}
                for c in ("disagree_hyper", "disagree_siba", "disagree_fixed", "trees_hyper", "trees_siba"):
                    row[f"{c}_mean"], row[f"{c}_std"] = mean_std([x[c] for x in cs])
                cal.append(row)
        if rs and rs[0]["prior"] is not None:
            pr = np.mean([x["prior"] for x in rs], axis=0)
            pri.extend({"problem": prob, "k": k, "prior_mean": v} for k, v in enumerate(pr))
    cal_cols = ["problem", "alpha", "n_realizations"] + [
        f"{c}_{m}" for c in ("disagree_hyper", "disagree_siba", "disagree_fixed", "trees_hyper", "trees_siba")
        for m in ("mean", "std")]
    return {"table1_error_disagreement.csv": pd.DataFrame(t1),
            "table2_trees_speedup.csv": pd.DataFrame(t2),
            "fig1_calibration.csv": pd.DataFrame(cal, columns=cal_cols),  # a header even if empty
            "fig1_priors.csv": pd.DataFrame(pri, columns=["problem", "k", "prior_mean"])}


SUITE = Suite(
    "soto2016", tuple(PROBLEMS), {"smoke": 2, "book": 100, "paper": 100},
    profile_params({"T": 101, "alpha": 0.99, "n_mc": 10_000, "n_test_synthetic": 1000},
                   n_mc=2000, n_test_synthetic=300),
    task=task, check=check, tables=tables, smoke_datasets=("sonar", "votes"))
