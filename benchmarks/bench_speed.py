#!/usr/bin/env python3
"""Wall-clock speed of halting against the fastest engine that runs the same forest, as ratios.

    .venv/bin/python benchmarks/bench_speed.py [--rows 100000] [--repeat 5] [--trees 101] [--quick] [--out DIR]

Everything is measured in one process, on one machine, on one fitted forest
per problem: ``HaltingClassifier.predict`` against four engines that walk
every tree of that same forest (``pip install -e .[bench]``):

``sklearn``
    the forest's own ``RandomForestClassifier.predict``;
``onnx``
    an onnxruntime session of the forest (``skl2onnx``);
``onedal``
    Intel oneDAL's tree inference (daal4py, shipped in ``scikit-learn-intelex``):
    the forest is loaded through treelite (``treelite.sklearn.import_model``)
    and ``daal4py.mb.convert_model``, the route daal4py documents for
    scikit-learn forests. It loads a two-class forest as a regressor of the
    share of trees voting for the second class (the label is that share
    > 1/2); daal4py refuses multi-class random forests, so on those the
    column is empty;
``ydf``
    Yggdrasil Decision Forests, ``ydf.from_sklearn(forest)`` (the label is
    the argmax of its class probabilities).

onnxruntime and skl2onnx are required; oneDAL and ydf are optional: when one
is missing or cannot load a forest its column is empty and the reason is
printed once.  Before timing, each engine's labels are compared with the
forest's ``predict`` on the benchmark rows (section ``agreement``); a share
below 1 is printed as a warning (the conversion is then not the same forest)
and the engine is still timed.  Candidate and engines are run in turn and the
best of ``--repeat`` runs of each is kept (the median for the single-row
latencies).  Printed, and written to ``results/speed/benchmark.csv`` with the
machine in ``results/speed/machine.json`` (``--out`` names another
directory), are ratios (engine time / ensvote time, above 1: ensvote is
faster) beside the tree-count speed-up, never bare seconds, apart from the
single-row latencies and the compile time.  The book chapter
``book/speed.ipynb`` reads these files; nothing here asserts a time (a
benchmark, not a test).

Columns of the timed sections (``batch``, ``cores``, ``batch_size``,
``single_row``): ``vs_sklearn``, ``vs_onnx``, ``vs_onedal``, ``vs_ydf`` (empty
where the engine did not run), ``fastest_engine`` (the engine with the
smallest time of those that ran) and ``vs_fastest`` (its time / ensvote's).

Sections (column ``section`` of the CSV):

``agreement``
    Per problem and engine (column ``rule``), one thread: ``value`` is the
    share of the benchmark rows on which the engine's label equals the
    forest's ``predict`` (1 for a faithful conversion).
``batch``
    ``--rows`` rows, one thread everywhere (ensvote ``n_jobs=1``, the forest
    ``n_jobs=1``, onnxruntime one intra-op thread, ``daal4py.daalinit(1)``,
    ydf ``num_threads=1``): the ``vs_*`` columns beside ``tree_speedup``
    (``T / mean trees queried``), per problem and rule; rule ``full walk``
    is ensvote querying every tree (``FixedRule(T)``, ``tree_speedup`` 1).
    For the soft votes and the full walk ``value`` is the share of rows whose
    label is not the forest's ``predict`` (0 for the exact soft stop and the
    full walk, at most δ for ``soft δ=1%``, the per-row bound).  A rule that
    refuses the forest (a table too large at ``--trees``) is left out, and
    said so; without HYPER the sections below are left out for that problem.
``per_node``
    The full walk's time per tree decision, per problem (column ``rule``: an
    engine, or ``ensvote``): ``value`` is the batch's time over the inner
    nodes the rows pass on their way to their leaves (summed over rows and
    trees: the decisions any engine must take), in nanoseconds; for
    ``ensvote steps`` it is ensvote's time over the levels its loop walks
    (eight rows side by side, each group to the longest path of its eight and
    at least ``ForestArrays.steps`` levels: a leaf is its own child, see
    ``decisions``), so the two ``ensvote`` rows differ by the steps walked
    beyond a row's leaf; for
    ``ensvote nodes tested`` (a forest of small trees, tested by leaf masks
    instead of walked: ``ensvote.kernel``), over the inner nodes tested
    (every inner node of each tree, for each row).
``cores``
    The same batch (HYPER rule) with ``n_jobs`` threads (column ``n_jobs``):
    ``value`` is ensvote's time with one thread / with ``n_jobs``; the
    engines also get ``n_jobs`` threads for the ``vs_*`` columns.  The best
    of ``CORE_ROUNDS`` x ``--repeat`` rounds and of as many more as fit in
    ``CORE_SECONDS`` seconds: on a virtual machine a second core's speed
    changes from one second to the next (on the 2-vCPU VM of
    ``results/speed``, consecutive rounds of five gave 1.2x to 1.9x for the
    same call, with no steal time reported), and the best of rounds spread
    over a few seconds is a moment when both cores ran.
``batch_size``
    Batches of 1 .. ``--rows`` rows (HYPER), one thread: the ``vs_*``
    columns.
``single_row``
    One request at a time, one thread: ``value`` is ensvote's median latency
    in microseconds, the ``vs_*`` columns the engines' median over
    ensvote's.
``halt_matrix``
    :func:`ensvote.halt` on a precomputed vote matrix: ``value`` = vote-checks
    (members queried, summed over rows) per second, in millions.
``table``
    Lookup-table build time, cold cache: ``value`` = budget / time (>= 1
    meets the budget).
``compile``
    First-call compile time of the compiled loop (:mod:`ensvote.kernel`) in a
    fresh process, with numba's on-disk cache empty (``cold``) and filled
    (``cached``): ``value`` in seconds.
"""

