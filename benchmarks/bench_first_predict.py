#!/usr/bin/env python3
"""First ``predict`` of large forests and many classes, against the forest's own ``predict``.

    .venv/bin/python benchmarks/bench_first_predict.py [--rows 2000] [--quick]

For each forest size ``T`` and number of classes ``l`` (synthetic problems of
``make_classification``: 2,000 training rows, 20 features), a forest is
fitted and, with the same parameters, a ``HaltingClassifier`` with the
default rule (the urn rule with the out-of-bag prior) and with
``rule="infinite"``.  Timed in the same process, one thread: the forest's own
``predict`` on ``--rows`` test rows (best of three), the classifier's ``fit``
(which refits the forest) beside the forest's, and the classifier's **first**
``predict`` on the same rows (what a user waits for: any table still to build,
any confidence still to compute) and its second.  Printed and written to
``results/speed/first_predict.csv``: the times, ``first_ratio`` = first
predict / forest predict, the mean number of trees queried, and whether
``fit`` warned (:class:`ensvote.SlowVoteWarning`: no table for this size, the
rule evaluates Eq. 3 on demand) or refused the configuration (a ValueError
naming the limit: e.g. the out-of-bag pair prior of 100 classes at
``T = 1,001``).  Nothing here asserts a time (a benchmark,
not a test).
"""

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import kernel

from _results import write_csv  # beside this script

OUT = Path(__file__).resolve().parents[1] / "results" / "speed" / "first_predict.csv"
FIELDS = ["n_members", "n_classes", "mode", "forest_fit_seconds", "fit_seconds", "forest_predict_seconds",
          "first_predict_seconds", "predict_seconds", "first_ratio", "mean_trees", "slow_vote_warning"]
#: (T, l) pairs: every T for two and three classes, the smaller forests for more classes (a 100-class
#: forest of 5,001 trees needs gigabytes for its leaf values)
GRID = [(T, 2) for T in (101, 501, 1001, 2001, 5001)] + [(T, 3) for T in (101, 501, 1001, 2001, 5001)] \
    + [(T, 10) for T in (101, 501, 1001)] + [(T, 100) for T in (101, 1001)]
QUICK = [(101, 2), (5001, 2), (501, 3), (1001, 100)]
MODES = {"urn, out-of-bag prior (default)": {}, "infinite": {"rule": "infinite"}}


def best(f, repeat=3):
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def problem(n_classes, n_train, n_test):
    X, y = make_classification(n_train + n_test, 20, n_informative=12, n_redundant=4, n_classes=n_classes,
                               n_clusters_per_class=1, random_state=ev.SEED)
    return X[:n_train], y[:n_train], np.ascontiguousarray(X[n_train:], dtype=np.float32)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2000, help="test rows per predict (default 2000)")
    ap.add_argument("--quick", action="store_true", help=f"only {QUICK}")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = []
    # every compiled loop (flat table, stop bits, memo, one row) loaded or compiled before anything is timed
    kernel.compile_kernels()
    X, y, X_test = problem(2, 200, 10)
    ev.HaltingClassifier(RandomForestClassifier(n_estimators=11, random_state=ev.SEED)).fit(X, y).predict(X_test)
    for T, l in (QUICK if args.quick else GRID):
        X, y, X_test = problem(l, 2000, args.rows)
        forest = RandomForestClassifier(n_estimators=T, random_state=ev.SEED, n_jobs=1)
        t0 = time.perf_counter()
        forest.fit(X, y)
        t_forest_fit = time.perf_counter() - t0
        t_forest = best(lambda: forest.predict(X_test))
        for mode, kw in MODES.items():
            ev.clear_caches()
            clf = ev.HaltingClassifier(forest, n_jobs=1, **kw)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always", ev.SlowVoteWarning)
                t0 = time.perf_counter()
                try:
                    clf.fit(X, y)
                except ValueError as exc:  # a configuration refused up front, with the limit named
                    rows.append({"n_members": T, "n_classes": l, "mode": mode, "slow_vote_warning": "refused",
                                 "forest_fit_seconds": f"{t_forest_fit:.3f}",
                                 "forest_predict_seconds": f"{t_forest:.4f}"})
                    print(f"T={T:5d} l={l:3d} {mode:32s} refused at fit: {exc}", flush=True)
                    continue
                t_fit = time.perf_counter() - t0
            slow = any(issubclass(w.category, ev.SlowVoteWarning) for w in caught)
            t0 = time.perf_counter()
            clf.predict(X_test)
            t_first = time.perf_counter() - t0
            t_second = best(lambda: clf.predict(X_test), 1)
            trees = clf.halt(X_test).mean_queried
            rows.append({"n_members": T, "n_classes": l, "mode": mode, "forest_fit_seconds": f"{t_forest_fit:.3f}",
                         "fit_seconds": f"{t_fit:.3f}", "forest_predict_seconds": f"{t_forest:.4f}",
                         "first_predict_seconds": f"{t_first:.4f}", "predict_seconds": f"{t_second:.4f}",
                         "first_ratio": f"{t_first / t_forest:.2f}", "mean_trees": f"{trees:.1f}",
                         "slow_vote_warning": "yes" if slow else "no"})
            print(f"T={T:5d} l={l:3d} {mode:32s} fit {t_fit:6.1f} s (forest {t_forest_fit:6.1f} s)  first predict "
                  f"{t_first:7.3f} s = {t_first / t_forest:6.2f} x the forest's {t_forest:.3f} s, then "
                  f"{t_second:.3f} s; {trees:6.1f} trees{'; warned at fit' if slow else ''}", flush=True)
    write_csv(args.out, FIELDS, rows)


if __name__ == "__main__":
    main()
