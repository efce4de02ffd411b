#!/usr/bin/env python3
"""Wall-clock speed of halting against scikit-learn's full forest, as ratios.

    .venv/bin/python benchmarks/bench_speed.py [--rows 100000] [--repeat 5] [--quick]

Everything is measured in one process, on one machine, with ``n_jobs=1``;
candidate and baseline runs are interleaved and the best of ``--repeat`` runs
of each is kept.  Printed (and written to ``results/speed/benchmark.csv``,
with the machine in ``results/speed/machine.json``) are ratios beside the
tree-count speed-up, never bare seconds.  The book chapter ``book/speed.ipynb``
reads these files; nothing here asserts a time (a benchmark, not a test).

Sections (column ``section`` of the CSV):

``batch``
    ``RandomForestClassifier.predict`` time / ``HaltingClassifier.predict`` time
    on the same fitted forest (``wall_speedup``), beside ``T / mean trees queried``
    (``tree_speedup``), the same ratio for the block engine this package used
    before the fast path (``before_speedup``) and for the fast path without
    its leaf-sorted row order (``nosort_speedup``).
``batch_size``
    The same ratio for batches of 1 .. ``--rows`` rows (HYPER rule).
``single_row``
    One request at a time: per-row latency of ``predict`` on one row, the
    forest's over ours (``wall_speedup``).
``halt_matrix``
    :func:`ensvote.halt` on a precomputed vote matrix: vote-checks (members
    queried, summed over rows) per second, in millions (``value``; target 50),
    new engine and (``before``) the block engine.
``table``
    Lookup-table build time, cold cache: ``value`` = budget / time (>= 1 meets
    the target).
"""

import argparse
import csv
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy
import sklearn
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import classifier as _classifier
from ensvote import datasets, engine, rules

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "speed"
T = 101
ALPHA = 0.99
RULES = {  # label -> HaltingClassifier keyword arguments
    "HYPER": dict(rule="urn", prior="oob"),
    "SIBA": dict(rule="urn", prior="uniform"),
    "infinite": dict(rule="infinite"),
    "exact": dict(rule="exact"),
}
FIELDS = ["section", "dataset", "rule", "n_rows", "n_classes", "tree_speedup", "wall_speedup",
          "before_speedup", "nosort_speedup", "value", "target"]
#: real-data test rows: held-out rows drawn with replacement plus Gaussian noise of this
#: fraction of each feature's standard deviation, so that the 10^5 rows are distinct
JITTER = 0.1


def clock(f):
    t0 = time.perf_counter()
    out = f()
    return time.perf_counter() - t0, out


def interleaved(fs, repeat):
    """Best-of-``repeat`` time of each callable, the callables run in turn."""
    best = [np.inf] * len(fs)
    outs = [None] * len(fs)
    for _ in range(repeat):
        for i, f in enumerate(fs):
            t, outs[i] = clock(f)
            best[i] = min(best[i], t)
    return best, outs


def before_halt(clf, X):
    """``clf.halt`` through the previous engine: blocks of 4..64 members, ``rule.decide`` per block."""
    X32 = clf._validate_X(X)

    def fetch(rows, a, b):
        Xa = X32[rows]
        return np.column_stack([clf._member_predict(j, Xa) for j in range(a, b)])

    return engine.run_halting(fetch, X32.shape[0], clf.n_members_, len(clf.classes_), clf.rule_)


def before_halt_votes(votes, rule):
    v = np.asarray(votes, dtype=np.int64)
    return engine.run_halting(lambda rows, a, b: v[rows, a:b], v.shape[0], v.shape[1],
                              max(2, int(v.max()) + 1), rule)


def predict_unsorted(clf, X):
    """``clf.predict`` with the rows kept in the caller's order (no leaf sorting)."""
    clf._SORT_MIN_ROWS = np.inf  # instance attribute, shadows the class default
    try:
        return clf.predict(X)
    finally:
        del clf._SORT_MIN_ROWS


