#!/usr/bin/env python3
"""Prediction latency for small batches, as ratios: ensvote against scikit-learn and onnxruntime.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_latency.py [--repeat 200]

Everything is measured in one process on one fitted forest (twonorm, T = 101
trees, HYPER rule with alpha = 0.99): the median latency of ``predict`` on
batches of 1, 10, 100 and 1,000 rows for ``HaltingClassifier``,
``RandomForestClassifier.predict`` and, when ``skl2onnx`` and ``onnxruntime``
are importable, an onnxruntime session of the same forest (one thread).
Printed are ratios (baseline time / ensvote time; above 1 means ensvote is
faster), never asserted: a benchmark, not a test.  Also printed: the
first-call compile time of the compiled loop (:mod:`ensvote.kernel`) in a
fresh subprocess, with numba's on-disk cache emptied first (cold) and then
filled (cached).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import datasets

T = 101
ALPHA = 0.99
SIZES = (1, 10, 100, 1000)


def median_latency(f, X, repeat):
    """Median seconds of ``f(X)`` over ``repeat`` calls (after one warm-up call)."""
    f(X)
    times = np.empty(repeat)
    for i in range(repeat):
        t0 = time.perf_counter()
        f(X)
        times[i] = time.perf_counter() - t0
    return float(np.median(times))


def onnx_predictor(forest, n_features):
    """``predict`` of an onnxruntime session of ``forest`` (one thread), or None if not importable."""
    try:
        import onnxruntime as ort
        from skl2onnx import to_onnx
    except ImportError:
        return None
    model = to_onnx(forest, np.zeros((1, n_features), dtype=np.float32), options={"zipmap": False})
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    return lambda X: sess.run(None, {name: X.astype(np.float32, copy=False)})[0]


_COMPILE = ("import time; t0 = time.perf_counter(); from ensvote import kernel; "
            "t1 = time.perf_counter(); s = kernel.compile_kernels(); "
            "print(f'{s:.3f} {t1 - t0:.3f}')")


def compile_time(cache_dir):
    """Seconds ``kernel.compile_kernels()`` takes in a fresh process with numba's cache in ``cache_dir``."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir)
    out = subprocess.run([sys.executable, "-c", _COMPILE], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.split()[0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=200, help="calls per batch size (median kept)")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error("--repeat must be >= 1")
    rng = np.random.default_rng(ev.SEED)
    X, y = datasets.load("twonorm", n_samples=300 + max(SIZES), random_state=rng)
    Xtr, ytr, Xte = X[:300], y[:300], X[300:]
    clf = ev.HaltingClassifier(RandomForestClassifier(T, random_state=ev.SEED), rule="urn", prior="oob",
                               confidence=ALPHA).fit(Xtr, ytr)
    forest = clf.estimator_
    onnx = onnx_predictor(forest, X.shape[1])
    print(f"twonorm, T = {T}, HYPER alpha = {ALPHA}; median of {args.repeat} calls; "
          "ratio = baseline time / ensvote time (> 1: ensvote faster)")
    head = f"{'rows':>6} {'ensvote us':>11} {'sklearn/ens':>12}"
    if onnx is not None:
        head += f" {'onnx/ens':>9} {'onnx us':>8}"
    print(head)
    for n in SIZES:
        Xb = np.ascontiguousarray(Xte[:n])
        ours = median_latency(clf.predict, Xb, args.repeat)
        skl = median_latency(forest.predict, Xb, max(1, args.repeat // 4))
        line = f"{n:>6} {ours * 1e6:>11.1f} {skl / ours:>12.1f}"
        if onnx is not None:
            ox = median_latency(onnx, Xb, args.repeat)
            line += f" {ox / ours:>9.2f} {ox * 1e6:>8.1f}"
        print(line, flush=True)
    if onnx is None:
        print("(onnxruntime / skl2onnx not importable: no onnxruntime column)")
    tmp = tempfile.mkdtemp(prefix="ensvote_numba_cache_")
    try:
        cold = compile_time(tmp)
        cached = compile_time(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"first-call compile time, fresh process: cold {cold:.2f} s, from numba's cache {cached:.2f} s")


if __name__ == "__main__":
    main()
