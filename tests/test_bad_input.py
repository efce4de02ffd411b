"""Every kind of bad input gets a clear error naming the problem (one test each)."""

import numpy as np
import pytest
from sklearn.datasets import make_classification
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LogisticRegression

import ensvote as ev

FUNCS = [ev.infinite_confidence, ev.infinite_confidence_exact, lambda c: ev.finite_confidence(c, 50)]


@pytest.mark.parametrize("f", FUNCS)
def test_negative_counts(f):
    with pytest.raises(ValueError, match="non-negative"):
        f([3, -1])


@pytest.mark.parametrize("f", FUNCS)
def test_non_integer_counts(f):
    with pytest.raises(ValueError, match="integers"):
        f([2.5, 1])
    with pytest.raises(TypeError, match="integer vote counts"):
        f(["a", "b"])
    with pytest.raises(TypeError, match="integer vote counts"):
        f([True, False])


@pytest.mark.parametrize("f", FUNCS)
def test_fewer_than_two_classes(f):
    with pytest.raises(ValueError, match="at least 2 classes"):
        f([5])
    with pytest.raises(ValueError, match="scalar"):
        f(5)


def test_ragged_counts():
    with pytest.raises(ValueError, match="rectangular"):
        ev.infinite_confidence([[1, 2], [3]])


@pytest.mark.parametrize("bad", [0, 1, 1.5, -0.1, np.nan])
@pytest.mark.parametrize("make", [ev.InfiniteRule, lambda c: ev.UrnRule(11, c)])
def test_confidence_outside_unit_interval(make, bad):
    with pytest.raises(ValueError, match="strictly between 0 and 1"):
        make(bad)


def test_confidence_wrong_type():
    with pytest.raises(TypeError, match="real number"):
        ev.InfiniteRule("0.99")


def test_counts_above_T():
    with pytest.raises(ValueError, match="more than the ensemble size T=10"):
        ev.finite_confidence([6, 5], 10)
    with pytest.raises(ValueError, match="T=10"):
        ev.UrnRule(10).stop([6, 5])
    with pytest.raises(ValueError, match="T=10"):
        ev.UrnRule(10).confidence_of([6, 5])


def test_label_out_of_range():
    with pytest.raises(ValueError, match="label must lie in 0..1"):
        ev.infinite_confidence([3, 1], label=2)


def test_prior_wrong_shape():
    with pytest.raises(ValueError, match="length T\\+1=11"):
        ev.finite_confidence([3, 1], 10, prior=np.full(10, 0.1))
    with pytest.raises(ValueError, match="over 2 classes but counts have 3"):
        ev.finite_confidence([3, 1, 0], 10, prior=np.full(11, 1 / 11))
    with pytest.raises(ValueError, match="sum to T=10"):
        ev.UrnRule(10, prior=(np.array([[5, 4, 0]]), np.array([1.0])))
    with pytest.raises(ValueError, match="shape \\(2,\\)"):
        ev.UrnRule(10, prior=(np.array([[5, 5, 0], [4, 6, 0]]), np.array([1.0])))


def test_prior_negative():
    p = np.full(11, 1 / 11)
    p[0], p[1] = -0.1, p[1] + 0.1
    with pytest.raises(ValueError, match="non-negative"):
        ev.UrnRule(10, prior=p)


def test_prior_nan():
    p = np.full(11, 1 / 11)
    p[3] = np.nan
    with pytest.raises(ValueError, match="finite"):
        ev.finite_confidence([2, 1], 10, prior=p)


def test_prior_not_normalised():
    with pytest.raises(ValueError, match="sum to 1"):
        ev.UrnRule(10, prior=np.full(11, 0.1))


def test_votes_label_out_of_range():
    with pytest.raises(ValueError, match="outside 0..1"):
        ev.halt(np.array([[0, 1, 2]]), ev.ExactRule(3), n_classes=2)
    with pytest.raises(ValueError, match=">= 0"):
        ev.halt(np.array([[0, -1, 1]]), ev.ExactRule(3))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64])
def test_votes_negative_or_too_large_any_dtype(dtype):
    # the range check is one pass over the votes seen as unsigned: a negative
    # vote (large as unsigned) and a too-large one must both be caught
    base = np.zeros((40, 9), dtype=dtype)
    for bad, match in ((-1, ">= 0, found -1"), (np.iinfo(dtype).min, ">= 0"), (3, "label 3, outside 0..2")):
        v = base.copy()
        v[37, 8] = bad  # in a member after every row's stop, and in a non-contiguous view below
        with pytest.raises(ValueError, match=match):
            ev.halt(v, ev.UrnRule(9), n_classes=3)
        with pytest.raises(ValueError, match=match):
            ev.halt(np.asfortranarray(v)[:, ::1], ev.UrnRule(9), n_classes=3)
    v = base.copy()
    v[5, 8] = -2
    with pytest.raises(ValueError, match=">= 0, found -2"):
        ev.halt(v[:, ::2], ev.UrnRule(5))  # strided columns, n_classes inferred
    v[5, 8] = 4
    assert ev.halt(v, ev.UrnRule(9)).counts.shape == (40, 5)  # inferred l = max + 1


def test_votes_wrong_dimension():
    with pytest.raises(ValueError, match="shape \\(n_rows, n_members\\)"):
        ev.halt(np.array([0, 1, 1]), ev.ExactRule(3))
    with pytest.raises(ValueError, match="shape \\(n_rows, n_members\\)"):
        ev.halt(np.zeros((2, 3, 1), dtype=int), ev.ExactRule(3))
    with pytest.raises(TypeError, match="integer class indices"):
        ev.halt(np.array([["a", "b"]]), ev.ExactRule(2))
    with pytest.raises(ValueError, match="rectangular"):
        ev.halt([[0, 1], [1]], ev.ExactRule(2))


