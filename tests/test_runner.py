"""Experiment runner: seeding, resumability, atomic records, Dask backend, aggregation."""

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

from ensvote import datasets, runner

ROOT = Path(__file__).resolve().parents[1]
PUBLISHED = ROOT / "results" / "published"


def _same_tree(files_a, files_b):
    assert [p.name for p in files_a] == [p.name for p in files_b]
    for a, b in zip(files_a, files_b):
        assert filecmp.cmp(a, b, shallow=False), f"{a} and {b} differ"


def test_task_seed_depends_on_suite_dataset_realization_only():
    a = runner.task_seed("hl2011", "pima", 3).generate_state(4)
    assert np.array_equal(a, runner.task_seed("hl2011", "pima", 3).generate_state(4))
    for other in (("hl2011", "pima", 4), ("hl2011", "glass", 3), ("soto2016", "pima", 3)):
        assert not np.array_equal(a, runner.task_seed(*other).generate_state(4))


def test_run_task_is_deterministic():
    r1 = runner.run_task("soto2016", "smoke", "votes", 1)
    r2 = runner.run_task("soto2016", "smoke", "votes", 1)
    assert r1 == r2


@pytest.mark.parametrize("suite", ["hl2011", "soto2016", "circle"])
def test_smoke_run_and_published_column_names(tmp_path, suite):
    summary = runner.run(suite, "smoke", out=tmp_path, progress=False)
    assert summary["run"] > 0 and summary["skipped"] == 0
    files = runner.aggregate(suite, "smoke", out=tmp_path)
    assert all(f.exists() for f in files)
    pairs = {"hl2011": [("table2_bagging.csv", "hl2011_table2_bagging.csv"), ("table3_rf.csv", "hl2011_table3_rf.csv")],
             "soto2016": [("table1_error_disagreement.csv", "soto2016_table1_error_disagreement.csv"),
                          ("table2_trees_speedup.csv", "soto2016_table2_trees_speedup.csv")],
             "circle": []}[suite]
    for ours, published in pairs:
        mine = pd.read_csv(tmp_path / suite / "smoke" / ours)
        pub = pd.read_csv(PUBLISHED / published)
        assert set(pub.columns) <= set(mine.columns)
        assert list(mine["problem"]) == list(pub["problem"]) or suite == "hl2011"
        assert set(pub["problem"]) <= set(mine["problem"])
    again = runner.run(suite, "smoke", out=tmp_path, progress=False)
    assert again["run"] == 0 and again["skipped"] == summary["run"]


def test_resume_from_a_shard_gives_identical_results(tmp_path):
    full, sharded = tmp_path / "full", tmp_path / "sharded"
    runner.run("circle", "smoke", out=full, progress=False)
    runner.run("circle", "smoke", out=sharded, realizations="1:2", progress=False)
    s = runner.run("circle", "smoke", out=sharded, progress=False)
    assert s == {**s, "run": 1, "skipped": 1}
    _same_tree(runner.aggregate("circle", "smoke", out=full), runner.aggregate("circle", "smoke", out=sharded))


