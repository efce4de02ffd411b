#!/usr/bin/env python3
"""The budget mode against a known truth, for the chapter "A disagreement budget".

    .venv/bin/python tools/budget_calibration.py [--n-jobs 2] [--variant no_uniform|rescaled] [--classes 3]
    .venv/bin/python tools/budget_calibration.py --oracle

On real data the budget mode (``OptimalRule.from_oob_votes``) can only be
checked on the rows a problem has; here the distribution of a member's class
probabilities is known, so the disagreement a fitted rule will have on all
future rows is computed exactly.  For each two-class problem of Soto et al.
(2016) with at most 1,000 rows (with ``--classes 3``: each three-class one):

1. *The truth.*  A 1,001-tree random forest (scikit-learn defaults, seeded
   from :data:`ensvote.SEED`) is grown on all the rows; the distribution ``G``
   of a member's class probabilities is estimated from its out-of-bag votes
   (about 368 a row) by the deconvolution of
   :func:`ensvote.priors.deconvolved_oob_prior`.  From here on ``G`` is taken
   as the truth.
2. *A dataset.*  As many training rows as the experiment's folds have
   (nine tenths of the problem): each row's ``p`` is drawn from ``G``, its
   number of out-of-bag members of a 101-tree forest from the bootstrap's
   Binomial(101, (1 - 1/n)^n), and its out-of-bag votes from
   Multinomial(that number, ``p``).  With three classes ``p`` is drawn as a
   point of ``G``'s grid (so the rows' own urns are a reweighting of ``G``).
3. *The rule* is ``OptimalRule.from_oob_votes(votes, 101, δ)``, as
   ``HaltingClassifier(rule="optimal", disagreement=δ)`` builds it.
4. *Its disagreement on future rows* is computed exactly under the truth
   (``policy_value(rule, G's urn prior)``), with its expected members; the
   optimum under the truth itself (``OptimalRule(101, δ, prior=truth)``) is
   the reference.  Beside it, the disagreement on the dataset's own rows
   (all of them, each with its own ``p``): what a realized disagreement
   measured on the problem's rows estimates, which the 100 partitions of the
   head-to-head experiment average over their rule fits but not over the rows;
   and the disagreement of the optimum under the truth on those same rows
   (no estimation at all: what the rows alone add).

``N_DATASETS[classes]`` datasets per problem and budget (100 with two
classes; 50 with three, where a budget-mode fit takes about 30 times as
long).  Writes ``book/data/budget_calibration.csv``, one row per
(problem, δ, dataset), for the budget mode as the package builds it by
default.  Two variants take one of its choices back (``VARIANTS``), each
with a file of its own: ``--variant no_uniform`` mixes no uniform prior into
the deconvolved ones (``uniform_rows=0`` of
``ensvote.optimal.cross_validated_budget``;
``book/data/budget_calibration_no_uniform.csv``), and ``--variant rescaled``
also scores the held-out rows under their rescaled out-of-bag votes instead
of their own deconvolved prior (``heldout="rescaled"``;
``book/data/budget_calibration_rescaled.csv``).  With ``--classes 3`` the
names end in ``_three_classes`` before ``.csv``.
A run keeps each finished problem's rows under ``build/budget_calibration/``
and a later run of the same file reads them instead of recomputing them, so
a stopped run resumes at the problem it stopped in (``--restart`` starts
afresh, for instance after a change to the budget mode).
Every draw comes from ``ensvote.experiments.store.task_seed`` (one
SeedSequence per problem and dataset, from :data:`ensvote.SEED`), so the file
is the same bytes on every run.

``--oracle`` writes ``book/data/budget_calibration_oracle.csv`` instead: per
problem (two and three classes) and budget, the optimal policy under the
truth itself, as the files above use it: the expected members and
disagreement of its deterministic table (``optimum_members`` above is the
former) and the expected members of the exact, randomised optimum
(``OptimalRule.optimum_members``), which a deterministic table can miss by a
step when a few vote vectors carry much of the probability.  A minute or two.  About an hour on one core per file with
two classes, two hours with three.
"""

import argparse
import csv
import os
import shutil
from pathlib import Path

