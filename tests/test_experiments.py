"""ensvote.experiments: seeding, scheduling and resumability, Dask backend, the command line."""

import filecmp
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier

from ensvote import datasets, experiments

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "results" / "published"


def _same_tree(files_a, files_b):
    assert [p.name for p in files_a] == [p.name for p in files_b]
    for a, b in zip(files_a, files_b):
        assert filecmp.cmp(a, b, shallow=False), f"{a} and {b} differ"


def test_task_seed_depends_on_suite_dataset_realization_only():
    a = experiments.task_seed("hl2011", "pima", 3).generate_state(4)
    assert np.array_equal(a, experiments.task_seed("hl2011", "pima", 3).generate_state(4))
    for other in (("hl2011", "pima", 4), ("hl2011", "glass", 3), ("soto2016", "pima", 3)):
        assert not np.array_equal(a, experiments.task_seed(*other).generate_state(4))


def test_run_task_is_deterministic():
    r1 = experiments.run_task("soto2016", "smoke", "votes", 1)
    r2 = experiments.run_task("soto2016", "smoke", "votes", 1)
    assert r1 == r2


@pytest.mark.parametrize("suite", ["hl2011", "soto2016", "circle"])
def test_smoke_run_and_published_column_names(tmp_path, suite):
    summary = experiments.run(suite, "smoke", out=tmp_path, progress=False)
    assert summary["run"] > 0 and summary["skipped"] == 0
    files = experiments.aggregate(suite, "smoke", out=tmp_path)
    assert all(f.exists() for f in files)
    pairs = {"hl2011": [("table2_bagging.csv", "hl2011_table2_bagging.csv"), ("table3_rf.csv", "hl2011_table3_rf.csv")],
             "soto2016": [("table1_error_disagreement.csv", "soto2016_table1_error_disagreement.csv"),
                          ("table2_trees_speedup.csv", "soto2016_table2_trees_speedup.csv")],
             "circle": []}[suite]
    for ours, published in pairs:
        mine = pd.read_csv(tmp_path / suite / "smoke" / ours)
        pub = pd.read_csv(PUBLISHED / published)
        assert set(pub.columns) <= set(mine.columns)
        # a row per problem of the suite, in the paper's order; the published table may lack some (Table 3: wine)
        names = {"hl2011": experiments.HL2011_PROBLEMS, "soto2016": experiments.SOTO2016_PROBLEMS}[suite]
        assert list(mine["problem"]) == list(names.values())
        assert [q for q in mine["problem"] if q in set(pub["problem"])] == list(pub["problem"])
    again = experiments.run(suite, "smoke", out=tmp_path, progress=False)
    assert again["run"] == 0 and again["skipped"] == summary["run"]


def test_resume_from_a_shard_gives_identical_results(tmp_path):
    full, sharded = tmp_path / "full", tmp_path / "sharded"
    experiments.run("circle", "smoke", out=full, progress=False)
    experiments.run("circle", "smoke", out=sharded, realizations="1:2", progress=False)
    s = experiments.run("circle", "smoke", out=sharded, progress=False)
    assert s == {**s, "run": 1, "skipped": 1}
    _same_tree(experiments.aggregate("circle", "smoke", out=full),
               experiments.aggregate("circle", "smoke", out=sharded))


