"""Records of the experiments: seeding, paths, atomic writes, validation, adoption and scanning.

Every task is seeded from ``(SEED, suite, dataset, realization)`` alone
(:func:`task_seed`), so any shard, order, backend or machine gives the same
record.  Each finished task is written atomically (temporary file + rename) as
a small gzip-compressed JSON record under
``<out>/<suite>/<profile>/tasks/<dataset>/r<realization>.json.gz``
(:func:`record_path`).

Every record is checked whenever it is read (:func:`read_record`): the file must
be one gzip member whose CRC and length check out, with nothing after it,
holding canonical JSON with the schema of its suite (the suite's ``check``) and
values in range, that names the suite, profile, dataset, realization and
parameters its path and profile say.

Canonical JSON has sorted keys, no spaces, no NaN, and every float rounded to
:data:`RECORD_DIGITS` significant digits.  Floating-point results differ across
CPUs in their last bits (numpy's and OpenBLAS's SIMD kernels, numba's target);
rounded (:func:`ensvote._utils.significant`, which says when they still
differ), the same task writes the same bytes on any x86-64 machine, so shards
computed on different machines aggregate to the same tables.
"""

import gzip
import hashlib
import json
import math
import os
import re
import stat
import uuid
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._utils import SEED, significant
from .suite import PROFILES

__all__ = ["task_seed", "rng_and_ints", "record_path", "read_record", "check_record", "scan_records", "RecordScan",
           "RecordError", "RecordSetError", "IncompleteRecordsError", "RecordWarning", "write_atomic", "write_csv",
           "mean_std", "need", "keys", "number", "numbers", "RECORD_DIGITS", "results_dir", "stray_files"]


def _suites():
    from .registry import SUITES  # the registry imports the suite modules, which import this one

    return SUITES


def check_suite_profile(suite, profile):
    suites = _suites()
    if suite not in suites:
        raise ValueError(f"unknown suite {suite!r}; valid suites: {', '.join(suites)}")
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; valid profiles: {', '.join(PROFILES)}")


# --------------------------------------------------------------------------
# seeding
# --------------------------------------------------------------------------
def task_seed(suite, dataset, realization):
    """The task's SeedSequence: a function of ``(SEED, suite, dataset, realization)`` only."""
    digest = hashlib.sha256(f"{suite}/{dataset}/{int(realization)}".encode()).digest()
    return np.random.SeedSequence([SEED, int.from_bytes(digest[:8], "little")])


def rng_and_ints(seq, n):
    """A generator seeded by ``seq`` and the first ``n`` integers it draws (seeds for the estimators)."""
    rng = np.random.default_rng(seq)
    return rng, [int(v) for v in rng.integers(0, 2**31 - 1, size=n)]



# --------------------------------------------------------------------------
# record files
# --------------------------------------------------------------------------
def record_path(out, suite, profile, dataset, realization):
    return Path(out) / suite / profile / "tasks" / dataset / f"r{int(realization):03d}.json.gz"


