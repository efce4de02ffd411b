"""The urn rule for many classes: the union bound, the exact reference, the pair prior, the limits."""

import time
from fractions import Fraction
from math import comb, prod

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.datasets import load_digits
from sklearn.ensemble import RandomForestClassifier
from sklearn.model_selection import train_test_split

import ensvote as ev
from ensvote import manyclass as mc
from ensvote.experiments.manyclasses import all_states


def _random_state(rng, T, l):
    s = int(rng.integers(0, T + 1))
    p = rng.dirichlet(np.full(l, rng.choice([0.2, 1.0, 5.0])))
    return rng.multinomial(s, p)


def _majority(v):
    return max(range(len(v)), key=lambda i: (v[i], -i))


def _eq3_bruteforce(t, T):
    """Eq. 3 under the uniform prior from its definition, in exact rationals."""
    l = len(t)
    c = _majority(t)
    num = den = Fraction(0)
    for urn in ev.compositions(T, l):
        if all(a >= b for a, b in zip(urn, t)):
            w = prod(comb(int(a), int(b)) for a, b in zip(urn, t))
            den += w
            if _majority(urn) == c:
                num += w
    return num / den


# ---------------------------------------------------------------- the bound, exhaustively
@pytest.mark.parametrize("T", [101, 100])
def test_bound_is_exact_for_two_classes(T):
    states = all_states(T, 2)
    bound = mc.urn_confidence_bound(states, T)
    exact = ev.finite_confidence(states, T)
    assert np.all(bound <= exact + 1e-12)
    np.testing.assert_allclose(bound, exact, atol=2e-7)  # one rival: only float32 storage separates them


def test_bound_never_above_eq3_three_classes_T101_exhaustive():
    T = 101
    states = all_states(T, 3)
    exact = ev.UrnRule(T, method="exact").table(3)[tuple(states.T)]
    bound = mc.urn_confidence_bound(states, T)
    assert len(states) == 182_104
    assert np.max(bound - exact) < 1e-12
    for alpha in (0.9, 0.95, 0.99):
        e_stop, b_stop = exact > alpha, bound > alpha
        assert not np.any(b_stop & ~e_stop)  # the bound never stops where Eq. 3 would not
        assert (e_stop & ~b_stop).sum() < 1e-3 * e_stop.sum()  # and loses few stops
    # the rule built on the bound decides exactly that, through the engine's stop table
    rule = ev.UrnRule(T, 0.99, method="bound")
    assert np.array_equal(rule.stop(states[states.sum(1) > 0]), (bound > 0.99)[states.sum(1) > 0])


@pytest.mark.parametrize("l,T", [(4, 30), (5, 16)])
def test_bound_never_above_eq3_four_five_classes_exhaustive(l, T):
    states = all_states(T, l)
    exact = ev.UrnRule(T, method="exact").table(l)[tuple(states.T)]
    bound = mc.urn_confidence_bound(states, T)
    assert np.max(bound - exact) < 1e-12
    assert np.allclose(mc.urn_confidence_exact(states[::97], T), exact[::97], atol=1e-12)


def test_bound_and_exact_against_rational_bruteforce():
    T, l = 7, 4
    states = all_states(T, l)
    ref = np.array([float(_eq3_bruteforce(tuple(int(v) for v in t), T)) for t in states])
    np.testing.assert_allclose(mc.urn_confidence_exact(states, T), ref, atol=1e-13)
    assert np.all(mc.urn_confidence_bound(states, T) <= ref + 1e-13)


def test_exact_reference_matches_enumeration_and_monte_carlo():
    rng = np.random.default_rng(ev.SEED)
    for l, T in [(3, 30), (4, 20), (6, 12)]:
        for _ in range(10):
            t = _random_state(rng, T, l)
            assert mc.urn_confidence_exact(t, T) == pytest.approx(float(ev.finite_confidence(t, T)), abs=1e-12)
    # 26 classes: the Dirichlet-multinomial simulated directly
    T, t = 101, np.array([9, 4, 2, 1] + [0] * 22)
    n = T - t.sum()
    n_mc = 50_000
    p = rng.dirichlet(t + 1.0, size=n_mc)
    final = t + rng.multinomial(n, p)
    freq = np.mean(np.argmax(final, axis=1) == 0)
    exact = float(mc.urn_confidence_exact(t, T))
    assert exact == pytest.approx(freq, abs=4 * np.sqrt(freq * (1 - freq) / n_mc))
    assert float(mc.urn_confidence_bound(t, T)) <= exact


@settings(max_examples=30, deadline=None)
@given(st.integers(6, 26), st.integers(20, 101), st.integers(0, 2**32 - 1))
def test_bound_never_above_exact_many_classes(l, T, seed):
    t = _random_state(np.random.default_rng(seed), T, l)
    assert float(mc.urn_confidence_bound(t, T)) <= float(mc.urn_confidence_exact(t, T)) + 1e-12


