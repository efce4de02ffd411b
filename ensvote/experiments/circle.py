"""Suite ``circle``: Hernández-Lobato, Martínez-Muñoz & Suárez (2011), §2.2 / Fig. 4.

Bagging of 10,000 trees on the circle problem, queried on a 101 x 101 grid
until L(y*|t) > 0.99.
"""

import math

import numpy as np
import pandas as pd
from sklearn.ensemble import RandomForestClassifier

from .. import datasets as _datasets
from ..classifier import HaltingClassifier
from ..rules import InfiniteRule
from .store import keys, need, numbers, rng_and_ints, task_seed
from .suite import Suite, profile_params

__all__ = ["SUITE", "task", "check", "tables"]


def task(dataset, realization, p):
    """One forest of ``n_trees`` on a fresh training sample, halted on every grid point."""
    rng, (s_fit,) = rng_and_ints(task_seed("circle", dataset, realization), 1)
    X, y = _datasets.load("circle", n_samples=p["n_train"], random_state=rng)
    g = np.linspace(-1.0, 1.0, p["grid"])
    gx, gy = np.meshgrid(g, g)
    grid = np.column_stack([gx.ravel(), gy.ravel()])
    rf = RandomForestClassifier(n_estimators=p["n_trees"], max_features=None, random_state=s_fit, n_jobs=1)
    clf = HaltingClassifier(rf, rule=InfiniteRule(p["pi"])).fit(X, y)
    res = clf.halt(grid)
    return {"n_queried": res.n_queried.astype(int).tolist(), "stopped": res.stopped.astype(int).tolist(),
            "label": res.labels.astype(int).tolist()}


def check(res, p):
    """The schema of a result of :func:`task` (ValueError saying what is wrong)."""
    keys(res, {"n_queried", "stopped", "label"}, "result")
    n = p["grid"] ** 2
    nq = numbers(res["n_queried"], "result.n_queried", n, 1, p["n_trees"], integer=True)
    st = numbers(res["stopped"], "result.stopped", n, 0, 1, integer=True)
    numbers(res["label"], "result.label", n, 0, 1, integer=True)
    need(all(s or q == p["n_trees"] for q, s in zip(nq, st)), "result.n_queried",
          "must be n_trees where the vote did not stop")



def tables(records, params):
    """Fig. 4 (``fig4_grid.csv``): per grid point, the mean members queried where the vote stopped."""
    rs = [r for r in records if r["dataset"] == "circle"]
    n = np.array([r["result"]["n_queried"] for r in rs], dtype=float)
    st = np.array([r["result"]["stopped"] for r in rs], dtype=bool)
    g = np.linspace(-1, 1, int(round(math.sqrt(n.shape[1]))))
    gx, gy = np.meshgrid(g, g)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_n = np.where(st.any(0), np.where(st, n, 0).sum(0) / st.sum(0), np.nan)
        df = pd.DataFrame({"x": gx.ravel(), "y": gy.ravel(), "mean_trees": mean_n,
                           "log10_mean_trees": np.log10(mean_n),
                           "frac_exceeded": 1.0 - st.mean(0), "n_realizations": len(rs)})
    return {"fig4_grid.csv": df}


SUITE = Suite(
    "circle", ("circle",), {"smoke": 2, "book": 100, "paper": 100},
    profile_params({"n_trees": 10_000, "grid": 101, "pi": 0.99, "n_train": 300}, n_trees=500, grid=21),
    task=task, check=check, tables=tables, smoke_datasets=("circle",))
