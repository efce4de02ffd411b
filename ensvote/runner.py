"""Resumable experiment runner for the papers' experiments.

A *suite* is a set of independent tasks, one per ``(dataset, realization)``.
Every task is seeded from ``(SEED, suite, dataset, realization)`` alone, so any
shard, order, backend or machine gives the same record.  Each finished task is
written atomically (temporary file + rename) as a small gzip-compressed JSON
record under ``<out>/<suite>/<profile>/tasks/<dataset>/r<realization>.json.gz``;
re-running skips finished tasks; :func:`aggregate` turns the records into the
CSV tables the book renders, with the column names of the published tables.

Every record is checked whenever it is read (:func:`read_record`): the file must
be one gzip member whose CRC and length check out, with nothing after it,
holding canonical JSON with the schema of its suite and values in range, that
names the suite, profile, dataset, realization and parameters its path and
profile say.  :func:`run` moves a bad record aside (``*.bad``),
reports it and computes the task again; :func:`aggregate` refuses bad records,
and refuses an incomplete record set unless ``allow_missing=True``, naming what
is missing.

Suites
------
``hl2011``   Hernández-Lobato et al. (2011), §4: bagging and random forests of 101 trees, stopping rule
             L(y*|t) > π = 0.99, the 10,000-tree ensemble as proxy of the
             infinite one (Tables 2-3), and the π sweep of Fig. 6.
``circle``   Hernández-Lobato et al. (2011), §2.2 / Fig. 4: bagging of 10,000 trees on the circle
             problem, queried on a 101 x 101 grid until L(y*|t) > 0.99.
``soto2016`` Soto et al. (2016), §3: random forests of 101 trees; RF*, SIBA, HYPER,
             the Monte Carlo (and exact) expected number of trees, and the
             calibration of Fig. 1 for α in {0.999, 0.995, 0.99, 0.95}.
``headtohead`` beyond both papers: on the partitions and forests of ``soto2016``,
             every stopping rule's parameter swept (fixed size, infinite-ensemble
             rule, urn rule, HYPER, the optimal rule for a disagreement budget,
             a margin rule); task code in :mod:`ensvote.headtohead`.  The
             ``book`` profile runs five problems (``book_datasets``).

Profiles: ``smoke`` (seconds; what notebooks run live), ``book`` (what the book
shows), ``paper`` (the papers' protocol: 100 realizations).

Bagging of unpruned CART trees is run as ``RandomForestClassifier(max_features=None)``:
each tree is a CART tree grown on a bootstrap sample with every feature
considered at every split, which is bagging (the test suite checks tree by tree
that it equals ``DecisionTreeClassifier`` fitted on the same bootstrap sample).
"""

import gzip
import hashlib
import json
import math
import os
import re
import threading
import time
import uuid
import warnings
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import StratifiedKFold

from . import datasets
from ._utils import SEED
from .classifier import HaltingClassifier
from .engine import halt
from .priors import expected_queries
from .rules import ExactRule, FixedRule, InfiniteRule, UrnRule

__all__ = ["SUITES", "PROFILES", "run", "aggregate", "task_seed", "run_task", "list_tasks", "compare_with_published",
           "read_record", "check_record", "record_path", "scan_records", "RecordError", "RecordSetError", "IncompleteRecordsError",
           "RecordWarning"]

PROFILES = ("smoke", "book", "paper")
SYNTHETIC = ("led", "ringnorm", "threenorm", "twonorm", "waveform")

# dataset name in ensvote -> problem name as printed in the paper
HL2011_PROBLEMS = {
    "breast": "breast", "glass": "glass", "heart": "heart", "led": "led", "liver": "liver",
    "new-thyroid": "new-thyroid", "pima": "pima", "ringnorm": "ringnorm", "spam": "spam",
    "threenorm": "threenorm", "twonorm": "twonorm", "vehicle": "vehicle", "vowel": "vowel",
    "waveform": "waveform", "wine": "wine",
}
SOTO2016_PROBLEMS = {
    "australian": "Australian", "breast": "Breast", "pima": "Diabetes",
    "echocardiogram": "Echocardiogram", "german": "German", "heart": "Heart",
    "horse-colic": "Horse-colic", "ionosphere": "Ionosphere", "labor": "Labor", "liver": "Liver",
    "mushroom": "Mushroom", "new-thyroid": "New-thyroid", "ringnorm": "Ringnorm", "sonar": "Sonar",
    "spam": "Spam", "threenorm": "Threenorm", "tic-tac-toe": "Tic-tac-toe", "twonorm": "Twonorm",
    "votes": "Votes", "waveform": "Waveform", "wine": "Wine",
}
PI_GRID = tuple(round(0.70 + 0.01 * i, 2) for i in range(30))  # 0.70 .. 0.99 (Fig. 6)
ALPHAS = (0.999, 0.995, 0.99, 0.95)  # Fig. 1 of Soto et al. (2016)


@dataclass(frozen=True)
class Suite:
    name: str
    datasets: tuple
    realizations: dict  # profile -> int
    params: dict  # profile -> dict
    smoke_datasets: tuple = field(default=())
    book_datasets: tuple = field(default=())  # a subset for the book profile (default: all)

    def dataset_list(self, profile):
        if profile == "book" and self.book_datasets:
            return self.book_datasets
        return self.smoke_datasets if profile == "smoke" else self.datasets


def _profile_params(full, **smoke):
    """The same parameters for ``book`` and ``paper``; ``smoke`` overrides a few to run in seconds."""
    return {"smoke": {**full, **smoke}, "book": dict(full), "paper": dict(full)}


SUITES = {
    "hl2011": Suite(
        "hl2011", tuple(HL2011_PROBLEMS), {"smoke": 1, "book": 10, "paper": 100},
        _profile_params({"T": 101, "proxy": 10_000, "pi": 0.99, "n_test_synthetic": 1000},
                        proxy=500, n_test_synthetic=300),
        smoke_datasets=("pima", "twonorm")),
    "circle": Suite(
        "circle", ("circle",), {"smoke": 2, "book": 100, "paper": 100},
        _profile_params({"n_trees": 10_000, "grid": 101, "pi": 0.99, "n_train": 300}, n_trees=500, grid=21),
        smoke_datasets=("circle",)),
    "soto2016": Suite(
        "soto2016", tuple(SOTO2016_PROBLEMS), {"smoke": 2, "book": 100, "paper": 100},
        _profile_params({"T": 101, "alpha": 0.99, "n_mc": 10_000, "n_test_synthetic": 1000},
                        n_mc=2000, n_test_synthetic=300),
        smoke_datasets=("sonar", "votes")),
    "headtohead": Suite(
        "headtohead", tuple(SOTO2016_PROBLEMS), {"smoke": 2, "book": 10, "paper": 100},
        _profile_params({"T": 101, "n_test_synthetic": 1000, "fs_grid": tuple(range(1, 102, 2)),
                         "alpha_grid": (0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995, 0.9999),
                         "delta_grid": (0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001, 0.0005, 0.0002, 0.0001),
                         "margin_grid": tuple(range(1, 31)) + (35, 40, 50), "prior_alphas": (0.95, 0.99, 0.999),
                         "target_pcts": (1.0, 0.1)},
                        n_test_synthetic=300, fs_grid=(1, 11, 51, 101), alpha_grid=(0.9, 0.99, 0.999),
                        delta_grid=(0.02, 0.01, 0.001), margin_grid=(1, 5, 15), prior_alphas=(0.99,)),
        smoke_datasets=("sonar", "votes"), book_datasets=("pima", "spam", "twonorm", "waveform", "votes")),
}