def test_killed_run_resumes_to_identical_results(tmp_path):
    ref, killed = tmp_path / "ref", tmp_path / "killed"
    runner.run("hl2011", "smoke", out=ref, progress=False)
    cmd = [sys.executable, "-m", "ensvote", "run", "hl2011", "--profile", "smoke", "--out", str(killed)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    tasks = killed / "hl2011" / "smoke" / "tasks"
    deadline = time.time() + 120
    while time.time() < deadline and not list(tasks.glob("*/r*.json.gz")):
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    done = list(tasks.glob("*/r*.json.gz"))
    assert 1 <= len(done) < 2, "the run should have been killed half way"
    # a killed run may leave a temporary file behind; it never counts as a finished task
    (done[0].parent / ".r009.json.gz.999.tmp").write_bytes(b"partial")
    s = runner.run("hl2011", "smoke", out=killed, progress=False)
    assert s["run"] == 1 and s["skipped"] == 1
    _same_tree(runner.aggregate("hl2011", "smoke", out=ref), runner.aggregate("hl2011", "smoke", out=killed))


def test_dask_local_cluster_gives_identical_results(tmp_path):
    pytest.importorskip("dask.distributed")
    a, b = tmp_path / "default", tmp_path / "dask"
    runner.run("soto2016", "smoke", out=a, progress=False)
    runner.run("soto2016", "smoke", out=b, n_jobs=2, scheduler="local", progress=False)
    _same_tree(runner.aggregate("soto2016", "smoke", out=a), runner.aggregate("soto2016", "smoke", out=b))
    for p in sorted((a / "soto2016" / "smoke" / "tasks").rglob("*.json.gz")):
        q = b / p.relative_to(a)
        assert filecmp.cmp(p, q, shallow=False)


def test_joblib_two_workers_identical(tmp_path):
    a, b = tmp_path / "one", tmp_path / "two"
    runner.run("circle", "smoke", out=a, progress=False)
    runner.run("circle", "smoke", out=b, n_jobs=2, progress=False)
    _same_tree(runner.aggregate("circle", "smoke", out=a), runner.aggregate("circle", "smoke", out=b))


def test_unavailable_datasets_keep_their_rows(tmp_path, monkeypatch):
    monkeypatch.delenv("ENSVOTE_DATA_DIR", raising=False)
    tasks, missing = runner.list_tasks("soto2016", "book")
    assert {"new-thyroid", "echocardiogram", "horse-colic"} <= set(missing)
    assert not any(d in missing for d, _ in tasks)
    runner.run("soto2016", "smoke", out=tmp_path, datasets_=["votes"], realizations="0:1", progress=False)
    runner.aggregate("soto2016", "smoke", out=tmp_path)
    t1 = pd.read_csv(tmp_path / "soto2016" / "smoke" / "table1_error_disagreement.csv")
    row = t1.set_index("problem").loc["New-thyroid"]
    assert row["n_realizations"] == 0 and np.isnan(row["error_rf_mean"])


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="valid suites"):
        runner.run("nope", "smoke", out=tmp_path)
    with pytest.raises(ValueError, match="valid profiles"):
        runner.run("circle", "huge", out=tmp_path)
    with pytest.raises(ValueError, match="not in suite"):
        runner.run("hl2011", "smoke", out=tmp_path, datasets_=["sonar"])
    with pytest.raises(ValueError, match="START:STOP"):
        runner.run("circle", "smoke", out=tmp_path, realizations="3")
    with pytest.raises(ValueError, match="0 <= START < STOP <= 2"):
        runner.run("circle", "smoke", out=tmp_path, realizations="0:5")
    with pytest.raises(ValueError, match="n_jobs"):
        runner.run("circle", "smoke", out=tmp_path, n_jobs=0)
    proc = subprocess.run([sys.executable, "-m", "ensvote", "run", "nosuite", "--profile", "smoke"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 2 and "invalid choice" in proc.stderr


def test_random_forest_without_feature_sampling_is_bagging():
    """Each tree of RandomForestClassifier(max_features=None) is the CART tree that
    DecisionTreeClassifier grows on that tree's bootstrap sample: bagging."""
    X, y = datasets.load("pima")
    rf = RandomForestClassifier(n_estimators=8, max_features=None, random_state=0).fit(X[:500], y[:500])
    Xt = X[500:]
    for tree, drawn in zip(rf.estimators_, rf.estimators_samples_):
        dt = DecisionTreeClassifier(random_state=tree.random_state).fit(X[drawn], y[drawn])
        assert np.array_equal(dt.predict(Xt), rf.classes_[tree.predict(Xt).astype(int)])


def test_paper_profile_adopts_book_records_with_identical_results(tmp_path):
    # book and paper share one parameter set and a task's seed ignores the profile,
    # so a record adopted from `book` must equal the one `paper` computes itself
    adopted, computed = tmp_path / "adopted", tmp_path / "computed"
    runner.run("soto2016", "book", out=adopted, datasets_=["sonar"], realizations="0:1", progress=False)
    s = runner.run("soto2016", "paper", out=adopted, datasets_=["sonar"], realizations="0:2", progress=False)
    assert (s["adopted"], s["run"], s["skipped"]) == (1, 1, 0)
    runner.run("soto2016", "paper", out=computed, datasets_=["sonar"], realizations="0:2", progress=False)
    a = runner.read_record(runner.record_path(adopted, "soto2016", "paper", "sonar", 0))
    assert a["profile"] == "paper"
    _same_tree(sorted((adopted / "soto2016" / "paper" / "tasks" / "sonar").iterdir()),
               sorted((computed / "soto2016" / "paper" / "tasks" / "sonar").iterdir()))