import argparse
import csv
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numba
import numpy as np
import scipy
import sklearn
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import datasets

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "results" / "speed"
T = 101
ALPHA = 0.99
SOFT_DELTA = 0.01
FULL_WALK = "full walk"  # ensvote querying every tree for every row: FixedRule(T), the engines' own work
RULES = {  # label -> HaltingClassifier keyword arguments (FULL_WALK's rule is FixedRule(T), built in main)
    "HYPER": dict(rule="urn", prior="oob"),
    "SIBA": dict(rule="urn", prior="uniform"),
    "infinite": dict(rule="infinite"),
    "exact": dict(rule="exact"),
    "soft": dict(voting="soft"),  # the forest's own soft vote, stopped exactly (same labels as its predict)
    # ... stopped with a per-row bound: a label unlike predict's with probability at most δ on every row
    "soft δ=1%": dict(voting="soft", disagreement=SOFT_DELTA),
    FULL_WALK: {},
}
#: the engines that walk the whole forest, in the order of their columns
ENGINES = ("sklearn", "onnx", "onedal", "ydf")
FIELDS = ["section", "dataset", "rule", "n_rows", "n_classes", "n_jobs", "tree_speedup",
          *(f"vs_{e}" for e in ENGINES), "fastest_engine", "vs_fastest", "value"]
#: real-data test rows: held-out rows drawn with replacement plus Gaussian noise of this
#: fraction of each feature's standard deviation, so that the 10^5 rows are distinct
JITTER = 0.1
BATCH_SIZES = (1, 10, 100, 1_000, 10_000, 100_000)
#: The ``cores`` section's rounds, at least this many times ``--repeat`` and at least
#: ``CORE_SECONDS`` seconds of them (see the module docstring).
CORE_ROUNDS = 4
CORE_SECONDS = 3.0


def clock(f):
    t0 = time.perf_counter()
    out = f()
    return time.perf_counter() - t0, out


def interleaved(fs, repeat, seconds=0.0):
    """Best-of-``repeat`` time of each callable, the callables run in turn (and more rounds until
    ``seconds`` have passed)."""
    best = [np.inf] * len(fs)
    outs = [None] * len(fs)
    start = time.perf_counter()
    k = 0
    while k < repeat or time.perf_counter() - start < seconds:
        for i, f in enumerate(fs):
            t, outs[i] = clock(f)
            best[i] = min(best[i], t)
        k += 1
    return best, outs


def median_latency(fs, xs, repeat):
    """Median seconds of one call ``f(x)``, per callable, over ``repeat`` rounds of all rows ``xs``.

    Each round runs one callable on every row before the next callable's
    turn, so each is timed warm (as a server answering one request after
    another), and the rounds interleave the callables.
    """
    times = [[] for _ in fs]
    for k in range(repeat + 1):
        for i, f in enumerate(fs):
            for x in xs:
                t, _ = clock(lambda: f(x))
                if k:  # round 0 warms up
                    times[i].append(t)
    return np.array([np.median(t) for t in times])


