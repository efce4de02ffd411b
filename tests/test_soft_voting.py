"""Soft voting stopped exactly (HaltingClassifier(voting="soft")): the labels are the forest's own predict on
every row — every benchmark problem, every supported ensemble, dense and sparse X, any n_jobs, and
adversarial rows built to sit on exact ties and on float rounding — with fewer members queried."""

import numpy as np
import pytest
from scipy import sparse
from sklearn.ensemble import BaggingClassifier, ExtraTreesClassifier, RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

import ensvote as ev
from ensvote import datasets
from ensvote.engine import TreeEnsemble
from ensvote.experiments import SYNTHETIC, soto2016


def _problem(name, n_max=600):
    kw = {"n_samples": n_max, "random_state": ev.SEED} if name in SYNTHETIC else {}
    X, y = datasets.load(name, **kw)
    idx = np.random.default_rng(ev.SEED).permutation(len(y))[:n_max]
    X, y = X[idx], y[idx]
    n = len(y) // 2
    return X[:n], y[:n], X[n:]


@pytest.mark.parametrize("name", sorted(soto2016.PROBLEMS))
def test_labels_are_the_forests_predict_on_every_benchmark_problem(name):
    Xtr, ytr, Xte = _problem(name)
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=31, random_state=ev.SEED),
                               voting="soft").fit(Xtr, ytr)
    own = clf.estimator_.predict(Xte)
    res = clf.halt(Xte)
    assert np.array_equal(clf.predict(Xte), own)
    assert np.array_equal(res.labels, own)
    assert np.array_equal(clf.predict(sparse.csr_matrix(np.nan_to_num(Xte))),
                          clf.estimator_.predict(np.nan_to_num(Xte)))
    assert (res.n_queried <= 31).all() and res.counts is None
    full = res.n_queried == 31  # the rows that queried every member: the forest's own probabilities
    assert np.array_equal(clf.predict_proba(Xte)[full], clf.estimator_.predict_proba(Xte)[full])


@pytest.mark.parametrize("est", [
    ExtraTreesClassifier(n_estimators=40, random_state=0),  # even T: exact ties of the sum are possible
    BaggingClassifier(DecisionTreeClassifier(max_depth=3), n_estimators=25, max_samples=0.2, max_features=0.5,
                      random_state=0),  # members that never saw a class, on feature subsets
])
def test_other_ensembles_dense_sparse_and_threads_agree(est):
    Xtr, ytr, Xte = _problem("waveform", 1200)
    clf = ev.HaltingClassifier(est, voting="soft").fit(Xtr, ytr)
    own = clf.estimator_.predict(Xte)
    dense = clf.halt(Xte)
    assert np.array_equal(dense.labels, own)
    for other in (clf.set_params(n_jobs=2).halt(Xte), clf.halt(sparse.csr_matrix(Xte))):
        assert np.array_equal(other.labels, dense.labels)
        assert np.array_equal(other.n_queried, dense.n_queried)
        assert np.array_equal(other.proba_sum, dense.proba_sum)
    assert dense.mean_queried < clf.n_members_


def _stumps(n_members, leaf_proba):
    """An ensemble of one-leaf trees (every row reaches node 0) with the given class probabilities."""
    X = np.zeros((4, 1))
    tree = DecisionTreeClassifier().fit(X, [0, 1, 0, 1]).tree_  # a single leaf: never splits
    assert tree.node_count == 1
    return TreeEnsemble([tree] * n_members, [None] * n_members, [np.zeros(1, dtype=int)] * n_members,
                        leaf_proba.shape[1], leaf_proba=[p[None, :] for p in leaf_proba])


def _sklearn_label(leaf_proba):
    """scikit-learn's predict for one row: the probabilities summed in member order, divided by T, argmax."""
    total = np.zeros(leaf_proba.shape[1])
    for p in leaf_proba:
        total += p
    return int(np.argmax(total / len(leaf_proba)))


@pytest.mark.parametrize("case", ["exact tie", "tie after rounding", "last member decides", "third class",
                                  "a lead of exactly the members left"])