def _wait_until(cond, proc, what, timeout=600):
    """Poll ``cond`` until it holds; fail (not hang) if ``proc`` ends first or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not cond():
        assert proc.poll() is None, f"the run ended before {what}"
        assert time.monotonic() < deadline, f"gave up waiting for {what} after {timeout} s"
        time.sleep(0.05)


def test_killed_run_resumes_to_identical_results(tmp_path):
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    experiments.run("hl2011", "smoke", out=ref, progress=False)
    cmd = [sys.executable, "-m", "ensvote", "run", "hl2011", "--profile", "smoke", "--out", str(killed)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tasks = killed / "hl2011" / "smoke" / "tasks"
    try:
        _wait_until(lambda: list(tasks.glob("*/r*.json.gz")), proc, "its first record was written")
    finally:
        proc.kill()  # SIGKILL: no clean-up runs in the killed process
        proc.wait()
    done = sorted(tasks.glob("*/r*.json.gz"))  # whatever finished: the resume must complete the rest
    # a writer killed mid-write leaves its temporary file; it never counts as a finished task
    for name in (".r000.json.gz.999.tmp", f".r000.json.gz.{proc.pid}.{'0' * 32}.tmp"):
        (done[0].parent / name).write_bytes(b"partial")
    s = experiments.run("hl2011", "smoke", out=killed, progress=False)
    assert (s["run"], s["skipped"], s["bad_records"]) == (2 - len(done), len(done), [])
    _same_tree(experiments.aggregate("hl2011", "smoke", out=ref), experiments.aggregate("hl2011", "smoke", out=killed))


def _alive(p):
    import psutil

    try:
        return p.is_running() and p.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_killed_parallel_run_leaves_no_live_workers(tmp_path):
    """After SIGKILL of `run --n-jobs 2`, the loky workers and the resource trackers end by themselves."""
    psutil = pytest.importorskip("psutil")
    cmd = [sys.executable, "-m", "ensvote", "run", "hl2011", "--profile", "smoke", "--n-jobs", "2",
           "--out", str(tmp_path)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    parent = psutil.Process(proc.pid)

    def workers():
        try:
            kids = parent.children(recursive=True)
            return [k for k in kids if "popen_loky_posix" in " ".join(k.cmdline())]
        except psutil.Error:
            return []

    try:
        _wait_until(lambda: len(workers()) >= 2, proc, "its two workers started")
        family = parent.children(recursive=True)  # the workers and the resource trackers
    finally:
        proc.kill()
        proc.wait()
    assert len(family) >= 3
    deadline = time.monotonic() + 300  # a worker still importing notices once its imports are done
    while any(_alive(p) for p in family) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [(p.pid, p.name()) for p in family if _alive(p)]
    for p in family:  # never leave processes behind for the next tests
        if _alive(p):
            p.kill()
    assert not left, f"still alive after their parent was killed: {left}"


def test_dask_local_cluster_gives_identical_results(tmp_path):
    pytest.importorskip("dask.distributed")
    a, b = tmp_path / "default", tmp_path / "dask"
    experiments.run("soto2016", "smoke", out=a, progress=False)
    experiments.run("soto2016", "smoke", out=b, n_jobs=2, scheduler="local", progress=False)
    _same_tree(experiments.aggregate("soto2016", "smoke", out=a), experiments.aggregate("soto2016", "smoke", out=b))
    for p in sorted((a / "soto2016" / "smoke" / "tasks").rglob("*.json.gz")):
        q = b / p.relative_to(a)
        assert filecmp.cmp(p, q, shallow=False)


def test_joblib_two_workers_identical(tmp_path):
    a, b = tmp_path / "one", tmp_path / "two"
    experiments.run("circle", "smoke", out=a, progress=False)
    experiments.run("circle", "smoke", out=b, n_jobs=2, progress=False)
    _same_tree(experiments.aggregate("circle", "smoke", out=a), experiments.aggregate("circle", "smoke", out=b))


def test_datasets_without_records_keep_their_rows(tmp_path):
    experiments.run("soto2016", "smoke", out=tmp_path, datasets=["votes"], realizations="0:1", progress=False)
    with pytest.raises(experiments.IncompleteRecordsError,
                       match=r"3 of 4 records missing \(sonar r000-r001; votes r001\)"):
        experiments.aggregate("soto2016", "smoke", out=tmp_path)
    with pytest.warns(experiments.RecordWarning, match="tabulating the 1 there are"):
        experiments.aggregate("soto2016", "smoke", out=tmp_path, allow_missing=True)
    t1 = pd.read_csv(tmp_path / "soto2016" / "smoke" / "table1_error_disagreement.csv").set_index("problem")
    assert t1.loc["Votes", "n_realizations"] == 1
    row = t1.loc["New-thyroid"]
    assert row["n_realizations"] == 0 and np.isnan(row["error_rf_mean"])


def test_a_deleted_vendored_file_is_an_error_not_unavailable(tmp_path, monkeypatch):
    real = datasets.load

    def load(name, **kw):
        if name == "sonar":
            raise FileNotFoundError(2, "No such file or directory", "/deleted/sonar.csv.gz")
        return real(name, **kw)

    monkeypatch.setattr(datasets, "load", load)
    with pytest.raises(FileNotFoundError, match="sonar.csv.gz"):
        experiments.list_tasks("soto2016", "smoke")
    code = ("import sys, ensvote.datasets as d\n"
            "real = d.load\n"
            "def load(name, **kw):\n"
            "    if name == 'sonar':\n"
            "        raise FileNotFoundError(2, 'No such file or directory', '/deleted/sonar.csv.gz')\n"
            "    return real(name, **kw)\n"
            "d.load = load\n"
            "from ensvote.__main__ import main\n"
            f"sys.exit(main(['run', 'soto2016', '--profile', 'smoke', '--out', {str(tmp_path)!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert "error:" in lines[0] and "/deleted/sonar.csv.gz" in lines[0] and "offline" not in proc.stderr
    assert not (tmp_path / "soto2016").exists()


def _cli(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "ensvote", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


@pytest.mark.parametrize("args, message", [
    (["--datasets", ""], "--datasets is empty; give comma-separated dataset names of suite 'circle': circle"),
    (["--datasets", "circle,"], "--datasets 'circle,' has an empty name"),
    (["--datasets", "sonar"], "dataset(s) sonar not in suite 'circle'"),
    (["--realizations", "-1:1"], "realizations '-1:1' must satisfy 0 <= START < STOP <= 2 for this profile"),
    (["--realizations", "3"], "realizations must look like START:STOP"),
    (["--n-jobs", "0"], "n_jobs must be >= 1, got 0"),
    (["--scheduler", ""], "scheduler must be 'local' or an address"),
])
def test_cli_errors_are_one_line(tmp_path, capsys, args, message):
    from ensvote.__main__ import main

    assert main(["run", "circle", "--profile", "smoke", "--out", str(tmp_path), *args]) == 1
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and len(lines) == 1 and lines[0].startswith(f"python -m ensvote run: error: {message}")
    assert not (tmp_path / "circle").exists()  # nothing ran


def test_unreachable_scheduler_fails_fast_with_one_line(tmp_path):
    import socket

    with socket.socket() as sock:  # a loopback port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ConnectionError, match="Connection refused"):
        experiments.schedule._connect(f"tcp://127.0.0.1:{port}")
    proc = _cli("run", "circle", "--profile", "smoke", "--out", tmp_path, "--scheduler", f"tcp://127.0.0.1:{port}",
                timeout=300)
    lines = proc.stderr.splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert f"error: cannot reach the Dask scheduler at 'tcp://127.0.0.1:{port}'" in lines[0]


def test_cli_shard_run_says_why_no_tables_were_written(tmp_path):
    proc = _cli("run", "circle", "--profile", "smoke", "--out", tmp_path, "--realizations", "0:1")
    assert proc.returncode == 0, proc.stderr
    note = [ln for ln in proc.stderr.splitlines() if "note:" in ln]
    assert len(note) == 1 and "tables not written" in note[0] and "circle r001" in note[0]
    assert not list(tmp_path.rglob("*.csv"))


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="valid suites"):
        experiments.run("nope", "smoke", out=tmp_path)
    with pytest.raises(ValueError, match="valid profiles"):
        experiments.run("circle", "huge", out=tmp_path)
    with pytest.raises(ValueError, match="not in suite"):
        experiments.run("hl2011", "smoke", out=tmp_path, datasets=["sonar"])
    with pytest.raises(ValueError, match="START:STOP"):
        experiments.run("circle", "smoke", out=tmp_path, realizations="3")
    with pytest.raises(ValueError, match="0 <= START < STOP <= 2"):
        experiments.run("circle", "smoke", out=tmp_path, realizations="0:5")
    with pytest.raises(ValueError, match="n_jobs"):
        experiments.run("circle", "smoke", out=tmp_path, n_jobs=0)
    with pytest.raises(ValueError, match="empty"):
        experiments.run("circle", "smoke", out=tmp_path, datasets=[])
    with pytest.raises(ValueError, match="empty name"):
        experiments.run("circle", "smoke", out=tmp_path, datasets=["circle", ""])
    with pytest.raises(TypeError, match="list of dataset names"):
        experiments.run("circle", "smoke", out=tmp_path, datasets="circle")
    with pytest.raises(ValueError, match="scheduler must be"):
        experiments.run("circle", "smoke", out=tmp_path, scheduler="")
    assert not tmp_path.joinpath("circle").exists()
    proc = subprocess.run([sys.executable, "-m", "ensvote", "run", "nosuite", "--profile", "smoke"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_hl2011_bagging_ensemble_votes_are_cart_trees_on_bootstrap_samples():
    """The hl2011 suite's bagging ensemble, RandomForestClassifier(max_features=None) as the task builds it:
    each member vote ensvote reads is the CART tree grown on that member's bootstrap sample (bagging)."""
    from ensvote import HaltingClassifier

    X, y = datasets.load("pima")
    rf = RandomForestClassifier(n_estimators=8, max_features=None, random_state=0)
    clf = HaltingClassifier(rf, rule="exact").fit(X[:500], y[:500])
    Xt = X[500:]
    votes = clf.member_votes(Xt)  # (rows, members) class codes
    for m, (tree, drawn) in enumerate(zip(clf.estimator_.estimators_, clf.estimator_.estimators_samples_)):
        dt = DecisionTreeClassifier(random_state=tree.random_state).fit(X[:500][drawn], y[:500][drawn])
        assert np.array_equal(clf.classes_[votes[:, m]], dt.predict(Xt))


