"""The runner under faults (#40): Ctrl-C, a writer killed mid-write, stray files, concurrent runners, a listener
that is not a Dask scheduler, and results paths blocked by a file or leading outside through a symlink.

Each fault gives one clear line and loses no record; none hangs.
"""

import copy
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest

from ensvote import experiments
from ensvote.__main__ import main

ROOT = Path(__file__).resolve().parents[1]
SUITE, PROFILE = "soto2016", "smoke"
TASKS = [("sonar", 0), ("sonar", 1), ("votes", 0), ("votes", 1)]
#: A segment of tqdm's progress bar on stderr (the bar redraws itself with carriage returns).
BAR = re.compile(rf"^{SUITE}/{PROFILE}:\s+\d+%\|")


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    """The records of a complete soto2016/smoke run (computed once), by task."""
    out = tmp_path_factory.mktemp("good")
    experiments.run(SUITE, PROFILE, out=out, progress=False)
    return {t: experiments.record_path(out, SUITE, PROFILE, *t).read_bytes() for t in TASKS}


@pytest.fixture
def fake_task(good, monkeypatch):
    """run_task returns the known records (recomputation is deterministic: tests/test_experiments.py); the calls."""
    calls = []

    def fake(suite, profile, dataset, r):
        calls.append((dataset, r))
        return copy.deepcopy(json.loads(gzip.decompress(good[(dataset, r)])))

    monkeypatch.setattr(experiments.schedule, "run_task", fake)
    return calls


def _copy(good, out, skip=()):
    for t in TASKS:
        if t not in skip:
            path = experiments.record_path(out, SUITE, PROFILE, *t)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(good[t])
    return out / SUITE / PROFILE / "tasks"


def _lines(stderr):
    """The lines of stderr, without the progress bar's."""
    return [s for s in re.split(r"[\r\n]", stderr) if s.strip() and not BAR.match(s)]


def _main(capsys, *args):
    status = main([str(a) for a in args])
    out, err = capsys.readouterr()
    return status, out, _lines(err)


def _leftovers(tasks):
    """Temporary and claim files under ``tasks``: a run leaves none behind."""
    return sorted(p.name for p in tasks.rglob(".*"))


# --------------------------------------------------------------------------
# 1. Ctrl-C
# --------------------------------------------------------------------------
def _alive(p):
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _interrupted_run(cmd, tasks):
    """Start ``cmd`` in a session of its own; once its first record is written, Ctrl-C its process group again and
    again until it ends: ``(returncode, stderr, seconds from the first Ctrl-C to the end, its processes)``."""
    psutil = pytest.importorskip("psutil")
    # as from a terminal: Ctrl-C's default action, even where this test runs as a background job of a
    # non-interactive shell (which starts its children with SIGINT ignored, and Python keeps it ignored)
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    family = {}
    deadline = time.monotonic() + 120
    try:
        while not list(tasks.glob("*/r*.json.gz")):
            assert proc.poll() is None, f"the run ended before its first record: {proc.stderr.read()}"
            assert time.monotonic() < deadline, "no record after 120 s"
            try:
                family.update((p.pid, p) for p in psutil.Process(proc.pid).children(recursive=True))
            except psutil.Error:
                pass
            time.sleep(0.02)
        t0 = time.monotonic()
        while proc.poll() is None and time.monotonic() < t0 + 10:  # Ctrl-C, again and again until it ends
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.05)
        _, err = proc.communicate(timeout=30)
        return proc.returncode, err, time.monotonic() - t0, family
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_ctrl_c_stops_the_run_with_one_line(tmp_path, n_jobs):
    """SIGINT to the process group, as a terminal sends it, again and again (an impatient user): exit 130, one line.

    A second Ctrl-C used to kill the clean-up of the first (exit by SIGINT, or a traceback), and a worker hit
    between two tasks printed a traceback.
    """
    for attempt in range(3):  # a run that finished all its tasks before the first Ctrl-C landed proves nothing
        out = tmp_path / str(attempt)
        tasks = out / SUITE / PROFILE / "tasks"
        cmd = [sys.executable, "-m", "ensvote", "run", SUITE, "--profile", PROFILE, "--out", str(out),
               "--n-jobs", str(n_jobs)]
        returncode, err, took, family = _interrupted_run(cmd, tasks)
        if not (returncode == 0 and len(list(tasks.glob("*/r*.json.gz"))) == len(TASKS)):
            break
    assert returncode == 130, err
    assert _lines(err) == ["python -m ensvote run: interrupted; the finished records are kept: the same command "
                           "resumes"], err
    assert took < 10
    done = list(tasks.glob("*/r*.json.gz"))
    assert done and all(experiments.read_record(p) for p in done)
    assert _leftovers(tasks) == []
    deadline = time.monotonic() + 10  # the workers are killed before the exit; the resource trackers follow
    while any(map(_alive, family.values())) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p.pid for p in family.values() if _alive(p)]
    for p in family.values():  # never leave processes behind for the next tests
        if _alive(p):
            p.kill()
    assert left == []


