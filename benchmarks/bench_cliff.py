#!/usr/bin/env python3
"""The flat stop table's limit: HYPER against scikit-learn's ``predict`` around and beyond it.

    .venv/bin/python benchmarks/bench_cliff.py [--rows 5000] [--repeat 3] [--quick] [--out CSV]

The engine looks stop decisions up in a flat table of ``(T + 1) ** l``
entries up to ``MAX_STOP_TABLE`` (three classes up to ``T = 129``) and,
beyond, in the rule's stop bits, one per vote vector in level order
(:meth:`ensvote.HaltingRule.stop_bits`; the urn rule builds them at ``fit``,
two classes up to ``MAX_STOP_BITS_T``, three up to ``MAX_STOP_BITS_T3``),
or else in a memo of the decisions of the vote vectors the rows reach
(:func:`ensvote.engine.stop_memo`), in the same compiled loop.  For three
classes (Breiman's waveform, :func:`ensvote.datasets.load`) at ``T`` = 129,
131, 501, 1001 and two classes (``make_classification`` as in
``bench_first_predict.py``) at ``T`` = 1501, 5001, a forest is fitted once
per case with ``HaltingClassifier(rule="urn", prior="oob")`` (HYPER), and,
in one process, one thread, in ``--repeat`` rounds: the forest's own
``predict``, then HYPER's **first** ``predict`` after
:func:`ensvote.clear_caches` (every decision memoised by earlier calls
dropped, so the memo is built again and Eq. 3 evaluated again where the rule
computes it on demand; what ``fit`` builds, the rule's tables and stop
bits, stays), then a second ``predict``.  Printed, medians
over the rounds: ``vs_sklearn`` = forest ``predict`` time / HYPER's time
(first and warm), beside the tree-count speed-up ``T / mean trees
queried``; ``vs_sklearn >= speed-up`` means HYPER spends at most
scikit-learn's time per tree queried.  ``decide`` is the part of the first
``predict`` spent in the rule's own ``decide`` (the memo's
``decide_seconds``), ``vectors`` how many vote vectors it decided; ``fit``
the classifier's ``fit`` beside the forest's own (what building the stop
bits costs).  Written to ``results/speed/cliff.csv`` (``--out``).  Nothing
is asserted (a benchmark, not a test).
"""

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import datasets, engine

from _results import write_csv  # beside this script
from bench_first_predict import problem  # beside this script: the two-class problem of the 118 s first predict

OUT = Path(__file__).resolve().parents[1] / "results" / "speed" / "cliff.csv"
FIELDS = ["n_classes", "T", "engine", "n_rows", "forest_fit_seconds", "fit_seconds", "sklearn_seconds",
          "first_seconds", "warm_seconds", "vs_sklearn_first", "vs_sklearn_warm", "tree_speedup", "decide_seconds",
          "vectors"]

CASES = [(3, 129), (3, 131), (3, 501), (3, 1001), (2, 1501), (2, 5001)]
QUICK = [(3, 129), (3, 131), (3, 501), (2, 1501)]
N_TRAIN = 2000


def clock(f):
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def data(l, n_test):
    if l == 3:
        X, y = datasets.load("waveform", n_samples=N_TRAIN + n_test, random_state=ev.SEED)
        return X[:N_TRAIN], y[:N_TRAIN], np.ascontiguousarray(X[N_TRAIN:], dtype=np.float32)
    return problem(l, N_TRAIN, n_test)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=5000, help="test rows per predict (default 5000)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; medians are printed (default 3)")
    ap.add_argument("--quick", action="store_true", help=f"only {QUICK}")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore", ev.SlowVoteWarning)
    # the compiled loops (flat table, memo, stop bits) loaded before anything is timed
    for T, rule in ((11, "exact"), (131, "exact"), (131, "urn")):
        X, y, X_test = data(3, 50)
        ev.HaltingClassifier(RandomForestClassifier(T, random_state=ev.SEED), rule=rule).fit(X, y).predict(X_test)
    print(f"{'l':>2} {'T':>5}  {'engine':11} {'sklearn s':>9} {'first s':>8} {'warm s':>7}  {'vs_sklearn':>10} "
          f"{'(warm)':>7}  {'speed-up':>8}  {'decide s':>8} {'vectors':>8}  {'fit s':>6} {'(forest)':>8}")
    rows = []
    for l, T in (QUICK if args.quick else CASES):
        X, y, X_test = data(l, args.rows)
        forest = RandomForestClassifier(T, random_state=ev.SEED, n_jobs=1)
        t_forest_fit = clock(lambda: forest.fit(X, y))
        ev.clear_caches()
        clf = ev.HaltingClassifier(forest, rule="urn", prior="oob", n_jobs=1)
        t_fit = clock(lambda: clf.fit(X, y))  # refits the forest (the same one: same seed)
        forest = clf.estimator_
        plan = clf._ensemble.plan(clf.rule_)
        dense = plan is not None
        engine_name = "memo" if plan is None else ("flat table" if plan[0].flat else "stop bits")
        t_sk, t_first, t_warm, t_decide, n_vec = [], [], [], [], []
        for _ in range(args.repeat):
            t_sk.append(clock(lambda: forest.predict(X_test)))
            ev.clear_caches()
            t_first.append(clock(lambda: clf.predict(X_test)))
            memo = None if dense else engine.stop_memo(clf.rule_, T, l)
            t_decide.append(0.0 if memo is None else memo.decide_seconds)
            n_vec.append(0 if memo is None else memo.n_decided)
            t_warm.append(clock(lambda: clf.predict(X_test)))
        speedup = clf.halt(X_test).speedup
        sk, first, warm = np.median(t_sk), np.median(t_first), np.median(t_warm)
        print(f"{l:>2} {T:>5}  {engine_name:11} {sk:9.3f} {first:8.3f} {warm:7.3f}  "
              f"{sk / first:10.2f} {sk / warm:7.2f}  {speedup:8.2f}  {np.median(t_decide):8.3f} "
              f"{int(np.median(n_vec)):8d}  {t_fit:6.2f} {t_forest_fit:8.2f}", flush=True)
        rows.append({"n_classes": l, "T": T, "engine": engine_name, "n_rows": len(X_test),
                     "forest_fit_seconds": f"{t_forest_fit:.3f}", "fit_seconds": f"{t_fit:.3f}",
                     "sklearn_seconds": f"{sk:.4f}", "first_seconds": f"{first:.4f}", "warm_seconds": f"{warm:.4f}",
                     "vs_sklearn_first": f"{sk / first:.2f}", "vs_sklearn_warm": f"{sk / warm:.2f}",
                     "tree_speedup": f"{speedup:.2f}", "decide_seconds": f"{np.median(t_decide):.4f}",
                     "vectors": int(np.median(n_vec))})
    write_csv(args.out, FIELDS, rows)


if __name__ == "__main__":
    main()
