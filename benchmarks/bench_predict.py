#!/usr/bin/env python3
"""Wall-clock cost of halting against scikit-learn's own predict, as ratios.

    .venv/bin/python benchmarks/bench_predict.py [--rows 100000] [--repeat 3]

For each dataset a RandomForestClassifier(n_estimators=101) is fitted once;
then, in the same process and with the same n_jobs (1), we time
``RandomForestClassifier.predict`` (the baseline), ``HaltingClassifier.predict``
with several rules, and ``ensvote.halt`` on a precomputed vote matrix.  Printed
numbers are ratios (baseline time / our time) beside the tree-count speed-up
(101 / mean trees queried), never absolute seconds, and nothing here asserts a
time: this is a benchmark, not a test.
"""

import argparse
import time

import numpy as np
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import datasets


def best_of(f, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t0)
    return best, out


def problems(n_rows):
    rng = np.random.default_rng(ev.SEED)
    X, y = datasets.load("twonorm", n_samples=300 + n_rows, random_state=rng)
    yield "twonorm", X[:300], y[:300], X[300:]
    for name in ("spam", "pima"):
        X, y = datasets.load(name)
        idx = rng.permutation(len(y))
        tr, te = idx[: 2 * len(y) // 3], idx[2 * len(y) // 3:]
        yield name, X[tr], y[tr], X[te][rng.integers(0, len(te), n_rows)]
    # adversarial: every row is borderline, p_1 = 1/2 for every tree
    X = rng.random((2000, 5))
    yield "adversarial", X, rng.integers(0, 2, 2000), rng.random((n_rows, 5))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    print(f"{'dataset':12s} {'rule':9s} {'tree-count speed-up':>20s} {'wall-clock speed-up':>20s}")
    for name, Xtr, ytr, Xte in problems(args.rows):
        forest = RandomForestClassifier(n_estimators=101, random_state=ev.SEED, n_jobs=1).fit(Xtr, ytr)
        base, _ = best_of(lambda: forest.predict(Xte), args.repeat)
        for rule, prior in (("urn", "oob"), ("urn", "uniform"), ("exact", "uniform")):
            clf = ev.HaltingClassifier(forest, rule=rule, prior=prior).fit(Xtr, ytr)
            t, res = best_of(lambda: clf.halt(Xte), args.repeat)
            label = "HYPER" if prior == "oob" else ("SIBA" if rule == "urn" else "exact")
            print(f"{name:12s} {label:9s} {res.speedup:20.2f} {base / t:20.2f}")
        votes = clf.member_votes(Xte)
        rule = ev.UrnRule(101, 0.99)
        t, res = best_of(lambda: ev.halt(votes, rule), args.repeat)
        checks = res.n_queried.sum()
        print(f"{name:12s} halt() on a vote matrix: {checks / t / 1e6:.1f} million vote-checks per second")


if __name__ == "__main__":
    main()
