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


class _CountingForest(RandomForestClassifier):
    """A forest that counts its fits (class attribute: clones share it)."""

    fits = 0

    def fit(self, X, y, **kw):
        type(self).fits += 1
        return super().fit(X, y, **kw)


@pytest.mark.parametrize("params, exc, match", [
    (dict(confidence=2.0), ValueError, "strictly between"),
    (dict(rule="nope"), ValueError, "valid names: 'infinite', 'urn', 'exact', 'fixed', 'margin', 'optimal'"),
    (dict(rule=3), TypeError, "rule must be one of"),
    (dict(prior="flat"), ValueError, "prior must be"),
    (dict(rule="optimal"), ValueError, "needs a budget"),
    (dict(rule="optimal", disagreement=2.0), ValueError, "disagreement"),
    (dict(disagreement=0.01), ValueError, "takes confidence instead"),
    (dict(n_jobs=0), ValueError, "n_jobs"),
], ids=lambda v: str(v) if isinstance(v, dict) else "")
def test_bad_parameters_fail_before_the_forest_and_leave_no_fit(params, exc, match):
    X, y = make_classification(60, 4, random_state=0)
    clf = ev.HaltingClassifier(_CountingForest(n_estimators=5, random_state=0)).fit(X, y)
    assert clf.predict(X[:2]).shape == (2,)
    fits = _CountingForest.fits
    with pytest.raises(exc, match=match):
        clf.set_params(**params).fit(X, y)
    assert _CountingForest.fits == fits  # refused before the forest was refitted
    for method in (clf.predict, clf.halt, clf.predict_proba, clf.member_votes):
        with pytest.raises(NotFittedError):  # not the old fit paired with the new parameters
            method(X[:2])


def test_a_fit_failing_after_the_forest_leaves_no_fit():
    X, y = make_classification(60, 4, random_state=0)
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=5, random_state=0)).fit(X, y)
    with pytest.raises(ValueError):  # a prior over three classes for a two-class problem: found after the forest
        clf.set_params(prior=np.full((6, 3), 1 / 3)).fit(X, y)
    assert not [k for k in vars(clf) if k.endswith("_") and not k.startswith("__")]
    with pytest.raises(NotFittedError):
        clf.predict(X[:2])


def test_oob_prior_needs_out_of_bag_rows():
    X, y = make_classification(60, 4, random_state=0)
    with pytest.raises(ValueError, match="out-of-bag"):
        ev.HaltingClassifier(RandomForestClassifier(n_estimators=5, bootstrap=False), prior="oob").fit(X, y)
    with pytest.raises(ValueError, match="out-of-bag"):
        ev.oob_prior(np.zeros((4, 2), dtype=int), 11)


def test_expected_queries_bad_method():
    with pytest.raises(ValueError, match="'mc' or 'exact'"):
        ev.expected_queries(ev.ExactRule(10), ev.uniform_prior(10), method="dp")
    with pytest.raises(ValueError, match="two and three classes"):
        ev.expected_queries(ev.ExactRule(10), ev.uniform_prior(10, 4), method="exact")


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
    with pytest.raises(ValueError, match="prior must be over the rule's ensemble size T=12: .*length T\\+1=13"):
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


# ---------------------------------------------------------------------------
# counts beyond exactly representable integers (issue: silent int64 wrap-around)
# ---------------------------------------------------------------------------
COUNT_FUNCS = [ev.current_majority, ev.infinite_confidence, ev.infinite_confidence_exact,
               ev.InfiniteRule().stop, ev.FixedRule(3).stop]


@pytest.mark.parametrize("f", COUNT_FUNCS)
@pytest.mark.parametrize("counts", [[1e19, 1.0], [1e300, 1.0], np.array([2**63, 1], dtype=np.uint64),
                                    np.array([2**62, 2**62], dtype=np.int64), [2**53, 0], [float(2**53), 0.0]],
                         ids=["1e19", "1e300", "uint64-2**63", "int64-2**62", "2**53", "float-2**53"])