@settings(max_examples=60, deadline=None)
@given(st.integers(3, 26), st.integers(5, 101), st.integers(0, 2**32 - 1))
def test_bound_grows_when_the_leader_gets_a_vote(l, T, seed):
    t = _random_state(np.random.default_rng(seed), T - 1, l)
    c = int(np.argmax(t))
    u = t.copy()
    u[c] += 1
    assert float(mc.urn_confidence_bound(u, T)) >= float(mc.urn_confidence_bound(t, T))


def test_general_recursion_reproduces_the_dirichlet_table():
    # the pair-prior code, fed the pair marginals of the uniform prior, gives the uniform table
    for l in (3, 5, 10):
        T = 40
        uni = mc.pair_table(T, l)
        gen = mc.pair_table(T, l, mc.PairPrior.uniform(T, l))
        for c in (0, l - 1):
            np.testing.assert_allclose(gen.values[c], uni.values[0], atol=1e-7)
    assert mc.PairPrior.uniform(9, 2).probs[1, 4, 5] == pytest.approx(0.1)


def test_table_memory_and_values_are_rounded_up():
    tab = mc.pair_table(101, 10)
    assert tab.values.dtype == np.float32 and tab.values.shape[:2] == (1, 2)
    assert tab.nbytes == mc.pair_table_nbytes(101, 10) + tab.base.nbytes
    assert mc.pair_table_nbytes(101, 26) == mc.pair_table_nbytes(101, 3)  # the uniform table ignores l
    assert mc.pair_table_nbytes(101, 26, per_class=True) == 26 * mc.pair_table_nbytes(101, 26)
    assert mc.pair_table(101, 10) is tab  # cached
    for l, per_class in ((3, False), (26, True)):
        t_max = mc.max_pair_table_T(l, per_class)
        assert mc.pair_table_nbytes(t_max, l, per_class) <= mc.MAX_PAIR_TABLE_BYTES
        assert mc.pair_table_nbytes(t_max + 1, l, per_class) > mc.MAX_PAIR_TABLE_BYTES


# ---------------------------------------------------------------- the rule and the engine
def test_urn_rule_methods():
    T = 30
    auto = ev.UrnRule(T, 0.9)
    states = np.array([[5, 1, 0, 0, 0], [2, 2, 1, 1, 0], [9, 0, 0, 0, 1]])
    np.testing.assert_allclose(auto.confidence_of(states), mc.urn_confidence_bound(states, T))
    exact = ev.UrnRule(T, 0.9, method="exact")
    np.testing.assert_allclose(exact.confidence_of(states), ev.finite_confidence(states, T), atol=1e-12)
    assert np.all(auto.confidence_of(states) <= exact.confidence_of(states) + 1e-12)
    assert ev.UrnRule(T, method="bound").table(3) is None and ev.UrnRule(T).table(3) is not None
    assert "method='bound'" in repr(ev.UrnRule(T, method="bound"))
    with pytest.raises(ValueError, match="method must be"):
        ev.UrnRule(T, method="fast")
    with pytest.raises(ValueError, match="needs the uniform prior"):
        ev.UrnRule(10, prior=ev.uniform_prior(10, 3), method="bound")


def test_halt_with_the_bound_matches_a_step_by_step_reference():
    T, l = 41, 6
    rng = np.random.default_rng(ev.SEED)
    p = rng.dirichlet(np.full(l, 0.3), size=60)
    votes = np.array([rng.choice(l, size=T, p=row) for row in p])
    for rule in (ev.UrnRule(T, 0.95), ev.UrnRule(T, 0.99, prior=mc.PairPrior.uniform(T, l))):
        res = ev.halt(votes, rule, n_classes=l)
        for r in range(len(votes)):
            c = np.zeros(l, dtype=int)
            for j in range(T):
                c[votes[r, j]] += 1
                if rule.stop(c) or j == T - 1:
                    break
            assert res.n_queried[r] == j + 1 and np.array_equal(res.counts[r], c)


def test_limits_raise_at_construction():
    with pytest.raises(ValueError, match="MAX_PAIR_TABLE_BYTES"):
        ev.UrnRule(600).stop([3, 1, 0, 0])
    with pytest.raises(ValueError, match="rule='infinite'"):
        ev.halt(np.zeros((2, 600), dtype=int), ev.UrnRule(600), n_classes=5)
    big = mc.PairPrior.uniform(200, 26)
    with pytest.raises(ValueError, match="prior='uniform'"):
        ev.UrnRule(200, prior=big)
    with pytest.raises(ValueError, match="T=200 members"):
        ev.UrnRule(101, prior=big)
    with pytest.raises(ValueError, match="no exact Eq. 3"):
        ev.UrnRule(200, prior=mc.PairPrior.uniform(200, 3), method="exact")
    with pytest.raises(ValueError, match="MAX_EXACT_WORK"):
        ev.UrnRule(101, method="exact").stop([3, 1, 0, 0, 0])
    assert ev.UrnRule(101, method="exact").stop([30, 1, 0, 0])  # four classes: within the limit
    with pytest.raises(TypeError, match="PairPrior"):
        ev.expected_queries(ev.UrnRule(101), mc.PairPrior.uniform(101, 4))
    # two classes need no pair table: any T works
    assert ev.UrnRule(600).stop([300, 10])