import numpy as np
from scipy import stats
from joblib import Parallel, delayed
from sklearn.ensemble import RandomForestClassifier

from ensvote import HaltingClassifier, OptimalRule, datasets, policy_value
from ensvote.optimal import UNIFORM_ROWS
from ensvote.experiments.store import rng_and_ints, task_seed
from ensvote.priors import DECONVOLUTION_RESOLUTION, VoteMixture

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "book" / "data" / "budget_calibration.csv"
#: Each finished problem's rows, per output file, so that a stopped run resumes where it stopped
#: (``build/`` is not committed; ``--restart`` starts afresh).
PARTS = ROOT / "build" / "budget_calibration"
#: The budget mode's settings per variant: the package's defaults, and two of its choices taken back.
VARIANTS = {"default": {"heldout": "deconvolved", "uniform_rows": UNIFORM_ROWS},
            "no_uniform": {"heldout": "deconvolved", "uniform_rows": 0.0},
            "rescaled": {"heldout": "rescaled", "uniform_rows": 0.0}}
#: Per variant, the file written (two classes).
OUTS = {"default": OUT, **{v: OUT.with_name(f"budget_calibration_{v}.csv") for v in VARIANTS if v != "default"}}
#: The same with three classes.
OUTS_THREE = {h: o.with_name(o.stem + "_three_classes.csv") for h, o in OUTS.items()}
#: The optimum under each truth (``--oracle``).
OUT_ORACLE = ROOT / "book" / "data" / "budget_calibration_oracle.csv"
ORACLE_COLUMNS = ["problem", "n_classes", "delta", "table_members", "table_disagreement", "optimum_members"]
T = 101
TRUTH_TREES = 1001
DELTAS = (0.002, 0.005, 0.01, 0.02, 0.05, 0.1)
#: Simulated datasets per problem and budget, by number of classes.
N_DATASETS = {2: 100, 3: 50}
MAX_ROWS = 1000
SUITE = "budget-calibration"
COLUMNS = ["problem", "n_rows", "n_train", "delta", "dataset", "budget", "disagreement", "disagreement_rows", "oracle_rows", "members",
           "optimum_members"]


def problems(classes=2):
    """Problems of Soto et al. (2016) with ``classes`` classes and at most ``MAX_ROWS`` rows, in the suite's order."""
    from ensvote.experiments import soto2016
    cat = datasets.catalog().set_index("name")
    real = [p for p in soto2016.PROBLEMS if p in cat.index and p not in soto2016.SYNTHETIC]
    return [p for p in real if int(cat.loc[p, "n_classes"]) == classes and int(cat.loc[p, "n_samples"]) <= MAX_ROWS]


def truth(problem):
    """``G`` (its ``grid`` and ``weights``) fitted to a 1,001-tree forest's out-of-bag votes of all the rows."""
    X, y = datasets.load(problem)
    _, (seed,) = rng_and_ints(task_seed(SUITE, problem, -1), 1)
    rf = RandomForestClassifier(n_estimators=TRUTH_TREES, random_state=seed, n_jobs=1)
    votes = HaltingClassifier(rf, rule="exact").fit(X, y).oob_votes_  # the votes only: no prior, no table
    mix = VoteMixture(votes[votes.sum(1) > 0], DECONVOLUTION_RESOLUTION[votes.shape[1]])
    return mix, len(y)