# --------------------------------------------------------------------------
# 2. a writer killed mid-write
# --------------------------------------------------------------------------
def test_resume_removes_the_temporary_files_of_a_killed_writer(good, fake_task, tmp_path):
    tasks = _copy(good, tmp_path, skip=[("sonar", 1)])
    # what SIGKILL during write_atomic leaves: a dead writer's and (pid reuse) a live process's
    for pid in (2**22 + 1, os.getppid()):
        (tasks / "sonar" / f".r001.json.gz.{pid}.{uuid.uuid4().hex}.tmp").write_bytes(b"\x1f\x8bpartial")
    s = experiments.run(SUITE, PROFILE, out=tmp_path, progress=False)
    assert (s["run"], s["skipped"]) == (1, 3) and fake_task == [("sonar", 1)]
    assert _leftovers(tasks) == []
    assert (tasks / "sonar" / "r001.json.gz").read_bytes() == good[("sonar", 1)]


# --------------------------------------------------------------------------
# 3. stray record-like files
# --------------------------------------------------------------------------
STRAYS = {"sonar/r005.json.gz": "realization 5, outside 0..1", "votes/r0.json.gz": "should be 'r000.json.gz'",
          "votes/rabc.json.gz": "is not rNNN.json.gz", "foo/r000.json.gz": "dataset 'foo', not one of suite"}


def test_stray_files_are_reported_and_set_aside_by_run(good, fake_task, tmp_path, capsys):
    tasks = _copy(good, tmp_path)
    for name in STRAYS:
        (tasks / name).parent.mkdir(exist_ok=True)
        (tasks / name).write_bytes(good[("votes", 0)])
    status, out, err = _main(capsys, "aggregate", SUITE, "--profile", PROFILE, "--out", tmp_path)
    assert status == 1 and out == "" and len(err) == 1
    assert "4 bad record(s)" in err[0] and "a file that names no task as *.stray" in err[0]
    assert sum(str(tasks / name) in err[0] for name in STRAYS) == 3  # the first three, by path

    status, out, err = _main(capsys, "run", SUITE, "--profile", PROFILE, "--out", tmp_path)
    assert status == 0 and fake_task == []
    warned = [ln for ln in err if "warning:" in ln]
    assert len(warned) == 4
    for (name, why), line in zip(sorted(STRAYS.items()), warned):
        path = tasks / name
        assert f"{path} names no task of {SUITE}/{PROFILE}" in line and why in line
        assert f"moved to {path.name}.stray" in line and not path.exists()
        assert path.with_name(path.name + ".stray").read_bytes() == good[("votes", 0)]  # kept, not deleted
    assert len(out.split()) == 4 and all(p.endswith(".csv") for p in out.split())  # the tables, written