# --------------------------------------------------------------------------
# seeding and records
# --------------------------------------------------------------------------
def task_seed(suite, dataset, realization):
    """The task's SeedSequence: a function of ``(SEED, suite, dataset, realization)`` only."""
    digest = hashlib.sha256(f"{suite}/{dataset}/{int(realization)}".encode()).digest()
    return np.random.SeedSequence([SEED, int.from_bytes(digest[:8], "little")])


def _rng_and_ints(seq, n):
    rng = np.random.default_rng(seq)
    return rng, [int(v) for v in rng.integers(0, 2**31 - 1, size=n)]


def record_path(out, suite, profile, dataset, realization):
    return Path(out) / suite / profile / "tasks" / dataset / f"r{int(realization):03d}.json.gz"


class RecordError(ValueError):
    """A task record that cannot be trusted: unreadable, malformed, or not the task its path names."""

    def __init__(self, path, reason):
        self.path, self.reason = Path(path), reason
        super().__init__(f"bad record {path}: {reason}")


class RecordSetError(ValueError):
    """The records of a suite/profile cannot be tabulated (none, or bad ones)."""


class IncompleteRecordsError(RecordSetError):
    """Records are missing; ``missing`` maps each dataset to its missing realizations."""

    def __init__(self, message, missing):
        self.missing = missing
        super().__init__(message)


class RecordWarning(UserWarning):
    """A bad record was found and set aside (run), or tables were made from an incomplete set."""


_GZIP_MAGIC = b"\x1f\x8b"
#: Largest decompressed record accepted (the largest, a circle record, is about 70 kB).
_MAX_RECORD_BYTES = 64 * 2**20
_RECORD_KEYS = {"suite", "profile", "dataset", "realization", "params", "result"}
_RECORD_NAME = re.compile(r"r(\d+)\.json\.gz")


def _encode(payload):
    """The canonical JSON bytes of a record (sorted keys, no spaces, no NaN)."""
    return json.dumps(payload, sort_keys=True, separators=(",", ":"), allow_nan=False).encode()


def _write_atomic(path, payload):
    data = _encode(payload)
    path.parent.mkdir(parents=True, exist_ok=True)
    # unique per process and call: concurrent writers never share a temporary file
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        with open(tmp, "wb") as fh:
            with gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="") as gz:
                gz.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _decode(raw):
    """The record dict in ``raw`` (the bytes of a record file); ValueError saying what is wrong."""
    if raw[:2] != _GZIP_MAGIC:
        raise ValueError("not gzip data" if raw else "empty file")
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        data = d.decompress(raw, _MAX_RECORD_BYTES)
    except zlib.error as exc:
        raise ValueError(f"corrupt gzip data ({exc})") from None
    if d.unconsumed_tail:
        raise ValueError(f"more than {_MAX_RECORD_BYTES} bytes of JSON")
    if not d.eof:
        raise ValueError("truncated gzip data")
    if d.unused_data:
        raise ValueError(f"{len(d.unused_data)} stray byte(s) after the gzip data")

    def no_constant(name):
        raise ValueError(f"non-finite number {name}")

    try:
        rec = json.loads(data.decode("utf-8"), parse_constant=no_constant)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"not valid JSON ({exc})") from None
    if _encode(rec) != data:
        raise ValueError("JSON is not in the canonical form the runner writes (sorted keys, no spaces)")
    return rec


def _task_of_path(path):
    """``(suite, profile, dataset, realization)`` named by a path ``.../SUITE/PROFILE/tasks/DATASET/rNNN.json.gz``.

    None if the path does not follow that layout; ValueError if only its file name is wrong.
    """
    parts = Path(path).parts
    if len(parts) < 5 or parts[-3] != "tasks" or parts[-5] not in SUITES or parts[-4] not in PROFILES:
        return None
    m = _RECORD_NAME.fullmatch(parts[-1])
    if m is None:
        raise ValueError(f"file name {parts[-1]!r} is not rNNN.json.gz")
    task = (parts[-5], parts[-4], parts[-2], int(m.group(1)))
    if record_path("", *task).name != parts[-1]:
        raise ValueError(f"file name {parts[-1]!r} should be {record_path('', *task).name!r}")
    return task


def read_record(path, task=None):
    """Read one task record and check it; return it as a dict.

    The file must be one gzip member (CRC and length verified, nothing after
    it) holding canonical JSON, as :func:`run` writes it, with the schema of
    its suite and values in range.  ``task``
    ``(suite, profile, dataset, realization)`` is the task the record must be;
    by default it is read from the path when the path follows the layout
    ``SUITE/PROFILE/tasks/DATASET/rNNN.json.gz``.  The record's ``params`` must
    be its profile's parameters.

    Raises
    ------
    RecordError
        Naming the path and what is wrong (a ValueError).
    """
    path = Path(path)
    try:
        if task is None:
            task = _task_of_path(path)
        if path.is_dir():
            raise ValueError("a directory, not a file")
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ValueError(f"cannot be read ({exc.strerror or exc})") from None
        rec = _decode(raw)
        check_record(rec, task)
    except ValueError as exc:
        raise RecordError(path, str(exc)) from None
    return rec


def _is_int(x):
    return isinstance(x, int) and not isinstance(x, bool)


