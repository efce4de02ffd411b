"""Resumable experiment runner for the papers' experiments.

A *suite* is a set of independent tasks, one per ``(dataset, realization)``.
Every task is seeded from ``(SEED, suite, dataset, realization)`` alone, so any
shard, order, backend or machine gives the same record.  Each finished task is
written atomically (temporary file + rename) as a small gzip-compressed JSON
record under ``<out>/<suite>/<profile>/tasks/<dataset>/r<realization>.json.gz``;
re-running skips finished tasks; :func:`aggregate` turns the records into the
CSV tables the book renders, with the column names of the published tables.

Suites
------
``hl2011``   seed 000 §4: bagging and random forests of 101 trees, stopping rule
             L(y*|t) > π = 0.99, the 10,000-tree ensemble as proxy of the
             infinite one (Tables 2-3), and the π sweep of Fig. 6.
``circle``   seed 000 §2.2 / Fig. 4: bagging of 10,000 trees on the circle
             problem, queried on a 101 x 101 grid until L(y*|t) > 0.99.
``soto2016`` seed 002 §3: random forests of 101 trees; RF*, SIBA, HYPER,
             the Monte Carlo (and exact) expected number of trees, and the
             calibration of Fig. 1 for α in {0.999, 0.995, 0.99, 0.95}.

Profiles: ``smoke`` (seconds; what notebooks run live), ``book`` (what the book
shows), ``paper`` (the papers' protocol: 100 realizations).

Bagging of unpruned CART trees is run as ``RandomForestClassifier(max_features=None)``:
each tree is a CART tree grown on a bootstrap sample with every feature
considered at every split, which is bagging (the test suite checks tree by tree
that it equals ``DecisionTreeClassifier`` fitted on the same bootstrap sample).
"""

import gzip
import hashlib
import json
import math
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import StratifiedKFold

from . import datasets
from ._utils import SEED
from .classifier import HaltingClassifier
from .engine import halt
from .priors import expected_queries
from .rules import ExactRule, FixedRule, InfiniteRule, UrnRule

__all__ = ["SUITES", "PROFILES", "run", "aggregate", "task_seed", "run_task", "list_tasks", "compare_with_published"]

PROFILES = ("smoke", "book", "paper")
SYNTHETIC = ("led", "ringnorm", "threenorm", "twonorm", "waveform")

# dataset name in ensvote -> problem name as printed in the paper
HL2011_PROBLEMS = {
    "breast": "breast", "glass": "glass", "heart": "heart", "led": "led", "liver": "liver",
    "new-thyroid": "new-thyroid", "pima": "pima", "ringnorm": "ringnorm", "spam": "spam",
    "threenorm": "threenorm", "twonorm": "twonorm", "vehicle": "vehicle", "vowel": "vowel",
    "waveform": "waveform", "wine": "wine",
}
SOTO2016_PROBLEMS = {
    "australian": "Australian", "breast": "Breast", "pima": "Diabetes",
    "echocardiogram": "Echocardiogram", "german": "German", "heart": "Heart",
    "horse-colic": "Horse-colic", "ionosphere": "Ionosphere", "labor": "Labor", "liver": "Liver",
    "mushroom": "Mushroom", "new-thyroid": "New-thyroid", "ringnorm": "Ringnorm", "sonar": "Sonar",
    "spam": "Spam", "threenorm": "Threenorm", "tic-tac-toe": "Tic-tac-toe", "twonorm": "Twonorm",
    "votes": "Votes", "waveform": "Waveform", "wine": "Wine",
}
PI_GRID = tuple(round(0.70 + 0.01 * i, 2) for i in range(30))  # 0.70 .. 0.99 (Fig. 6)
ALPHAS = (0.999, 0.995, 0.99, 0.95)  # seed 002 Fig. 1


@dataclass(frozen=True)
class Suite:
    name: str
    datasets: tuple
    realizations: dict  # profile -> int
    params: dict  # profile -> dict
    smoke_datasets: tuple = field(default=())

    def dataset_list(self, profile):
        return self.smoke_datasets if profile == "smoke" else self.datasets