def onnx_predictor(forest, n_features, threads=1):
    """``predict`` (labels) of an onnxruntime session of ``forest`` with ``threads`` intra-op threads."""
    import onnxruntime as ort
    from skl2onnx import to_onnx

    model = to_onnx(forest, np.zeros((1, n_features), dtype=np.float32), options={"zipmap": False})
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    # no busy-waiting threads after a call: they would take a core from whatever runs next
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return lambda X: sess.run(None, {name: np.asarray(X, dtype=np.float32)})[0]


def onedal_predictor(forest, n_features, threads=1):
    """``predict`` (labels) of Intel oneDAL on ``forest``, loaded via treelite, with ``threads`` threads.

    ``daal4py.mb.convert_model`` takes no scikit-learn forest; its documented
    route is a treelite model, which it loads as a regressor of the share of
    trees voting for the second class (two classes only: it refuses
    multi-class random forests).  oneDAL's thread count is process-wide
    (``daal4py.daalinit``): set on each call when it differs.
    """
    import daal4py
    import treelite.sklearn

    with warnings.catch_warnings():  # "... not based on gradient boosting. Will output a regression model"
        warnings.simplefilter("ignore", UserWarning)
        model = daal4py.mb.convert_model(treelite.sklearn.import_model(forest))  # multi-class: TypeError
    if len(forest.classes_) != 2 or not model.is_regressor_:
        raise TypeError("daal4py did not load the forest as the regressor of the second class's vote share "
                        "that it documents for two-class random forests")
    classes = forest.classes_

    def predict(X):
        if daal4py.num_threads() != threads:
            daal4py.daalinit(threads)
        return classes[(model.predict(np.asarray(X, dtype=np.float32)) > 0.5).astype(np.intp)]

    return predict


def ydf_predictor(forest, n_features, threads=1):
    """``predict`` (labels) of Yggdrasil Decision Forests on ``forest`` (``ydf.from_sklearn``), ``threads`` threads."""
    import ydf

    model = ydf.from_sklearn(forest)
    classes = forest.classes_

    def predict(X):
        p = model.predict({"features": np.asarray(X, dtype=np.float32)}, num_threads=threads)
        # two classes: the second class's probability; more: one probability per class (ties: the first, as predict)
        return classes[(p > 0.5).astype(np.intp) if p.ndim == 1 else p.argmax(axis=1)]

    return predict


def release_threads(n):
    """Let the process use ``n`` threads again after oneDAL ran with fewer.

    ``daal4py.daalinit(k)`` sets a process-wide limit that also holds numba's
    threads (and so ensvote's ``n_jobs``) to ``k``: after oneDAL's one-thread
    timings, ensvote with ``n_jobs=2`` ran on one thread (measured: 0.98x
    n_jobs=1 after ``daalinit(1)``, 2.1x after ``daalinit(2)``).
    """
    if "daal4py" in sys.modules:
        sys.modules["daal4py"].daalinit(n)


_LOADERS = {"onnx": onnx_predictor, "onedal": onedal_predictor, "ydf": ydf_predictor}


def engines(forest, n_features, threads, missing):
    """The engines that run ``forest`` (fitted with ``n_jobs=threads``): ``{name: predict}`` in ``ENGINES`` order.

    An engine that is not installed or cannot load the forest is left out;
    its reason is printed the first time it comes up (``missing``: the
    reasons printed so far).
    """
    out = {"sklearn": forest.predict}
    for name, load in _LOADERS.items():
        try:
            out[name] = load(forest, n_features, threads)
        except Exception as e:  # noqa: BLE001 -- any failure to load leaves the column empty, said once
            why = f"not installed ({e.name}: pip install -e '.[bench]')" if isinstance(e, ImportError) \
                else f"{type(e).__name__}: {e}"
            if (name, why) not in missing:
                missing.add((name, why))
                print(f"  [{name}] left out: {why}", flush=True)
    return out


