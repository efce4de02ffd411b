"""Suite ``hl2011``: Hernández-Lobato, Martínez-Muñoz & Suárez (2011), §4.

Bagging and random forests of ``T = 101`` trees, stopping rule
L(y*|t) > π = 0.99, the 10,000-tree ensemble as proxy of the infinite one
(Tables 2-3), and the π sweep of Fig. 6.

Bagging of unpruned CART trees is run as ``RandomForestClassifier(max_features=None)``:
each tree is a CART tree grown on a bootstrap sample with every feature
considered at every split, which is bagging (the test suite checks tree by tree
that it equals ``DecisionTreeClassifier`` fitted on the same bootstrap sample).
"""

import math

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier
from sklearn.utils import check_array

from .. import datasets as _datasets
from ..classifier import HaltingClassifier
from ..engine import halt
from ..rules import FixedRule, InfiniteRule
from .store import keys, mean_std, need, number, numbers, rng_and_ints, task_seed
from .suite import SYNTHETIC, Suite, profile_params

__all__ = ["SUITE", "PROBLEMS", "PI_GRID", "seeds", "split", "proxy_seeds", "proxy_votes", "task", "check", "tables"]

#: dataset name in ensvote -> problem name as printed in the paper
PROBLEMS = {
    "breast": "breast", "glass": "glass", "heart": "heart", "led": "led", "liver": "liver",
    "new-thyroid": "new-thyroid", "pima": "pima", "ringnorm": "ringnorm", "spam": "spam",
    "threenorm": "threenorm", "twonorm": "twonorm", "vehicle": "vehicle", "vowel": "vowel",
    "waveform": "waveform", "wine": "wine",
}
PI_GRID = tuple(round(0.70 + 0.01 * i, 2) for i in range(30))  # 0.70 .. 0.99 (Fig. 6)


def seeds(dataset, realization):
    """The task's generator (for the split) and the seeds ``(bagging, rf, bagging proxy, rf proxy)``."""
    return rng_and_ints(task_seed("hl2011", dataset, realization), 4)


def split(dataset, rng, n_test_synthetic):
    """Hernández-Lobato et al. (2011), §4: real data 2/3 train, 1/3 test; synthetic 300 train / n_test test."""
    if dataset in SYNTHETIC:
        Xtr, ytr = _datasets.load(dataset, n_samples=300, random_state=rng)
        Xte, yte = _datasets.load(dataset, n_samples=n_test_synthetic, random_state=rng)
        return Xtr, ytr, Xte, yte
    X, y = _datasets.load(dataset)
    idx = rng.permutation(len(y))
    n_tr = int(round(2 * len(y) / 3))
    return X[idx[:n_tr]], y[idx[:n_tr]], X[idx[n_tr:]], y[idx[n_tr:]]


def proxy_seeds(seed, n_trees, chunk=500):
    """The ``random_state`` of each ``chunk``-tree forest that makes up an ``n_trees`` proxy ensemble."""
    return [int(s) for s in np.random.default_rng(seed).integers(0, 2**31 - 1, size=math.ceil(n_trees / chunk))]