def _profile_params(full, **smoke):
    """The same parameters for ``book`` and ``paper``; ``smoke`` overrides a few to run in seconds."""
    return {"smoke": {**full, **smoke}, "book": dict(full), "paper": dict(full)}


SUITES = {
    "hl2011": Suite(
        "hl2011", tuple(HL2011_PROBLEMS), {"smoke": 1, "book": 10, "paper": 100},
        _profile_params({"T": 101, "proxy": 10_000, "pi": 0.99, "n_test_synthetic": 1000},
                        proxy=500, n_test_synthetic=300),
        smoke_datasets=("pima", "twonorm")),
    "circle": Suite(
        "circle", ("circle",), {"smoke": 2, "book": 100, "paper": 100},
        _profile_params({"n_trees": 10_000, "grid": 101, "pi": 0.99, "n_train": 300}, n_trees=500, grid=21),
        smoke_datasets=("circle",)),
    "soto2016": Suite(
        "soto2016", tuple(SOTO2016_PROBLEMS), {"smoke": 2, "book": 100, "paper": 100},
        _profile_params({"T": 101, "alpha": 0.99, "n_mc": 10_000, "n_test_synthetic": 1000},
                        n_mc=2000, n_test_synthetic=300),
        smoke_datasets=("sonar", "votes")),
}


# --------------------------------------------------------------------------
# seeding and records
# --------------------------------------------------------------------------
def task_seed(suite, dataset, realization):
    """The task's SeedSequence: a function of ``(SEED, suite, dataset, realization)`` only."""
    digest = hashlib.sha256(f"{suite}/{dataset}/{int(realization)}".encode()).digest()
    return np.random.SeedSequence([SEED, int.from_bytes(digest[:8], "little")])


def _rng_and_ints(seq, n):
    rng = np.random.default_rng(seq)
    return rng, [int(v) for v in rng.integers(0, 2**31 - 1, size=n)]


def record_path(out, suite, profile, dataset, realization):
    return Path(out) / suite / profile / "tasks" / dataset / f"r{int(realization):03d}.json.gz"


def _write_atomic(path, payload):
    path.parent.mkdir(parents=True, exist_ok=True)
    data = json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as fh:
        with gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
            gz.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_record(path):
    with gzip.open(path, "rb") as fh:
        return json.loads(fh.read().decode())


def _available(dataset):
    try:
        if dataset in SYNTHETIC or dataset == "circle":
            return True
        datasets.load(dataset)
        return True
    except FileNotFoundError:
        return False


def _split_holdout(dataset, rng, n_test_synthetic):
    """seed 000 §4: real data 2/3 train, 1/3 test; synthetic 300 train / n_test test."""
    if dataset in SYNTHETIC:
        Xtr, ytr = datasets.load(dataset, n_samples=300, random_state=rng)
        Xte, yte = datasets.load(dataset, n_samples=n_test_synthetic, random_state=rng)
        return Xtr, ytr, Xte, yte
    X, y = datasets.load(dataset)
    idx = rng.permutation(len(y))
    n_tr = int(round(2 * len(y) / 3))
    return X[idx[:n_tr]], y[idx[:n_tr]], X[idx[n_tr:]], y[idx[n_tr:]]


def _member_labels(clf, X):
    return clf.classes_[clf.member_votes(X)]


def _proxy_votes(Xtr, ytr, Xte, max_features, n_trees, seed, chunk=500):
    """Vote counts of an ``n_trees`` ensemble, grown ``chunk`` trees at a time (bounded memory)."""
    classes = np.unique(ytr)
    counts = np.zeros((len(Xte), len(classes)), dtype=np.int64)
    seeds = np.random.default_rng(seed).integers(0, 2**31 - 1, size=math.ceil(n_trees / chunk))
    for c, s in enumerate(seeds):
        k = min(chunk, n_trees - c * chunk)
        rf = RandomForestClassifier(n_estimators=k, max_features=max_features, random_state=int(s), n_jobs=1)
        clf = HaltingClassifier(rf, rule="exact").fit(Xtr, ytr)
        v = clf.member_votes(Xte)
        for j in range(len(classes)):
            counts[:, j] += (v == j).sum(axis=1)
    return classes, counts


