"""The hl2011 proxy ensemble: its chunked, seeded forests must vote exactly as each tree's own predict does."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

from ensvote import datasets
from ensvote.experiments import hl2011


def _forest_votes(Xtr, ytr, Xte, max_features, n_trees, seed, chunk):
    """The reference: each chunk fitted as a RandomForestClassifier, each tree voting with its own predict."""
    classes = np.unique(ytr)
    counts = np.zeros((len(Xte), len(classes)), dtype=np.int64)
    for c, s in enumerate(hl2011.proxy_seeds(seed, n_trees, chunk)):
        k = min(chunk, n_trees - c * chunk)
        rf = RandomForestClassifier(n_estimators=k, max_features=max_features, random_state=s, n_jobs=1)
        rf.fit(Xtr, ytr)
        for tree in rf.estimators_:  # a member predicts an index into the forest's classes_
            counts[np.arange(len(Xte)), tree.predict(Xte.astype(np.float32)).astype(np.int64)] += 1
    return classes, counts


def _split(name, seed=0):
    X, y = datasets.load(name)
    idx = np.random.default_rng(seed).permutation(len(y))
    n_tr = int(round(2 * len(y) / 3))
    return X[idx[:n_tr]], y[idx[:n_tr]], X[idx[n_tr:]]


@pytest.mark.parametrize("name", ["pima", "glass", "vowel", "wine"])
@pytest.mark.parametrize("max_features", [None, "sqrt"])
def test_proxy_votes_equal_the_forests(name, max_features):
    Xtr, ytr, Xte = _split(name)
    # 3 chunks of 11 and a remainder of 4: the seeds of every chunk, and a short last chunk
    got = hl2011.proxy_votes(Xtr, ytr, Xte, max_features, 37, seed=5, chunk=11)
    ref = _forest_votes(Xtr, ytr, Xte, max_features, 37, 5, 11)
    assert np.array_equal(got[0], ref[0])
    assert got[1].dtype == np.int64 and np.array_equal(got[1], ref[1])
    assert np.all(got[1].sum(axis=1) == 37)


def test_proxy_votes_equal_the_forests_with_missing_values_and_string_labels():
    Xtr, ytr, Xte = _split("glass", seed=1)
    rng = np.random.default_rng(2)
    Xtr, Xte = Xtr.astype(float), Xte.astype(float)
    Xtr[rng.random(Xtr.shape) < 0.1] = np.nan
    Xte[rng.random(Xte.shape) < 0.1] = np.nan
    labels = np.array(["a", "b", "c", "d", "e", "f", "g"])[np.unique(ytr, return_inverse=True)[1]]
    got = hl2011.proxy_votes(Xtr, labels, Xte, "sqrt", 25, seed=3, chunk=10)
    ref = _forest_votes(Xtr, labels, Xte, "sqrt", 25, 3, 10)
    assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1])


def test_proxy_votes_refuses_what_it_does_not_grow():
    Xtr, ytr, Xte = _split("pima")
    with pytest.raises(ValueError, match="max_features must be None or 'sqrt'"):
        hl2011.proxy_votes(Xtr, ytr, Xte, "log2", 5, seed=0)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        hl2011.proxy_votes(Xtr, ytr[:-1], Xte, None, 5, seed=0)
