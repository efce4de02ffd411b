#!/usr/bin/env python3
"""Time and memory of the urn rule for many classes (``ensvote.manyclass``).

    .venv/bin/python benchmarks/bench_many_classes.py [--quick]

Three sections, printed as tables (a benchmark, not a test: nothing is asserted):

``table``
    Build time (cold cache) and size of the union-bound table against ``T``
    (uniform prior: one table whatever ``l``) and against ``l`` (out-of-bag pair
    prior: one table per class), with the peak memory of the build
    (``tracemalloc``).  The largest ``T`` the size limit
    ``MAX_PAIR_TABLE_BYTES`` admits is printed too.
``fit_predict``
    ``HaltingClassifier`` (``rule="urn"``, T = 101, α = 0.99) on a seeded
    ``make_classification`` problem with 1,000 training and 1,000 test rows,
    ``l`` = 2, 3, 10, 26: the forest's own fit, what ``fit`` adds to it (the
    out-of-bag votes, the prior and the rule's tables, timed on their own
    with cold caches) and ``predict`` on the 1,000 test rows, for both priors.
    Target: at most 2 s beyond the forest's fit for ``l = 10``.
``exact``
    The exact Eq. 3 for many classes (``urn_confidence_exact``) per vote vector,
    to show why the rule uses the bound.

Every run uses ``n_jobs=1`` and ``ensvote.SEED``; times are wall-clock seconds on
this machine (best of ``--repeat``).
"""

import argparse
import time
import tracemalloc

import numpy as np
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import manyclass as mc
from ensvote import rules

ALPHA = 0.99


def _best(fn, repeat):
    out, best = None, np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return out, best


def _cold():
    mc._TABLES.clear()
    rules._URN_TABLES.clear()
    ev.engine._STOP_TABLES.clear()


def bench_tables(Ts, ls, repeat):
    print("\n[table] union-bound table: build time (cold cache), size, peak build memory")
    print(f"{'prior':>8} {'T':>5} {'l':>4} {'build s':>9} {'table MiB':>10} {'peak MiB':>9}")

    def one(T, l, prior):
        def build():
            _cold()
            return mc.pair_table(T, l, prior)
        tab, sec = _best(build, repeat)
        _cold()
        tracemalloc.start()
        mc.pair_table(T, l, prior)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        name = "uniform" if prior is None else "oob-pair"
        print(f"{name:>8} {T:>5} {l:>4} {sec:>9.3f} {tab.nbytes / 2**20:>10.2f} {peak / 2**20:>9.1f}")

    for T in Ts:
        one(T, 10, None)
    for l in ls:
        one(101, l, mc.PairPrior.uniform(101, l))
    t_max = mc.max_pair_table_T(3)
    per = {l: mc.max_pair_table_T(l, per_class=True) for l in (4, 10, 26)}
    print(f"limit MAX_PAIR_TABLE_BYTES = {mc.MAX_PAIR_TABLE_BYTES / 2**20:.0f} MiB: uniform prior up to "
          f"T = {t_max} (any l); out-of-bag pair prior up to T = "
          + ", ".join(f"{per[l]} (l = {l})" for l in per))


def bench_fit_predict(ls, repeat, n_rows=1000, T=101):
    print(f"\n[fit_predict] HaltingClassifier, T = {T}, alpha = {ALPHA}, {n_rows} training + {n_rows} test rows")
    print("  'beyond forest' = out-of-bag votes + prior + rule tables, timed on their own (cold caches)")
    print(f"{'l':>3} {'prior':>8} {'forest fit s':>13} {'beyond forest s':>16} {'predict s':>10} "
          f"{'mean trees':>11} {'RF* trees':>10} {'disagree %':>11}")
    for l in ls:
        X, y = make_classification(n_samples=2 * n_rows, n_features=30, n_informative=20, n_redundant=0,
                                   n_classes=l, n_clusters_per_class=1, class_sep=1.5,
                                   random_state=ev.SEED)
        Xtr, ytr, Xte = X[:n_rows], y[:n_rows], X[n_rows:]
        forest = RandomForestClassifier(n_estimators=T, random_state=ev.SEED, n_jobs=1)
        _, t_forest = _best(lambda: forest.fit(Xtr, ytr), repeat)
        for prior in ("oob", "uniform"):
            clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=T, random_state=ev.SEED, n_jobs=1),
                                       prior=prior, confidence=ALPHA).fit(Xtr, ytr)

            def beyond():  # what fit does after the forest's own fit
                _cold()
                p = ev.oob_prior(clf.oob_votes(Xtr), T) if prior == "oob" else None
                rule = ev.UrnRule(T, ALPHA, prior=p)
                rule.prepare(T, l)
                ev.engine.stop_table(rule, T, l)
                return rule
            _, t_beyond = _best(beyond, repeat)
            _, t_pred = _best(lambda: clf.predict(Xte), repeat)
            res = clf.halt(Xte)
            votes = clf.member_votes(Xte)
            full = ev.halt(votes, ev.FixedRule(T), n_classes=l)
            star = ev.halt(votes, ev.ExactRule(T), n_classes=l)
            dis = 100 * np.mean(clf.classes_[full.labels] != res.labels)
            print(f"{l:>3} {prior:>8} {t_forest:>13.2f} {t_beyond:>16.2f} {t_pred:>10.2f} "
                  f"{res.mean_queried:>11.2f} {star.mean_queried:>10.2f} {dis:>11.2f}")


def bench_exact(ls, T=101):
    print(f"\n[exact] urn_confidence_exact, one vote vector with 10 votes seen, T = {T}")
    for l in ls:
        t = np.zeros(l, dtype=int)
        t[:3] = (6, 3, 1)
        _, sec = _best(lambda: mc.urn_confidence_exact(t, T), 3)
        _, sb = _best(lambda: mc.urn_confidence_bound(t, T), 3)
        print(f"l = {l:>2}: exact {sec * 1e3:8.1f} ms   bound (table cached) {sb * 1e3:6.2f} ms")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer sizes, one repeat")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    repeat = 1 if args.quick else args.repeat
    Ts = (51, 101, 201) if args.quick else (51, 101, 201, 301, 401, mc.max_pair_table_T(10))
    bench_tables(Ts, (4, 10, 26), repeat)
    bench_fit_predict((2, 3, 10, 26), repeat)
    bench_exact((3, 10, 26))


if __name__ == "__main__":
    main()