def test_adversarial_rows_on_ties_and_rounding(case):
    rng = np.random.default_rng(ev.SEED)
    if case == "exact tie":  # halves, every member: the sum ends level, the lower index wins
        P = np.full((30, 2), 0.5)
    elif case == "tie after rounding":  # 0.1 + 0.2 style sums: level in exact arithmetic, not in floats
        P = np.tile([[0.1, 0.2, 0.7], [0.2, 0.1, 0.7]], (20, 1))[:, [0, 1, 2]]
        P = np.column_stack([P[:, 0] + P[:, 2] * 0.5, P[:, 1] + P[:, 2] * 0.5])
    elif case == "last member decides":  # level after T - 1 members, the last one tips it
        P = np.vstack([np.tile([[1.0, 0.0], [0.0, 1.0]], (25, 1)), [[0.49, 0.51]]])
    elif case == "third class":  # three classes, two of them neck and neck behind random members
        P = np.vstack([rng.dirichlet([1, 1, 1], size=40), np.tile([[0.3, 0.3, 0.4]], (5, 1))])
    else:  # class 1 leads by 3 with 3 members to come, all for class 0: a tie, which class 0 wins
        P = np.array([[0.0, 1.0]] * 3 + [[1.0, 0.0]] * 3)
    ens = _stumps(len(P), P)
    res = ens.soft_halt(np.zeros((1, 1), dtype=np.float32))
    assert res.labels[0] == _sklearn_label(P)
    if case in ("exact tie", "last member decides", "a lead of exactly the members left"):
        assert res.n_queried[0] == len(P)  # nothing is decided before the end
    assert ens.soft_halt(sparse.csr_matrix(np.zeros((1, 1), dtype=np.float32))).labels[0] == res.labels[0]


def test_a_clear_lead_stops_as_soon_as_the_rest_cannot_catch_up():
    # 11 members that each give class 1 probability 1: after k members the lead is k, with 11 - k to come
    P = np.tile([[0.0, 1.0]], (11, 1))
    res = _stumps(11, P).soft_halt(np.zeros((1, 1), dtype=np.float32))
    assert res.labels[0] == 1 and res.n_queried[0] == 6  # 6 > 5 members left


@pytest.mark.parametrize("l", [2, 3, 4])
def test_a_lead_of_exactly_the_margin_goes_on(l):
    # class 1 leads by exactly 3 after 3 members; the margin after member 3 is set so that need + eps is 3.0:
    # "leads by more than" the margin is false, so the row goes on (two and three classes take loops of their
    # own in the compiled kernel, more classes the general one; sparse rows the numpy loop)
    from ensvote.kernel import soft_margin

    P = np.zeros((6, l))
    P[:3, 1] = 1.0
    P[3:, 0] = 1.0
    eps = soft_margin(len(P))
    need = np.full(len(P), np.inf)
    need[2] = 3.0 - eps
    assert need[2] + eps == 3.0
    ens = _stumps(len(P), P)
    for X in (np.zeros((1, 1), dtype=np.float32), sparse.csr_matrix(np.zeros((1, 1), dtype=np.float32))):
        res = ens.soft_halt(X, need=need)
        assert res.n_queried[0] == 6 and res.labels[0] == 0  # the 3:3 tie at the end, to the lower index
        need_less = need.copy()
        need_less[2] = np.nextafter(need[2], -np.inf)  # a hair less: the lead of 3 is now more, it stops
        res = ens.soft_halt(X, need=need_less)
        assert res.n_queried[0] == 3 and res.labels[0] == 1


def test_soft_voting_takes_no_rule_and_refuses_bad_values():
    X, y, _ = _problem("twonorm", 200)
    forest = RandomForestClassifier(n_estimators=5, random_state=0)
    for bad in ({"voting": "medium"}, {"voting": None}, {"voting": "soft", "rule": "exact"},
                {"voting": "soft", "rule": ev.ExactRule(5)}, {"voting": "soft", "max_members": 3.0}):
        with pytest.raises(ValueError, match="voting"):
            ev.HaltingClassifier(forest, **bad).fit(X, y)
    clf = ev.HaltingClassifier(forest, voting="soft").fit(X, y)
    assert clf.rule_ is None and clf.prior_ is None
    tree = clf.estimator_.estimators_[0].tree_
    with pytest.raises(ValueError, match="leaf probabilities"):
        TreeEnsemble([tree], [None], [np.zeros(tree.node_count, dtype=int)], 2).soft_halt(
            np.zeros((1, X.shape[1]), dtype=np.float32))


@parametrize_with_checks([
    ev.HaltingClassifier(RandomForestClassifier(n_estimators=15, random_state=0), voting="soft"),
])
def test_sklearn_estimator_checks_soft(estimator, check):
    check(estimator)