def problems(n_rows, rng):
    """(name, X_train, y_train, X_test) with ``n_rows`` test rows each.

    Synthetic problems draw fresh test rows.  A real dataset is split 2/3 : 1/3;
    its test rows are held-out rows drawn with replacement, jittered by
    ``JITTER`` standard deviations (exact duplicates would flatter the
    leaf-sorted evaluation, which groups identical rows).
    """
    X, y = datasets.load("twonorm", n_samples=300 + n_rows, random_state=rng)
    yield "twonorm", X[:300], y[:300], X[300:]
    X, y = datasets.load("waveform", n_samples=300 + n_rows, random_state=rng)
    yield "waveform", X[:300], y[:300], X[300:]
    for name in ("spam", "pima"):
        X, y = datasets.load(name)
        idx = rng.permutation(len(y))
        tr, te = idx[: 2 * len(y) // 3], idx[2 * len(y) // 3:]
        Xte = X[te][rng.integers(0, len(te), n_rows)]
        Xte = Xte + rng.normal(0.0, JITTER, Xte.shape) * X[te].std(axis=0)
        yield name, X[tr], y[tr], Xte
    # adversarial: labels independent of the features, so every row is borderline
    X = rng.random((2000, 5))
    yield "adversarial", X, rng.integers(0, 2, 2000), rng.random((n_rows, 5))


def machine():
    cpu = platform.processor() or ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "logical_cores": os.cpu_count(),
            "affinity_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__, "ensvote": getattr(ev, "__version__", "dev"),
            "platform": platform.platform(), "n_jobs": 1, "T": T, "alpha": ALPHA}


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="10^4 rows, 2 repeats, no output files")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.repeat = 10_000, 2
    rng = np.random.default_rng(ev.SEED)
    rows_out = []

    def emit(**kw):
        row = {k: kw.get(k, "") for k in FIELDS}
        rows_out.append(row)
        return row

    print(f"T={T}, alpha={ALPHA}, {args.rows} rows, best of {args.repeat}, n_jobs=1; "
          "ratios = forest time / our time")
    print(f"{'dataset':12s} {'rule':9s} {'tree-count':>10s} {'wall-clock':>10s} {'wall/tree':>9s} "
          f"{'nosort':>7s} {'before':>7s}")
    for name, Xtr, ytr, Xte in problems(args.rows, rng):
        l = len(np.unique(ytr))
        clfs = {}
        for label, kw in RULES.items():
            clf = ev.HaltingClassifier(
                RandomForestClassifier(n_estimators=T, random_state=ev.SEED, n_jobs=1),
                confidence=ALPHA, **kw).fit(Xtr, ytr)
            clfs[label] = clf
            forest = clf.estimator_  # the same fitted forest
            clf.predict(Xte[:10])  # build (and cache) the stop table outside the timing
            fs = [lambda: forest.predict(Xte), lambda: clf.predict(Xte), lambda: predict_unsorted(clf, Xte)]
            if label in ("HYPER", "exact"):
                fs.append(lambda: before_halt(clf, Xte))
            t, outs = interleaved(fs, args.repeat)
            res = clf.halt(Xte)  # the same labels, plus the members each row queried
            assert np.array_equal(res.labels, outs[1]) and np.array_equal(outs[2], outs[1])
            r = emit(section="batch", dataset=name, rule=label, n_rows=len(Xte), n_classes=l,
                     tree_speedup=res.speedup, wall_speedup=t[0] / t[1], nosort_speedup=t[0] / t[2],
                     before_speedup=t[0] / t[3] if len(t) > 3 else "", target=0.8 * res.speedup)
            before = f"{r['before_speedup']:7.2f}" if len(t) > 3 else f"{'':7s}"
            print(f"{name:12s} {label:9s} {res.speedup:10.2f} {t[0] / t[1]:10.2f} "
                  f"{t[0] / t[1] / res.speedup:9.2f} {t[0] / t[2]:7.2f} {before}", flush=True)

        clf = clfs["HYPER"]
        forest = clf.estimator_
        # batch sizes
        if name in ("twonorm", "spam", "adversarial"):
            for n in (1, 10, 100, 1_000, 10_000, 100_000):
                if n > len(Xte):
                    break
                Xb = Xte[:n]
                reps = max(args.repeat, min(200, 20_000 // n))
                t, outs = interleaved([lambda: forest.predict(Xb), lambda: clf.predict(Xb)], reps)
                sp = clf.halt(Xb).speedup
                emit(section="batch_size", dataset=name, rule="HYPER", n_rows=n, n_classes=l,
                     tree_speedup=sp, wall_speedup=t[0] / t[1])
                print(f"{name:12s} HYPER     batch of {n:6d}: tree-count {sp:6.2f}, "
                      f"wall-clock {t[0] / t[1]:6.2f}", flush=True)
        # single row, one request at a time
        if name in ("twonorm", "waveform", "spam", "pima", "adversarial"):
            one = [Xte[i:i + 1] for i in range(200)]
            tf = th = 0.0
            nq = []
            for _ in range(max(2, args.repeat // 2)):
                a = b = 0.0
                for x in one:
                    dt, _ = clock(lambda: forest.predict(x))
                    a += dt
                    dt, _ = clock(lambda: clf.predict(x))
                    b += dt
                    nq.append(clf.halt(x).n_queried[0])
                tf, th = (a, b) if tf == 0 or a + b < tf + th else (tf, th)
            emit(section="single_row", dataset=name, rule="HYPER", n_rows=1, n_classes=l,
                 tree_speedup=T / np.mean(nq), wall_speedup=tf / th,
                 value=1e6 * th / len(one))
            print(f"{name:12s} HYPER     single row: tree-count {T / np.mean(nq):6.2f}, "
                  f"wall-clock {tf / th:6.2f}", flush=True)
        # halt() on a precomputed vote matrix
        votes = clf.member_votes(Xte)
        for label in ("HYPER", "SIBA", "exact"):
            rule = clfs[label].rule_
            t, outs = interleaved([lambda: ev.halt(votes, rule), lambda: before_halt_votes(votes, rule)],
                                  args.repeat)
            checks = outs[0].n_queried.sum()
            emit(section="halt_matrix", dataset=name, rule=label, n_rows=len(votes), n_classes=l,
                 tree_speedup=outs[0].speedup, value=checks / t[0] / 1e6,
                 before_speedup=checks / t[1] / 1e6, target=50.0)
            print(f"{name:12s} {label:9s} halt() on the vote matrix: {checks / t[0] / 1e6:6.1f} million "
                  f"vote-checks/s (before {checks / t[1] / 1e6:5.1f}; target 50)", flush=True)

    # lookup tables, cold cache
    def cold_tstar():
        rules._TSTAR_CACHE.clear()
        return ev.InfiniteRule(ALPHA).t_star(10_000)

    def cold_urn(l):
        def f():
            rules._URN_TABLES.clear()
            return ev.UrnRule(T, ALPHA).table(l)
        return f

    for label, f, budget in (("InfiniteRule t* T=10000", cold_tstar, 0.1),
                             ("UrnRule l=2 T=101", cold_urn(2), 0.05),
                             ("UrnRule l=3 T=101", cold_urn(3), 2.0)):
        t, _ = interleaved([f], args.repeat)
        emit(section="table", dataset="", rule=label, value=budget / t[0], target=1.0)
        print(f"table {label:24s}: budget / time = {budget / t[0]:8.1f} (>= 1 meets the target)")

    if not args.quick:
        OUT.mkdir(parents=True, exist_ok=True)
        with open(OUT / "benchmark.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, FIELDS)
            w.writeheader()
            for r in rows_out:
                w.writerow({k: (f"{v:.4g}" if isinstance(v, (float, np.floating)) else v) for k, v in r.items()})
        info = machine()
        info.update(rows=args.rows, repeat=args.repeat, command=" ".join(["benchmarks/bench_speed.py"] + sys.argv[1:]))
        (OUT / "machine.json").write_text(json.dumps(info, indent=1) + "\n")
        print(f"wrote {OUT / 'benchmark.csv'} and machine.json")


if __name__ == "__main__":
    main()