# --------------------------------------------------------------------------
# task functions
# --------------------------------------------------------------------------
def _task_hl2011(dataset, realization, p):
    rng, (s_bag, s_rf, s_pbag, s_prf) = _rng_and_ints(task_seed("hl2011", dataset, realization), 4)
    Xtr, ytr, Xte, yte = _split_holdout(dataset, rng, p["n_test_synthetic"])
    T, pi = p["T"], p["pi"]
    out = {"n_train": int(len(ytr)), "n_test": int(len(yte))}
    for ens, mf, s_ens, s_proxy in (("bagging", None, s_bag, s_pbag), ("rf", "sqrt", s_rf, s_prf)):
        rf = RandomForestClassifier(n_estimators=T, max_features=mf, random_state=s_ens, n_jobs=1)
        clf = HaltingClassifier(rf, rule=InfiniteRule(pi)).fit(Xtr, ytr)
        votes = clf.member_votes(Xte)
        n_cls = len(clf.classes_)
        classes, inf_counts = _proxy_votes(Xtr, ytr, Xte, mf, p["proxy"], s_proxy)
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


def _task_circle(dataset, realization, p):
    rng, (s_fit,) = _rng_and_ints(task_seed("circle", dataset, realization), 1)
    X, y = datasets.load("circle", n_samples=p["n_train"], random_state=rng)
    g = np.linspace(-1.0, 1.0, p["grid"])
    gx, gy = np.meshgrid(g, g)
    grid = np.column_stack([gx.ravel(), gy.ravel()])
    rf = RandomForestClassifier(n_estimators=p["n_trees"], max_features=None, random_state=s_fit, n_jobs=1)
    clf = HaltingClassifier(rf, rule=InfiniteRule(p["pi"])).fit(X, y)
    res = clf.halt(grid)
    return {"n_queried": res.n_queried.astype(int).tolist(), "stopped": res.stopped.astype(int).tolist(),
            "label": res.labels.astype(int).tolist()}


def _split_soto(dataset, realization, n_test_synthetic):
    """seed 002 §3: 10 x 10-fold CV for real data (stratified), random sampling for synthetic."""
    if dataset in SYNTHETIC:
        rng, _ = _rng_and_ints(task_seed("soto2016", dataset, realization), 1)
        Xtr, ytr = datasets.load(dataset, n_samples=300, random_state=rng)
        Xte, yte = datasets.load(dataset, n_samples=n_test_synthetic, random_state=rng)
        return Xtr, ytr, Xte, yte
    rep, fold = divmod(int(realization), 10)
    X, y = datasets.load(dataset)
    # the fold assignment depends on the repetition only, so the 10 folds' tasks share it
    _, (s_cv,) = _rng_and_ints(task_seed("soto2016-cv", dataset, rep), 1)
    tr, te = list(StratifiedKFold(10, shuffle=True, random_state=s_cv).split(X, y))[fold]
    return X[tr], y[tr], X[te], y[te]


def _task_soto2016(dataset, realization, p):
    rng, (s_fit, s_mc) = _rng_and_ints(task_seed("soto2016", dataset, realization), 2)
    Xtr, ytr, Xte, yte = _split_soto(dataset, realization, p["n_test_synthetic"])
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


_TASKS = {"hl2011": _task_hl2011, "circle": _task_circle, "soto2016": _task_soto2016}


def run_task(suite, profile, dataset, realization):
    """Run one task and return its record (a JSON-serialisable dict)."""
    params = SUITES[suite].params[profile]
    result = _TASKS[suite](dataset, realization, params)
    return {"suite": suite, "profile": profile, "dataset": dataset, "realization": int(realization),
            "params": params, "result": result}


# --------------------------------------------------------------------------
# command-level API
# --------------------------------------------------------------------------
def _check_suite_profile(suite, profile):
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; valid suites: {', '.join(SUITES)}")
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")


def _parse_realizations(spec, n):
    if spec is None:
        return range(n)
    if isinstance(spec, range):
        return spec
    try:
        a, b = str(spec).split(":")
        start = int(a) if a else 0
        stop = int(b) if b else n
    except ValueError:
        raise ValueError(f"realizations must look like START:STOP (e.g. 0:10), got {spec!r}") from None
    if not 0 <= start < stop <= n:
        raise ValueError(f"realizations {spec!r} must satisfy 0 <= START < STOP <= {n} for this profile")
    return range(start, stop)