def test_rule_ensemble_size_mismatch():
    with pytest.raises(ValueError, match="built for T=5"):
        ev.halt(np.zeros((2, 3), dtype=int), ev.UrnRule(5))
    with pytest.raises(TypeError, match="HaltingRule"):
        ev.halt(np.zeros((2, 3), dtype=int), "urn")


def test_fixed_rule_n_outside_range():
    with pytest.raises(ValueError, match="1..T"):
        ev.halt(np.zeros((2, 3), dtype=int), ev.FixedRule(4))
    with pytest.raises(ValueError, match=">= 1"):
        ev.FixedRule(0)
    with pytest.raises(TypeError, match="int"):
        ev.FixedRule(2.5)


def test_T_not_positive_int():
    with pytest.raises(ValueError, match="T must be >= 1"):
        ev.UrnRule(0)
    with pytest.raises(TypeError, match="T must be an int"):
        ev.finite_confidence([1, 0], 10.0)


def test_unfitted_classifier():
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=5))
    for method in (clf.predict, clf.halt, clf.member_votes):
        with pytest.raises(NotFittedError):
            method(np.zeros((2, 3)))


@pytest.mark.parametrize("est", [LogisticRegression(), GradientBoostingClassifier(n_estimators=3)])
def test_estimator_not_a_voting_ensemble(est):
    X, y = make_classification(50, 4, random_state=0)
    with pytest.raises(TypeError, match="voting ensemble"):
        ev.HaltingClassifier(est).fit(X, y)


def test_wrong_number_of_features():
    X, y = make_classification(60, 4, random_state=0)
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=5, random_state=0)).fit(X, y)
    with pytest.raises(ValueError, match="features"):
        clf.predict(X[:, :3])


def test_bad_rule_and_prior_names():
    X, y = make_classification(60, 4, random_state=0)
    with pytest.raises(ValueError, match="valid names"):
        ev.HaltingClassifier(RandomForestClassifier(n_estimators=5), rule="siba").fit(X, y)
    with pytest.raises(ValueError, match="prior must be"):
        ev.HaltingClassifier(RandomForestClassifier(n_estimators=5), prior="flat").fit(X, y)
    with pytest.raises(ValueError, match="strictly between"):
        ev.HaltingClassifier(RandomForestClassifier(n_estimators=5), confidence=1.0).fit(X, y)


def test_oob_prior_needs_out_of_bag_rows():
    X, y = make_classification(60, 4, random_state=0)
    with pytest.raises(ValueError, match="out-of-bag"):
        ev.HaltingClassifier(RandomForestClassifier(n_estimators=5, bootstrap=False)).fit(X, y)
    with pytest.raises(ValueError, match="out-of-bag"):
        ev.oob_prior(np.zeros((4, 2), dtype=int), 11)


def test_expected_queries_bad_method():
    with pytest.raises(ValueError, match="'mc' or 'exact'"):
        ev.expected_queries(ev.ExactRule(10), ev.uniform_prior(10), method="dp")
    with pytest.raises(ValueError, match="two classes"):
        ev.expected_queries(ev.ExactRule(10), ev.uniform_prior(10, 3), method="exact")


def test_smoothing_window_must_be_odd():
    with pytest.raises(ValueError, match="span must be odd"):
        ev.priors.smooth_moving_average(np.ones(10), 4)
    with pytest.raises(ValueError, match="one-dimensional"):
        ev.priors.smooth_moving_average(np.ones((3, 3)), 5)
    with pytest.raises(ValueError, match="window must be odd"):
        ev.oob_prior(np.array([[3, 1], [2, 2]]), 11, window=4)


def test_oob_prior_bad_votes():
    with pytest.raises(ValueError, match="non-negative"):
        ev.oob_prior(np.array([[3, -1]]), 11)
    with pytest.raises(ValueError, match="shape \\(n_rows, n_classes\\)"):
        ev.oob_prior(np.zeros((2, 2, 2), dtype=int), 11)


def test_expected_queries_bad_rule_and_samples():
    with pytest.raises(TypeError, match="HaltingRule"):
        ev.expected_queries("urn", ev.uniform_prior(10))
    with pytest.raises(ValueError, match="n_samples must be >= 1"):
        ev.expected_queries(ev.ExactRule(10), ev.uniform_prior(10), n_samples=0)
    with pytest.raises(ValueError, match="built for T=12"):
        ev.expected_queries(ev.UrnRule(12), ev.uniform_prior(10))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # scikit-learn's cast, then its error
def test_predict_rejects_infinite_or_float32_overflowing_features():
    # the trees see float32 (as RandomForestClassifier.predict does): 1e300 would become inf
    X, y = make_classification(200, 6, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(7, random_state=ev.SEED)).fit(X, y)
    for bad in (np.inf, -np.inf, 1e300):
        Xb = X[:5].copy()
        Xb[2, 3] = bad
        for method in (clf.predict, clf.halt, clf.member_votes):
            with pytest.raises(ValueError, match="infinity or a value too large"):
                method(Xb)
    Xn = X[:5].copy()
    Xn[1, 0] = np.nan  # NaN is allowed: scikit-learn's trees route missing values
    assert clf.predict(Xn).shape == (5,)
