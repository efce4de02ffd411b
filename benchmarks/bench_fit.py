#!/usr/bin/env python3
"""What ``HaltingClassifier.fit`` costs on top of fitting the forest, per rule, and the first call's compile time.

    .venv/bin/python benchmarks/bench_fit.py [--repeat 3]

For each problem (half its rows to train, a forest of 101 trees, one thread)
and each way of building the classifier, the forest's own ``fit`` and
``HaltingClassifier.fit`` are timed in turn in the same process (best of
``--repeat``, every cache emptied before each fit, the compiled loops already
loaded); printed and written to ``results/speed/fit.csv`` is the ratio
``fit_ratio`` = HaltingClassifier.fit / forest fit (1.0: no overhead) with the
two times.  ``first_call`` rows time one fit plus one predict in a fresh
process, with numba's on-disk cache empty (``cold``: everything compiles) and
then filled (``cached``), against the same in a process that has done it
once (``warm``): the difference is what a user's first call pays.  The
docstring of ``HaltingClassifier`` quotes these numbers.  Run it on an
otherwise idle machine; nothing here asserts a time (a benchmark, not a test).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

import ensvote as ev
from ensvote import datasets

from _results import write_csv  # beside this script

OUT = Path(__file__).resolve().parents[1] / "results" / "speed" / "fit.csv"
FIELDS = ["section", "dataset", "n_train", "n_classes", "mode", "forest_seconds", "seconds", "fit_ratio"]
PROBLEMS = {"pima": {}, "spam": {}, "waveform": {"n_samples": 5000}, "vehicle": {}}
MODES = {  # name -> HaltingClassifier keyword arguments
    "urn, out-of-bag prior (HYPER)": {"rule": "urn", "prior": "oob"},
    "urn, uniform prior (SIBA)": {"rule": "urn", "prior": "uniform"},
    "infinite": {"rule": "infinite"},
    "exact": {"rule": "exact"},
    "budget mode, disagreement=0.01": {"rule": "optimal", "disagreement": 0.01},
}
_FIRST = """
import time, sys
t0 = time.perf_counter()
from sklearn.ensemble import RandomForestClassifier
import ensvote as ev
from ensvote import datasets
X, y = datasets.load("pima")
kw = eval(sys.argv[1])
for i in range(int(sys.argv[2])):
    t0 = time.perf_counter()
    ev.clear_caches()
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=101, random_state=ev.SEED), **kw).fit(X, y)
    clf.predict(X[:1])
    t = time.perf_counter() - t0
print(f"{t:.3f}")
"""


def best(f, repeat):
    times = []
    for _ in range(repeat):
        ev.clear_caches()
        t0 = time.perf_counter()
        f()
        times.append(time.perf_counter() - t0)
    return min(times)


def first_call(kw, cache_dir, n=1):
    """Seconds of the n-th fit + predict in a fresh process with numba's cache in cache_dir."""
    out = subprocess.run([sys.executable, "-c", _FIRST, repr(kw), str(n)], env=dict(os.environ, NUMBA_CACHE_DIR=cache_dir),
                         capture_output=True, text=True, check=True, cwd=tempfile.gettempdir())
    return float(out.stdout.split()[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = []
    for name, kw in PROBLEMS.items():
        X, y = datasets.load(name, random_state=ev.SEED, **kw)
        X_tr, _, y_tr, _ = train_test_split(X, y, test_size=0.5, random_state=ev.SEED, stratify=y)
        n_classes = len(set(y_tr))
        forest = RandomForestClassifier(n_estimators=101, random_state=ev.SEED, n_jobs=1)
        for mode, mkw in MODES.items():
            if mkw.get("rule") == "optimal" and n_classes > 3:
                continue  # the budget mode takes two or three classes
            clf = ev.HaltingClassifier(forest, **mkw)
            clf.fit(X_tr, y_tr)  # compile and warm up
            t_forest = best(lambda: forest.fit(X_tr, y_tr), args.repeat)
            t_fit = best(lambda: clf.fit(X_tr, y_tr), args.repeat)
            rows.append({"section": "fit", "dataset": name, "n_train": len(y_tr), "n_classes": n_classes,
                         "mode": mode, "forest_seconds": f"{t_forest:.3f}", "seconds": f"{t_fit:.3f}",
                         "fit_ratio": f"{t_fit / t_forest:.2f}"})
            print(f"{name:9s} {len(y_tr):5d} rows {n_classes} classes  {mode:32s} fit {t_fit / t_forest:5.2f} x the "
                  f"forest's ({t_fit:.2f} s against {t_forest:.2f} s)", flush=True)
    for mode in ("urn, out-of-bag prior (HYPER)", "budget mode, disagreement=0.01"):
        with tempfile.TemporaryDirectory() as cache:
            cold = first_call(MODES[mode], cache)
            cached = first_call(MODES[mode], cache)
            warm = first_call(MODES[mode], cache, n=2)
        for kind, t in (("cold", cold), ("cached", cached), ("warm", warm)):
            rows.append({"section": "first_call", "dataset": "pima", "n_train": 768, "n_classes": 2,
                         "mode": f"{mode} ({kind})", "seconds": f"{t:.3f}"})
        print(f"first fit + predict, pima, {mode}: {cold:.1f} s with numba's cache empty, {cached:.1f} s cached, "
              f"{warm:.1f} s once warm", flush=True)
    write_csv(args.out, FIELDS, rows)


if __name__ == "__main__":
    main()
