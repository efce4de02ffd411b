#!/usr/bin/env python3
"""The exhaustive check of the many-class union bound, for the chapter "Many classes".

    .venv/bin/python tools/many_classes_check.py

Writes ``book/data/many_classes_check.csv``: for each (l, T) below, every vote
vector with at most T votes, the union-bound confidence
(``ensvote.manyclass.urn_confidence_bound``) against the exact Eq. 3 of Soto
et al. (2016) under the uniform prior (the dense backward-induction table of
``UrnRule(T, method="exact")``; the closed form for two classes), and, per
threshold α, the vote vectors where each stops and the expected number of
members each queries under the uniform prior (``ensvote.expected_queries``,
the same seeded draws for every rule).  One row per (l, T, α).

Also writes ``book/data/many_classes_random.csv``: seeded random vote vectors
for 10 and 26 classes at T = 101, the bound against the exact value
(``urn_confidence_exact``).  About a minute on one core.
"""

import csv
from pathlib import Path

import numpy as np

import ensvote as ev
from ensvote import manyclass as mc

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data" / "many_classes_check.csv"
OUT_RANDOM = ROOT / "book" / "data" / "many_classes_random.csv"
CONFIGS = [(2, 101), (3, 101), (4, 30), (5, 16)]
ALPHAS = (0.95, 0.99)
N_DRAWS = 20_000


def all_states(T, l):
    """Every vote vector of ``l`` classes with at most ``T`` votes."""
    states = np.zeros((1, 0), dtype=np.int64)
    for _ in range(l):
        reps = T - states.sum(axis=1) + 1
        rows = np.repeat(np.arange(len(states)), reps)
        offs = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
        states = np.column_stack([states[rows], offs])
    return states


def check(l, T):
    states = all_states(T, l)
    if l == 2:
        exact = ev.finite_confidence(states, T)
    else:
        exact = ev.UrnRule(T, method="exact").table(l)[tuple(states.T)]
    bound = mc.urn_confidence_bound(states, T)
    prior = ev.uniform_prior(T, l)
    rows = []
    for alpha in ALPHAS:
        e_stop, b_stop = exact > alpha, bound > alpha
        members = {}
        for name, rule in (("exact", ev.UrnRule(T, alpha, method="exact")),
                           ("bound", ev.UrnRule(T, alpha, method="bound") if l > 2 else ev.UrnRule(T, alpha)),
                           ("rfstar", ev.ExactRule(T))):
            members[name] = ev.expected_queries(rule, prior, n_samples=N_DRAWS, random_state=ev.SEED,
                                                return_sem=True)
        rows.append({
            "l": l, "T": T, "alpha": alpha, "n_vectors": len(states),
            "max_excess": float(np.max(bound - exact)),
            "max_gap": float(np.max(exact - bound)),
            "stops_exact": int(e_stop.sum()), "stops_bound": int(b_stop.sum()),
            "stops_lost": int((e_stop & ~b_stop).sum()), "stops_extra": int((b_stop & ~e_stop).sum()),
            "members_exact": members["exact"][0], "members_bound": members["bound"][0],
            "members_rfstar": members["rfstar"][0], "members_sem": members["exact"][1],
            "n_draws": N_DRAWS,
        })
    return rows


def random_check(n_per=40, T=101):
    rng = np.random.default_rng(ev.SEED)
    rows = []
    for l in (10, 26):
        for _ in range(n_per):
            s = int(rng.integers(1, T))
            p = rng.dirichlet(np.full(l, rng.choice([0.2, 1.0])))
            t = rng.multinomial(s, p)
            rows.append({"l": l, "T": T, "counts": " ".join(map(str, t)),
                         "exact": float(mc.urn_confidence_exact(t, T)),
                         "bound": float(mc.urn_confidence_bound(t, T))})
    return rows


def write(path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        for r in rows:
            w.writerow({k: (repr(float(v)) if isinstance(v, float) else v) for k, v in r.items()})
    print(f"wrote {path.relative_to(ROOT)} ({len(rows)} rows)")


def main():
    write(OUT, [r for l, T in CONFIGS for r in check(l, T)])
    write(OUT_RANDOM, random_check())


if __name__ == "__main__":
    main()
