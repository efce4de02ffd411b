"""Suite ``many-classes``: the exhaustive check of the many-class union bound (the chapter "Many classes").

Each dataset of the suite is one configuration, not a file:

``l{l}-T{T}`` (``l2-T101``, ``l3-T101``, ``l4-T30``, ``l5-T16``)
    Every vote vector of ``l`` classes with at most ``T`` votes: the
    union-bound confidence (:func:`ensvote.manyclass.urn_confidence_bound`)
    against the exact Eq. 3 of Soto et al. (2016) under the uniform prior (the
    dense backward-induction table of ``UrnRule(T, method="exact")``; the
    closed form for two classes) and, per threshold α, the vote vectors where
    each stops and the expected number of members each queries under the
    uniform prior (:func:`ensvote.expected_queries`, the same seeded draws for
    every rule).
``random``
    Seeded random vote vectors for 10 and 26 classes at ``T`` = 101: the bound
    against the exact value (:func:`ensvote.manyclass.urn_confidence_exact`),
    and their difference (``gap``, exact minus bound, to ``GAP_DECIMALS``
    decimals: below that it is rounding).

One realization: nothing here is drawn from data.  The draws are seeded from
:data:`ensvote.SEED` itself (every configuration the same draws).  Tables:
``many_classes_check.csv`` (one row per configuration and α) and
``many_classes_random.csv`` (one row per random vote vector).
"""

import numpy as np
import pandas as pd

from .. import SEED, ExactRule, UrnRule, compositions, expected_queries, finite_confidence, uniform_prior
from .. import manyclass as mc
from .store import keys, need, number, numbers
from .suite import Suite, profile_params

__all__ = ["SUITE", "CONFIGS", "all_states", "task", "check", "tables"]

#: ``dataset name -> (l, T)`` of the exhaustive checks, in the chapter's order.
CONFIGS = {"l2-T101": (2, 101), "l3-T101": (3, 101), "l4-T30": (4, 30), "l5-T16": (5, 16)}
#: Decimals kept of the gap between the exact value and the bound of a random vote vector.
GAP_DECIMALS = 12
_CHECK_KEYS = ["n_vectors", "max_excess", "max_gap", "stops_exact", "stops_bound", "stops_lost", "stops_extra",
               "members_exact", "members_bound", "members_rfstar", "members_sem", "n_draws"]


def all_states(T, l):
    """Every vote vector of ``l`` classes with at most ``T`` votes (one per row, lexicographic order)."""
    return compositions(T, l + 1)[:, :l]  # the last part is the votes not cast yet


def _check_config(l, T, p):
    states = all_states(T, l)
    if l == 2:
        exact = finite_confidence(states, T)
    else:
        exact = UrnRule(T, method="exact").table(l)[tuple(states.T)]
    bound = mc.urn_confidence_bound(states, T)
    prior = uniform_prior(T, l)
    rows = []
    for alpha in p["alphas"]:
        e_stop, b_stop = exact > alpha, bound > alpha
        members = {}
        for name, rule in (("exact", UrnRule(T, alpha, method="exact")),
                           ("bound", UrnRule(T, alpha, method="bound") if l > 2 else UrnRule(T, alpha)),
                           ("rfstar", ExactRule(T))):
            members[name] = expected_queries(rule, prior, n_samples=p["n_draws"], random_state=SEED,
                                             return_sem=True)
        rows.append({
            "alpha": alpha, "n_vectors": len(states),
            "max_excess": float(np.max(bound - exact)), "max_gap": float(np.max(exact - bound)),
            "stops_exact": int(e_stop.sum()), "stops_bound": int(b_stop.sum()),
            "stops_lost": int((e_stop & ~b_stop).sum()), "stops_extra": int((b_stop & ~e_stop).sum()),
            "members_exact": float(members["exact"][0]), "members_bound": float(members["bound"][0]),
            "members_rfstar": float(members["rfstar"][0]), "members_sem": float(members["exact"][1]),
            "n_draws": p["n_draws"]})
    return {"l": l, "T": T, "rows": rows}


def _random_check(p):
    rng = np.random.default_rng(SEED)
    T, out = p["random_T"], []
    for l in p["random_classes"]:
        for _ in range(p["random_per_class"]):
            s = int(rng.integers(1, T))
            prob = rng.dirichlet(np.full(l, rng.choice([0.2, 1.0])))
            t = rng.multinomial(s, prob)
            exact, bound = float(mc.urn_confidence_exact(t, T)), float(mc.urn_confidence_bound(t, T))
            # the gap to 12 decimals: the record's 9 significant digits of each value would lose it, and below
            # 1e-12 it is the two computations' rounding, which differs from CPU to CPU
            out.append({"l": l, "counts": [int(x) for x in t], "exact": exact, "bound": bound,
                        "gap": round(exact - bound, GAP_DECIMALS) + 0.0})
    return {"T": T, "rows": out}