def test_counts_beyond_exact_integers_are_refused(f, counts):
    with pytest.raises(ValueError, match=r"counts must be below 2\*\*53"):
        f(counts)


@pytest.mark.parametrize("f", COUNT_FUNCS)
def test_count_totals_beyond_exact_integers_are_refused(f):
    with pytest.raises(ValueError, match=r"total below 2\*\*53"):
        f([2**52, 2**52])
    # each count fits, but an int64 sum over many classes would wrap around
    with pytest.raises(ValueError, match=r"total below 2\*\*53"):
        f(np.full(2000, 2**52, dtype=np.int64))


def test_largest_exact_counts_are_accepted():
    assert ev.current_majority([2**53 - 1, 0]) == 0
    assert ev.infinite_confidence([2**52, 2**52 - 1]) == pytest.approx(0.5, abs=1e-3)
    assert ev.InfiniteRule().stop([2**50, 1])  # beyond the t* table: evaluated directly, no hang
    # beyond the table the rule decides as the table would (the same test of the confidence)
    from ensvote import rules

    t = np.array([[rules.MAX_T_STAR + 1 - k, k] for k in range(0, 600, 7)] + [[k, 3] for k in range(1, 200)])
    big = ev.InfiniteRule(0.95).stop(t)
    assert np.array_equal(big, ev.infinite_confidence(t) > 0.95) and big.any() and not big.all()
    small = t[t.sum(axis=1) <= rules.MAX_T_STAR]
    assert np.array_equal(ev.InfiniteRule(0.95).stop(small), ev.infinite_confidence(small) > 0.95)


@pytest.mark.parametrize("make", [ev.ExactRule, ev.UrnRule], ids=["ExactRule", "UrnRule"])
@pytest.mark.parametrize("counts", [[2**62, 2**62], np.array([2**63, 1], dtype=np.uint64), [1e300, 0.0]],
                         ids=["int64-overflowing-sum", "uint64", "1e300"])
def test_sum_above_T_is_reported_even_when_counts_overflow(make, counts):
    rule = make(11)
    with pytest.raises(ValueError, match="more than the rule's ensemble size T=11"):
        rule.stop(counts)
    with pytest.raises(ValueError, match="more than the rule's ensemble size T=11"):
        rule.confidence_of(counts)
    with pytest.raises(ValueError, match="more than the ensemble size T=11"):
        ev.finite_confidence(counts, 11)


def test_votes_beyond_exact_integers():
    with pytest.raises(ValueError, match=r"below 2\*\*53"):
        ev.halt(np.array([[0.0, 2.0**60]]), ev.ExactRule(2))
    with pytest.raises(ValueError, match="beyond any number of classes"):
        ev.halt(np.array([[0, 2**63]], dtype=np.uint64), ev.ExactRule(2))


# ---------------------------------------------------------------------------
# sizes that explode are checked up front, naming the limit
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("call, match", [
    (lambda: ev.finite_confidence([3, 2], 10**12), "T must be <= 100,000,000"),
    (lambda: ev.UrnRule(10**9), "T must be <= 100,000,000"),
    (lambda: ev.compositions(100, 6), r"compositions\(100, 6\) .* more than the limit of 50,000,000"),
    (lambda: ev.uniform_prior(10**6, 3), r"uniform_prior\(1000000, 3\) .* limit of 50,000,000"),
    (lambda: ev.uniform_prior(10**9), "limit of 50,000,000"),
    (lambda: ev.halt(np.array([[0, 2**40, 1]]), ev.ExactRule(3)), "n_classes would be 1,099,511,627,777"),
    (lambda: ev.halt(np.zeros((2, 3), dtype=int), ev.ExactRule(3), n_classes=2**40), "limit of 50,000,000"),
    (lambda: ev.expected_queries(ev.ExactRule(3001), ev.uniform_prior(3001), method="exact"),
     "limit of 4,000,000; use method='mc'"),
    (lambda: ev.expected_queries(ev.ExactRule(101), ev.uniform_prior(101), n_samples=10**6),
     "limit of 50,000,000"),
    (lambda: ev.finite_confidence([1, 0, 0], 50, n_mc=10**8), r"n_mc=100,000,000 .* limit of 50,000,000"),
    (lambda: ev.InfiniteRule().t_star(10**8), "t_max must be <= 100,000"),
    (lambda: ev.UrnRule(10**4).lookup_table(), r"lookup_table\(\) of T=10000 .* limit"),
    (lambda: ev.oob_prior(np.ones((3, 3), dtype=int), 10**4), r"\(T \+ 1\) \*\* \(l - 1\) entries, more than"),
], ids=["finite_confidence-T", "UrnRule-T", "compositions", "uniform_prior-3", "uniform_prior-2",
        "halt-inferred-classes", "halt-n_classes", "expected_queries-exact", "expected_queries-mc",
        "finite_confidence-n_mc", "t_star", "lookup_table", "oob_prior"])
