#!/usr/bin/env python3
"""Runner overhead against fitting the same trees with scikit-learn directly, and 1 vs 2 workers.

    .venv/bin/python benchmarks/bench_runner.py [--profile smoke|book] [--dataset pima]

Overhead: one hl2011 task (both ensembles, their proxies, halting, the π sweep,
the record) against the bare cost of fitting the same forests with
``RandomForestClassifier.fit`` and predicting the test rows with ``predict``.
Goal: at most 10 %.  The proxies are grown without the forest's per-tree Python
work (:func:`ensvote.experiments.hl2011.proxy_votes`), so on small problems the
task takes less than the bare forests.  Workers: wall-clock time of the smoke suite with
``--n-jobs 1`` and ``--n-jobs 2`` in the same process (40 soto2016 tasks, so the
workers' start-up is amortised); printed as a ratio.  Run it on an otherwise idle machine.
"""

import argparse
import tempfile
import time

from sklearn.ensemble import RandomForestClassifier

from ensvote import experiments
from ensvote.experiments import hl2011


def bare_fit(dataset, profile, chunk=500):
    """Fit and predict the task's forests with scikit-learn alone, seeded as the task seeds them."""
    p = experiments.SUITES["hl2011"].params[profile]
    rng, seeds = hl2011.seeds(dataset, 0)
    Xtr, ytr, Xte, _ = hl2011.split(dataset, rng, p["n_test_synthetic"])
    t0 = time.perf_counter()
    for mf, s1, s2 in ((None, seeds[0], seeds[2]), ("sqrt", seeds[1], seeds[3])):
        RandomForestClassifier(p["T"], max_features=mf, random_state=s1, n_jobs=1).fit(Xtr, ytr).predict(Xte)
        for c, s in enumerate(hl2011.proxy_seeds(s2, p["proxy"], chunk)):
            k = min(chunk, p["proxy"] - c * chunk)
            RandomForestClassifier(k, max_features=mf, random_state=s, n_jobs=1).fit(Xtr, ytr).predict(Xte)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--profile", default="smoke", choices=["smoke", "book"])
    ap.add_argument("--dataset", default="pima")
    args = ap.parse_args()
    t0 = time.perf_counter()
    experiments.run_task("hl2011", args.profile, args.dataset, 0)
    task = time.perf_counter() - t0
    bare = bare_fit(args.dataset, args.profile)
    print(f"hl2011/{args.profile}/{args.dataset}: runner task / bare scikit-learn fit+predict = "
          f"{task / bare:.3f}  (overhead {100 * (task / bare - 1):+.1f} %; goal <= +10 %)")
    times = {}
    for n_jobs in (1, 2):
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            experiments.run("soto2016", "book", out=out, datasets=["sonar", "votes"], realizations="0:20",
                       n_jobs=n_jobs, progress=False)
            times[n_jobs] = time.perf_counter() - t0
    print(f"soto2016 (40 tasks): speed-up with 2 workers over 1 = {times[1] / times[2]:.2f}x")


if __name__ == "__main__":
    main()