def test_pair_prior_validation():
    with pytest.raises(ValueError, match="shape"):
        mc.PairPrior(np.ones((3, 4, 5)))
    p = mc.PairPrior.uniform(5, 3).probs.copy()
    p[0, 5, 5] = 0.1
    with pytest.raises(ValueError, match="zero where"):
        mc.PairPrior(p)
    with pytest.raises(ValueError, match="sum to 1"):
        mc.PairPrior(mc.PairPrior.uniform(5, 3).probs * 2)
    with pytest.raises(TypeError, match="PairPrior"):
        mc.pair_table(5, 3, prior=np.ones(6) / 6)


# ---------------------------------------------------------------- the out-of-bag pair prior
def test_pair_prior_is_the_papers_prior_for_two_classes():
    T = 101
    rng = np.random.default_rng(ev.SEED)
    share = rng.beta(0.4, 0.3, size=300)
    n = rng.integers(25, 45, size=300)
    oob = np.column_stack([np.round(share * n), n - np.round(share * n)]).astype(int)
    paper = ev.oob_prior(oob, T)
    pair = ev.priors.pair_oob_prior(oob, T)
    x = np.arange(T + 1)
    assert np.array_equal(pair.probs[0, x, T - x], paper) and np.array_equal(pair.probs[1, T - x, x], paper)
    states = all_states(T, 2)
    hyper = ev.UrnRule(T, 0.99, prior=paper).confidence_of(states)
    via_pairs = ev.UrnRule(T, 0.99, prior=pair).confidence_of(states)
    ok = ~np.isnan(hyper)
    np.testing.assert_allclose(via_pairs[ok], hyper[ok], atol=2e-7)
    assert np.all(via_pairs[~ok] == 0)  # vote vectors the prior rules out never stop


def test_pair_histogram_by_hand():
    T = 4
    oob = np.array([[4, 0, 0, 0], [1, 1, 2, 0]])  # already T votes: no rescaling
    pr = ev.priors.pair_oob_prior(oob, T, window=1)
    # class 0 vs its 3 rivals: (4,0) three times, then (1,1), (1,2), (1,0)
    want = np.zeros((T + 1, T + 1))
    want[4, 0] = 3
    want[1, 1] = want[1, 2] = want[1, 0] = 1
    np.testing.assert_allclose(pr.probs[0], want / 6)
    assert isinstance(ev.oob_prior(oob, T), mc.PairPrior)
    assert pr.n_classes == 4 and pr.T == 4


# ---------------------------------------------------------------- end to end, ten classes
@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return train_test_split(X, y, test_size=0.5, random_state=ev.SEED, stratify=y)


@pytest.mark.parametrize("prior", ["oob", "uniform"])
def test_ten_class_halting_classifier(digits, prior):
    Xtr, Xte, ytr, yte = digits
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=101, random_state=ev.SEED),
                               prior=prior, confidence=0.99)
    t0 = time.perf_counter()
    clf.fit(Xtr, ytr)
    assert isinstance(clf.prior_, mc.PairPrior) if prior == "oob" else clf.prior_ is None
    res = clf.halt(Xte)
    assert time.perf_counter() - t0 < 120  # a hang would not end; seconds on an idle machine
    assert np.array_equal(clf.predict(Xte), res.labels)
    votes = clf.member_votes(Xte)
    full = ev.halt(votes, ev.FixedRule(101), n_classes=10)
    star = ev.halt(votes, ev.ExactRule(101), n_classes=10)
    assert np.mean(clf.classes_[full.labels] != res.labels) <= 0.015  # 1 - alpha + 0.5 points
    assert res.mean_queried < star.mean_queried
    assert np.all(res.n_queried >= 1) and np.all(res.n_queried <= 101)
    assert clf.score(Xte, yte) > 0.9


def test_the_documented_pair_table_limits_are_the_computed_ones():
    import inspect
    import re

    from ensvote import manyclass

    src = inspect.getsource(manyclass)
    comment = src[src.index("#: Largest pair table"):src.index("MAX_PAIR_TABLE_BYTES =")]
    stated = [int(v) for v in re.findall(r"T = (\d+)", comment)]
    assert stated == [manyclass.max_pair_table_T(2), manyclass.max_pair_table_T(10, per_class=True),
                      manyclass.max_pair_table_T(26, per_class=True)]


def test_check_pair_table_size_names_the_limit():
    assert mc.check_pair_table_size(21, 4) == mc.pair_table_nbytes(21, 4)
    with pytest.raises(ValueError, match=r"MAX_PAIR_TABLE_BYTES = 64 MiB \(T <= 462\).*rule='infinite'"):
        mc.check_pair_table_size(463, 4)
    with pytest.raises(ValueError, match="one table per class"):
        mc.check_pair_table_size(300, 26, per_class=True)