def test_paper_profile_adopts_book_records_with_identical_results(tmp_path):
    # book and paper share one parameter set and a task's seed ignores the profile,
    # so a record adopted from `book` must equal the one `paper` computes itself
    adopted, computed = tmp_path / "adopted", tmp_path / "computed"
    experiments.run("soto2016", "book", out=adopted, datasets=["sonar"], realizations="0:1", progress=False)
    s = experiments.run("soto2016", "paper", out=adopted, datasets=["sonar"], realizations="0:2", progress=False)
    assert (s["adopted"], s["run"], s["skipped"]) == (1, 1, 0)
    experiments.run("soto2016", "paper", out=computed, datasets=["sonar"], realizations="0:2", progress=False)
    a = experiments.read_record(experiments.record_path(adopted, "soto2016", "paper", "sonar", 0))
    assert a["profile"] == "paper"
    _same_tree(sorted((adopted / "soto2016" / "paper" / "tasks" / "sonar").iterdir()),
               sorted((computed / "soto2016" / "paper" / "tasks" / "sonar").iterdir()))


def test_cli_interrupted_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    """Ctrl-C in the command's own process: one line and exit status 130, not a traceback."""
    import ensvote.__main__ as cli

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "run", interrupted)
    assert cli.main(["run", "soto2016", "--profile", "smoke", "--out", str(tmp_path)]) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "interrupted; the finished records are kept: the same command resumes" in err


