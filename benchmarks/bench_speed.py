#!/usr/bin/env python3
"""Wall-clock speed of halting against scikit-learn and onnxruntime on the same forest, as ratios.

    .venv/bin/python benchmarks/bench_speed.py [--rows 100000] [--repeat 5] [--quick]

Everything is measured in one process, on one machine, on one fitted forest
per problem: ``HaltingClassifier.predict`` against the forest's own
``RandomForestClassifier.predict`` and against an onnxruntime session of the
same forest (``skl2onnx``, ``pip install -e .[bench]``).  Candidate and
baselines are run in turn and the best of ``--repeat`` runs of each is kept
(the median for the single-row latencies).  Printed, and written to
``results/speed/benchmark.csv`` with the machine in
``results/speed/machine.json``, are ratios (baseline time / ensvote time,
above 1: ensvote is faster) beside the tree-count speed-up, never bare
seconds, apart from the single-row latencies and the compile time.  The book
chapter ``book/speed.ipynb`` reads these files; nothing here asserts a time
(a benchmark, not a test).

Sections (column ``section`` of the CSV):

``batch``
    ``--rows`` rows, one thread everywhere (ensvote ``n_jobs=1``, the forest
    ``n_jobs=1``, onnxruntime one intra-op thread): ``vs_sklearn`` and
    ``vs_onnx`` beside ``tree_speedup`` (``T / mean trees queried``), per
    problem and rule; for the soft votes ``value`` is the share of rows whose
    label is not the forest's ``predict`` (0 for the exact soft stop, at most
    δ for ``soft δ=1%``, the per-row bound).
``cores``
    The same batch (HYPER rule) with ``n_jobs`` threads (column ``n_jobs``):
    ``value`` is ensvote's time with one thread / with ``n_jobs``; the
    baselines also get ``n_jobs`` threads for ``vs_sklearn`` / ``vs_onnx``.
``batch_size``
    Batches of 1 .. ``--rows`` rows (HYPER), one thread: ``vs_sklearn`` and
    ``vs_onnx``.
``single_row``
    One request at a time, one thread: ``value`` is ensvote's median latency
    in microseconds, ``vs_sklearn`` / ``vs_onnx`` the baselines' median over
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
RULES = {  # label -> HaltingClassifier keyword arguments
    "HYPER": dict(rule="urn", prior="oob"),
    "SIBA": dict(rule="urn", prior="uniform"),
    "infinite": dict(rule="infinite"),
    "exact": dict(rule="exact"),
    "soft": dict(voting="soft"),  # the forest's own soft vote, stopped exactly (same labels as its predict)
    # ... stopped with a per-row bound: a label unlike predict's with probability at most δ on every row
    "soft δ=1%": dict(voting="soft", disagreement=SOFT_DELTA),
}
FIELDS = ["section", "dataset", "rule", "n_rows", "n_classes", "n_jobs", "tree_speedup", "vs_sklearn",
          "vs_onnx", "value"]
#: real-data test rows: held-out rows drawn with replacement plus Gaussian noise of this
#: fraction of each feature's standard deviation, so that the 10^5 rows are distinct
JITTER = 0.1
BATCH_SIZES = (1, 10, 100, 1_000, 10_000, 100_000)


def clock(f):
    t0 = time.perf_counter()
    out = f()
    return time.perf_counter() - t0, out


def interleaved(fs, repeat):
    """Best-of-``repeat`` time of each callable, the callables run in turn."""
    best = [np.inf] * len(fs)
    outs = [None] * len(fs)
    for _ in range(repeat):
        for i, f in enumerate(fs):
            t, outs[i] = clock(f)
            best[i] = min(best[i], t)
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
            "ensvote": getattr(ev, "__version__", "dev"), "platform": platform.platform(),
            "n_jobs": 1, "cores_n_jobs": cores, "T": T, "alpha": ALPHA, "rows": args.rows, "repeat": args.repeat,
            "command": " ".join(["benchmarks/bench_speed.py"] + (argv_shown(args)))}


def argv_shown(args):
    return [f"--rows {args.rows}", f"--repeat {args.repeat}"]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="10^4 rows, 2 repeats, no output files")
    args = ap.parse_args(argv)
    if args.quick:
        args.rows, args.repeat = 10_000, 2
    if args.rows < 1 or args.repeat < 1:
        ap.error("--rows and --repeat must be >= 1")
    try:
        import onnxruntime  # noqa: F401
        import skl2onnx  # noqa: F401
    except ImportError:
        sys.exit("the benchmark needs onnxruntime and skl2onnx: pip install -e '.[bench]'")
    from ensvote import kernel

    cores = sorted({2, kernel.resolve_n_jobs(-1)})
    rng = np.random.default_rng(ev.SEED)
    rows_out = []

    def emit(**kw):
        rows_out.append({k: kw.get(k, "") for k in FIELDS})

    print(f"T={T}, alpha={ALPHA}, {args.rows} rows, best of {args.repeat}; "
          "ratios = baseline time / ensvote time (> 1: ensvote faster)")
    print(f"{'dataset':12s} {'rule':9s} {'tree-count':>10s} {'vs sklearn':>10s} {'vs onnx':>8s}")
    for name, Xtr, ytr, Xte in problems(args.rows, rng):
        l = len(np.unique(ytr))
        forest = RandomForestClassifier(n_estimators=T, random_state=ev.SEED, n_jobs=1).fit(Xtr, ytr)
        onnx = onnx_predictor(forest, Xte.shape[1])
        clfs = {}
        for label, kw in RULES.items():
            # the same fitted forest under each rule: fit once, then only the rule differs
            clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=T, random_state=ev.SEED, n_jobs=1),
                                       confidence=ALPHA, **kw).fit(Xtr, ytr)
            assert all((a.tree_.threshold == b.tree_.threshold).all()
                       for a, b in zip(clf.estimator_.estimators_, forest.estimators_))
            clfs[label] = clf
            clf.predict(Xte[:10])  # compile / load the loop outside the timing
            t, outs = interleaved([lambda: forest.predict(Xte), lambda: onnx(Xte), lambda: clf.predict(Xte)],
                                  args.repeat)
            unlike = float(np.mean(outs[2] != outs[0]))  # share of labels unlike the forest's predict
            if "voting" in kw and "disagreement" not in kw:  # stopped exactly: the forest's own labels, row for row
                assert unlike == 0.0, f"{name}: soft labels differ from the forest's predict"
            elif "voting" in kw:  # the per-row bound: a few labels may differ, fewer than δ of the rows
                assert unlike <= kw["disagreement"], f"{name}: soft bound above δ"
            sp = clf.halt(Xte).speedup
            emit(section="batch", dataset=name, rule=label, n_rows=len(Xte), n_classes=l, n_jobs=1,
                 tree_speedup=sp, vs_sklearn=t[0] / t[2], vs_onnx=t[1] / t[2],
                 value=unlike if "voting" in kw else None)
            print(f"{name:12s} {label:9s} {sp:10.2f} {t[0] / t[2]:10.2f} {t[1] / t[2]:8.2f}", flush=True)

        clf = clfs["HYPER"]
        sp = clf.halt(Xte).speedup
        # cores: the same batch with n_jobs threads, for ensvote and the baselines
        for n_jobs in cores:
            forest_n = RandomForestClassifier(n_estimators=T, random_state=ev.SEED, n_jobs=n_jobs).fit(Xtr, ytr)
            onnx_n = onnx_predictor(forest_n, Xte.shape[1], threads=n_jobs)
            par = ev.HaltingClassifier(RandomForestClassifier(n_estimators=T, random_state=ev.SEED),
                                       confidence=ALPHA, n_jobs=n_jobs, **RULES["HYPER"]).fit(Xtr, ytr)
            par.predict(Xte[:1000])
            # ensvote with one thread and with n_jobs, in turn; then the baselines with n_jobs threads
            t, outs = interleaved([lambda: clf.predict(Xte), lambda: par.predict(Xte)], args.repeat)
            assert np.array_equal(outs[0], outs[1])  # identical labels for any n_jobs
            t += interleaved([lambda: forest_n.predict(Xte), lambda: onnx_n(Xte)], args.repeat)[0]
            emit(section="cores", dataset=name, rule="HYPER", n_rows=len(Xte), n_classes=l, n_jobs=n_jobs,
                 tree_speedup=sp, vs_sklearn=t[2] / t[1], vs_onnx=t[3] / t[1], value=t[0] / t[1])
            print(f"{name:12s} HYPER     n_jobs={n_jobs}: {t[0] / t[1]:5.2f}x n_jobs=1; "
                  f"vs sklearn (n_jobs={n_jobs}) {t[2] / t[1]:6.2f}, vs onnx ({n_jobs} threads) {t[3] / t[1]:6.2f}",
                  flush=True)
        # batch sizes
        if name in ("twonorm", "spam", "adversarial"):
            for n in BATCH_SIZES:
                if n > len(Xte):
                    break
                Xb = np.ascontiguousarray(Xte[:n])
                reps = max(args.repeat, min(200, 20_000 // n))
                t, _ = interleaved([lambda: forest.predict(Xb), lambda: onnx(Xb), lambda: clf.predict(Xb)], reps)
                sp_n = clf.halt(Xb).speedup
                emit(section="batch_size", dataset=name, rule="HYPER", n_rows=n, n_classes=l, n_jobs=1,
                     tree_speedup=sp_n, vs_sklearn=t[0] / t[2], vs_onnx=t[1] / t[2])
                print(f"{name:12s} HYPER     batch of {n:6d}: tree-count {sp_n:6.2f}, vs sklearn "
                      f"{t[0] / t[2]:7.2f}, vs onnx {t[1] / t[2]:6.2f}", flush=True)
        # single row, one request at a time
        one = [np.ascontiguousarray(Xte[i:i + 1]) for i in range(200)]
        med = median_latency([forest.predict, onnx, clf.predict], one, args.repeat)
        nq = np.array([clf.halt(x).n_queried[0] for x in one])
        emit(section="single_row", dataset=name, rule="HYPER", n_rows=1, n_classes=l, n_jobs=1,
             tree_speedup=T / nq.mean(), vs_sklearn=med[0] / med[2], vs_onnx=med[1] / med[2], value=1e6 * med[2])
        print(f"{name:12s} HYPER     single row: {1e6 * med[2]:6.1f} us; sklearn {1e6 * med[0]:7.1f} us "
              f"({med[0] / med[2]:5.1f}x), onnx {1e6 * med[1]:6.1f} us ({med[1] / med[2]:5.2f}x)", flush=True)
        # halt() on a precomputed vote matrix
        votes = clf.member_votes(Xte)
        for label in ("HYPER", "SIBA", "exact"):
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

    if not args.quick:
        OUT.mkdir(parents=True, exist_ok=True)
        with open(OUT / "benchmark.csv", "w", newline="") as fh:
            w = csv.DictWriter(fh, FIELDS, lineterminator="\n")
            w.writeheader()
            for row in rows_out:
                w.writerow({k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in row.items()})
        (OUT / "machine.json").write_text(json.dumps(machine(args, cores), indent=2) + "\n")
        print(f"wrote {OUT / 'benchmark.csv'} and {OUT / 'machine.json'}")


if __name__ == "__main__":
    main()