def proxy_votes(Xtr, ytr, Xte, max_features, n_trees, seed, chunk=500):
    """Vote counts of an ``n_trees`` ensemble made of ``chunk``-tree forests, each with its own seed.

    Chunk ``c`` is the forest ``RandomForestClassifier(n_estimators=k,
    max_features=max_features, random_state=proxy_seeds(seed, n_trees,
    chunk)[c]).fit(Xtr, ytr)`` with ``k = min(chunk, n_trees - c * chunk)``;
    each tree votes for the class of largest value in the leaf a test row
    reaches (lowest index on ties), as the forest's trees do in
    :meth:`HaltingClassifier.member_votes <ensvote.HaltingClassifier.member_votes>`.
    Each chunk is dropped once it has voted, so memory does not grow with
    ``n_trees``.

    Parameters
    ----------
    Xtr, ytr : arrays
        Training rows; NaN is allowed and handled as the forest handles it.
    Xte : array
        Rows to vote on.
    max_features : {None, "sqrt"}
        None: every feature at every split (bagging); ``"sqrt"``: a random forest.
    n_trees, seed, chunk : int

    Returns
    -------
    classes : ndarray
        ``np.unique(ytr)``.
    counts : ndarray of int64, shape (n_test_rows, n_classes)
    """
    if max_features not in (None, "sqrt"):
        raise ValueError(f"proxy_votes: max_features must be None or 'sqrt', got {max_features!r}")
    Xq = np.ascontiguousarray(check_array(Xte, dtype=np.float32, ensure_all_finite=False))
    classes = np.unique(np.asarray(ytr))
    counts = np.zeros((len(Xq), len(classes)), dtype=np.int64)
    rows = np.arange(len(Xq))
    for c, s in enumerate(proxy_seeds(seed, n_trees, chunk)):
        forest = RandomForestClassifier(n_estimators=min(chunk, n_trees - c * chunk), max_features=max_features,
                                        random_state=s, n_jobs=1).fit(Xtr, ytr)
        for tree in forest.estimators_:
            np.add.at(counts, (rows, np.argmax(tree.tree_.value[tree.tree_.apply(Xq), 0, :], axis=1)), 1)
    return classes, counts


def task(dataset, realization, p):
    """One split of one problem: both ensembles, their proxies, halting and the π sweep."""
    rng, (s_bag, s_rf, s_pbag, s_prf) = seeds(dataset, realization)
    Xtr, ytr, Xte, yte = split(dataset, rng, p["n_test_synthetic"])
    T, pi = p["T"], p["pi"]
    out = {"n_train": int(len(ytr)), "n_test": int(len(yte))}
    for ens, mf, s_ens, s_proxy in (("bagging", None, s_bag, s_pbag), ("rf", "sqrt", s_rf, s_prf)):
        rf = RandomForestClassifier(n_estimators=T, max_features=mf, random_state=s_ens, n_jobs=1)
        clf = HaltingClassifier(rf, rule=InfiniteRule(pi)).fit(Xtr, ytr)
        votes = clf.member_votes(Xte)
        n_cls = len(clf.classes_)
        classes, inf_counts = proxy_votes(Xtr, ytr, Xte, mf, p["proxy"], s_proxy)
        inf_lab = classes[np.argmax(inf_counts, axis=1)]
        ib = halt(votes, InfiniteRule(pi), n_classes=n_cls)
        an = ib.stopped
        ib_lab = clf.classes_[ib.labels]
        rec = {"pct_test_instances": 100.0 * float(an.mean())}
        if an.any():
            n_fs = int(math.ceil(float(ib.n_queried[an].mean())))
            fs_lab = clf.classes_[halt(votes, FixedRule(n_fs), n_classes=n_cls).labels]
            rec.update({
                "trees_ib": float(ib.n_queried[an].mean()), "n_fs": n_fs,
                "disagree_fs": 100.0 * float(np.mean(fs_lab[an] != inf_lab[an])),
                "disagree_ib": 100.0 * float(np.mean(ib_lab[an] != inf_lab[an])),
                "error_fs": 100.0 * float(np.mean(fs_lab[an] != yte[an])),
                "error_ib": 100.0 * float(np.mean(ib_lab[an] != yte[an])),
                "error_inf": 100.0 * float(np.mean(inf_lab[an] != yte[an])),
            })
        rec["error_inf_all"] = 100.0 * float(np.mean(inf_lab != yte))
        rec["error_full101_all"] = 100.0 * float(np.mean(
            clf.classes_[halt(votes, FixedRule(T), n_classes=n_cls).labels] != yte))
        rec["pi_sweep"] = [float(halt(votes, InfiniteRule(q), n_classes=n_cls).stopped.mean()) for q in PI_GRID]
        out[ens] = rec
    return out



