"""HaltingClassifier: behaviour, scikit-learn estimator checks."""

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import BaggingClassifier, ExtraTreesClassifier, RandomForestClassifier
from sklearn.tree import DecisionTreeClassifier
from sklearn.utils.estimator_checks import parametrize_with_checks

import ensvote as ev


@pytest.fixture(scope="module")
def data():
    X, y = make_classification(1200, 10, n_informative=5, n_classes=3, random_state=ev.SEED)
    return X[:800], y[:800], X[800:], y[800:]


@pytest.mark.parametrize("est", [
    RandomForestClassifier(n_estimators=51, random_state=0),
    ExtraTreesClassifier(n_estimators=51, bootstrap=True, random_state=0),
    BaggingClassifier(DecisionTreeClassifier(), n_estimators=51, random_state=0),
    BaggingClassifier(DecisionTreeClassifier(), n_estimators=51, max_features=0.6, random_state=0),
])
def test_member_votes_match_the_ensembles_own_trees(est, data):
    X, y, Xt, yt = data
    clf = ev.HaltingClassifier(est).fit(X, y)
    votes = clf.member_votes(Xt)
    feats = getattr(clf.estimator_, "estimators_features_", [slice(None)] * clf.n_members_)
    for j, tree in enumerate(clf.estimator_.estimators_):
        own = tree.predict(Xt[:, feats[j]]).astype(int)
        assert np.array_equal(votes[:, j], own)
    exact = ev.HaltingClassifier(est, rule="exact").fit(X, y)
    assert np.array_equal(exact.predict(Xt), clf.classes_[ev.halt(votes, ev.FixedRule(51)).labels])


def test_labels_are_in_class_space_and_rules_by_name(data):
    X, y, Xt, yt = data
    names = np.array(["ant", "bee", "cat"])
    for rule in ("urn", "infinite", "exact"):
        clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=41, random_state=0), rule=rule).fit(X, names[y])
        pred = clf.predict(Xt)
        assert set(pred) <= set(names)
        assert clf.score(Xt, names[yt]) > 0.7
        res = clf.halt(Xt)
        assert res.counts.shape == (len(Xt), 3) and np.all(res.n_queried <= 41)


def test_oob_prior_and_halting_speed(data):
    X, y, Xt, yt = data
    yb = (y == 0).astype(int)
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=101, random_state=0)).fit(X, yb)
    assert clf.prior_.shape == (102,) and clf.prior_.sum() == pytest.approx(1.0)
    oob = clf.oob_votes(X)
    assert np.all(oob.sum(1) > 10)  # ~37 of 101 trees leave each row out
    assert np.array_equal(clf.prior_, ev.oob_prior(oob, 101))
    res = clf.halt(Xt)
    full = ev.HaltingClassifier(clf.estimator, rule="exact").fit(X, yb).predict(Xt)
    assert res.mean_queried < 30
    assert np.mean(res.labels != full) < 0.03
    uni = ev.HaltingClassifier(clf.estimator, prior="uniform").fit(X, yb)
    assert uni.prior_ is None and isinstance(uni.rule_, ev.UrnRule)


def test_rule_object_is_used(data):
    X, y, Xt, _ = data
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=21, random_state=0), rule=ev.FixedRule(5)).fit(X, y)
    assert np.all(clf.halt(Xt).n_queried == 5)
    with pytest.raises(ValueError, match="T=31"):
        ev.HaltingClassifier(RandomForestClassifier(n_estimators=21), rule=ev.UrnRule(31)).fit(X, y)
    with pytest.raises(ValueError, match="1..T"):
        ev.HaltingClassifier(RandomForestClassifier(n_estimators=21), rule=ev.FixedRule(40)).fit(X, y)


def test_nan_input_supported_by_forest():
    X, y = make_classification(300, 5, random_state=0)
    X[::7, 2] = np.nan
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=31, random_state=0)).fit(X, y)
    res = clf.halt(X)
    assert np.array_equal(
        ev.HaltingClassifier(RandomForestClassifier(n_estimators=31, random_state=0), rule="exact").fit(X, y).predict(X),
        clf.classes_[ev.halt(clf.member_votes(X), ev.FixedRule(31)).labels])
    assert len(res.labels) == 300


@parametrize_with_checks([
    ev.HaltingClassifier(RandomForestClassifier(n_estimators=15, random_state=0)),
    ev.HaltingClassifier(BaggingClassifier(DecisionTreeClassifier(), n_estimators=15, random_state=0),
                         rule="infinite"),
])
def test_sklearn_estimator_checks(estimator, check):
    """Every check scikit-learn applies to a classifier runs; none is skipped by us.

    scikit-learn itself skips its array-API check unless SCIPY_ARRAY_API=1 is set
    (the forests underneath do not support the array API, so it would not apply).
    """
    check(estimator)


def test_fit_warns_when_the_rule_would_evaluate_on_demand(monkeypatch):
    # three classes, T = 171: (T + 1)**3 vote vectors exceed the urn rule's dense table, and the stop
    # bits stop at MAX_STOP_BITS_T3 (lowered here to 170); the out-of-bag prior has no union bound, so
    # every new vote vector would cost a sum over the prior
    import warnings

    X, y = make_classification(150, 6, n_informative=4, n_classes=3, random_state=0)
    forest = RandomForestClassifier(n_estimators=171, max_depth=2, random_state=0)
    with monkeypatch.context() as m:
        m.setattr(ev.rules, "MAX_STOP_BITS_T3", 170)
        with pytest.warns(ev.SlowVoteWarning, match="T=171 members and 3 classes.*MAX_STOP_BITS_T3 = 170.*at most 170"):
            ev.HaltingClassifier(forest, prior="oob").fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ev.SlowVoteWarning)
        ev.HaltingClassifier(forest, prior="uniform").fit(X, y)  # the union bound: a table
        ev.HaltingClassifier(forest, rule="infinite").fit(X, y)
        ev.HaltingClassifier(forest, prior="oob").fit(X, y)  # stop bits up to MAX_STOP_BITS_T3 = 1,001
        ev.HaltingClassifier(forest.set_params(n_estimators=169), prior="oob").fit(X, y)


def test_pickled_classifier_predicts_the_same_and_carries_no_confidence_table():
    import pickle

    X, y = make_classification(300, 6, n_informative=4, n_classes=3, random_state=0)
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=101, random_state=0)).fit(X, y)
    rule = pickle.loads(pickle.dumps(clf.rule_))
    assert len(pickle.dumps(clf.rule_)) < 10**6  # its prior, not the 102**3 confidence table (8 MB)
    np.testing.assert_array_equal(rule.confidence_of([[5, 1, 0], [3, 3, 2]]), clf.rule_.confidence_of([[5, 1, 0], [3, 3, 2]]))
    again = pickle.loads(pickle.dumps(clf))
    np.testing.assert_array_equal(again.predict(X), clf.predict(X))
    np.testing.assert_array_equal(again.halt(X).n_queried, clf.halt(X).n_queried)
