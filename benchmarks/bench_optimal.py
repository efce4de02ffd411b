#!/usr/bin/env python3
"""Build time of the optimal-policy table (ensvote.optimal.OptimalRule) at T = 101.

    .venv/bin/python benchmarks/bench_optimal.py [--repeat 3] [--budget 0.01]

For two and three classes, uniform prior, a cold cache each time: the urn
model (log marginals, disagreement and next-vote probabilities of every vote
vector), then the budget solve (bisection on the price λ, one Bellman pass
per step, and the greedy use of the budget left over) and the dense table.
Then the budget mode as ``HaltingClassifier(rule="optimal")`` builds it,
:meth:`OptimalRule.from_oob_votes` on the out-of-bag votes of a fitted
forest (pima: two classes, waveform: three): the deconvolved prior of each
fold and of all rows, and the cross-validated budget search, with the
held-out folds scored both ways (``heldout``); and a sweep of
the head-to-head suite's budgets on the same votes, as one of its tasks
builds them (the deconvolved priors are fitted once and kept for the sweep).
Prints the best of ``--repeat`` runs; run it on an otherwise idle machine.

The budget mode's build times are also written to ``results/speed/optimal.csv``
(``--out``), one row per problem and held-out scoring, beside the time to fit
the forest itself in the same process (``forest_seconds``): the chapter "How far
from optimal are the threshold rules?" quotes them.
"""

import argparse
import time
from pathlib import Path

from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import _bellman, datasets, optimal
from ensvote.confidence import check_prior, uniform_prior
from ensvote.experiments.registry import SUITES

from _results import write_csv  # beside this script

DELTAS = SUITES["headtohead"].params["paper"]["delta_grid"]
OUT = Path(__file__).resolve().parents[1] / "results" / "speed" / "optimal.csv"
FIELDS = ["dataset", "n_train", "n_classes", "disagreement", "heldout", "seconds", "forest_seconds", "budget",
          "n_rounds"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.01)
    ap.add_argument("--out", type=Path, default=OUT, help=f"CSV of the budget mode's build times (default {OUT})")
    args = ap.parse_args()
    rows_out = []
    T = optimal.MAX_OPTIMAL_T
    for l in optimal.SUPPORTED_CLASSES:
        prior = check_prior(uniform_prior(T, l), T)
        model_t, total_t = [], []
        for _ in range(args.repeat):
            ev.clear_caches()
            t0 = time.perf_counter()
            _bellman._model(T, prior)
            t1 = time.perf_counter()
            rule = optimal.OptimalRule(T, args.budget, n_classes=l)
            t2 = time.perf_counter()
            model_t.append(t1 - t0)
            total_t.append(t2 - t0)
        print(f"OptimalRule T={T} l={l} disagreement={args.budget:g}: build {min(total_t):.3f} s "
              f"(urn model {min(model_t):.3f} s, budget solve {min(total_t) - min(model_t):.3f} s); "
              f"{(T + 1) ** l:,} table entries; expected members {rule.expected_members:.3f}")
    for name, n_train in (("pima", 500), ("waveform", 300)):
        X, y = datasets.load(name, **({"n_samples": n_train, "random_state": ev.SEED} if name == "waveform" else {}))
        fits = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            RandomForestClassifier(T, random_state=ev.SEED).fit(X[:n_train], y[:n_train])
            fits.append(time.perf_counter() - t0)
        clf = ev.HaltingClassifier(RandomForestClassifier(T, random_state=ev.SEED), rule="exact").fit(
            X[:n_train], y[:n_train])
        for heldout in ("rescaled", "deconvolved"):
            times = []
            for _ in range(args.repeat):
                ev.clear_caches()
                t0 = time.perf_counter()
                rule = optimal.OptimalRule.from_oob_votes(clf.oob_votes_, T, args.budget, heldout=heldout)
                times.append(time.perf_counter() - t0)
            cv = rule.cross_validation
            print(f"OptimalRule.from_oob_votes {name} ({n_train} rows, l={len(clf.classes_)}), "
                  f"disagreement={args.budget:g}, heldout={heldout}: build {min(times):.2f} s; budget "
                  f"{cv.budget:.5f} after {cv.n_rounds} round(s), cross-validated disagreement {cv.cv_disagreement:.5f}; "
                  f"the forest's own fit {min(fits):.2f} s")
            rows_out.append({"dataset": name, "n_train": n_train, "n_classes": len(clf.classes_),
                             "disagreement": args.budget, "heldout": heldout, "seconds": f"{min(times):.3f}",
                             "forest_seconds": f"{min(fits):.3f}", "budget": f"{cv.budget:.6g}",
                             "n_rounds": cv.n_rounds})
        times = []
        for _ in range(args.repeat):
            ev.clear_caches()
            t0 = time.perf_counter()
            for d in DELTAS:
                optimal.OptimalRule.from_oob_votes(clf.oob_votes_, T, d)
            times.append(time.perf_counter() - t0)
        print(f"OptimalRule.from_oob_votes {name}, the {len(DELTAS)} budgets of the head-to-head sweep: "
              f"{min(times):.2f} s ({min(times) / len(DELTAS):.2f} s a budget)")
    write_csv(args.out, FIELDS, rows_out)


if __name__ == "__main__":
    main()