def decisions(forest, X, steps, masked=False):
    """``(needed, walked)``: the inner nodes the rows of ``X`` pass on their way to their leaves, summed over
    rows and trees, and the work of ensvote's full walk in its own unit.  Walked (``ensvote.kernel``), a
    group of eight rows of a block (``kernel.BLOCK`` rows, one thread) goes down tree ``j`` ``steps[j]``
    levels (``ForestArrays.steps``), then on until all eight are at their leaves: eight times the larger of
    ``steps[j]`` and the eight's longest path (a last group of two to seven rows filled up to eight with
    copies of its last row, a last row alone its own path); for a forest ``masked`` (walked by leaf masks),
    the inner nodes tested (rows x the trees' inner nodes summed)."""
    from ensvote import kernel

    needed = walked = 0
    for j, est in enumerate(forest.estimators_):
        t = est.tree_
        depth = np.zeros(t.node_count, dtype=np.int64)
        for node in range(t.node_count):  # a child's index is above its parent's
            if t.children_left[node] >= 0:
                depth[t.children_left[node]] = depth[t.children_right[node]] = depth[node] + 1
        path = depth[est.apply(X)]
        needed += int(path.sum())
        if masked:
            walked += len(X) * int((t.children_left >= 0).sum())
            continue
        for a in range(0, len(X), kernel.BLOCK):
            p = path[a:a + kernel.BLOCK]
            r = len(p) % 8
            walked += 8 * int(np.maximum(p[:len(p) - r].reshape(-1, 8).max(axis=1), steps[j]).sum())
            if r == 1:  # a last row alone: its own path
                walked += int(p[-1])
            elif r:  # a last group of 2-7 rows, filled up to eight
                walked += 8 * max(int(p[-r:].max()), int(steps[j]))
    return needed, walked


def versus(times, names, t_ev):
    """The ``vs_*`` columns: each engine's time over ensvote's ``t_ev``, and the fastest engine's."""
    cols = {f"vs_{n}": t / t_ev for n, t in zip(names, times)}
    i = int(np.argmin(times))
    return dict(cols, fastest_engine=names[i], vs_fastest=times[i] / t_ev)


def shown(cols):
    """The ``vs_*`` columns as printed: one number per engine (``-`` where it did not run), then the fastest."""
    vs = " ".join(f"{cols[f'vs_{e}']:10.2f}" if f"vs_{e}" in cols else f"{'-':>10s}" for e in ENGINES)
    return f"{vs} {cols['vs_fastest']:10.2f} {cols['fastest_engine']:>7s}"