# --------------------------------------------------------------------------
# 4. concurrent runners
# --------------------------------------------------------------------------
def test_concurrent_runners_neither_abort_nor_compute_a_task_twice(good, tmp_path):
    bad = experiments.record_path(tmp_path, SUITE, PROFILE, "sonar", 1)
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a record")  # both find it: it is set aside once
    cmd = [sys.executable, "-m", "ensvote", "run", SUITE, "--profile", PROFILE, "--out", str(tmp_path)]
    procs = [subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    ran = [int(re.search(r"(\d+) task\(s\) run", e).group(1)) for e in errs]
    assert sum(ran) == len(TASKS), errs
    for t in TASKS:
        assert experiments.record_path(tmp_path, SUITE, PROFILE, *t).read_bytes() == good[t]
    tasks = tmp_path / SUITE / PROFILE / "tasks"
    assert [p.name for p in tasks.rglob("*.bad*")] == ["r001.json.gz.bad"] and _leftovers(tasks) == []


# --------------------------------------------------------------------------
# 5. a listener that is not a Dask scheduler
# --------------------------------------------------------------------------
@pytest.mark.parametrize("answer", [None, b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/html\r\n\r\n<p>no</p>\n"])
def test_a_listener_that_is_not_a_scheduler_fails_within_the_timeout(tmp_path, capsys, monkeypatch, answer, within):
    """A silent listener, or one answering HTTP, hung ``Client`` forever despite its timeout."""
    monkeypatch.setattr(experiments.schedule, "SCHEDULER_TIMEOUT", 1)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        address = f"tcp://127.0.0.1:{sock.getsockname()[1]}"
        if answer is not None:
            def serve():
                with sock.accept()[0] as conn:
                    conn.sendall(answer)
            threading.Thread(target=serve, daemon=True).start()
        before = {t for t in threading.enumerate() if not t.daemon}
        t0 = time.monotonic()
        status = within(15, main, ["run", "circle", "--profile", "smoke", "--out", str(tmp_path),
                                    "--scheduler", address])
        took = time.monotonic() - t0
    err = _lines(capsys.readouterr().err)
    assert status == 1 and len(err) == 1 and took < 5, (err, took)
    assert err[0].startswith(f"python -m ensvote run: error: cannot reach the Dask scheduler at '{address}' "
                             "within 1 s")
    assert {t for t in threading.enumerate() if not t.daemon} <= before  # nothing keeps the process alive


# --------------------------------------------------------------------------
# 6. and 7. the results path: a file in the way, a symlink leading out
# --------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["out", "tasks/sonar"])
def test_a_file_in_the_way_is_named_before_anything_runs(tmp_path, capsys, monkeypatch, where):
    monkeypatch.setattr(experiments.schedule, "run_task", lambda *a: pytest.fail("computed"))
    out = tmp_path / "results"
    block = out if where == "out" else out / SUITE / PROFILE / where
    block.parent.mkdir(parents=True, exist_ok=True)
    block.write_text("a file")
    status, _, err = _main(capsys, "run", SUITE, "--profile", PROFILE, "--out", out)
    assert status == 1 and err == [f"python -m ensvote run: error: cannot write records under {out}: {block} is a "
                                   "file, not a directory"]


def test_records_are_never_written_through_a_symlink_inside_out(good, fake_task, tmp_path, capsys):
    elsewhere, real = tmp_path / "elsewhere", tmp_path / "real"
    elsewhere.mkdir()
    real.mkdir()
    link = real / SUITE / PROFILE / "tasks" / "sonar"
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere, target_is_directory=True)
    status, _, err = _main(capsys, "run", SUITE, "--profile", PROFILE, "--out", real)
    assert status == 1 and len(err) == 1 and f"cannot write records under {real}: {link} is a symlink" in err[0]
    assert list(elsewhere.iterdir()) == [] and fake_task == []

    link.unlink()  # the results directory itself may be a symlink: the user's choice
    (tmp_path / "out").symlink_to(real, target_is_directory=True)
    status, _, err = _main(capsys, "run", SUITE, "--profile", PROFILE, "--out", tmp_path / "out")
    assert status == 0, err
    assert all(experiments.record_path(real, SUITE, PROFILE, *t).read_bytes() == good[t] for t in TASKS)


def test_aggregate_never_writes_tables_through_a_symlink_inside_out(good, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "results"
    (out / SUITE).mkdir(parents=True)
    (out / SUITE / PROFILE).symlink_to(outside, target_is_directory=True)
    _copy(good, out)
    with pytest.raises(ValueError, match="is a symlink"):
        experiments.aggregate(SUITE, PROFILE, out=out)
    assert not list(outside.glob("*.csv"))
