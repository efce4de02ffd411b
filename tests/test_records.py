"""Experiment records are checked whenever they are read: nothing silently wrong, nothing lost.

A record that is corrupt, malformed, or not the task its path names is reported
by path; ``run`` sets it aside (``*.bad``) and computes the task again;
``aggregate`` refuses bad, missing (unless allowed) or absent records.
"""

import copy
import importlib.util
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import warnings
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ensvote import experiments

ROOT = Path(__file__).resolve().parents[1]
SUITE, PROFILE = "soto2016", "smoke"
TASKS = [("sonar", 0), ("sonar", 1), ("votes", 0), ("votes", 1)]
TARGET = ("sonar", 1)


def _canonical(obj):
    """A record file as the experiments write it, for any JSON value."""
    return gzip.compress(json.dumps(obj, sort_keys=True, separators=(",", ":")).encode(), mtime=0)


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """A complete soto2016/smoke record set (computed once): its directory, record bytes and tables."""
    out = tmp_path_factory.mktemp("good")
    experiments.run(SUITE, PROFILE, out=out, progress=False)
    files = {t: experiments.record_path(out, SUITE, PROFILE, *t).read_bytes() for t in TASKS}
    tables = {p.name: p.read_bytes() for p in experiments.aggregate(SUITE, PROFILE, out=out)}
    return out, files, tables


def _copy(good, dest):
    shutil.copytree(good[0] / SUITE / PROFILE / "tasks", dest / SUITE / PROFILE / "tasks")
    return dest


def _fake_run_task(good, calls):
    """run_task returning the known record: recomputation is deterministic (checked in test_experiments.py)."""
    recs = {t: json.loads(gzip.decompress(b)) for t, b in good[1].items()}

    def fake(suite, profile, dataset, r):
        calls.append((dataset, r))
        return copy.deepcopy(recs[(dataset, r)])
    return fake


def _rec(good, task=TARGET):
    return json.loads(gzip.decompress(good[1][task]))


def _edit(good, change):
    rec = _rec(good)
    change(rec)
    return _canonical(rec)


def _set(path_keys, value):
    def change(rec):
        obj = rec
        for k in path_keys[:-1]:
            obj = obj[k]
        obj[path_keys[-1]] = value
    return change