def problems(n_rows, rng):
    """(name, X_train, y_train, X_test) with ``n_rows`` test rows each.

    Synthetic problems draw fresh test rows.  A real dataset is split 2/3 : 1/3;
    its test rows are held-out rows drawn with replacement, jittered by
    ``JITTER`` standard deviations.
    """
    X, y = datasets.load("twonorm", n_samples=300 + n_rows, random_state=rng)
    yield "twonorm", X[:300], y[:300], X[300:]
    X, y = datasets.load("waveform", n_samples=300 + n_rows, random_state=rng)
    yield "waveform", X[:300], y[:300], X[300:]
    for name in ("spam", "pima"):
        X, y = datasets.load(name)
        idx = rng.permutation(len(y))
        tr, te = idx[: 2 * len(y) // 3], idx[2 * len(y) // 3:]
        Xte = X[te][rng.integers(0, len(te), n_rows)]
        Xte = Xte + rng.normal(0.0, JITTER, Xte.shape) * X[te].std(axis=0)
        yield name, X[tr], y[tr], Xte
    # adversarial: labels independent of the features, so every row is borderline
    X = rng.random((2000, 5))
    yield "adversarial", X, rng.integers(0, 2, 2000), rng.random((n_rows, 5))


_COMPILE = "from ensvote import kernel; print(f'{kernel.compile_kernels():.3f}')"


def compile_time(cache_dir):
    """Seconds ``kernel.compile_kernels()`` takes in a fresh process with numba's cache in ``cache_dir``."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", _COMPILE], env=env, capture_output=True, text=True, check=True,
                         cwd=tempfile.gettempdir())
    return float(out.stdout.split()[0])


def version(dist):
    """The installed version of the distribution ``dist`` (an optional package), or ``None``."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as dist_version

    try:
        return dist_version(dist)
    except PackageNotFoundError:
        return None


def machine(args, cores):
    cpu = platform.processor() or ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    import onnxruntime
    import skl2onnx

    return {"cpu": cpu, "logical_cores": os.cpu_count(),
            "affinity_cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "scikit-learn": sklearn.__version__, "numba": numba.__version__,
            "onnxruntime": onnxruntime.__version__, "skl2onnx": skl2onnx.__version__,
            # oneDAL (daal4py ships in scikit-learn-intelex) loaded through treelite; ydf; None: not installed
            "scikit-learn-intelex": version("scikit-learn-intelex"), "daal": version("daal"),
            "treelite": version("treelite"), "ydf": version("ydf"),
            "ensvote": getattr(ev, "__version__", "dev"), "platform": platform.platform(),
            "n_jobs": 1, "cores_n_jobs": cores, "T": args.trees, "alpha": ALPHA, "rows": args.rows,
            "repeat": args.repeat, "cores_rounds": CORE_ROUNDS * args.repeat,
            "cores_seconds": CORE_SECONDS,
            "command": " ".join(["benchmarks/bench_speed.py"] + (argv_shown(args)))}


def argv_shown(args):
    out = [] if args.out is None else [f"--out {args.out.resolve().relative_to(ROOT) if args.out.resolve().is_relative_to(ROOT) else args.out}"]
    return [f"--rows {args.rows}", f"--repeat {args.repeat}"] + ([f"--trees {args.trees}"] if args.trees != T else []) + out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--trees", type=int, default=T, help=f"trees per forest (default {T}); the table section "
                    f"keeps T = {T}")
    ap.add_argument("--quick", action="store_true",
                    help="10^4 rows, 2 repeats, no output files unless --out is given")
    ap.add_argument("--out", type=Path, default=None,
                    help=f"directory for benchmark.csv and machine.json (default {OUT.relative_to(ROOT)})")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.repeat = 10_000, 2
    if args.rows < 1 or args.repeat < 1 or args.trees < 1:
        ap.error("--rows, --repeat and --trees must be >= 1")
    out_dir = args.out or (None if args.quick else OUT)  # --quick writes nothing unless told where
    try:
        import onnxruntime  # noqa: F401
        import skl2onnx  # noqa: F401
    except ImportError:
        sys.exit("the benchmark needs onnxruntime and skl2onnx: pip install -e '.[bench]'")
    from ensvote import kernel

    n_trees = args.trees
    cores = sorted({2, kernel.resolve_n_jobs(-1)})
    rng = np.random.default_rng(ev.SEED)
    rows_out = []
    missing = set()  # (engine, reason) already printed

    def emit(**kw):
        rows_out.append({k: kw.get(k, "") for k in FIELDS})

    def forest_for(n_jobs):
        return RandomForestClassifier(n_estimators=n_trees, random_state=ev.SEED, n_jobs=n_jobs)

    print(f"T={n_trees}, alpha={ALPHA}, {args.rows} rows, best of {args.repeat}; "
          "ratios = engine time / ensvote time (> 1: ensvote faster); fastest = the fastest engine that ran")
    head = " ".join(f"{'vs ' + e:>10s}" for e in ENGINES) + f" {'vs fastest':>10s} {'fastest':>7s}"
    for name, Xtr, ytr, Xte in problems(args.rows, rng):
        l = len(np.unique(ytr))
        forest = forest_for(1).fit(Xtr, ytr)
        base = engines(forest, Xte.shape[1], 1, missing)
        names = list(base)
        # every engine's labels against the forest's predict on the benchmark rows: 1 for a faithful conversion
        ref = forest.predict(Xte)
        for e, f in list(base.items())[1:]:  # sklearn is the reference
            agree = float(np.mean(f(Xte) == ref))
            emit(section="agreement", dataset=name, rule=e, n_rows=len(Xte), n_classes=l, n_jobs=1, value=agree)
            print(f"{name:12s} {e:7s} labels equal to the forest's predict on {agree:.4%} of the rows"
                  + ("" if agree == 1 else "  <-- WARNING: not the same forest's labels"), flush=True)
        print(f"{'dataset':12s} {'rule':9s} {'trees':>6s} {head}")
        clfs = {}
        for label, kw in RULES.items():
            if label == FULL_WALK:
                kw = dict(rule=ev.FixedRule(n_trees))
            # the same fitted forest under each rule: fit once, then only the rule differs
            try:  # a rule may refuse a forest this large (--trees): its rows are left out, said so
                clf = ev.HaltingClassifier(forest_for(1), confidence=ALPHA, **kw).fit(Xtr, ytr)
                clf.predict(Xte[:10])  # compile / load the loop outside the timing
            except ValueError as e:
                print(f"{name:12s} {label:9s} left out: {e}", flush=True)
                continue
            assert all((a.tree_.threshold == b.tree_.threshold).all()
                       for a, b in zip(clf.estimator_.estimators_, forest.estimators_))
            clfs[label] = clf
            t, outs = interleaved([*(lambda f=f: f(Xte) for f in base.values()), lambda: clf.predict(Xte)],
                                  args.repeat)
            unlike = float(np.mean(outs[-1] != ref))  # share of labels unlike the forest's predict
            if label == FULL_WALK and unlike:  # every tree: the forest's own vote (a tie may break otherwise)
                print(f"  WARNING: the full walk's labels differ from the forest's predict on {unlike:.4%} "
                      "of the rows", flush=True)
            elif "voting" in kw and "disagreement" not in kw:  # stopped exactly: the forest's labels, row for row
                assert unlike == 0.0, f"{name}: soft labels differ from the forest's predict"
            elif "voting" in kw:  # the per-row bound: a few labels may differ, fewer than δ of the rows
                assert unlike <= kw["disagreement"], f"{name}: soft bound above δ"
            sp = clf.halt(Xte).speedup
            cols = versus(t[:-1], names, t[-1])
            emit(section="batch", dataset=name, rule=label, n_rows=len(Xte), n_classes=l, n_jobs=1,
                 tree_speedup=sp, value=unlike if "voting" in kw or label == FULL_WALK else None, **cols)
            print(f"{name:12s} {label:9s} {sp:6.2f} {shown(cols)}", flush=True)
            if label == FULL_WALK:  # the time per decision, each engine's and ensvote's, and ensvote's per unit
                masked = clf._ensemble.arrays.mask is not None  # small trees: tested by leaf masks, not walked
                needed, walked = decisions(forest, Xte, clf._ensemble.arrays.steps, masked)
                unit = "ensvote nodes tested" if masked else "ensvote steps"
                for e, te in [*zip(names, t[:-1]), ("ensvote", t[-1])]:
                    emit(section="per_node", dataset=name, rule=e, n_rows=len(Xte), n_classes=l, n_jobs=1,
                         value=1e9 * te / needed)
                emit(section="per_node", dataset=name, rule=unit, n_rows=len(Xte), n_classes=l,
                     n_jobs=1, value=1e9 * t[-1] / walked)
                print(f"{name:12s} ns per decision: " + ", ".join(
                    f"{e} {1e9 * te / needed:.2f}" for e, te in [*zip(names, t[:-1]), ("ensvote", t[-1])])
                    + f"; ensvote per {unit[8:]} {1e9 * t[-1] / walked:.2f} ({walked / needed:.2f} per "
                    "decision)", flush=True)

        if "HYPER" not in clfs:
            print(f"{name:12s} the HYPER sections (cores, batch_size, single_row, halt_matrix) left out", flush=True)
            continue
        clf = clfs["HYPER"]
        sp = clf.halt(Xte).speedup
        # cores: the same batch with n_jobs threads, for ensvote and the engines
        for n_jobs in cores:
            forest_n = forest_for(n_jobs).fit(Xtr, ytr)
            base_n = engines(forest_n, Xte.shape[1], n_jobs, missing)
            par = ev.HaltingClassifier(forest_for(None), confidence=ALPHA, n_jobs=n_jobs,
                                       **RULES["HYPER"]).fit(Xtr, ytr)
            par.predict(Xte[:1000])
            # ensvote with one thread and with n_jobs, in turn; then the engines with n_jobs threads
            release_threads(n_jobs)
            t, outs = interleaved([lambda: clf.predict(Xte), lambda: par.predict(Xte)],
                                  CORE_ROUNDS * args.repeat, CORE_SECONDS)
            assert np.array_equal(outs[0], outs[1])  # identical labels for any n_jobs
            tb, outs = interleaved([lambda f=f: f(Xte) for f in base_n.values()], CORE_ROUNDS * args.repeat,
                                   CORE_SECONDS)
            for e, o in zip(base_n, outs):
                if not np.array_equal(o, ref):
                    print(f"  [{e}] WARNING: with {n_jobs} threads, labels unlike the forest's predict on "
                          f"{np.mean(o != ref):.4%} of the rows", flush=True)
            cols = versus(tb, list(base_n), t[1])
            emit(section="cores", dataset=name, rule="HYPER", n_rows=len(Xte), n_classes=l, n_jobs=n_jobs,
                 tree_speedup=sp, value=t[0] / t[1], **cols)
            print(f"{name:12s} HYPER     n_jobs={n_jobs}: {t[0] / t[1]:5.2f}x n_jobs=1; against the engines "
                  f"with {n_jobs} threads: {shown(cols)}", flush=True)
        # batch sizes
        if name in ("twonorm", "spam", "adversarial"):
            for n in BATCH_SIZES:
                if n > len(Xte):
                    break
                Xb = np.ascontiguousarray(Xte[:n])
                reps = max(args.repeat, min(200, 20_000 // n))
                t, _ = interleaved([*(lambda f=f: f(Xb) for f in base.values()), lambda: clf.predict(Xb)], reps)
                sp_n = clf.halt(Xb).speedup
                cols = versus(t[:-1], names, t[-1])
                emit(section="batch_size", dataset=name, rule="HYPER", n_rows=n, n_classes=l, n_jobs=1,
                     tree_speedup=sp_n, **cols)
                print(f"{name:12s} HYPER     batch of {n:6d}: tree-count {sp_n:6.2f}, {shown(cols)}", flush=True)
        # single row, one request at a time
        one = [np.ascontiguousarray(Xte[i:i + 1]) for i in range(200)]
        med = median_latency([*base.values(), clf.predict], one, args.repeat)
        nq = np.array([clf.halt(x).n_queried[0] for x in one])
        cols = versus(med[:-1], names, med[-1])
        emit(section="single_row", dataset=name, rule="HYPER", n_rows=1, n_classes=l, n_jobs=1,
             tree_speedup=n_trees / nq.mean(), value=1e6 * med[-1], **cols)
        print(f"{name:12s} HYPER     single row: {1e6 * med[-1]:6.1f} us; "
              + ", ".join(f"{e} {1e6 * m:7.1f} us" for e, m in zip(names, med[:-1]))
              + f"; ratios {shown(cols)}", flush=True)
        # halt() on a precomputed vote matrix
        votes = clf.member_votes(Xte)
        for label in [r for r in ("HYPER", "SIBA", "exact") if r in clfs]:
            rule = clfs[label].rule_
            t, outs = interleaved([lambda: ev.halt(votes, rule)], args.repeat)
            checks = outs[0].n_queried.sum()
            emit(section="halt_matrix", dataset=name, rule=label, n_rows=len(votes), n_classes=l, n_jobs=1,
                 tree_speedup=outs[0].speedup, value=checks / t[0] / 1e6)
            print(f"{name:12s} {label:9s} halt() on the vote matrix: {checks / t[0] / 1e6:6.1f} million "
                  "vote-checks/s", flush=True)

    # lookup tables, cold cache
    def cold_tstar():
        ev.clear_caches()
        return ev.InfiniteRule(ALPHA).t_star(10_000)

    def cold_urn(l):
        def f():
            ev.clear_caches()
            return ev.UrnRule(T, ALPHA).table(l)
        return f

    for label, f, budget in (("InfiniteRule t* T=10000", cold_tstar, 0.1),
                             ("UrnRule l=2 T=101", cold_urn(2), 0.05),
                             ("UrnRule l=3 T=101", cold_urn(3), 2.0)):
        t, _ = interleaved([f], args.repeat)
        emit(section="table", dataset="", rule=label, value=budget / t[0])
        print(f"table {label:24s}: budget / time = {budget / t[0]:8.1f} (>= 1 meets the budget)")
    # first-call compile time in a fresh process
    tmp = tempfile.mkdtemp(prefix="ensvote_numba_cache_")
    try:
        for label in ("cold", "cached"):
            s = compile_time(tmp)
            emit(section="compile", rule=label, value=s)
            print(f"compile, fresh process, {label}: {s:.2f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        with open(out_dir / "benchmark.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, FIELDS, lineterminator="\n")
            w.writeheader()
            for row in rows_out:
                w.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items()})
        (out_dir / "machine.json").write_text(json.dumps(machine(args, cores), indent=2) + "\n")
        print(f"wrote {out_dir / 'benchmark.csv'} and {out_dir / 'machine.json'}")


if __name__ == "__main__":
    main()