def test_sizes_that_explode_are_refused_up_front(call, match):
    with pytest.raises(ValueError, match=match):
        call()


# ---------------------------------------------------------------------------
# every bad argument names the argument
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("f", [ev.infinite_confidence, ev.infinite_confidence_exact,
                               lambda c, label: ev.finite_confidence(c, 10, label=label)])
def test_label_of_the_wrong_shape(f):
    counts = [[3, 1], [2, 2], [1, 0]]
    with pytest.raises(ValueError, match=r"label must be one class index or an array broadcastable .* \(3,\)"):
        f(counts, label=[0, 1])
    with pytest.raises(ValueError, match="label must be"):
        f(counts, label=[[0], [1], [0]])
    assert np.shape(f(counts, label=[0, 1, 1])) == (3,)  # one label per row is fine


def test_prior_uniform_is_accepted_wherever_the_classifier_accepts_it():
    c = np.array([[4, 1, 0], [2, 2, 1]])
    assert np.array_equal(ev.finite_confidence(c, 12, prior="uniform"), ev.finite_confidence(c, 12))
    assert np.array_equal(ev.finite_confidence([4, 1], 12, prior="uniform"), ev.finite_confidence([4, 1], 12))
    u, n = ev.UrnRule(12, prior="uniform"), ev.UrnRule(12)
    assert u.prior is None and np.array_equal(u.stop(c), n.stop(c))
    assert np.array_equal(ev.rules.make_rule("urn", n_members=12, prior="uniform").stop(c), n.stop(c))
    support, probs = ev.confidence.check_prior("uniform", 12, n_classes=3)
    assert len(support) == len(probs) == 91 and np.allclose(probs, 1 / 91)
    X, y = make_classification(80, 4, random_state=0)
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=7, random_state=0), prior="uniform").fit(X, y)
    assert clf.prior_ is None and clf.predict(X).shape == (80,)


@pytest.mark.parametrize("make", [lambda p: ev.finite_confidence([3, 1], 10, prior=p),
                                  lambda p: ev.UrnRule(10, prior=p)], ids=["finite_confidence", "UrnRule"])
def test_prior_strings_other_than_uniform(make):
    with pytest.raises(ValueError, match="prior='oob' .*HaltingClassifier.*oob_prior"):
        make("oob")
    with pytest.raises(ValueError, match="prior must be None or 'uniform'"):
        make("flat")
    with pytest.raises(TypeError, match="prior probabilities must be numbers"):
        make(["a"] * 11)


@pytest.mark.parametrize("kw, exc, match", [
    ({"n_mc": 0}, ValueError, "n_mc must be >= 1"),
    ({"n_mc": -5}, ValueError, "n_mc must be >= 1"),
    ({"n_mc": 2.5}, TypeError, "n_mc must be an int"),
    ({"max_terms": "x"}, TypeError, "max_terms must be an int"),
    ({"max_terms": 0}, ValueError, "max_terms must be >= 1"),
    ({"random_state": "x"}, TypeError, "random_state"),
])
@pytest.mark.parametrize("counts", [[3, 1], [3, 1, 0]], ids=["two-classes", "three-classes"])
def test_finite_confidence_bad_keyword(kw, exc, match, counts):
    # checked up front, also where the argument would not be used (two classes, exact sum)
    with pytest.raises(exc, match=match):
        ev.finite_confidence(counts, 50, **kw)


