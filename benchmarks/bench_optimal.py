#!/usr/bin/env python3
"""Build time of the optimal-policy table (ensvote.optimal.OptimalRule) at T = 101, and against T.

    .venv/bin/python benchmarks/bench_optimal.py [--repeat 3] [--budget 0.01] [--sizes-only]

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

Against T (``results/speed/optimal_sizes.csv``, ``--sizes``): for each size up to
:data:`ensvote.optimal.MAX_OPTIMAL_T` (1,001 trees with two classes, 201 with
three) a forest of ``T`` trees is fitted (its time beside), then the budget
mode is built from its out-of-bag votes as ``fit`` builds it (best of ``--repeat``), on one thread
and, as ``HaltingClassifier(..., n_jobs=2)`` builds it, with its folds on two
(``budget_mode_seconds_2_threads``); the same for the per-row guarantees
(``guarantee="per-row"`` and ``"minimax"``: a linear program up to
:data:`ensvote.optimal.LP_T`, its Lagrangian dual beyond) up to
:data:`ensvote.optimal.MAX_PER_ROW_T` (1,001 and 201), on one thread.
"""

import argparse
import time

import numpy as np
from pathlib import Path

from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import _bellman, datasets, optimal
from ensvote.rules import make_rule
from ensvote.confidence import check_prior, uniform_prior
from ensvote.experiments.registry import SUITES

from _results import write_csv  # beside this script

DELTAS = SUITES["headtohead"].params["paper"]["delta_grid"]
OUT = Path(__file__).resolve().parents[1] / "results" / "speed" / "optimal.csv"
FIELDS = ["dataset", "n_train", "n_classes", "disagreement", "heldout", "seconds", "forest_seconds", "budget",
          "n_rounds"]


SIZES = OUT.with_name("optimal_sizes.csv")
SIZE_GRID = {2: (101, 301, 1001), 3: (51, 101, 151, 201)}
#: Sizes of the per-row guarantee, up to ensvote.optimal.MAX_PER_ROW_T: its linear program up to
#: ensvote.optimal.LP_T (101 with two classes, 21 with three), the program's Lagrangian dual beyond.
PER_ROW_GRID = {2: (51, 101, 201, 501, 1001), 3: (21, 41, 101, 201)}
SIZE_FIELDS = ["dataset", "n_classes", "T", "guarantee", "forest_seconds", "budget_mode_seconds",
               "budget_mode_seconds_2_threads", "expected_members"]


def sizes(args):
    """The budget mode's build time against the forest's size, beside the forest's own fit."""
    rows = []
    for name, l in (("pima", 2), ("waveform", 3)):
        X, y = datasets.load(name, **({"n_samples": 300, "random_state": ev.SEED} if name == "waveform" else {}))
        X, y = X[:500], y[:500]
        runs = [(T, "average") for T in SIZE_GRID[l]] + [(T, g) for g in ("per-row", "minimax")
                                                         for T in PER_ROW_GRID[l]]
        for T, guarantee in runs:
            assert T <= (optimal.MAX_OPTIMAL_T if guarantee == "average" else optimal.MAX_PER_ROW_T)[l]
            t0 = time.perf_counter()
            clf = ev.HaltingClassifier(RandomForestClassifier(T, random_state=ev.SEED), rule="exact").fit(X, y)
            t1 = time.perf_counter()

            def build(**options):  # best of --repeat builds from a cold cache: (seconds, rule)
                best = None
                for _ in range(args.repeat):
                    ev.clear_caches()
                    t = time.perf_counter()
                    # as HaltingClassifier(rule="optimal", disagreement=budget, guarantee=..., n_jobs=...).fit
                    rule = make_rule("optimal", n_members=T, strength=args.budget, n_classes=l, prior="oob",
                                     oob_votes=lambda: clf.oob_votes_, **options)
                    best = min(best or np.inf, time.perf_counter() - t)
                return best, rule

            seconds, rule = build(guarantee=guarantee)
            threaded = ""
            if guarantee == "average":  # HaltingClassifier(..., n_jobs=2): the folds on two threads
                seconds2, again = build(n_jobs=2)
                threaded = f"{seconds2:.3f}"
                assert again.expected_members == rule.expected_members
            print(f"{guarantee} {name} (l={l}) T={T}: forest fit {t1 - t0:.2f} s, optimal rule {seconds:.2f} s "
                  f"({threaded or '-'} s on two threads), expected members {rule.expected_members:.2f}", flush=True)
            rows.append({"dataset": name, "n_classes": l, "T": T, "guarantee": guarantee,
                         "forest_seconds": f"{t1 - t0:.3f}", "budget_mode_seconds": f"{seconds:.3f}",
                         "budget_mode_seconds_2_threads": threaded,
                         "expected_members": f"{rule.expected_members:.4f}"})
    write_csv(args.sizes, SIZE_FIELDS, rows)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.01)
    ap.add_argument("--out", type=Path, default=OUT, help=f"CSV of the budget mode's build times (default {OUT})")
    ap.add_argument("--sizes", type=Path, default=SIZES, help=f"CSV of build times against T (default {SIZES})")
    ap.add_argument("--sizes-only", action="store_true", help="only the build times against T")
    args = ap.parse_args()
    sizes(args)
    if args.sizes_only:
        return
    rows_out = []
    T = 101
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