def check(res, p):
    """The schema of a result of :func:`task` (ValueError saying what is wrong)."""
    T = p["T"]
    keys(res, {"n_train", "n_test", "bagging", "rf"}, "result")
    number(res["n_train"], "result.n_train", 1, math.inf, integer=True)
    number(res["n_test"], "result.n_test", 1, math.inf, integer=True)
    base = {"pct_test_instances", "error_inf_all", "error_full101_all", "pi_sweep"}
    halted = {"trees_ib", "n_fs", "disagree_fs", "disagree_ib", "error_fs", "error_ib", "error_inf"}
    for ens in ("bagging", "rf"):
        r, w = res[ens], f"result.{ens}"
        need(isinstance(r, dict), w, "must be an object")
        pct = number(r.get("pct_test_instances"), f"{w}.pct_test_instances", 0, 100)
        keys(r, base | halted if pct > 0 else base, w)
        for k in sorted(r):
            if k.startswith(("error_", "disagree_")):
                number(r[k], f"{w}.{k}", 0, 100)
        sweep = numbers(r["pi_sweep"], f"{w}.pi_sweep", len(PI_GRID), 0, 1)
        need(all(a >= b for a, b in zip(sweep, sweep[1:])), f"{w}.pi_sweep", "must not increase with π")
        if p["pi"] == PI_GRID[-1]:
            need(abs(100.0 * sweep[-1] - pct) <= 1e-9, f"{w}.pct_test_instances",
                  f"= {pct} disagrees with pi_sweep at π = {p['pi']}")
        if pct > 0:
            trees = number(r["trees_ib"], f"{w}.trees_ib", 1, T)
            need(number(r["n_fs"], f"{w}.n_fs", 1, T, integer=True) == math.ceil(trees), f"{w}.n_fs",
                  "must be trees_ib rounded up")



def tables(records, params):
    """Tables 2-3 (``table2_bagging.csv``, ``table3_rf.csv``) and Fig. 6 (``fig6_pi_sweep.csv``)."""
    by = {}
    for r in records:
        by.setdefault(r["dataset"], []).append(r)
    out = {}
    cols = ["pct_test_instances", "trees_ib", "disagree_fs", "disagree_ib", "error_fs", "error_ib", "error_inf"]
    for ens, fname in (("bagging", "table2_bagging.csv"), ("rf", "table3_rf.csv")):
        rows = []
        for d, prob in PROBLEMS.items():
            rs = [r["result"][ens] for r in by.get(d, [])]
            row = {"problem": prob}
            for c in cols:
                row[f"{c}_mean"], row[f"{c}_std"] = mean_std([x.get(c) for x in rs])
            row["n_realizations"] = len(rs)
            rows.append(row)
        out[fname] = pd.DataFrame(rows)
    rows = []
    for d, rs in by.items():
        for ens in ("bagging", "rf"):
            sweep = np.array([r["result"][ens]["pi_sweep"] for r in rs])
            std = sweep.std(0, ddof=1) if len(rs) > 1 else np.full(len(PI_GRID), np.nan)
            for q, m, s in zip(PI_GRID, sweep.mean(0), std):
                rows.append({"problem": PROBLEMS[d], "ensemble": ens, "pi": q,
                             "pct_halted_mean": 100 * m, "pct_halted_std": 100 * s, "n_realizations": len(rs)})
    out["fig6_pi_sweep.csv"] = pd.DataFrame(rows)
    return out


SUITE = Suite(
    "hl2011", tuple(PROBLEMS), {"smoke": 1, "book": 10, "paper": 100},
    profile_params({"T": 101, "proxy": 10_000, "pi": 0.99, "n_test_synthetic": 1000},
                   proxy=500, n_test_synthetic=300),
    task=task, check=check, tables=tables, smoke_datasets=("pima", "twonorm"))