@pytest.mark.parametrize("prior", [None, "uniform", 5, [[0.5, 0.5]]])
def test_expected_queries_prior_must_be_a_distribution(prior):
    with pytest.raises((TypeError, ValueError), match="prior must be|two-class prior must be"):
        ev.expected_queries(ev.ExactRule(10), prior)


def test_extra_trees_with_the_default_prior():
    """prior="auto" (the default): out-of-bag when the ensemble bootstraps, uniform otherwise."""
    from sklearn.ensemble import BaggingClassifier, ExtraTreesClassifier

    X, y = make_classification(120, 5, random_state=0)
    et = ev.HaltingClassifier(ExtraTreesClassifier(n_estimators=11, random_state=0)).fit(X, y)
    assert et.prior_ is None and et.predict(X).shape == (120,)
    assert np.array_equal(et.predict(X), ev.HaltingClassifier(ExtraTreesClassifier(n_estimators=11, random_state=0),
                                                              prior="uniform").fit(X, y).predict(X))
    for est in (RandomForestClassifier(n_estimators=11, random_state=0),
                ExtraTreesClassifier(n_estimators=11, bootstrap=True, random_state=0),
                BaggingClassifier(n_estimators=11, random_state=0)):
        auto = ev.HaltingClassifier(est).fit(X, y)
        oob = ev.HaltingClassifier(est, prior="oob").fit(X, y)
        assert auto.prior_ is not None and np.array_equal(auto.prior_, oob.prior_)
    with pytest.raises(ValueError, match="out-of-bag"):
        ev.HaltingClassifier(ExtraTreesClassifier(n_estimators=11), prior="oob").fit(X, y)


def test_sparse_X_is_accepted_when_the_forest_accepts_it():
    import scipy.sparse as sp
    from sklearn.ensemble import BaggingClassifier, ExtraTreesClassifier

    X, y = make_classification(200, 8, random_state=0)
    X[np.abs(X) < 0.5] = 0.0
    for est in (RandomForestClassifier(n_estimators=15, random_state=0),
                ExtraTreesClassifier(n_estimators=15, random_state=0),
                BaggingClassifier(n_estimators=15, max_features=0.6, random_state=0)):
        dense = ev.HaltingClassifier(est).fit(X, y)
        ref = dense.halt(X)
        for fmt in (sp.csr_matrix, sp.csc_matrix, sp.csr_array):
            clf = ev.HaltingClassifier(est).fit(fmt(X), y)
            res = clf.halt(fmt(X))
            assert np.array_equal(res.labels, ref.labels) and np.array_equal(res.n_queried, ref.n_queried)
            assert np.array_equal(clf.predict(fmt(X)), dense.predict(X))
            assert np.array_equal(clf.member_votes(fmt(X)), dense.member_votes(X))
            assert np.array_equal(clf.oob_votes(fmt(X)), dense.oob_votes(X))
        big = sp.csr_matrix(X)  # int64 indices, as scipy makes for large matrices
        big.indices, big.indptr = big.indices.astype(np.int64), big.indptr.astype(np.int64)
        assert np.array_equal(dense.predict(big), dense.predict(X))


@pytest.mark.parametrize("empty", [[], (), iter([])])
def test_listing_of_nothing(empty):
    from ensvote.experiments import listing

    with pytest.raises(ValueError, match="no items"):
        listing(empty)


