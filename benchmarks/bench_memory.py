"""Memory: what HaltingClassifier keeps and what one predict allocates, beside the forest's own predict.

    .venv/bin/python benchmarks/bench_memory.py [--rows 100000] [--trees 101]

On the problems of ``bench_speed.py`` (the same forests, rows and seed), per
problem, for HYPER (the default rule):

* ``forest_arrays_mb``: the flattened forest the compiled loop walks, with
  the node order and (for a forest of small trees) the leaf masks
  (:class:`ensvote.kernel.ForestArrays`, built at ``fit``);
* ``stop_table_mb``: the rule's stop table (0 where the rule needs none or
  its stops go to the memo of the vote vectors reached);
* ``ensvote_peak_mb`` and ``sklearn_peak_mb``: the peak of the memory
  allocated during one ``predict`` of the batch, above what was allocated
  before it (``tracemalloc``, which sees numpy's allocations and those of
  the compiled loop, which numba makes through Python's raw allocator; the
  batch is float32 and C-contiguous, so neither copies it), for ``ensvote`` and for
  ``RandomForestClassifier.predict`` (``n_jobs=1``);
* ``input_mb``: the batch itself.

onnxruntime, oneDAL and YDF allocate outside Python's allocator, where
tracemalloc does not see, so they have no column.  Writes
``results/speed/memory.csv``.
"""

import argparse
import tracemalloc
from pathlib import Path

import numpy as np
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import engine

from _results import write_csv  # beside this script
from bench_speed import RULES, problems

OUT = Path(__file__).resolve().parents[1] / "results" / "speed" / "memory.csv"
FIELDS = ["dataset", "n_classes", "n_rows", "T", "rule", "input_mb", "forest_arrays_mb", "stop_table_mb",
          "ensvote_peak_mb", "sklearn_peak_mb"]
MB = 2.0 ** 20


def peak(f, X):
    """Peak bytes allocated while ``f(X)`` runs, above the bytes allocated before it."""
    f(X)  # once beforehand: what a first call compiles or loads (each batch size's loop) is not the call's memory
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        f(X)
        return tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--trees", type=int, default=101)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = []
    for name, Xtr, ytr, Xte in problems(args.rows, np.random.default_rng(ev.SEED)):
        forest = RandomForestClassifier(args.trees, random_state=ev.SEED).fit(Xtr, ytr)
        X = np.ascontiguousarray(Xte, dtype=np.float32)
        sk = peak(forest.predict, X)
        clf = ev.HaltingClassifier(forest, **RULES["HYPER"]).fit(Xtr, ytr)
        l = len(clf.classes_)
        table = engine.stop_table(clf.rule_, args.trees, l)
        rows.append({"dataset": name, "n_classes": l, "n_rows": len(X), "T": args.trees, "rule": "HYPER",
                     "input_mb": f"{X.nbytes / MB:.3f}",
                     "forest_arrays_mb": f"{clf._ensemble.arrays.nbytes / MB:.3f}",
                     "stop_table_mb": f"{0 if table is None else table.table.nbytes / MB:.3f}",
                     "ensvote_peak_mb": f"{peak(clf.predict, X) / MB:.3f}",
                     "sklearn_peak_mb": f"{sk / MB:.3f}"})
        print(" ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
    write_csv(args.out, FIELDS, rows)


if __name__ == "__main__":
    main()