BOOK = experiments.SUITES[SUITE].params["book"]
CORRUPTIONS = {
    "truncated": lambda g: g[1][TARGET][: len(g[1][TARGET]) // 2],
    "emptied": lambda g: b"",
    "garbage": lambda g: b"this is not a record\n" * 7,
    "empty-object": lambda g: _canonical({}),
    "result-null": lambda g: _edit(g, _set(["result"], None)),
    "missing-key": lambda g: _edit(g, lambda r: r.pop("params")),
    "missing-result-key": lambda g: _edit(g, lambda r: r["result"].pop("trees_siba")),
    "flipped-byte": lambda g: (lambda b: b[:200] + bytes([b[200] ^ 0xFF]) + b[201:])(g[1][TARGET]),
    "flipped-crc": lambda g: (lambda b: b[:-6] + bytes([b[-6] ^ 0x01]) + b[-5:])(g[1][TARGET]),
    "directory": None,
    "trailing-bytes": lambda g: g[1][TARGET] + b"\0\0\0\0",
    "gzip-reserved-flag": lambda g: (lambda b: b[:3] + b"\xe0" + b[4:])(g[1][TARGET]),
    "not-canonical-json": lambda g: gzip.compress(json.dumps(_rec(g), indent=1).encode(), mtime=0),
    "bad-json": lambda g: gzip.compress(b'{"dataset": "sonar", ', mtime=0),
    "nan": lambda g: gzip.compress(json.dumps({**_rec(g), "result": {**_rec(g)["result"], "error_rf": math.nan}},
                                              sort_keys=True, separators=(",", ":")).encode(), mtime=0),
    "other-dataset": lambda g: g[1][("votes", 1)],  # a valid record under another task's name
    "other-realization": lambda g: g[1][("sonar", 0)],
    "other-profile": lambda g: _edit(g, lambda r: r.update(profile="book", params=BOOK)),
    "other-T": lambda g: _edit(g, _set(["params", "T"], 51)),
    "wrong-type": lambda g: _edit(g, _set(["result", "n_test"], "21")),
    "bool-for-int": lambda g: _edit(g, _set(["realization"], True)),
    "out-of-range": lambda g: _edit(g, _set(["result", "error_rf"], 150.0)),
    "inconsistent-calibration": lambda g: _edit(g, _set(["result", "calibration", 2, "trees_hyper"], 2.5)),
    "extra-key": lambda g: _edit(g, _set(["result", "note"], "hand edit")),
}


def _corrupt(out, name, good):
    path = experiments.record_path(out, SUITE, PROFILE, *TARGET)
    path.unlink()
    if name == "directory":
        path.mkdir()
        (path / "junk").write_bytes(b"x")
    else:
        path.write_bytes(CORRUPTIONS[name](good))
    return path


@pytest.mark.parametrize("name", sorted(CORRUPTIONS))
def test_a_bad_record_is_reported_by_path_and_redone(name, good, tmp_path, monkeypatch):
    out = _copy(good, tmp_path)
    path = _corrupt(out, name, good)
    content = None if path.is_dir() else path.read_bytes()

    with pytest.raises(experiments.RecordError, match=f"bad record {path}: ") as info:
        experiments.read_record(path)
    assert info.value.path == path
    with pytest.raises(experiments.RecordSetError, match=f"1 bad record\\(s\\) .*{path}"):
        experiments.aggregate(SUITE, PROFILE, out=out)

    calls = []
    monkeypatch.setattr(experiments.schedule, "run_task", _fake_run_task(good, calls))
    with pytest.warns(experiments.RecordWarning, match=f"bad record {path}: .*moved to r001.json.gz.bad"):
        s = experiments.run(SUITE, PROFILE, out=out, progress=False)
    assert (s["run"], s["skipped"], s["bad_records"]) == (1, 3, [path])
    assert calls == [TARGET]
    assert path.read_bytes() == good[1][TARGET]  # redone: the very record a clean run writes
    aside = path.with_name(path.name + ".bad")  # the evidence is kept, not deleted
    assert aside.is_dir() if content is None else aside.read_bytes() == content
    written = experiments.aggregate(SUITE, PROFILE, out=out)
    assert {p.name: p.read_bytes() for p in written} == good[2]
    again = experiments.run(SUITE, PROFILE, out=out, progress=False)
    assert (again["run"], again["bad_records"]) == (0, [])


def test_a_record_is_its_content_not_its_gzip_header(good, tmp_path):
    # another mtime or OS byte in the gzip header (e.g. gzip.compress writes OS=3) changes no content
    out = _copy(good, tmp_path)
    path = experiments.record_path(out, SUITE, PROFILE, *TARGET)
    path.write_bytes(_canonical(_rec(good)))
    assert path.read_bytes()[:10] != good[1][TARGET][:10]
    assert experiments.read_record(path) == _rec(good)
    assert experiments.run(SUITE, PROFILE, out=out, progress=False)["bad_records"] == []


def test_a_second_bad_copy_does_not_overwrite_the_first(good, tmp_path, monkeypatch):
    out = _copy(good, tmp_path)
    monkeypatch.setattr(experiments.schedule, "run_task", _fake_run_task(good, []))
    for i, name in enumerate(("garbage", "emptied")):
        path = _corrupt(out, name, good)
        with pytest.warns(experiments.RecordWarning, match=f"r001.json.gz.bad{i or ''} and computed"):
            experiments.run(SUITE, PROFILE, out=out, progress=False)
    assert path.with_name("r001.json.gz.bad").read_bytes() == CORRUPTIONS["garbage"](good)
    assert path.with_name("r001.json.gz.bad1").read_bytes() == b""


# ---------------------------------------------------------------------------
# property: random corruptions are always detected and redone
# ---------------------------------------------------------------------------
def _leaves(obj, prefix=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _leaves(v, prefix + (k,))
    elif isinstance(obj, list) and obj:
        for i, v in enumerate(obj):
            yield from _leaves(v, prefix + (i,))
    else:
        yield prefix


def _containers(obj, prefix=()):
    if isinstance(obj, (dict, list)) and obj:
        yield prefix
        for k, v in (obj.items() if isinstance(obj, dict) else enumerate(obj)):
            yield from _containers(v, prefix + (k,))


def _at(obj, keys):
    for k in keys:
        obj = obj[k]
    return obj


BAD_VALUES = [None, "x", True, -1, -0.5, 1e300, [], {}]


@st.composite
def corruptions(draw, raw, rec):
    kind = draw(st.sampled_from(["truncate", "flip", "insert", "json-text", "delete-key", "bad-value",
                                 "identity"]))
    if kind == "truncate":
        return raw[:draw(st.integers(0, len(raw) - 1))]
    if kind == "flip":
        i = draw(st.integers(0, len(raw) - 1))
        return raw[:i] + bytes([raw[i] ^ draw(st.integers(1, 255))]) + raw[i + 1:]
    if kind == "insert":
        i = draw(st.integers(0, len(raw)))
        return raw[:i] + draw(st.binary(min_size=1, max_size=8)) + raw[i:]
    text = json.dumps(rec, sort_keys=True, separators=(",", ":"))
    if kind == "json-text":  # a gzip of broken JSON: a piece cut out or a character put in
        i = draw(st.integers(0, len(text) - 1))
        j = draw(st.integers(i + 1, min(len(text), i + 20)))
        broken = text[:i] + draw(st.sampled_from(["", "}", ",", "\"", "x", " "])) + text[j:]
        try:  # an edit that leaves valid JSON changes a value instead: the other kinds cover those
            json.loads(broken)
            assume(False)
        except ValueError:
            pass
        return gzip.compress(broken.encode(), mtime=0)
    rec = copy.deepcopy(rec)
    if kind == "delete-key":
        keys = draw(st.sampled_from([k for k in _containers(rec)]))
        box = _at(rec, keys)
        victim = draw(st.sampled_from(sorted(box) if isinstance(box, dict) else list(range(len(box)))))
        del box[victim]
    elif kind == "bad-value":
        keys = draw(st.sampled_from(list(_leaves(rec))))
        _at(rec, keys[:-1])[keys[-1]] = draw(st.sampled_from(BAD_VALUES))
    else:  # a valid record, but of another task, profile or parameter set
        key, value = draw(st.sampled_from([("dataset", "votes"), ("realization", 0), ("profile", "book"),
                                           ("suite", "hl2011"), ("params", BOOK)]))
        rec[key] = value
    return gzip.compress(json.dumps(rec, sort_keys=True, separators=(",", ":")).encode(), mtime=0)


@pytest.fixture(scope="module")
def target_bytes(good):
    return good[1][TARGET], _rec(good)


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_random_corruptions_are_always_detected_and_redone(good, target_bytes, data):
    raw, rec = target_bytes
    bad = data.draw(corruptions(raw, rec))
    try:  # what the corrupted file decodes to, if anything
        same_content = json.loads(gzip.decompress(bad)) == rec
    except Exception:  # noqa: BLE001 - any failure means the content is not the record's
        same_content = False
    with tempfile.TemporaryDirectory() as tmp, pytest.MonkeyPatch.context() as mp:
        out = _copy(good, Path(tmp))
        path = experiments.record_path(out, SUITE, PROFILE, *TARGET)
        path.write_bytes(bad)
        calls = []
        mp.setattr(experiments.schedule, "run_task", _fake_run_task(good, calls))
        try:
            experiments.read_record(path)
            flagged = False
        except experiments.RecordError:
            flagged = True
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", experiments.RecordWarning)
            s = experiments.run(SUITE, PROFILE, out=out, progress=False)
        # a corruption is detected and redone unless it left the decoded record exactly as it was
        # (only possible in the unused padding bits of the deflate stream)
        assert flagged or same_content
        assert (s["bad_records"] == [path]) == flagged and (calls == [TARGET]) == flagged
        assert experiments.read_record(path) == rec
        if flagged:
            assert path.read_bytes() == raw and path.with_name(path.name + ".bad").read_bytes() == bad


# ---------------------------------------------------------------------------
# the committed records, the real recomputation, the command line
# ---------------------------------------------------------------------------
def test_every_record_under_results_is_valid():
    paths = sorted(ROOT.glob("results/*/*/tasks/*/r*.json.gz"))
    assert len(paths) >= 1000
    bad = []
    for p in paths:
        try:
            experiments.read_record(p)
        except experiments.RecordError as exc:
            bad.append(str(exc))
    assert not bad, bad[:5]


def _cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "ensvote", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, **kw)


def _main(capsys, *args):
    """The command line in this process: (exit status, stdout, stderr)."""
    from ensvote.__main__ import main

    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, err


def test_cli_reports_redoes_and_refuses_bad_records(good, tmp_path):
    out = _copy(good, tmp_path)
    for name, task in (("flipped-byte", TARGET), ("other-dataset", TARGET)):
        path = _corrupt(out, name, good)
        agg = _cli("aggregate", SUITE, "--profile", PROFILE, "--out", out)
        assert agg.returncode == 1 and agg.stdout == ""
        assert agg.stderr.count("\n") == 1 and f"error: 1 bad record(s) under" in agg.stderr and str(path) in agg.stderr
        proc = _cli("run", SUITE, "--profile", PROFILE, "--out", out)  # the real task function, computed again
        assert proc.returncode == 0, proc.stderr
        warn = [ln for ln in proc.stderr.splitlines() if "warning:" in ln]
        assert len(warn) == 1 and f"bad record {path}" in warn[0] and "computed again" in warn[0]
        assert "1 task(s) run, 3 skipped" in proc.stderr and "1 bad record(s) set aside" in proc.stderr
        assert path.read_bytes() == good[1][task]
        path.with_name(path.name + ".bad").unlink()


def test_adoption_checks_the_source_record(good, tmp_path, monkeypatch):
    # a `book` record of sonar r001 (book and paper share one parameter set)
    rec = {**_rec(good), "profile": "book", "params": BOOK}
    src = experiments.record_path(tmp_path, SUITE, "book", *TARGET)
    src.parent.mkdir(parents=True)
    src.write_bytes(_canonical(rec))
    monkeypatch.setattr(experiments.schedule, "run_task", lambda *a: pytest.fail("computed instead of adopted"))
    s = experiments.run(SUITE, "paper", out=tmp_path, datasets=["sonar"], realizations="1:2", progress=False)
    assert (s["adopted"], s["run"]) == (1, 0)
    path = experiments.record_path(tmp_path, SUITE, "paper", *TARGET)
    assert experiments.read_record(path) == {**rec, "profile": "paper"}

    bad_rec = {**rec, "result": {**rec["result"], "error_rf": -3.0}}
    src.write_bytes(_canonical(bad_rec))
    experiments.record_path(tmp_path, SUITE, "paper", *TARGET).unlink()
    calls = []
    fake = _fake_run_task(good, calls)
    monkeypatch.setattr(experiments.schedule, "run_task", lambda s_, p_, d, r: {**fake(s_, "book", d, r), "profile": p_,
                                                                  "params": BOOK})
    with pytest.warns(experiments.RecordWarning,
                      match=f"bad record {src}: .*error_rf.*not adopted into profile 'paper'"):
        s = experiments.run(SUITE, "paper", out=tmp_path, datasets=["sonar"], realizations="1:2", progress=False)
    assert (s["adopted"], s["run"]) == (0, 1) and calls == [TARGET]
    assert src.read_bytes() == _canonical(bad_rec)  # the other profile's record is left as it was


def test_run_refuses_to_write_a_record_that_would_not_be_read_back(good, tmp_path, monkeypatch):
    fake = _fake_run_task(good, [])
    monkeypatch.setattr(experiments.schedule, "run_task", lambda *a: {**fake(*a), "result": {"error_rf": 1.0}})
    with pytest.raises(ValueError, match="result has"):
        experiments.run(SUITE, PROFILE, out=tmp_path, datasets=["sonar"], realizations="0:1", progress=False)
    assert not list(tmp_path.rglob("*.json.gz")) and not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("name, match", [
    ("votes/r002.json.gz", "the task names realization 2, outside 0..1 of profile 'smoke'"),
    ("votes/r1.json.gz", "file name 'r1.json.gz' should be 'r001.json.gz'"),
    ("glass/r000.json.gz", "the task names dataset 'glass', not one of suite 'soto2016'"),
    ("votes/r000x.json.gz", "is not rNNN.json.gz"),
])
def test_records_that_do_not_belong_are_refused(good, tmp_path, name, match):
    out = _copy(good, tmp_path)
    stray = out / SUITE / PROFILE / "tasks" / name
    stray.parent.mkdir(exist_ok=True)
    stray.write_bytes(good[1][("votes", 0)])
    with pytest.raises(experiments.RecordSetError, match=match):
        experiments.aggregate(SUITE, PROFILE, out=out)


@pytest.mark.parametrize("suite", sorted(experiments.SUITES))
def test_aggregate_without_records_names_the_directory(tmp_path, capsys, suite):
    where = tmp_path / suite / "smoke" / "tasks"
    with pytest.raises(experiments.RecordSetError, match=f"no records of {suite}/smoke under {where}"):
        experiments.aggregate(suite, "smoke", out=tmp_path)
    where.mkdir(parents=True)
    with pytest.raises(experiments.RecordSetError, match=f"no records of {suite}/smoke under {where};"):
        experiments.aggregate(suite, "smoke", out=tmp_path, allow_missing=True)
    assert not list(tmp_path.rglob("*.csv"))
    status, out, err = _main(capsys, "aggregate", suite, "--profile", "smoke", "--out", tmp_path)
    assert status == 1 and out == "" and err.count("\n") == 1 and str(where) in err


def test_aggregate_refuses_an_incomplete_set_unless_allowed(good, tmp_path, capsys):
    out = _copy(good, tmp_path)
    experiments.record_path(out, SUITE, PROFILE, "votes", 1).unlink()
    experiments.record_path(out, SUITE, PROFILE, "sonar", 0).unlink()
    with pytest.raises(experiments.IncompleteRecordsError,
                       match=r"2 of 4 records missing \(sonar r000; votes r001\).*allow_missing=True") as info:
        experiments.aggregate(SUITE, PROFILE, out=out)
    assert info.value.missing == {"sonar": [0], "votes": [1]}
    assert not list(out.rglob("*.csv"))
    with pytest.warns(experiments.RecordWarning, match="2 of 4 records missing .*tabulating the 2 there are"):
        written = experiments.aggregate(SUITE, PROFILE, out=out, allow_missing=True)
    t1 = pd.read_csv(out / SUITE / PROFILE / "table1_error_disagreement.csv").set_index("problem")
    assert t1.loc["Sonar", "n_realizations"] == t1.loc["Votes", "n_realizations"] == 1
    for p in written:
        assert len(pd.read_csv(p).columns) > 1
    status, _, err = _main(capsys, "aggregate", SUITE, "--profile", PROFILE, "--out", out)
    assert status == 1 and err.count("\n") == 1 and "sonar r000; votes r001" in err
    status, stdout, err = _main(capsys, "aggregate", SUITE, "--profile", PROFILE, "--out", out, "--allow-missing")
    assert status == 0 and err.count("\n") == 1 and "warning:" in err
    assert len(stdout.splitlines()) == 4
    with pytest.raises(TypeError, match="allow_missing must be True or False"):
        experiments.aggregate(SUITE, PROFILE, out=out, allow_missing="yes")


def test_tables_without_rows_still_have_their_header(good, tmp_path):
    # records of a three-class problem only: no two-class prior to plot, but a readable fig1_priors.csv
    rec = {**_rec(good, ("sonar", 0)), "dataset": "wine"}
    rec["result"] = {**rec["result"], "n_classes": 3, "prior": None, "trees_exact_estimate": None}
    for r in range(2):
        path = experiments.record_path(tmp_path, SUITE, PROFILE, "wine", r)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_canonical({**rec, "realization": r}))
    with pytest.warns(experiments.RecordWarning):
        experiments.aggregate(SUITE, PROFILE, out=tmp_path, allow_missing=True)
    pri = pd.read_csv(tmp_path / SUITE / PROFILE / "fig1_priors.csv")
    assert list(pri.columns) == ["problem", "k", "prior_mean"] and len(pri) == 0
    cal = pd.read_csv(tmp_path / SUITE / PROFILE / "fig1_calibration.csv")
    assert set(cal["problem"]) == {"Wine"}