def test_sparse_nan_is_refused_as_the_forest_refuses_it():
    """NaN in sparse X was routed differently from the same dense X (different labels, silently)."""
    import scipy.sparse as sps

    X, y = make_classification(n_samples=120, n_features=6, random_state=0)
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=11, random_state=0)).fit(X, y)
    x = np.full((2, 6), np.nan)
    assert clf.predict(x).shape == (2,)  # dense NaN is routed as the trees learned
    for method in (clf.predict, clf.predict_proba, clf.halt, clf.oob_votes, clf.member_votes):
        with pytest.raises(ValueError, match="sparse X contains NaN"):
            method(sps.csr_matrix(x))
    with pytest.raises(ValueError, match="NaN"):
        clf.estimator_.predict(sps.csr_matrix(x))  # the forest's own predict refuses it too


@pytest.mark.parametrize("rows", [50, 400])
def test_oob_votes_of_other_rows_are_refused(rows):
    """oob_votes(X) with fewer rows than the training set raised IndexError; with more, it answered."""
    X, y = make_classification(n_samples=200, n_features=6, random_state=0)
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=11, random_state=0)).fit(X, y)
    with pytest.raises(ValueError, match=f"training data passed to fit \\(200 rows\\): X has {rows} rows"):
        clf.oob_votes(np.resize(X, (rows, 6)))
    assert (clf.oob_votes(X) == clf.oob_votes_).all()


@pytest.mark.parametrize("kw, err, match", [
    ({"epsabs": -1}, ValueError, "epsabs must be a finite number >= 0"),
    ({"epsabs": float("nan")}, ValueError, "epsabs must be a finite number >= 0"),
    ({"epsrel": float("inf")}, ValueError, "epsrel must be a finite number >= 0"),
    ({"epsrel": "1e-9"}, TypeError, "epsrel must be a non-negative real number"),
    ({"epsabs": 0, "epsrel": 1e-20}, ValueError, "with epsabs=0, epsrel must be at least"),
])
def test_infinite_confidence_exact_tolerances(kw, err, match):
    """epsabs=-1 or NaN was accepted (#40 item 8)."""
    with pytest.raises(err, match=match):
        ev.infinite_confidence_exact([6, 2, 1], **kw)
    assert ev.infinite_confidence_exact([6, 2, 1], epsabs=0, epsrel=1e-9) == pytest.approx(0.8861, abs=1e-4)


class _Returns(ev.HaltingRule):
    """A custom rule whose decide returns what it is given (a function of the counts)."""

    def __init__(self, f):
        self.f = f

    def decide(self, counts):
        return self.f(counts)


# (the shape is that of the vote vectors decided together: the new ones the votes reached, see StopMemo)
@pytest.mark.parametrize("f, err, match", [
    (lambda c: True, ValueError, "_Returns.decide must return one decision per vote vector, shape \\(2,\\), got "),
    (lambda c: None, TypeError, "_Returns.decide must return a boolean numpy array of shape \\(2,\\), got NoneType"),
    (lambda c: (c.sum(-1) >= 3).astype(float), TypeError, "got an array of dtype float64"),
    (lambda c: (c.sum(-1) >= 3)[..., None], ValueError, "one decision per vote vector, shape \\(2,\\)"),
])
def test_the_decide_contract_is_checked(f, err, match):
    """True/None gave AttributeError, a wrong shape AxisError, floats silently wrong stops (#40 item 8)."""
    votes = np.random.default_rng(0).integers(0, 2, size=(6, 11))
    with pytest.raises(err, match=match):
        ev.halt(votes, _Returns(f))
    with pytest.raises(err):
        _Returns(f).stop(np.array([[2, 1], [3, 0]]))
    assert ev.halt(votes, _Returns(lambda c: c.sum(-1) >= 3)).n_queried.max() == 3


@pytest.mark.parametrize("rule", [ev.UrnRule(11), ev.ExactRule(11), ev.InfiniteRule()], ids=["urn", "exact", "infinite"])
@pytest.mark.parametrize("bad, exc", [(1, ValueError), (0, ValueError), ("2", TypeError), (2.5, TypeError)])
def test_on_demand_warning_refuses_a_bad_number_of_classes(rule, bad, exc):
    with pytest.raises(exc, match="n_classes"):
        rule.on_demand_warning(bad)