def task(dataset, realization, p):
    """One configuration's check (a JSON-serialisable dict)."""
    return _random_check(p) if dataset == "random" else _check_config(*CONFIGS[dataset], p)


def check(res, p):
    """The schema of a result of :func:`task` (ValueError saying what is wrong)."""
    if "l" not in res:  # the random vote vectors
        keys(res, {"T", "rows"}, "result")
        T = number(res["T"], "result.T", 1, 10**4, integer=True)
        need(isinstance(res["rows"], list) and len(res["rows"]) == p["random_per_class"] * len(p["random_classes"]),
             "result.rows", "must have one row per random vote vector")
        for i, r in enumerate(res["rows"]):
            w = f"result.rows[{i}]"
            keys(r, {"l", "counts", "exact", "bound", "gap"}, w)
            l = number(r["l"], f"{w}.l", 2, 10**3, integer=True)
            counts = numbers(r["counts"], f"{w}.counts", l, 0, T, integer=True)
            need(sum(counts) <= T, f"{w}.counts", f"must sum to at most T = {T}")
            number(r["exact"], f"{w}.exact", 0, 1)
            number(r["bound"], f"{w}.bound", -1e9, 1)
            number(r["gap"], f"{w}.gap", -1, 1e9)
        return
    keys(res, {"l", "T", "rows"}, "result")
    l = number(res["l"], "result.l", 2, 10, integer=True)
    T = number(res["T"], "result.T", 1, 10**4, integer=True)
    need(isinstance(res["rows"], list) and len(res["rows"]) == len(p["alphas"]), "result.rows",
         "must have one row per α")
    for i, r in enumerate(res["rows"]):
        w = f"result.rows[{i}]"
        keys(r, {"alpha", *_CHECK_KEYS}, w)
        n = number(r["n_vectors"], f"{w}.n_vectors", 1, float("inf"), integer=True)
        for c in ("stops_exact", "stops_bound", "stops_lost", "stops_extra"):
            number(r[c], f"{w}.{c}", 0, n, integer=True)
        for c in ("members_exact", "members_bound", "members_rfstar"):
            number(r[c], f"{w}.{c}", 1, T)
        number(r["max_excess"], f"{w}.max_excess", -1, 1)
        number(r["max_gap"], f"{w}.max_gap", -1, 1e9)
        number(r["members_sem"], f"{w}.members_sem", 0, T)
        need(r["n_draws"] == p["n_draws"], f"{w}.n_draws", "must be the profile's n_draws")
        need(l >= 2, "result.l", "must be at least 2")


def _cell(v):
    return repr(float(v)) if isinstance(v, float) else v


def tables(records, params):
    """``many_classes_check.csv``: per configuration and α; ``many_classes_random.csv``: per random vote vector."""
    by = {r["dataset"]: r["result"] for r in records}
    rows = [{"l": res["l"], "T": res["T"], **{k: _cell(v) for k, v in row.items()}}
            for name in CONFIGS if name in by for res in [by[name]] for row in res["rows"]]
    check_cols = ["l", "T", "alpha", *_CHECK_KEYS]
    out = {"many_classes_check.csv": pd.DataFrame(rows, columns=check_cols)}
    rnd = by.get("random", {"T": None, "rows": []})
    out["many_classes_random.csv"] = pd.DataFrame(
        [{"l": r["l"], "T": rnd["T"], "counts": " ".join(map(str, r["counts"])), "exact": _cell(r["exact"]),
          "bound": _cell(r["bound"]), "gap": _cell(r["gap"])} for r in rnd["rows"]],
        columns=["l", "T", "counts", "exact", "bound", "gap"])
    return out


SUITE = Suite(
    "many-classes", (*CONFIGS, "random"), {"smoke": 1, "book": 1, "paper": 1},
    profile_params({"alphas": (0.95, 0.99), "n_draws": 20_000, "random_T": 101, "random_classes": (10, 26),
                    "random_per_class": 40},
                   n_draws=2_000, random_per_class=5),
    task=task, check=check, tables=tables, smoke_datasets=("l5-T16", "random"), loads_datasets=False)