def test_the_registry_names_the_committed_tables_each_chapter_reads():
    # the reproducing page lists each chapter's inputs from experiments.registry; here they are checked against
    # what the chapters' code reads: `"suite" / "profile"` (or the path "results/suite/profile")
    import json
    import re

    from ensvote.experiments.registry import CHAPTER_LIVE, CHAPTER_RESULTS

    names = "|".join(map(re.escape, experiments.SUITES))
    pair = re.compile(rf'''["']({names})["']\s*/\s*["'](\w+)["']|results/({names})/(\w+)/''')
    live = re.compile(rf'''experiments\.run\(\s*["']({names})["'],\s*["']smoke["']''')
    found, found_live = {}, {}
    for nb_path in sorted((ROOT / "book").glob("*.ipynb")):
        if nb_path.stem == "reproducing":
            continue
        cells = json.loads(nb_path.read_text())["cells"]
        text = "\n".join("".join(c["source"]) for c in cells)
        pairs = {(a or c, b or d) for a, b, c, d in pair.findall(text)}
        if pairs:
            found[nb_path.stem] = pairs
        runs = set(live.findall(text))
        if runs:
            found_live[nb_path.stem] = runs
    assert found == {k: set(v) for k, v in CHAPTER_RESULTS.items()}
    assert found_live == {k: set(v) for k, v in CHAPTER_LIVE.items()}
    assert {s for v in CHAPTER_RESULTS.values() for s, _ in v} == set(experiments.SUITES)