def _is_num(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _need(cond, where, what):
    if not cond:
        raise ValueError(f"{where} {what}")


def _keys(obj, keys, where):
    _need(isinstance(obj, dict), where, f"must be an object, got {type(obj).__name__}")
    if set(obj) != set(keys):
        extra, lacking = sorted(set(obj) - set(keys)), sorted(set(keys) - set(obj))
        raise ValueError(f"{where} has " + "; ".join(
            x for x in (f"unexpected key(s) {extra}" if extra else "", f"no key(s) {lacking}" if lacking else "") if x))


def _number(x, where, lo, hi, integer=False):
    _need(_is_int(x) if integer else _is_num(x), where,
          f"must be {'an integer' if integer else 'a finite number'}, got {x!r:.40}")
    slack = 0 if integer else 1e-9 * max(1, abs(hi) if math.isfinite(hi) else 1)  # rounding of float means
    _need(lo - slack <= x <= hi + slack, where, f"= {x!r} is outside [{lo}, {hi}]")
    return x


def _numbers(xs, where, n, lo, hi, integer=False):
    _need(isinstance(xs, list) and len(xs) == n, where, f"must be a list of {n} numbers")
    types = set(map(type, xs))
    if types <= ({int} if integer else {int, float}) and (
            integer or bool(np.isfinite(np.asarray(xs, dtype=float)).all())) and (not xs or lo <= min(xs)
                                                                                   and max(xs) <= hi):
        return xs
    for i, x in enumerate(xs):  # the first offending entry, for the message
        _number(x, f"{where}[{i}]", lo, hi, integer)
    return xs


def _check_hl2011(res, p):
    T = p["T"]
    _keys(res, {"n_train", "n_test", "bagging", "rf"}, "result")
    _number(res["n_train"], "result.n_train", 1, math.inf, integer=True)
    _number(res["n_test"], "result.n_test", 1, math.inf, integer=True)
    base = {"pct_test_instances", "error_inf_all", "error_full101_all", "pi_sweep"}
    halted = {"trees_ib", "n_fs", "disagree_fs", "disagree_ib", "error_fs", "error_ib", "error_inf"}
    for ens in ("bagging", "rf"):
        r, w = res[ens], f"result.{ens}"
        _need(isinstance(r, dict), w, "must be an object")
        pct = _number(r.get("pct_test_instances"), f"{w}.pct_test_instances", 0, 100)
        _keys(r, base | halted if pct > 0 else base, w)
        for k in sorted(r):
            if k.startswith(("error_", "disagree_")):
                _number(r[k], f"{w}.{k}", 0, 100)
        sweep = _numbers(r["pi_sweep"], f"{w}.pi_sweep", len(PI_GRID), 0, 1)
        _need(all(a >= b for a, b in zip(sweep, sweep[1:])), f"{w}.pi_sweep", "must not increase with π")
        if p["pi"] == PI_GRID[-1]:
            _need(abs(100.0 * sweep[-1] - pct) <= 1e-9, f"{w}.pct_test_instances",
                  f"= {pct} disagrees with pi_sweep at π = {p['pi']}")
        if pct > 0:
            trees = _number(r["trees_ib"], f"{w}.trees_ib", 1, T)
            _need(_number(r["n_fs"], f"{w}.n_fs", 1, T, integer=True) == math.ceil(trees), f"{w}.n_fs",
                  "must be trees_ib rounded up")


def _check_circle(res, p):
    _keys(res, {"n_queried", "stopped", "label"}, "result")
    n = p["grid"] ** 2
    nq = _numbers(res["n_queried"], "result.n_queried", n, 1, p["n_trees"], integer=True)
    st = _numbers(res["stopped"], "result.stopped", n, 0, 1, integer=True)
    _numbers(res["label"], "result.label", n, 0, 1, integer=True)
    _need(all(s or q == p["n_trees"] for q, s in zip(nq, st)), "result.n_queried",
          "must be n_trees where the vote did not stop")


def _check_soto2016(res, p):
    T = p["T"]
    pct = ("error_rf", "error_siba", "error_hyper", "disagree_siba", "disagree_hyper")
    trees = ("trees_rfstar", "trees_siba", "trees_hyper", "trees_mc_estimate")
    _keys(res, {"n_train", "n_test", "n_classes", *pct, *trees, "trees_mc_sem", "trees_exact_estimate",
                "prior", "calibration"}, "result")
    _number(res["n_train"], "result.n_train", 1, math.inf, integer=True)
    _number(res["n_test"], "result.n_test", 1, math.inf, integer=True)
    l = _number(res["n_classes"], "result.n_classes", 2, math.inf, integer=True)
    for k in pct:
        _number(res[k], f"result.{k}", 0, 100)
    for k in trees:
        _number(res[k], f"result.{k}", 1, T)
    _number(res["trees_mc_sem"], "result.trees_mc_sem", 0, T)
    if l == 2:
        _number(res["trees_exact_estimate"], "result.trees_exact_estimate", 1, T)
        prior = _numbers(res["prior"], "result.prior", T + 1, 0, 1)
        _need(abs(sum(prior) - 1) <= 1e-6, "result.prior", "must sum to 1")
    else:
        _need(res["trees_exact_estimate"] is None, "result.trees_exact_estimate", f"must be null for {l} classes")
        _need(res["prior"] is None, "result.prior", f"must be null for {l} classes")
    cal = res["calibration"]
    _need(isinstance(cal, list) and len(cal) == len(ALPHAS), "result.calibration",
          f"must be a list of {len(ALPHAS)} objects")
    for i, (c, a) in enumerate(zip(cal, ALPHAS)):
        w = f"result.calibration[{i}]"
        _keys(c, {"alpha", "n_fixed", "disagree_hyper", "disagree_siba", "disagree_fixed", "trees_hyper",
                  "trees_siba"}, w)
        _need(c["alpha"] == a and not isinstance(c["alpha"], bool), f"{w}.alpha", f"must be {a}")
        for k in ("disagree_hyper", "disagree_siba", "disagree_fixed"):
            _number(c[k], f"{w}.{k}", 0, 100)
        for k in ("trees_hyper", "trees_siba"):
            _number(c[k], f"{w}.{k}", 1, T)
        _need(_number(c["n_fixed"], f"{w}.n_fixed", 1, T, integer=True) == max(1, int(round(c["trees_hyper"]))),
              f"{w}.n_fixed", "must be trees_hyper rounded")
        if a == p["alpha"]:  # the same halts as the headline columns
            for k in ("disagree_hyper", "disagree_siba", "trees_hyper", "trees_siba"):
                _need(c[k] == res[k], f"{w}.{k}", f"must equal result.{k} (α = {a})")


def _check_headtohead(res, p):
    from .headtohead import check_result

    check_result(res, p)


_CHECKS = {"hl2011": _check_hl2011, "circle": _check_circle, "soto2016": _check_soto2016,
           "headtohead": _check_headtohead}


def _check_task(suite, profile, dataset, r, who):
    _need(suite in SUITES, who, f"names an unknown suite {suite!r:.60}")
    _need(profile in PROFILES, who, f"names an unknown profile {profile!r:.60}")
    s = SUITES[suite]
    _need(isinstance(dataset, str) and dataset in s.datasets, who,
          f"names dataset {dataset!r:.60}, not one of suite {suite!r}")
    n = s.realizations[profile]
    _need(_is_int(r) and 0 <= r < n, who, f"names realization {r!r:.60}, outside 0..{n - 1} of profile {profile!r}")


def check_record(rec, task=None):
    """Check a record's schema and values; with ``task = (suite, profile, dataset, realization)`` also its identity.

    Raises ValueError saying what is wrong.  The record's ``params`` must be its
    profile's parameters, its realization within its profile's range and its
    dataset one of its suite's.
    """
    _keys(rec, _RECORD_KEYS, "the record")
    if task is not None:
        _check_task(*task, "the task")
        for key, want in zip(("suite", "profile", "dataset", "realization"), task):
            _need(rec[key] == want and type(rec[key]) is type(want), "the record",
                  f"says {key}={rec[key]!r:.60}, but it is the record of {key}={want!r}")
    suite, profile, dataset, r = (rec[k] for k in ("suite", "profile", "dataset", "realization"))
    _check_task(suite, profile, dataset, r, "the record")
    s = SUITES[suite]
    _need(isinstance(rec["params"], dict) and _encode(rec["params"]) == _encode(s.params[profile]), "the record",
          f"has params {rec['params']!r:.200}, but profile {profile!r} has {s.params[profile]!r}")
    try:
        _CHECKS[suite](rec["result"], s.params[profile])
    except (TypeError, KeyError, AttributeError) as exc:  # a malformed value deep inside
        raise ValueError(f"result is malformed ({type(exc).__name__}: {exc})") from None


def _available(dataset):
    """True: every dataset ships with ensvote.  Loading a real one verifies it, so a
    missing or damaged vendored file stops the run with an error naming the file
    (FileNotFoundError, ChecksumError) instead of being skipped as unavailable."""
    if dataset not in SYNTHETIC and dataset != "circle":
        datasets.load(dataset)
    return True


def _split_holdout(dataset, rng, n_test_synthetic):
    """Hernández-Lobato et al. (2011), §4: real data 2/3 train, 1/3 test; synthetic 300 train / n_test test."""
    if dataset in SYNTHETIC:
        Xtr, ytr = datasets.load(dataset, n_samples=300, random_state=rng)
        Xte, yte = datasets.load(dataset, n_samples=n_test_synthetic, random_state=rng)
        return Xtr, ytr, Xte, yte
    X, y = datasets.load(dataset)
    idx = rng.permutation(len(y))
    n_tr = int(round(2 * len(y) / 3))
    return X[idx[:n_tr]], y[idx[:n_tr]], X[idx[n_tr:]], y[idx[n_tr:]]


def _member_labels(clf, X):
    return clf.classes_[clf.member_votes(X)]


def _proxy_votes(Xtr, ytr, Xte, max_features, n_trees, seed, chunk=500):
    """Vote counts of an ``n_trees`` ensemble, grown ``chunk`` trees at a time (bounded memory)."""
    classes = np.unique(ytr)
    counts = np.zeros((len(Xte), len(classes)), dtype=np.int64)
    seeds = np.random.default_rng(seed).integers(0, 2**31 - 1, size=math.ceil(n_trees / chunk))
    for c, s in enumerate(seeds):
        k = min(chunk, n_trees - c * chunk)
        rf = RandomForestClassifier(n_estimators=k, max_features=max_features, random_state=int(s), n_jobs=1)
        clf = HaltingClassifier(rf, rule="exact").fit(Xtr, ytr)
        v = clf.member_votes(Xte)
        for j in range(len(classes)):
            counts[:, j] += (v == j).sum(axis=1)
    return classes, counts


# --------------------------------------------------------------------------
# task functions
# --------------------------------------------------------------------------
def _task_hl2011(dataset, realization, p):
    rng, (s_bag, s_rf, s_pbag, s_prf) = _rng_and_ints(task_seed("hl2011", dataset, realization), 4)
    Xtr, ytr, Xte, yte = _split_holdout(dataset, rng, p["n_test_synthetic"])
    T, pi = p["T"], p["pi"]
    out = {"n_train": int(len(ytr)), "n_test": int(len(yte))}
    for ens, mf, s_ens, s_proxy in (("bagging", None, s_bag, s_pbag), ("rf", "sqrt", s_rf, s_prf)):
        rf = RandomForestClassifier(n_estimators=T, max_features=mf, random_state=s_ens, n_jobs=1)
        clf = HaltingClassifier(rf, rule=InfiniteRule(pi)).fit(Xtr, ytr)
        votes = clf.member_votes(Xte)
        n_cls = len(clf.classes_)
        classes, inf_counts = _proxy_votes(Xtr, ytr, Xte, mf, p["proxy"], s_proxy)
        inf_lab = classes[np.argmax(inf_counts, axis=1)]
        ib = halt(votes, InfiniteRule(pi), n_classes=n_cls)
        an = ib.stopped
        ib_lab = clf.classes_[ib.labels]
        rec = {"pct_test_instances": 100.0 * float(an.mean())}
        if an.any():
            n_fs = int(math.ceil(float(ib.n_queried[an].mean())))
            fs_lab = clf.classes_[halt(votes, FixedRule(n_fs), n_classes=n_cls).labels]
            rec.update({
                "trees_ib": float(ib.n_queried[an].mean()), "n_fs": n_fs,
                "disagree_fs": 100.0 * float(np.mean(fs_lab[an] != inf_lab[an])),
                "disagree_ib": 100.0 * float(np.mean(ib_lab[an] != inf_lab[an])),
                "error_fs": 100.0 * float(np.mean(fs_lab[an] != yte[an])),
                "error_ib": 100.0 * float(np.mean(ib_lab[an] != yte[an])),
                "error_inf": 100.0 * float(np.mean(inf_lab[an] != yte[an])),
            })
        rec["error_inf_all"] = 100.0 * float(np.mean(inf_lab != yte))
        rec["error_full101_all"] = 100.0 * float(np.mean(
            clf.classes_[halt(votes, FixedRule(T), n_classes=n_cls).labels] != yte))
        rec["pi_sweep"] = [float(halt(votes, InfiniteRule(q), n_classes=n_cls).stopped.mean()) for q in PI_GRID]
        out[ens] = rec
    return out


def _task_circle(dataset, realization, p):
    rng, (s_fit,) = _rng_and_ints(task_seed("circle", dataset, realization), 1)
    X, y = datasets.load("circle", n_samples=p["n_train"], random_state=rng)
    g = np.linspace(-1.0, 1.0, p["grid"])
    gx, gy = np.meshgrid(g, g)
    grid = np.column_stack([gx.ravel(), gy.ravel()])
    rf = RandomForestClassifier(n_estimators=p["n_trees"], max_features=None, random_state=s_fit, n_jobs=1)
    clf = HaltingClassifier(rf, rule=InfiniteRule(p["pi"])).fit(X, y)
    res = clf.halt(grid)
    return {"n_queried": res.n_queried.astype(int).tolist(), "stopped": res.stopped.astype(int).tolist(),
            "label": res.labels.astype(int).tolist()}


def _split_soto(dataset, realization, n_test_synthetic):
    """Soto et al. (2016), §3: 10 x 10-fold CV for real data (stratified), random sampling for synthetic."""
    if dataset in SYNTHETIC:
        rng, _ = _rng_and_ints(task_seed("soto2016", dataset, realization), 1)
        Xtr, ytr = datasets.load(dataset, n_samples=300, random_state=rng)
        Xte, yte = datasets.load(dataset, n_samples=n_test_synthetic, random_state=rng)
        return Xtr, ytr, Xte, yte
    rep, fold = divmod(int(realization), 10)
    X, y = datasets.load(dataset)
    # the fold assignment depends on the repetition only, so the 10 folds' tasks share it
    _, (s_cv,) = _rng_and_ints(task_seed("soto2016-cv", dataset, rep), 1)
    tr, te = list(StratifiedKFold(10, shuffle=True, random_state=s_cv).split(X, y))[fold]
    return X[tr], y[tr], X[te], y[te]


def _task_soto2016(dataset, realization, p):
    rng, (s_fit, s_mc) = _rng_and_ints(task_seed("soto2016", dataset, realization), 2)
    Xtr, ytr, Xte, yte = _split_soto(dataset, realization, p["n_test_synthetic"])
    T, alpha = p["T"], p["alpha"]
    rf = RandomForestClassifier(n_estimators=T, random_state=s_fit, n_jobs=1)
    clf = HaltingClassifier(rf, rule="urn", prior="oob", confidence=alpha).fit(Xtr, ytr)
    prior = clf.prior_
    votes = clf.member_votes(Xte)
    l = len(clf.classes_)
    lab = clf.classes_
    full = halt(votes, FixedRule(T), n_classes=l)
    full_lab = lab[full.labels]
    star = halt(votes, ExactRule(T), n_classes=l)
    siba = halt(votes, UrnRule(T, alpha), n_classes=l)
    hyper_rule = UrnRule(T, alpha, prior=prior)
    hyper = halt(votes, hyper_rule, n_classes=l)
    mc, mc_sem = expected_queries(hyper_rule, prior, n_samples=p["n_mc"], random_state=s_mc, return_sem=True)
    exact = expected_queries(hyper_rule, prior, method="exact") if l == 2 else None
    rec = {
        "n_train": int(len(ytr)), "n_test": int(len(yte)), "n_classes": int(l),
        "error_rf": 100.0 * float(np.mean(full_lab != yte)),
        "error_siba": 100.0 * float(np.mean(lab[siba.labels] != yte)),
        "error_hyper": 100.0 * float(np.mean(lab[hyper.labels] != yte)),
        "disagree_siba": 100.0 * float(np.mean(siba.labels != full.labels)),
        "disagree_hyper": 100.0 * float(np.mean(hyper.labels != full.labels)),
        "trees_rfstar": float(star.n_queried.mean()),
        "trees_siba": float(siba.n_queried.mean()),
        "trees_hyper": float(hyper.n_queried.mean()),
        "trees_mc_estimate": float(mc), "trees_mc_sem": float(mc_sem),
        "trees_exact_estimate": None if exact is None else float(exact),
        "prior": prior.tolist() if l == 2 else None,
        "calibration": [],
    }
    for a in ALPHAS:
        h = halt(votes, UrnRule(T, a, prior=prior), n_classes=l)
        s = halt(votes, UrnRule(T, a), n_classes=l)
        n_fixed = max(1, int(round(float(h.n_queried.mean()))))
        f = halt(votes, FixedRule(n_fixed), n_classes=l)
        rec["calibration"].append({
            "alpha": a, "n_fixed": n_fixed,
            "disagree_hyper": 100.0 * float(np.mean(h.labels != full.labels)),
            "disagree_siba": 100.0 * float(np.mean(s.labels != full.labels)),
            "disagree_fixed": 100.0 * float(np.mean(f.labels != full.labels)),
            "trees_hyper": float(h.n_queried.mean()), "trees_siba": float(s.n_queried.mean()),
        })
    return rec


def _task_headtohead(dataset, realization, p):
    from .headtohead import run_task as task  # the task code lives in its own module

    return task(dataset, realization, p)


_TASKS = {"hl2011": _task_hl2011, "circle": _task_circle, "soto2016": _task_soto2016,
          "headtohead": _task_headtohead}


def run_task(suite, profile, dataset, realization):
    """Run one task and return its record (a JSON-serialisable dict)."""
    params = SUITES[suite].params[profile]
    result = _TASKS[suite](dataset, realization, params)
    return {"suite": suite, "profile": profile, "dataset": dataset, "realization": int(realization),
            "params": params, "result": result}


# --------------------------------------------------------------------------
# command-level API
# --------------------------------------------------------------------------
def _check_suite_profile(suite, profile):
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; valid suites: {', '.join(SUITES)}")
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")


def _parse_realizations(spec, n):
    if spec is None:
        return range(n)
    if isinstance(spec, range):
        return spec
    try:
        a, b = str(spec).split(":")
        start = int(a) if a else 0
        stop = int(b) if b else n
    except ValueError:
        raise ValueError(f"realizations must look like START:STOP (e.g. 0:10), got {spec!r}") from None
    if not 0 <= start < stop <= n:
        raise ValueError(f"realizations {spec!r} must satisfy 0 <= START < STOP <= {n} for this profile")
    return range(start, stop)


def list_tasks(suite, profile, *, datasets_=None, realizations=None):
    """The (dataset, realization) pairs of a suite/profile, missing datasets listed separately."""
    _check_suite_profile(suite, profile)
    s = SUITES[suite]
    names = s.dataset_list(profile)
    if datasets_ is not None:
        if isinstance(datasets_, str) or not all(isinstance(d, str) for d in datasets_):
            raise TypeError(f"datasets_ must be a list of dataset names, got {datasets_!r}")
        if not datasets_ or "" in datasets_:
            raise ValueError(f"datasets_ {list(datasets_)!r} is empty or has an empty name; valid names of suite "
                             f"{suite!r}: {', '.join(s.datasets)}")
        bad = [d for d in datasets_ if d not in s.datasets]
        if bad:
            raise ValueError(f"dataset(s) {', '.join(bad)} not in suite {suite!r}; valid: {', '.join(s.datasets)}")
        names = tuple(datasets_)
    reals = _parse_realizations(realizations, s.realizations[profile])
    avail = [d for d in names if _available(d)]
    missing = [d for d in names if d not in avail]
    return [(d, r) for d in avail for r in reals], missing


def _execute(job):
    suite, profile, dataset, r = job
    return job, run_task(suite, profile, dataset, r)


def _exit_with_parent(parent_pid, period=0.2):
    """Worker initializer: end this worker as soon as the process that started it is gone.

    A worker pool outlives a parent killed with SIGKILL (no clean-up runs); each
    worker therefore watches its parent and exits when it has been re-parented
    or the parent no longer exists.  The pool's resource tracker exits once the
    last worker has.
    """
    first_ppid = os.getppid()

    def parent_alive():
        if os.getppid() != first_ppid:
            return False
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    def watch():
        while parent_alive():
            time.sleep(period)
        os._exit(1)

    threading.Thread(target=watch, name="ensvote-exit-with-parent", daemon=True).start()


#: Seconds to wait for a Dask scheduler to answer before giving up.
SCHEDULER_TIMEOUT = 10


def _connect(scheduler, timeout=SCHEDULER_TIMEOUT):
    """A ``dask.distributed.Client`` for the scheduler at ``scheduler``, or a one-line ConnectionError."""
    import socket

    from dask.distributed import Client
    from distributed.comm import parse_address, parse_host_port

    if not isinstance(scheduler, str) or not scheduler.strip():
        raise ValueError(f"scheduler must be 'local' or an address like tcp://HOST:8786, got {scheduler!r}")
    hint = "start one with `dask scheduler`, or use scheduler='local'"
    try:
        scheme, loc = parse_address(scheduler if "://" in scheduler else f"tcp://{scheduler}")
        if scheme == "tcp":  # fail fast (refused, unknown host) before the client's retry loop
            socket.create_connection(parse_host_port(loc, default_port=8786), timeout=timeout).close()
        return Client(scheduler, timeout=timeout)
    except Exception as exc:  # whatever the client met: refused, timed out, not a Dask scheduler
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise ConnectionError(f"cannot reach the Dask scheduler at {scheduler!r} within {timeout} s "
                              f"({why}); {hint}") from None


def _set_aside(path):
    """Rename a bad record to ``<name>.bad`` (``.bad1``, ``.bad2``, ... if taken); return the new path."""
    for i in range(1000):
        target = path.with_name(f"{path.name}.bad{i or ''}")
        if not (target.exists() or target.is_symlink()):
            os.rename(path, target)
            return target
    raise FileExistsError(f"too many set-aside copies of {path}")


def run(suite, profile, *, out="results", datasets_=None, realizations=None, n_jobs=1,
        scheduler=None, progress=True):
    """Run every unfinished task of a suite, writing one record per task.

    Parameters
    ----------
    suite : {"hl2011", "circle", "soto2016"}
    profile : {"smoke", "book", "paper"}
    out : path, default "results"
    datasets_ : list of str, optional
        Restrict to these datasets of the suite.
    realizations : "START:STOP", optional
        Restrict to these realizations (a shard).
    n_jobs : int
        Parallel workers (one task each; trees inside a task single-threaded).
    scheduler : str, optional
        A ``dask.distributed`` scheduler address, or ``"local"`` for a
        ``LocalCluster`` with ``n_jobs`` single-threaded workers; default: joblib's
        process backend.
    progress : bool
        Show a tqdm progress bar.

    Returns
    -------
    dict with ``run``, ``skipped``, ``adopted``, ``missing_datasets``,
    ``bad_records`` (paths of the records found bad, set aside as ``*.bad``
    and computed again; each is also reported with a :class:`RecordWarning`)
    and ``seconds``.

    Every existing record of the tasks is checked (:func:`read_record`) before
    the task counts as done.  With ``n_jobs > 1`` (joblib's process pool) each
    worker exits as soon as this process is gone, even after SIGKILL.
    """
    from joblib import Parallel, delayed, parallel_config
    from tqdm import tqdm

    if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs < 1:
        raise ValueError(f"n_jobs must be a positive int, got {n_jobs!r}")
    if scheduler is not None and scheduler != "local" and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise ValueError(f"scheduler must be 'local' or an address like tcp://HOST:8786, got {scheduler!r}")
    tasks, missing = list_tasks(suite, profile, datasets_=datasets_, realizations=realizations)
    todo, bad = [], []
    for d, r in tasks:
        path = record_path(out, suite, profile, d, r)
        if path.exists() or path.is_symlink():
            try:
                read_record(path, (suite, profile, d, r))
                continue
            except RecordError as exc:
                moved = _set_aside(path)
                bad.append(path)
                warnings.warn(RecordWarning(f"{exc}; moved to {moved.name} and computed again"), stacklevel=2)
        todo.append((suite, profile, d, r))
    adopted = _adopt_from_twin_profiles(out, todo)
    todo = [j for j in todo if j not in adopted]
    skipped = len(tasks) - len(todo) - len(adopted)
    t0 = time.perf_counter()
    client = cluster = bar = None
    try:
        backend = "loky"
        if scheduler is not None:
            from dask.distributed import Client, LocalCluster

            if scheduler == "local":
                cluster = LocalCluster(n_workers=n_jobs, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
                client = Client(cluster)
            else:
                client = _connect(scheduler)
            backend = "dask"
        bar = tqdm(total=len(tasks), initial=skipped, desc=f"{suite}/{profile}", unit="task",
                   disable=not progress)
        if n_jobs == 1 and scheduler is None:
            results = (_execute(j) for j in todo)
        elif backend == "loky":
            with parallel_config(backend="loky", n_jobs=n_jobs, initializer=_exit_with_parent,
                                 initargs=(os.getpid(),)):
                par = Parallel(return_as="generator_unordered")
                results = par(delayed(_execute)(j) for j in todo)
        else:
            with parallel_config(backend=backend, n_jobs=-1):
                par = Parallel(return_as="generator_unordered")
                results = par(delayed(_execute)(j) for j in todo)
        for (s_, p_, d, r), rec in results:
            check_record(rec, (s_, p_, d, r))  # never write what would not be read back
            _write_atomic(record_path(out, s_, p_, d, r), rec)
            bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    return {"run": len(todo), "skipped": skipped, "adopted": len(adopted), "missing_datasets": missing,
            "bad_records": bad, "seconds": time.perf_counter() - t0}


def _adopt_from_twin_profiles(out, jobs):
    """Copy records that another profile with identical parameters already computed.

    A task's seed depends on ``(suite, dataset, realization)`` only, so a
    profile whose parameters equal this one's (``book`` and ``paper`` share one
    parameter set) computes the very same result; its record is re-stamped with
    this profile's name instead of being computed again.  The source record is
    checked first (:func:`read_record`); a bad one is reported with a
    :class:`RecordWarning` and not adopted (the task is computed instead).
    Returns the set of jobs adopted.
    """
    adopted = set()
    for suite, profile, d, r in jobs:
        for other in PROFILES:
            if other == profile or SUITES[suite].params[other] != SUITES[suite].params[profile]:
                continue
            src = record_path(out, suite, other, d, r)
            if not (src.exists() or src.is_symlink()) or r >= SUITES[suite].realizations[other]:
                continue
            try:
                rec = read_record(src, (suite, other, d, r))
            except RecordError as exc:
                warnings.warn(RecordWarning(f"{exc}; not adopted into profile {profile!r}"), stacklevel=3)
                continue
            new = {**rec, "profile": profile}
            check_record(new, (suite, profile, d, r))
            _write_atomic(record_path(out, suite, profile, d, r), new)
            adopted.add((suite, profile, d, r))
            break
    return adopted


# --------------------------------------------------------------------------
# aggregation
# --------------------------------------------------------------------------
@dataclass
class RecordScan:
    """What :func:`scan_records` found under ``directory``."""

    directory: Path
    records: list  #: the good records, sorted by (dataset, realization)
    bad: list  #: ``(path, reason)`` of every bad record
    missing: dict  #: dataset -> realizations without a good record
    n_expected: int  #: records a complete set has

    def missing_text(self):
        """``"breast r010-r099, glass r012, r015-r099"``: the missing records, one line."""
        parts = []
        for d, rs in self.missing.items():
            runs, start = [], rs[0]
            for a, b in zip(rs, rs[1:] + [None]):
                if b != a + 1:
                    runs.append(f"r{start:03d}" + (f"-r{a:03d}" if a != start else ""))
                    start = b
            parts.append(f"{d} {', '.join(runs)}")
        return "; ".join(parts)


def scan_records(suite, profile, *, out="results"):
    """Check every record of a suite/profile and list the missing ones.

    Every file ``<out>/<suite>/<profile>/tasks/*/r*.json.gz`` is read with
    :func:`read_record`.  A complete set has every realization of the profile
    for every dataset of the profile (and for any other dataset of the suite
    that has records).

    Returns
    -------
    RecordScan
    """
    _check_suite_profile(suite, profile)
    s = SUITES[suite]
    base = Path(out) / suite / profile / "tasks"
    recs, bad = [], []
    for path in sorted(base.glob("*/r*.json.gz")):
        try:
            recs.append(read_record(path, _task_of_path(path) if path.parts[-5:-3] == (suite, profile) else None))
        except (RecordError, ValueError) as exc:
            bad.append((path, getattr(exc, "reason", str(exc))))
    recs.sort(key=lambda r: (r["dataset"], r["realization"]))
    have = {(r["dataset"], r["realization"]) for r in recs}
    names = list(s.dataset_list(profile)) + sorted({d for d, _ in have} - set(s.dataset_list(profile)))
    n = s.realizations[profile]
    missing = {}
    for d in names:
        gone = [r for r in range(n) if (d, r) not in have]
        if gone:
            missing[d] = gone
    return RecordScan(base, recs, bad, missing, len(names) * n)


def _checked_records(suite, profile, out, allow_missing):
    """The good records of a suite/profile, or RecordSetError: bad records, none at all, or (unless allowed) missing ones."""
    scan = scan_records(suite, profile, out=out)
    redo = f"`python -m ensvote run {suite} --profile {profile}`"
    if scan.bad:
        shown = "; ".join(f"{p}: {why}" for p, why in scan.bad[:3])
        more = f"; and {len(scan.bad) - 3} more" if len(scan.bad) > 3 else ""
        raise RecordSetError(f"{len(scan.bad)} bad record(s) under {scan.directory}: {shown}{more}. "
                             f"{redo} sets them aside and computes them again")
    if not scan.records:
        where = "" if scan.directory.is_dir() else " (the directory does not exist)"
        raise RecordSetError(f"no records of {suite}/{profile} under {scan.directory}{where}; run {redo} first")
    if scan.missing:
        k = sum(map(len, scan.missing.values()))
        text = f"{suite}/{profile} is incomplete: {k} of {scan.n_expected} records missing ({scan.missing_text()})"
        if not allow_missing:
            raise IncompleteRecordsError(f"{text}; run them with {redo}, or pass allow_missing=True "
                                         "(--allow-missing) to tabulate what there is", scan.missing)
        warnings.warn(RecordWarning(f"{text}; tabulating the {len(scan.records)} there are"), stacklevel=3)
    return scan.records


def _mean_std(values):
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if len(v) == 0:
        return np.nan, np.nan
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else np.nan


def _write_csv(df, path):
    path.parent.mkdir(parents=True, exist_ok=True)
    # unique per process and call: concurrent aggregations never share a temporary file
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        df.to_csv(tmp, index=False, float_format="%.4f", lineterminator="\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def aggregate(suite, profile, *, out="results", allow_missing=False):
    """Turn a suite's task records into the CSV tables the book renders.

    Every record is checked first (:func:`scan_records`).  Bad records are an
    error (:func:`run` sets them aside and computes them again), and so is a
    directory without any record.  An incomplete set (a dataset or
    realization of the profile without its record) is an error naming what is
    missing, unless ``allow_missing=True``: then the tables are made from the
    records there are, with a :class:`RecordWarning` naming the missing ones.
    Datasets of the suite without records keep their row, with empty values
    and ``n_realizations = 0``.

    Returns the list of files written.

    Raises
    ------
    RecordSetError
        Bad records, or no records (naming the directory).
    IncompleteRecordsError
        Missing records and ``allow_missing`` is False (a RecordSetError).
    """
    _check_suite_profile(suite, profile)
    if not isinstance(allow_missing, (bool, np.bool_)):
        raise TypeError(f"allow_missing must be True or False, got {allow_missing!r}")
    recs = _checked_records(suite, profile, out, allow_missing)
    target = Path(out) / suite / profile
    by = {}
    for r in recs:
        by.setdefault(r["dataset"], []).append(r)
    written = []
    if suite == "hl2011":
        cols = ["pct_test_instances", "trees_ib", "disagree_fs", "disagree_ib", "error_fs", "error_ib", "error_inf"]
        for ens, fname in (("bagging", "table2_bagging.csv"), ("rf", "table3_rf.csv")):
            rows = []
            for d, prob in HL2011_PROBLEMS.items():
                rs = [r["result"][ens] for r in by.get(d, [])]
                row = {"problem": prob}
                for c in cols:
                    row[f"{c}_mean"], row[f"{c}_std"] = _mean_std([x.get(c) for x in rs])
                row["n_realizations"] = len(rs)
                rows.append(row)
            _write_csv(pd.DataFrame(rows), target / fname)
            written.append(target / fname)
        rows = []
        for d, rs in by.items():
            for ens in ("bagging", "rf"):
                sweep = np.array([r["result"][ens]["pi_sweep"] for r in rs])
                for q, m, s in zip(PI_GRID, sweep.mean(0), sweep.std(0, ddof=1) if len(rs) > 1 else np.full(len(PI_GRID), np.nan)):
                    rows.append({"problem": HL2011_PROBLEMS[d], "ensemble": ens, "pi": q,
                                 "pct_halted_mean": 100 * m, "pct_halted_std": 100 * s, "n_realizations": len(rs)})
        _write_csv(pd.DataFrame(rows), target / "fig6_pi_sweep.csv")
        written.append(target / "fig6_pi_sweep.csv")
    elif suite == "headtohead":
        from .headtohead import aggregate as aggregate_headtohead

        written += aggregate_headtohead(recs, target, _write_csv)
    elif suite == "circle":
        rs = by.get("circle", [])
        n = np.array([r["result"]["n_queried"] for r in rs], dtype=float)
        st = np.array([r["result"]["stopped"] for r in rs], dtype=bool)
        g = np.linspace(-1, 1, int(round(math.sqrt(n.shape[1]))))
        gx, gy = np.meshgrid(g, g)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean_n = np.where(st.any(0), np.where(st, n, 0).sum(0) / st.sum(0), np.nan)
            df = pd.DataFrame({"x": gx.ravel(), "y": gy.ravel(), "mean_trees": mean_n,
                               "log10_mean_trees": np.log10(mean_n),
                               "frac_exceeded": 1.0 - st.mean(0), "n_realizations": len(rs)})
        _write_csv(df, target / "fig4_grid.csv")
        written.append(target / "fig4_grid.csv")
    else:
        t1, t2, cal, pri = [], [], [], []
        for d, prob in SOTO2016_PROBLEMS.items():
            rs = [r["result"] for r in by.get(d, [])]
            row1, row2 = {"problem": prob}, {"problem": prob}
            for c in ("error_rf", "error_siba", "error_hyper", "disagree_siba", "disagree_hyper"):
                row1[f"{c}_mean"], row1[f"{c}_std"] = _mean_std([x[c] for x in rs])
            for c in ("trees_rfstar", "trees_siba", "trees_hyper"):
                row2[f"{c}_mean"], row2[f"{c}_std"] = _mean_std([x[c] for x in rs])
            row2["trees_mc_estimate"], row2["trees_mc_estimate_std"] = _mean_std([x["trees_mc_estimate"] for x in rs])
            for c in ("rfstar", "siba", "hyper"):
                row2[f"speedup_{c}"] = 101.0 / row2[f"trees_{c}_mean"] if rs else np.nan
            row2["trees_exact_estimate"] = _mean_std([x["trees_exact_estimate"] for x in rs])[0]
            # paired t-tests SIBA vs HYPER (alpha = 0.05), as the paper marks in boldface
            for key, c in (("error", "error"), ("disagree", "disagree"), ("trees", "trees")):
                a = np.array([x[f"{c}_siba"] for x in rs], dtype=float)
                b = np.array([x[f"{c}_hyper"] for x in rs], dtype=float)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)  # near-constant differences
                    p = stats.ttest_rel(a, b).pvalue if len(rs) > 1 and np.any(a != b) else np.nan
                (row1 if key != "trees" else row2)[f"pvalue_{key}_siba_vs_hyper"] = p
            row1["n_realizations"] = row2["n_realizations"] = len(rs)
            t1.append(row1)
            t2.append(row2)
            for a in ALPHAS:
                cs = [c for x in rs for c in x["calibration"] if c["alpha"] == a]
                if cs:
                    row = {"problem": prob, "alpha": a, "n_realizations": len(rs)}
                    for c in ("disagree_hyper", "disagree_siba", "disagree_fixed", "trees_hyper", "trees_siba"):
                        row[f"{c}_mean"], row[f"{c}_std"] = _mean_std([x[c] for x in cs])
                    cal.append(row)
            if rs and rs[0]["prior"] is not None:
                pr = np.mean([x["prior"] for x in rs], axis=0)
                pri.extend({"problem": prob, "k": k, "prior_mean": v} for k, v in enumerate(pr))
        cal_cols = ["problem", "alpha", "n_realizations"] + [
            f"{c}_{m}" for c in ("disagree_hyper", "disagree_siba", "disagree_fixed", "trees_hyper", "trees_siba")
            for m in ("mean", "std")]
        for df, name in ((pd.DataFrame(t1), "table1_error_disagreement.csv"),
                         (pd.DataFrame(t2), "table2_trees_speedup.csv"),
                         (pd.DataFrame(cal, columns=cal_cols), "fig1_calibration.csv"),  # a header even if empty
                         (pd.DataFrame(pri, columns=["problem", "k", "prior_mean"]), "fig1_priors.csv")):
            _write_csv(df, target / name)
            written.append(target / name)
    return written


def _half_unit(printed):
    """Half a unit of the last printed digit of each value (``"2.5"`` -> 0.05, ``"12"`` -> 0.5); NaN if empty."""
    def one(text):
        text = str(text).strip()
        if text in ("", "nan", "None", "<NA>"):
            return np.nan
        mantissa = text.lower().split("e")[0]
        return 0.5 * 10.0 ** -(len(mantissa.split(".")[1]) if "." in mantissa else 0)
    return printed.map(one).astype(float)


def compare_with_published(ours, published, quantities, *, pvalue=None, decimals=2, unavailable=(),
                           not_in_published="not in our copy", show_n=False, delta=True):
    """Side-by-side table of our mean ± std and the published value as printed, with a within-one-std flag.

    For every problem (row of `ours`) and quantity ``q``, our ``q_mean ± q_std`` is
    set beside the published ``q_mean ± q_std``. Δ = ours − published (means) is
    flagged ✓ if ``|Δ|`` is at most one published std, allowing for the rounding
    of the printed values: the printed mean and std each stand for any value
    within half a unit of their last digit, so the flag is ✓ when
    ``|Δ| <= std + u(mean) + u(std)`` (u = half a unit of the last printed
    digit, plus a floating-point tolerance of 1e-9), ✗ otherwise. A published
    ``51.0±0.0`` therefore accepts 51.01, which the printed std cannot tell
    from a true std of 0.04. Δ is shown with at least as many decimals as the
    published mean, so a Δ that reads as zero is always ✓.

    Parameters
    ----------
    ours : pandas.DataFrame
        Our aggregated results, one row per problem (as written by
        :func:`aggregate`), with columns ``<q>_mean`` and ``<q>_std`` for every
        quantity and ``n_realizations``.
    published : pandas.DataFrame
        The published values, indexed by problem, with columns ``<q>_mean`` and
        ``<q>_std``. Read it with ``dtype=str`` so that the values are shown
        exactly as printed (``"0.50"`` stays ``"0.50"``).
    quantities : mapping or sequence of str
        ``{quantity: column title}``; a sequence of quantities uses the
        quantities themselves as titles.
    pvalue : str or mapping, optional
        Column of `ours` holding a p-value; our value gets a ``*`` where it is
        below 0.05. A str applies to every quantity, a mapping
        ``{quantity: column}`` only to the quantities it names.
    decimals : int, default 2
        Decimals of our values and of Δ.
    unavailable : iterable of str, default ()
        Problems without results because their data is unavailable offline.
        A row with ``n_realizations == 0`` reads "unavailable offline" if its
        problem is listed here, "not run" otherwise.
    not_in_published : str, default "not in our copy"
        Text of the published cell of a problem that `published` lacks.
    show_n : bool, default False
        Append the column ``("N", "")`` with ``n_realizations``.
    delta : bool, default True
        Show the column Δ (with the flag). If False, there is no Δ column and
        the flag ✓ / ✗ is appended to our cell instead (narrower tables).

    Returns
    -------
    table : pandas.DataFrame
        Strings, index ``ours.index``, columns ``(title, "ours" | "published" |
        "Δ")`` per quantity (no "Δ" if `delta` is False; and ``("N", "")``).
        Our std reads "–" when it is undefined (one realization); "—" marks a
        cell that cannot be compared.
    within : pandas.DataFrame
        ``boolean`` dtype, index ``ours.index``, one column per quantity: whether
        ``|Δ|`` is within one published std (as above); ``<NA>`` where not comparable (no
        results of ours, or no published value).
    deltas : pandas.DataFrame
        Δ as floats, same shape as `within`; NaN where not comparable.

    Raises
    ------
    TypeError
        If `ours` or `published` is not a DataFrame, or `delta` is not a bool.
    ValueError
        If `quantities` is empty, a required column is missing (the message
        names them), `pvalue` names a quantity not compared, an index has
        duplicate problems, or `decimals` is negative.

    Examples
    --------
    >>> ours = pd.DataFrame({"err_mean": [1.04, 3.0], "err_std": [0.1, np.nan], "n_realizations": [10, 1]},
    ...                     index=["a", "b"])
    >>> pub = pd.DataFrame({"err_mean": ["1.0", "2.5"], "err_std": ["0.2", "0.3"]}, index=["a", "b"])
    >>> table, within, delta = compare_with_published(ours, pub, {"err": "error %"})
    >>> table.loc["b"].tolist()
    ['3.00±–', '2.5±0.3', '+0.50 ✗']
    >>> within["err"].tolist()
    [True, False]
    >>> compare_with_published(ours, pub, {"err": "error %"}, delta=False)[0].loc["a"].tolist()
    ['1.04±0.10 ✓', '1.0±0.2']
    """
    if not isinstance(ours, pd.DataFrame) or not isinstance(published, pd.DataFrame):
        raise TypeError("ours and published must be pandas DataFrames")
    titles = dict(quantities) if isinstance(quantities, Mapping) else {q: q for q in quantities}
    if not titles:
        raise ValueError("no quantities to compare")
    if not isinstance(decimals, (int, np.integer)) or decimals < 0:
        raise ValueError(f"decimals must be a non-negative integer, got {decimals!r}")
    if not isinstance(delta, (bool, np.bool_)):
        raise TypeError(f"delta must be True or False, got {delta!r}")
    pcols = dict.fromkeys(titles, pvalue) if pvalue is None or isinstance(pvalue, str) else dict(pvalue)
    if unknown := sorted(set(pcols) - set(titles)):
        raise ValueError(f"pvalue names quantities that are not compared: {unknown}")
    stats_cols = [f"{q}_{s}" for q in titles for s in ("mean", "std")]
    need = stats_cols + ["n_realizations"] + sorted({c for c in pcols.values() if c is not None})
    for name, df, cols in (("ours", ours, need), ("published", published, stats_cols)):
        if missing := [c for c in cols if c not in df.columns]:
            raise ValueError(f"{name} lacks the columns {missing}")
        if df.index.has_duplicates:
            raise ValueError(f"{name} has duplicate problems: {sorted(set(df.index[df.index.duplicated()]))}")

    n = ours["n_realizations"].fillna(0).astype(int)
    run = n > 0
    pub = published.reindex(ours.index)
    in_pub = ours.index.isin(published.index)
    no_result = np.where(ours.index.isin(set(unavailable)), "unavailable offline", "not run")
    out, within, deltas = {}, {}, {}
    for q, title in titles.items():
        om, os_ = ours[f"{q}_mean"].astype(float), ours[f"{q}_std"].astype(float)
        pm_txt, ps_txt = pub[f"{q}_mean"], pub[f"{q}_std"]
        pm, ps = pd.to_numeric(pm_txt), pd.to_numeric(ps_txt)
        has_pub = pm.notna() & ps.notna()
        ok_ours = run & om.notna()
        comparable = ok_ours & has_pub
        star = ours[pcols[q]].lt(0.05) if pcols.get(q) else pd.Series(False, index=ours.index)
        txt_o = [f"{m:.{decimals}f}±" + (f"{s:.{decimals}f}" if pd.notna(s) else "–") + ("*" if st else "")
                 for m, s, st in zip(om, os_, star)]
        d = (om - pm).where(comparable)
        tol = _half_unit(pm_txt) + _half_unit(ps_txt)
        ok = (d.abs() <= ps + tol + 1e-9).astype("boolean").mask(~comparable)
        marks = [" ✓" if k else " ✗" for k in ok.fillna(False)]
        if not delta:
            txt_o = [t + (mk if c else "") for t, mk, c in zip(txt_o, marks, comparable)]
        out[(title, "ours")] = np.where(ok_ours, txt_o, np.where(run, "—", no_result))
        out[(title, "published")] = np.where(has_pub, pm_txt.astype(str) + "±" + ps_txt.astype(str),
                                             np.where(in_pub, "—", not_in_published))
        if delta:
            # at least the published mean's decimals, so that a Δ reading as zero is within the rounding (✓)
            digits = [max(decimals, int(round(-np.log10(2 * u)))) if np.isfinite(u) else decimals
                      for u in _half_unit(pm_txt)]
            out[(title, "Δ")] = np.where(comparable, [f"{x:+.{k}f}{mk}" for x, k, mk in zip(d.fillna(0), digits, marks)],
                                         "—")
        within[q], deltas[q] = ok, d
    table = pd.DataFrame(out, index=ours.index)
    if show_n:
        table[("N", "")] = n
    return table, pd.DataFrame(within, index=ours.index), pd.DataFrame(deltas, index=ours.index)
