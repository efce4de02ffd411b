#!/usr/bin/env python3
"""Build time of the optimal-policy table (ensvote.optimal.OptimalRule) at T = 101.

    .venv/bin/python benchmarks/bench_optimal.py [--repeat 3] [--budget 0.01]

For two and three classes, uniform prior, a cold cache each time: the urn
model (log marginals, disagreement and next-vote probabilities of every vote
vector), then the budget solve (bisection on the price λ, one Bellman pass
per step, and the greedy use of the budget left over) and the dense table.
Prints the best of ``--repeat`` runs; run it on an otherwise idle machine.
"""

import argparse
import time

from ensvote import optimal
from ensvote.confidence import check_prior, uniform_prior


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--budget", type=float, default=0.01)
    args = ap.parse_args()
    T = optimal.MAX_T
    for l in optimal.SUPPORTED_CLASSES:
        support, probs = check_prior(uniform_prior(T, l), T)
        model_t, total_t = [], []
        for _ in range(args.repeat):
            optimal._MODELS.clear()
            t0 = time.perf_counter()
            optimal._model(T, support, probs)
            t1 = time.perf_counter()
            rule = optimal.OptimalRule(T, args.budget, n_classes=l)
            t2 = time.perf_counter()
            model_t.append(t1 - t0)
            total_t.append(t2 - t0)
        print(f"OptimalRule T={T} l={l} disagreement={args.budget:g}: build {min(total_t):.3f} s "
              f"(urn model {min(model_t):.3f} s, budget solve {min(total_t) - min(model_t):.3f} s); "
              f"{(T + 1) ** l:,} table entries; expected members {rule.expected_members:.3f}")


if __name__ == "__main__":
    main()