def results_dir(out, *parts):
    """The directory ``<out>/<parts...>`` (e.g. ``suite, profile, "tasks", dataset``), made if need be.

    Records and tables are written only inside ``out``: ``out`` itself may be
    a symlink (the user's choice), but a symlink below it is refused, and so
    is a file where a directory should be.

    Raises
    ------
    NotADirectoryError
        A file stands where a directory should be (the message names it).
    ValueError
        A directory below ``out`` is a symlink (the message names it).
    """
    path = Path(out)
    for part in (None, *parts):
        path = path if part is None else path / part
        try:
            path.mkdir(parents=part is None, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            pass  # a file is in the way: named below
        if part is not None and path.is_symlink():
            raise ValueError(f"cannot write records under {out}: {path} is a symlink, and records are written only "
                             "inside the results directory (make it a real directory)")
        if not path.is_dir():
            block = next(p for p in (path, *path.parents) if p.exists() or p.is_symlink())
            raise NotADirectoryError(f"cannot write records under {out}: {block} is "
                                     f"{'a file, not a directory' if block.is_file() else 'not a directory'}")
    return path


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
    """A bad record or a stray file was found and set aside (run), or tables were made from an incomplete set."""


_GZIP_MAGIC = b"\x1f\x8b"
#: Largest decompressed record accepted (the largest, a circle record, is about 70 kB).
_MAX_RECORD_BYTES = 64 * 2**20
#: Largest record file read (compressed); a larger file is refused before it is read.
_MAX_FILE_BYTES = 16 * 2**20
_RECORD_KEYS = {"suite", "profile", "dataset", "realization", "params", "result"}
_RECORD_NAME = re.compile(r"r(\d+)\.json\.gz")
#: Significant digits of every float a record stores (more than any table shows: they have 4 decimals).
RECORD_DIGITS = 9


def _encode(payload):
    """The canonical JSON bytes of a record (sorted keys, no spaces, no NaN, floats at RECORD_DIGITS digits)."""
    return json.dumps(significant(payload, RECORD_DIGITS), sort_keys=True, separators=(",", ":"),
                      allow_nan=False).encode()


def write_atomic(path, payload):
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
        raise ValueError("JSON is not in the canonical form the runner writes (sorted keys, no spaces, "
                         f"floats at {RECORD_DIGITS} significant digits)")
    return rec


def _task_of_path(path):
    """``(suite, profile, dataset, realization)`` named by a path ``.../SUITE/PROFILE/tasks/DATASET/rNNN.json.gz``.

    None if the path does not follow that layout; ValueError if only its file name is wrong.
    """
    parts = Path(path).parts
    if len(parts) < 5 or parts[-3] != "tasks" or parts[-5] not in _suites() or parts[-4] not in PROFILES:
        return None
    m = _RECORD_NAME.fullmatch(parts[-1])
    if m is None:
        raise ValueError(f"file name {parts[-1]!r} is not rNNN.json.gz")
    task = (parts[-5], parts[-4], parts[-2], int(m.group(1)))
    if record_path("", *task).name != parts[-1]:
        raise ValueError(f"file name {parts[-1]!r} should be {record_path('', *task).name!r}")
    return task


def _not_a_task(path):
    """Why a file ``.../SUITE/PROFILE/tasks/DATASET/<name>`` names no task of its profile; None if it names one."""
    try:
        task = _task_of_path(path)
        if task is not None:
            _check_task(*task, "the task")
    except ValueError as exc:
        return str(exc)
    return None


def stray_files(suite, profile, *, out="results"):
    """The record-like files of a suite/profile that name no task of it: ``[(path, reason), ...]``.

    A file ``<out>/<suite>/<profile>/tasks/*/r*.json.gz`` is stray if its name
    is not ``rNNN.json.gz``, its realization is outside the profile's range or
    its dataset is not one of the suite's: no run ever writes it, and no run
    would compute it again.
    """
    check_suite_profile(suite, profile)
    base = Path(out) / suite / profile / "tasks"
    return [(path, why) for path in sorted(base.glob("*/r*.json.gz")) if (why := _not_a_task(path))]


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
        try:
            st = path.stat()  # of the target of a symlink; never opens (a FIFO would block)
        except OSError as exc:
            raise ValueError(f"cannot be read ({exc.strerror or exc})") from None
        if stat.S_ISDIR(st.st_mode):
            raise ValueError("a directory, not a file")
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file (a FIFO, device or socket)")
        if st.st_size > _MAX_FILE_BYTES:
            raise ValueError(f"{st.st_size:,} bytes, more than a record can be ({_MAX_FILE_BYTES:,})")
        try:
            with open(path, "rb") as fh:
                raw = fh.read(_MAX_FILE_BYTES)  # bounded even if the file grew since stat
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


def need(cond, where, what):
    """Schema check: ValueError ``"<where> <what>"`` unless ``cond``."""
    if not cond:
        raise ValueError(f"{where} {what}")


def keys(obj, names, where):
    """Schema check: ``obj`` is a dict with exactly the keys ``names``."""
    need(isinstance(obj, dict), where, f"must be an object, got {type(obj).__name__}")
    if set(obj) != set(names):
        extra, lacking = sorted(set(obj) - set(names)), sorted(set(names) - set(obj))
        raise ValueError(f"{where} has " + "; ".join(
            x for x in (f"unexpected key(s) {extra}" if extra else "", f"no key(s) {lacking}" if lacking else "") if x))


def number(x, where, lo, hi, integer=False):
    """Schema check: ``x`` is a finite number (an int if ``integer``) in ``[lo, hi]``; return it."""
    need(_is_int(x) if integer else _is_num(x), where,
         f"must be {'an integer' if integer else 'a finite number'}, got {x!r:.40}")
    slack = 0 if integer else 1e-9 * max(1, abs(hi) if math.isfinite(hi) else 1)  # rounding of float means
    need(lo - slack <= x <= hi + slack, where, f"= {x!r} is outside [{lo}, {hi}]")
    return x


def numbers(xs, where, n, lo, hi, integer=False):
    """Schema check: ``xs`` is a list of ``n`` numbers as :func:`number` checks them; return it."""
    need(isinstance(xs, list) and len(xs) == n, where, f"must be a list of {n} numbers")
    types = set(map(type, xs))
    if types <= ({int} if integer else {int, float}) and (
            integer or bool(np.isfinite(np.asarray(xs, dtype=float)).all())) and (not xs or lo <= min(xs)
                                                                                   and max(xs) <= hi):
        return xs
    for i, x in enumerate(xs):  # the first offending entry, for the message
        number(x, f"{where}[{i}]", lo, hi, integer)
    return xs


def _check_task(suite, profile, dataset, r, who):
    suites = _suites()
    need(suite in suites, who, f"names an unknown suite {suite!r:.60}")
    need(profile in PROFILES, who, f"names an unknown profile {profile!r:.60}")
    s = suites[suite]
    need(isinstance(dataset, str) and dataset in s.datasets, who,
         f"names dataset {dataset!r:.60}, not one of suite {suite!r}")
    n = s.n_realizations(profile, dataset)
    need(_is_int(r) and 0 <= r < n, who, f"names realization {r!r:.60}, outside 0..{n - 1} of profile {profile!r}")


def check_record(rec, task=None):
    """Check a record's schema and values; with ``task = (suite, profile, dataset, realization)`` also its identity.

    Raises ValueError saying what is wrong.  The record's ``params`` must be its
    profile's parameters, its realization within its profile's range and its
    dataset one of its suite's.
    """
    keys(rec, _RECORD_KEYS, "the record")
    if task is not None:
        _check_task(*task, "the task")
        for key, want in zip(("suite", "profile", "dataset", "realization"), task):
            need(rec[key] == want and type(rec[key]) is type(want), "the record",
                  f"says {key}={rec[key]!r:.60}, but it is the record of {key}={want!r}")
    suite, profile, dataset, r = (rec[k] for k in ("suite", "profile", "dataset", "realization"))
    _check_task(suite, profile, dataset, r, "the record")
    s = _suites()[suite]
    need(isinstance(rec["params"], dict) and _encode(rec["params"]) == _encode(s.params[profile]), "the record",
         f"has params {rec['params']!r:.200}, but profile {profile!r} has {s.params[profile]!r}")
    try:
        s.check(rec["result"], s.params[profile])
    except (TypeError, KeyError, AttributeError) as exc:  # a malformed value deep inside
        raise ValueError(f"result is malformed ({type(exc).__name__}: {exc})") from None



def adopt_from_twin_profiles(out, jobs):
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
    suites = _suites()
    for suite, profile, d, r in jobs:
        for other in PROFILES:
            if other == profile or suites[suite].params[other] != suites[suite].params[profile]:
                continue
            src = record_path(out, suite, other, d, r)
            if not (src.exists() or src.is_symlink()) or r >= suites[suite].n_realizations(other, d):
                continue
            try:
                rec = read_record(src, (suite, other, d, r))
            except RecordError as exc:
                warnings.warn(RecordWarning(f"{exc}; not adopted into profile {profile!r}"), stacklevel=3)
                continue
            new = {**rec, "profile": profile}
            check_record(new, (suite, profile, d, r))
            write_atomic(record_path(out, suite, profile, d, r), new)
            adopted.add((suite, profile, d, r))
            break
    return adopted




# --------------------------------------------------------------------------
# scanning a record set
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
    check_suite_profile(suite, profile)
    s = _suites()[suite]
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
    missing = {}
    for d in names:
        gone = [r for r in range(s.n_realizations(profile, d)) if (d, r) not in have]
        if gone:
            missing[d] = gone
    return RecordScan(base, recs, bad, missing, sum(s.n_realizations(profile, d) for d in names))


def mean_std(values):
    """Mean and sample std (ddof=1) of the non-None values; NaN where undefined."""
    v = np.asarray([x for x in values if x is not None], dtype=float)
    if len(v) == 0:
        return np.nan, np.nan
    return float(v.mean()), float(v.std(ddof=1)) if len(v) > 1 else np.nan


def write_csv(df, path):
    """Write a table atomically with the tables' fixed format (4 decimals, ``\\n`` line ends).

    Floats are first rounded to 12 significant digits: a mean that is exactly a
    half unit of the 4th decimal (common on small test sets) then rounds the
    same way on every CPU, whatever its last bits.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    floats = df.select_dtypes("float").columns
    df = df.assign(**{c: df[c].map(lambda x: significant(x, 12)) for c in floats})
    # unique per process and call: concurrent aggregations never share a temporary file
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex}.tmp")
    try:
        df.to_csv(tmp, index=False, float_format="%.4f", lineterminator="\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


