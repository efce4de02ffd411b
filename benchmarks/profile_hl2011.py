#!/usr/bin/env python3
"""Where the time of one Hernández-Lobato et al. (2011) task goes, per problem.

    .venv/bin/python benchmarks/profile_hl2011.py [--proxy 1000] [--datasets pima,spam]

Runs realization 0 of every problem of the ``hl2011`` suite through the real
task function (``ensvote.experiments.run_task``) and splits its wall-clock time by timing
wrappers around the few calls that can matter:

- ``fit T``: fitting the two 101-tree ensembles (bagging and random forest);
- ``votes T``: ``HaltingClassifier.member_votes`` on the test rows;
- ``proxy``: the two proxy ensembles that stand in for the infinite ensemble
  (10,000 trees each, grown and voting 500 at a time in
  :func:`ensvote.experiments.hl2011.proxy_votes`);
- ``halt``: every ``halt`` call of the task (stopping rules, the π sweep);
- ``other``: splitting, loading, building the record.

With ``--proxy N`` the proxies have N trees instead of the profile's 10,000 and
the proxy column is scaled to 10,000 trees (it is linear in the number
of trees), so a survey of all problems takes minutes instead of an hour.  The
wrappers only time; they change no result.  Run it on an otherwise idle machine
(pause background experiment runs with ``kill -STOP``).
"""

import argparse
import time
from collections import defaultdict

from sklearn.ensemble import RandomForestClassifier

from ensvote import HaltingClassifier, datasets, experiments
from ensvote.experiments import hl2011

CLOCK = defaultdict(float)


def _timed(owner, name, key_of):
    original = getattr(owner, name)

    def wrapper(*args, **kwargs):
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            CLOCK[key_of(*args)] += time.perf_counter() - t0

    setattr(owner, name, wrapper)


def _kind(forest):
    return "T" if forest.n_estimators == experiments.SUITES["hl2011"].params["paper"]["T"] else "proxy"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proxy", type=int, default=1000, help="proxy trees actually grown (default 1000)")
    ap.add_argument("--datasets", help="comma-separated subset (default: every available problem)")
    args = ap.parse_args()
    params = experiments.SUITES["hl2011"].params["paper"]
    full_proxy = params["proxy"]
    params["proxy"] = args.proxy  # this process only
    scale = full_proxy / args.proxy

    _timed(RandomForestClassifier, "fit", lambda self, *a: f"fit {_kind(self)}")
    _timed(HaltingClassifier, "member_votes", lambda self, *a: f"votes {_kind(self.estimator_)}")
    _timed(hl2011, "proxy_votes", lambda *a: "proxy")
    _timed(hl2011, "halt", lambda *a: "halt")

    names = args.datasets.split(",") if args.datasets else experiments.SUITES["hl2011"].datasets
    cols = ("fit T", "votes T", "proxy", "halt", "other")
    print(f"seconds per task, proxies scaled from {args.proxy} to {full_proxy} trees")
    print(f"{'problem':12s}" + "".join(f"{c:>12s}" for c in cols) + f"{'total':>10s}{'proxy %':>9s}")
    for name in names:
        try:
            if name not in experiments.SYNTHETIC:
                datasets.load(name)
        except FileNotFoundError:
            print(f"{name:12s} not available")
            continue
        CLOCK.clear()
        t0 = time.perf_counter()
        experiments.run_task("hl2011", "paper", name, 0)
        wall = time.perf_counter() - t0
        row = dict(CLOCK)
        row["other"] = wall - sum(row.values())
        row["proxy"] = row.get("proxy", 0.0) * scale
        total = sum(row.get(c, 0.0) for c in cols)
        print(f"{name:12s}" + "".join(f"{row.get(c, 0.0):12.2f}" for c in cols)
              + f"{total:10.1f}{100 * row['proxy'] / total:9.1f}", flush=True)


if __name__ == "__main__":
    main()