def list_tasks(suite, profile, *, datasets_=None, realizations=None):
    """The (dataset, realization) pairs of a suite/profile, missing datasets listed separately."""
    _check_suite_profile(suite, profile)
    s = SUITES[suite]
    names = s.dataset_list(profile)
    if datasets_ is not None:
        bad = [d for d in datasets_ if d not in s.datasets]
        if bad:
            raise ValueError(f"dataset(s) {', '.join(bad)} not in suite {suite!r}; valid: {', '.join(s.datasets)}")
        names = tuple(datasets_)
    reals = _parse_realizations(realizations, s.realizations[profile])
    avail = [d for d in names if _available(d)]
    missing = [d for d in names if d not in avail]
    return [(d, r) for d in avail for r in reals], missing


def _execute(job):
    suite, profile, dataset, r = job
    return job, run_task(suite, profile, dataset, r)


def run(suite, profile, *, out="results", datasets_=None, realizations=None, n_jobs=1,
        scheduler=None, progress=True):
    """Run every unfinished task of a suite, writing one record per task.

    Parameters
    ----------
    suite : {"hl2011", "circle", "soto2016"}
    profile : {"smoke", "book", "paper"}
    out : path, default "results"
    datasets_ : list of str, optional
        Restrict to these datasets of the suite.
    realizations : "START:STOP", optional
        Restrict to these realizations (a shard).
    n_jobs : int
        Parallel workers (one task each; trees inside a task single-threaded).
    scheduler : str, optional
        A ``dask.distributed`` scheduler address, or ``"local"`` for a
        ``LocalCluster`` with ``n_jobs`` single-threaded workers; default: joblib's
        process backend.
    progress : bool
        Show a tqdm progress bar.

    Returns
    -------
    dict with ``run``, ``skipped``, ``missing_datasets`` and ``seconds``.
    """
    from joblib import Parallel, delayed, parallel_config
    from tqdm import tqdm

    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise ValueError(f"n_jobs must be a positive int, got {n_jobs!r}")
    tasks, missing = list_tasks(suite, profile, datasets_=datasets_, realizations=realizations)
    todo = [(suite, profile, d, r) for d, r in tasks
            if not record_path(out, suite, profile, d, r).exists()]
    adopted = _adopt_from_twin_profiles(out, todo)
    todo = [j for j in todo if j not in adopted]
    skipped = len(tasks) - len(todo) - len(adopted)
    t0 = time.perf_counter()
    bar = tqdm(total=len(tasks), initial=skipped, desc=f"{suite}/{profile}", unit="task",
               disable=not progress)
    client = cluster = None
    try:
        backend = "loky"
        if scheduler is not None:
            from dask.distributed import Client, LocalCluster

            if scheduler == "local":
                cluster = LocalCluster(n_workers=n_jobs, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
                client = Client(cluster)
            else:
                client = Client(scheduler)
            backend = "dask"
        if n_jobs == 1 and scheduler is None:
            results = (_execute(j) for j in todo)
        else:
            with parallel_config(backend=backend, n_jobs=n_jobs if backend == "loky" else -1):
                par = Parallel(return_as="generator_unordered")
                results = par(delayed(_execute)(j) for j in todo)
        for (s_, p_, d, r), rec in results:
            _write_atomic(record_path(out, s_, p_, d, r), rec)
            bar.update(1)
    finally:
        bar.close()
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    return {"run": len(todo), "skipped": skipped, "adopted": len(adopted), "missing_datasets": missing,
            "seconds": time.perf_counter() - t0}


def _adopt_from_twin_profiles(out, jobs):
    """Copy records that another profile with identical parameters already computed.

    A task's seed depends on ``(suite, dataset, realization)`` only, so a
    profile whose parameters equal this one's (``book`` and ``paper`` share one
    parameter set) computes the very same result; its record is re-stamped with
    this profile's name instead of being computed again.  Returns the set of
    jobs adopted.
    """
    adopted = set()
    for suite, profile, d, r in jobs:
        for other in PROFILES:
            if other == profile or SUITES[suite].params[other] != SUITES[suite].params[profile]:
                continue
            src = record_path(out, suite, other, d, r)
            if not src.is_file():
                continue
            rec = read_record(src)
            if (rec.get("suite"), rec.get("dataset"), rec.get("realization"), rec.get("params")) != (
                    suite, d, int(r), SUITES[suite].params[profile]):
                continue
            _write_atomic(record_path(out, suite, profile, d, r), {**rec, "profile": profile})
            adopted.add((suite, profile, d, r))
            break
    return adopted


# --------------------------------------------------------------------------
# aggregation
# --------------------------------------------------------------------------
def _records(out, suite, profile):
    base = Path(out) / suite / profile / "tasks"
    recs = []
    for path in sorted(base.glob("*/r*.json.gz")):
        recs.append(read_record(path))
    return sorted(recs, key=lambda r: (r["dataset"], r["realization"]))


def _mean_std(values):
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if len(v) == 0:
        return np.nan, np.nan
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else np.nan


def _write_csv(df, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    df.to_csv(tmp, index=False, float_format="%.4f", lineterminator="\n")
    os.replace(tmp, path)


def aggregate(suite, profile, *, out="results"):
    """Turn a suite's task records into the CSV tables the book renders.

    Returns the list of files written.  Datasets of the suite without records
    (e.g. not available offline) keep their row, with empty values and
    ``n_realizations = 0``.
    """
    _check_suite_profile(suite, profile)
    recs = _records(out, suite, profile)
    target = Path(out) / suite / profile
    by = {}
    for r in recs:
        by.setdefault(r["dataset"], []).append(r)
    written = []
    if suite == "hl2011":
        cols = ["pct_test_instances", "trees_ib", "disagree_fs", "disagree_ib", "error_fs", "error_ib", "error_inf"]
        for ens, fname in (("bagging", "table2_bagging.csv"), ("rf", "table3_rf.csv")):
            rows = []
            for d, prob in HL2011_PROBLEMS.items():
                rs = [r["result"][ens] for r in by.get(d, [])]
                row = {"problem": prob}
                for c in cols:
                    row[f"{c}_mean"], row[f"{c}_std"] = _mean_std([x.get(c) for x in rs])
                row["n_realizations"] = len(rs)
                rows.append(row)
            _write_csv(pd.DataFrame(rows), target / fname)
            written.append(target / fname)
        rows = []
        for d, rs in by.items():
            for ens in ("bagging", "rf"):
                sweep = np.array([r["result"][ens]["pi_sweep"] for r in rs])
                for q, m, s in zip(PI_GRID, sweep.mean(0), sweep.std(0, ddof=1) if len(rs) > 1 else np.full(len(PI_GRID), np.nan)):
                    rows.append({"problem": HL2011_PROBLEMS[d], "ensemble": ens, "pi": q,
                                 "pct_halted_mean": 100 * m, "pct_halted_std": 100 * s, "n_realizations": len(rs)})
        _write_csv(pd.DataFrame(rows), target / "fig6_pi_sweep.csv")
        written.append(target / "fig6_pi_sweep.csv")
    elif suite == "circle":
        rs = by.get("circle", [])
        n = np.array([r["result"]["n_queried"] for r in rs], dtype=float)
        st = np.array([r["result"]["stopped"] for r in rs], dtype=bool)
        g = np.linspace(-1, 1, int(round(math.sqrt(n.shape[1]))))
        gx, gy = np.meshgrid(g, g)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_n = np.where(st.any(0), np.where(st, n, 0).sum(0) / st.sum(0), np.nan)
            df = pd.DataFrame({"x": gx.ravel(), "y": gy.ravel(), "mean_trees": mean_n,
                               "log10_mean_trees": np.log10(mean_n),
                               "frac_exceeded": 1.0 - st.mean(0), "n_realizations": len(rs)})
        _write_csv(df, target / "fig4_grid.csv")
        written.append(target / "fig4_grid.csv")
    else:
        t1, t2, cal, pri = [], [], [], []
        for d, prob in SOTO2016_PROBLEMS.items():
            rs = [r["result"] for r in by.get(d, [])]
            row1, row2 = {"problem": prob}, {"problem": prob}
            for c in ("error_rf", "error_siba", "error_hyper", "disagree_siba", "disagree_hyper"):
                row1[f"{c}_mean"], row1[f"{c}_std"] = _mean_std([x[c] for x in rs])
            for c in ("trees_rfstar", "trees_siba", "trees_hyper"):
                row2[f"{c}_mean"], row2[f"{c}_std"] = _mean_std([x[c] for x in rs])
            row2["trees_mc_estimate"], row2["trees_mc_estimate_std"] = _mean_std([x["trees_mc_estimate"] for x in rs])
            for c in ("rfstar", "siba", "hyper"):
                row2[f"speedup_{c}"] = 101.0 / row2[f"trees_{c}_mean"] if rs else np.nan
            row2["trees_exact_estimate"] = _mean_std([x["trees_exact_estimate"] for x in rs])[0]
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
                        row[f"{c}_mean"], row[f"{c}_std"] = _mean_std([x[c] for x in cs])
                    cal.append(row)
            if rs and rs[0]["prior"] is not None:
                pr = np.mean([x["prior"] for x in rs], axis=0)
                pri.extend({"problem": prob, "k": k, "prior_mean": v} for k, v in enumerate(pr))
        for df, name in ((pd.DataFrame(t1), "table1_error_disagreement.csv"),
                         (pd.DataFrame(t2), "table2_trees_speedup.csv"),
                         (pd.DataFrame(cal), "fig1_calibration.csv"),
                         (pd.DataFrame(pri), "fig1_priors.csv")):
            _write_csv(df, target / name)
            written.append(target / name)
    return written


def compare_with_published(ours, published, quantities, *, pvalue=None, decimals=2, unavailable=(),
                           not_in_published="not in our copy", show_n=False):
    """Side-by-side table of our mean ± std and the published value as printed, with Δ and a within-one-std flag.

    For every problem (row of `ours`) and quantity ``q``, our ``q_mean ± q_std`` is
    set beside the published ``q_mean ± q_std``, and Δ = ours − published (means)
    is flagged ✓ if ``|Δ|`` is at most one published std (up to a floating-point
    tolerance of 1e-9), ✗ otherwise.

    Parameters
    ----------
    ours : pandas.DataFrame
        Our aggregated results, one row per problem (as written by
        :func:`aggregate`), with columns ``<q>_mean`` and ``<q>_std`` for every
        quantity and ``n_realizations``.
    published : pandas.DataFrame
        The published values, indexed by problem, with columns ``<q>_mean`` and
        ``<q>_std``. Read it with ``dtype=str`` so that the values are shown
        exactly as printed (``"0.50"`` stays ``"0.50"``).
    quantities : mapping or sequence of str
        ``{quantity: column title}``; a sequence of quantities uses the
        quantities themselves as titles.
    pvalue : str or mapping, optional
        Column of `ours` holding a p-value; our value gets a ``*`` where it is
        below 0.05. A str applies to every quantity, a mapping
        ``{quantity: column}`` only to the quantities it names.
    decimals : int, default 2
        Decimals of our values and of Δ.
    unavailable : iterable of str, default ()
        Problems without results because their data is unavailable offline.
        A row with ``n_realizations == 0`` reads "unavailable offline" if its
        problem is listed here, "not run" otherwise.
    not_in_published : str, default "not in our copy"
        Text of the published cell of a problem that `published` lacks.
    show_n : bool, default False
        Append the column ``("N", "")`` with ``n_realizations``.

    Returns
    -------
    table : pandas.DataFrame
        Strings, index ``ours.index``, columns ``(title, "ours" | "published" |
        "Δ")`` per quantity (and ``("N", "")``). Our std reads "–" when it is
        undefined (one realization); "—" marks a cell that cannot be compared.
    within : pandas.DataFrame
        ``boolean`` dtype, index ``ours.index``, one column per quantity: whether
        ``|Δ|`` is within one published std; ``<NA>`` where not comparable (no
        results of ours, or no published value).
    delta : pandas.DataFrame
        Δ as floats, same shape as `within`; NaN where not comparable.

    Raises
    ------
    TypeError
        If `ours` or `published` is not a DataFrame.
    ValueError
        If `quantities` is empty, a required column is missing (the message
        names them), `pvalue` names a quantity not compared, an index has
        duplicate problems, or `decimals` is negative.

    Examples
    --------
    >>> ours = pd.DataFrame({"err_mean": [1.04, 3.0], "err_std": [0.1, np.nan], "n_realizations": [10, 1]},
    ...                     index=["a", "b"])
    >>> pub = pd.DataFrame({"err_mean": ["1.0", "2.5"], "err_std": ["0.2", "0.3"]}, index=["a", "b"])
    >>> table, within, delta = compare_with_published(ours, pub, {"err": "error %"})
    >>> table.loc["b"].tolist()
    ['3.00±–', '2.5±0.3', '+0.50 ✗']
    >>> within["err"].tolist()
    [True, False]
    """
    if not isinstance(ours, pd.DataFrame) or not isinstance(published, pd.DataFrame):
        raise TypeError("ours and published must be pandas DataFrames")
    titles = dict(quantities) if isinstance(quantities, Mapping) else {q: q for q in quantities}
    if not titles:
        raise ValueError("no quantities to compare")
    if not isinstance(decimals, (int, np.integer)) or decimals < 0:
        raise ValueError(f"decimals must be a non-negative integer, got {decimals!r}")
    pcols = dict.fromkeys(titles, pvalue) if pvalue is None or isinstance(pvalue, str) else dict(pvalue)
    if unknown := sorted(set(pcols) - set(titles)):
        raise ValueError(f"pvalue names quantities that are not compared: {unknown}")
    stats_cols = [f"{q}_{s}" for q in titles for s in ("mean", "std")]
    need = stats_cols + ["n_realizations"] + sorted({c for c in pcols.values() if c is not None})
    for name, df, cols in (("ours", ours, need), ("published", published, stats_cols)):
        if missing := [c for c in cols if c not in df.columns]:
            raise ValueError(f"{name} lacks the columns {missing}")
        if df.index.has_duplicates:
            raise ValueError(f"{name} has duplicate problems: {sorted(set(df.index[df.index.duplicated()]))}")

    n = ours["n_realizations"].fillna(0).astype(int)
    run = n > 0
    pub = published.reindex(ours.index)
    in_pub = ours.index.isin(published.index)
    no_result = np.where(ours.index.isin(set(unavailable)), "unavailable offline", "not run")
    out, within, delta = {}, {}, {}
    for q, title in titles.items():
        om, os_ = ours[f"{q}_mean"].astype(float), ours[f"{q}_std"].astype(float)
        pm_txt, ps_txt = pub[f"{q}_mean"], pub[f"{q}_std"]
        pm, ps = pd.to_numeric(pm_txt), pd.to_numeric(ps_txt)
        has_pub = pm.notna() & ps.notna()
        ok_ours = run & om.notna()
        comparable = ok_ours & has_pub
        star = ours[pcols[q]].lt(0.05) if pcols.get(q) else pd.Series(False, index=ours.index)
        txt_o = [f"{m:.{decimals}f}±" + (f"{s:.{decimals}f}" if pd.notna(s) else "–") + ("*" if st else "")
                 for m, s, st in zip(om, os_, star)]
        d = (om - pm).where(comparable)
        ok = (d.abs() <= ps + 1e-9).astype("boolean").mask(~comparable)
        out[(title, "ours")] = np.where(ok_ours, txt_o, np.where(run, "—", no_result))
        out[(title, "published")] = np.where(has_pub, pm_txt.astype(str) + "±" + ps_txt.astype(str),
                                             np.where(in_pub, "—", not_in_published))
        out[(title, "Δ")] = np.where(comparable, [f"{x:+.{decimals}f} {'✓' if k else '✗'}"
                                                  for x, k in zip(d.fillna(0), ok.fillna(False))], "—")
        within[q], delta[q] = ok, d
    table = pd.DataFrame(out, index=ours.index)
    if show_n:
        table[("N", "")] = n
    return table, pd.DataFrame(within, index=ours.index), pd.DataFrame(delta, index=ours.index)