def one_dataset(problem, mix, n_rows, rep, prior, oracle, variant="default"):
    rng, (fold_seed,) = rng_and_ints(task_seed(SUITE, problem, rep), 1)
    n = int(round(0.9 * n_rows))
    at = rng.choice(len(mix.grid), size=n_rows, p=mix.weights)  # each row's point of G's grid
    m = rng.binomial(T, (1.0 - 1.0 / n) ** n, size=n)
    if mix.grid.shape[1] == 2:
        p_all = mix.grid[at, 0]
        p = p_all[:n]  # the training rows
        k = rng.binomial(m, p)
        votes = np.column_stack([k, m - k])
        # the dataset's own rows: the urn of a row with class-0 probability p has Binomial(T, p) class-0 votes
        own = stats.binom.pmf(np.arange(T + 1)[:, None], T, p_all[None, :]).mean(axis=1)
        own = own / own.sum()
    else:
        votes = rng.multinomial(m, mix.grid[at[:n]])
        # the dataset's own rows: G reweighted to the rows' grid points
        own = mix.prior(T, weights=np.bincount(at, minlength=len(mix.grid)) / n_rows)
    rows = []
    for delta in DELTAS:
        rule = OptimalRule.from_oob_votes(votes, T, delta, random_state=fold_seed, **VARIANTS[variant])
        v = policy_value(rule, prior)
        d_own = policy_value(rule, own).disagreement
        d_oracle = policy_value(oracle[delta], own).disagreement
        rows.append([problem, n_rows, n, delta, rep, f"{rule.disagreement:.6g}", f"{v.disagreement:.6g}",
                     f"{d_own:.6g}", f"{d_oracle:.6g}", f"{v.members:.6g}", f"{oracle[delta].expected_members:.6g}"])
    return rows


def oracle_rows(problem):
    """The optimum under ``problem``'s truth at every budget: its table and the exact, randomised optimum."""
    mix, _ = truth(problem)
    prior = mix.prior(T)
    out = []
    for delta in DELTAS:
        o = OptimalRule(T, delta, prior=prior)
        out.append([problem, mix.grid.shape[1], delta, f"{o.expected_members:.6g}", f"{o.expected_disagreement:.6g}",
                    f"{o.optimum_members:.6g}"])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-jobs", type=int, default=1)
    ap.add_argument("--problems", default=None, help="comma-separated subset (default: all)")
    ap.add_argument("--classes", type=int, choices=(2, 3), default=2, help="the problems' number of classes")
    ap.add_argument("--variant", choices=list(VARIANTS), default="default",
                    help="the budget mode as the package builds it (default), or with one of its choices taken "
                         "back: no_uniform (no uniform mass), rescaled (also held-out rows scored by their "
                         "rescaled votes)")
    ap.add_argument("--restart", action="store_true",
                    help="recompute the problems an earlier, stopped run of the same file has finished")
    ap.add_argument("--oracle", action="store_true", help=f"write {OUT_ORACLE.name} (the optimum under each truth)")
    args = ap.parse_args()
    if args.oracle:
        jobs = Parallel(n_jobs=args.n_jobs)(delayed(oracle_rows)(p) for p in problems(2) + problems(3))
        with open(OUT_ORACLE, "w", newline="") as f:
            w = csv.writer(f, lineterminator="\n")
            w.writerow(ORACLE_COLUMNS)
            w.writerows(r for rows in jobs for r in rows)
        print("wrote", OUT_ORACLE)
        return
    names = problems(args.classes) if args.problems is None else args.problems.split(",")
    out_path = (OUTS if args.classes == 2 else OUTS_THREE)[args.variant]
    parts = PARTS / out_path.stem
    if args.restart and parts.exists():
        shutil.rmtree(parts)
    parts.mkdir(parents=True, exist_ok=True)
    out = []
    for problem in names:
        part = parts / f"{problem}.csv"
        if part.exists():  # finished by an earlier run of this file: the same rows, the same bytes
            with open(part, newline="") as f:
                out.extend(csv.reader(f))
            print(problem, "read from", part, flush=True)
            continue
        mix, n_rows = truth(problem)
        prior = mix.prior(T)
        oracle = {d: OptimalRule(T, d, prior=prior) for d in DELTAS}
        jobs = Parallel(n_jobs=args.n_jobs)(
            delayed(one_dataset)(problem, mix, n_rows, rep, prior, oracle, args.variant)
            for rep in range(N_DATASETS[args.classes]))
        rows = [r for rows in jobs for r in rows]
        _write(part, rows)
        out.extend(rows)
        print(problem, "done", flush=True)
    _write(out_path, out, header=COLUMNS)
    print("wrote", out_path)


def _write(path, rows, header=None):
    """``rows`` as CSV at ``path``, atomically (a stopped run leaves no half-written file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        if header is not None:
            w.writerow(header)
        w.writerows(rows)
    os.replace(tmp, path)


if __name__ == "__main__":
    main()