def test_temporary_files_are_unique_per_process_and_call(good, tmp_path, monkeypatch):
    names = []
    real_replace = os.replace
    monkeypatch.setattr(experiments.store.os, "replace", lambda a, b: (names.append(Path(a).name), real_replace(a, b)))
    experiments.store.write_atomic(tmp_path / "r000.json.gz", {"a": 1})
    experiments.store.write_atomic(tmp_path / "r000.json.gz", {"a": 1})
    experiments.store.write_csv(pd.DataFrame({"a": [1]}), tmp_path / "t.csv")
    experiments.store.write_csv(pd.DataFrame({"a": [1]}), tmp_path / "t.csv")
    assert len(set(names)) == 4 and all(f".{os.getpid()}." in n for n in names)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r000.json.gz", "t.csv"]


def test_concurrent_aggregations_do_not_collide(good, tmp_path):
    out = _copy(good, tmp_path)
    errors = []

    def agg():
        try:
            for _ in range(3):
                experiments.aggregate(SUITE, PROFILE, out=out)
        except Exception as exc:  # noqa: BLE001 - collected and reported below
            errors.append(exc)

    threads = [threading.Thread(target=agg) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert {p.name: p.read_bytes() for p in (out / SUITE / PROFILE).glob("*.csv")} == good[2]
    procs = [subprocess.Popen([sys.executable, "-m", "ensvote", "aggregate", SUITE, "--profile", PROFILE,
                               "--out", str(out)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              text=True) for _ in range(4)]
    for p in procs:
        assert p.wait(timeout=600) == 0, p.stderr.read()
    assert not list((out / SUITE / PROFILE).glob(".*.tmp"))


def test_floats_are_stored_at_record_digits(tmp_path):
    path = tmp_path / "r000.json.gz"
    x = 0.1 + 0.2  # 0.30000000000000004
    experiments.store.write_atomic(path, {"a": [x, x * (1 + 4e-16)], "b": {"c": -2.9976021664879227e-15, "n": 7}})
    rec = json.loads(gzip.decompress(path.read_bytes()))
    assert rec == {"a": [0.3, 0.3], "b": {"c": -2.99760217e-15, "n": 7}}
    assert experiments.store.RECORD_DIGITS == 9
    path.write_bytes(_canonical({"a": [x]}))  # sorted and compact, but 17 digits
    with pytest.raises(ValueError, match="floats at 9 significant digits"):
        experiments.store._decode(path.read_bytes())


def _older_cpu():
    spec = importlib.util.spec_from_file_location("dev", ROOT / "tools" / "dev.py")
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return dev.OLDER_CPU


def test_records_are_the_same_bytes_on_an_older_cpu(tmp_path):
    """The smoke runs of five suites, here and under an emulated older CPU, write identical files.

    Unrounded, 52 floats of these records differ in their last bits (relative
    differences up to 4e-15: numpy's AVX-512 kernels, OpenBLAS's, numba's target).
    """
    procs = {}
    for name, extra in (("here", {}), ("older", _older_cpu())):
        cmd = " && ".join(f"{sys.executable} -m ensvote run {suite} --profile smoke --out {tmp_path / name} --n-jobs 1"
                          for suite in ("soto2016", "headtohead", "perrow", "budget-calibration", "many-classes"))
        procs[name] = subprocess.Popen(cmd, shell=True, cwd=ROOT, env={**os.environ, **extra},
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for name, proc in procs.items():
        assert proc.wait(timeout=600) == 0, f"{name}: {proc.stderr.read()}"
    files = {name: {p.relative_to(tmp_path / name): p.read_bytes() for p in (tmp_path / name).rglob("*.json.gz")}
             for name in procs}
    assert len(files["here"]) == 16 and files["here"].keys() == files["older"].keys()
    differ = [str(p) for p in files["here"] if files["here"][p] != files["older"][p]]
    assert differ == []


@pytest.mark.parametrize("kind", ["fifo", "device", "huge"])
def test_only_regular_files_of_bounded_size_are_read(kind, good, tmp_path, monkeypatch, within):
    """A FIFO at a record path hung run and aggregate; /dev/zero or a 3 GB file was read without bound."""
    out = _copy(good, tmp_path)
    path = experiments.record_path(out, SUITE, PROFILE, *TARGET)
    path.unlink()
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path.symlink_to("/dev/zero")
    else:
        with open(path, "wb") as fh:  # sparse: no disk space used
            fh.truncate(3 * 2**30)
    why = {"fifo": "not a regular file", "device": "not a regular file", "huge": "3,221,225,472 bytes, more than"}[kind]
    with pytest.raises(experiments.RecordError, match=f"bad record {path}: {why}"):
        within(20, experiments.read_record, path)
    with pytest.raises(experiments.RecordSetError, match="1 bad record"):
        within(20, experiments.aggregate, SUITE, PROFILE, out=out)
    calls = []
    monkeypatch.setattr(experiments.schedule, "run_task", _fake_run_task(good, calls))
    with pytest.warns(experiments.RecordWarning, match="moved to r001.json.gz.bad"):
        s = within(30, experiments.run, SUITE, PROFILE, out=out, progress=False)
    assert s["bad_records"] == [path] and calls == [TARGET]
    assert path.read_bytes() == good[1][TARGET]
