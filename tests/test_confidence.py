"""Hernández-Lobato, Martínez-Muñoz & Suárez (2011) Eq. 6-8 and Soto, Suárez & Martínez-Muñoz (2016) Eq. 3:
values, identities, numerics against mpmath."""

import itertools

import mpmath as mp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special

import ensvote as ev
from ensvote.confidence import check_prior

counts2 = st.tuples(st.integers(0, 60), st.integers(0, 60))
countsl = st.lists(st.integers(0, 12), min_size=3, max_size=5)


# ------------------------------------------- Hernández-Lobato et al. (2011)
def test_eq7_closed_form_small_cases():
    # P(p1 > p2 | t) for a Beta(t1+1, t2+1) posterior, by exact rational integration
    for t1, t2 in [(3, 1), (5, 0), (2, 2), (10, 7)]:
        exact = mp.quad(lambda p: p**t1 * (1 - p) ** t2, [mp.mpf(1) / 2, 1]) / mp.beta(t1 + 1, t2 + 1)
        assert ev.infinite_confidence([t1, t2], label=0) == pytest.approx(float(exact), rel=1e-12)


def test_tie_is_one_half_and_lowest_index_wins():
    assert ev.infinite_confidence([4, 4]) == pytest.approx(0.5)
    assert ev.current_majority([4, 4]) == 0
    assert ev.current_majority([1, 4, 4]) == 1
    # the reported confidence is for the lowest-index tied class
    assert ev.infinite_confidence([1, 4, 4]) == pytest.approx(ev.infinite_confidence([1, 4, 4], label=1))


@given(counts2)
def test_eq7_equals_eq8_for_two_classes(t):
    # Eq. 8's product has a single factor for l = 2: the bound is exact (Eq. 7)
    lab = int(np.argmax(t))
    eq7 = special.betainc(t[1 - lab] + 1, t[lab] + 1, 0.5)
    assert ev.infinite_confidence(t) == pytest.approx(eq7, rel=1e-13)
    assert ev.infinite_confidence_exact(t) == pytest.approx(eq7, abs=1e-10)


@settings(max_examples=30, deadline=None)
@given(countsl)
def test_eq8_is_a_lower_bound_of_eq6(t):
    bound = ev.infinite_confidence(t)
    exact = ev.infinite_confidence_exact(t)
    assert bound <= exact + 1e-10


@pytest.mark.parametrize("t", [(5, 3, 2), (4, 4, 1), (6, 3, 2, 1), (1, 0, 0, 0)])
def test_eq6_quadrature_against_mpmath(t):
    # independent check: mpmath integrates the Dirichlet density over {p_0 > p_j for all j}
    # via the same one-dimensional Gamma representation, at 30 digits
    mp.mp.dps = 30
    a = [mp.mpf(v + 1) for v in t]
    f = lambda x: mp.exp(-x) * x ** (a[0] - 1) / mp.gamma(a[0]) * mp.fprod(
        mp.gammainc(aj, 0, x, regularized=True) for aj in a[1:])
    ref = mp.quad(f, [0, a[0], mp.inf])
    assert ev.infinite_confidence_exact(t, label=0) == pytest.approx(float(ref), abs=1e-10)
    mp.mp.dps = 15


def test_eq6_against_monte_carlo_for_a_nonmajority_label():
    t = np.array([2, 5, 3, 2, 1])
    rng = np.random.default_rng(ev.SEED)
    p = rng.dirichlet(t + 1, size=400_000)
    mc = np.mean(np.argmax(p, axis=1) == 0)
    assert ev.infinite_confidence_exact(t, label=0) == pytest.approx(mc, abs=4 * np.sqrt(mc * (1 - mc) / 4e5))


@pytest.mark.parametrize("ti,tj", [(10, 3), (600, 550), (5000, 4900), (10_000, 9_800)])
def test_infinite_confidence_mpmath_relative(ti, tj):
    # I_{1/2}(tj + 1, ti + 1) = P(Binomial(ti + tj + 1, 1/2) >= tj + 1), summed exactly
    n = ti + tj + 1
    mp.mp.dps = 40
    ref = mp.fsum(mp.binomial(n, k) for k in range(tj + 1, n + 1)) / mp.mpf(2) ** n
    mp.mp.dps = 15
    assert ev.infinite_confidence([ti, tj]) == pytest.approx(float(ref), rel=1e-10)


def test_infinite_confidence_stable_at_a_million():
    v = ev.infinite_confidence([[500_400, 499_600], [10**6, 0], [3, 10**6 - 3]])
    assert np.all(np.isfinite(v)) and np.all((v >= 0) & (v <= 1))
    assert v[1] == 1.0
    assert 0.5 < v[0] < 1.0


@given(st.integers(0, 40), st.integers(0, 40))
def test_infinite_confidence_monotone(ti, tj):
    # more votes for the leader raise the confidence, more for the runner-up lower it
    if ti >= tj:
        assert ev.infinite_confidence([ti + 1, tj]) >= ev.infinite_confidence([ti, tj])
    if ti >= tj + 1:
        assert ev.infinite_confidence([ti, tj + 1]) <= ev.infinite_confidence([ti, tj])


def test_vectorised_over_leading_axes():
    t = np.arange(24).reshape(2, 4, 3)
    v = ev.infinite_confidence(t)
    assert v.shape == (2, 4)
    assert v[1, 2] == pytest.approx(ev.infinite_confidence(t[1, 2]))
    w = ev.finite_confidence(t, 200)
    assert w.shape == (2, 4)
    assert w[0, 3] == pytest.approx(ev.finite_confidence(t[0, 3], 200))


# ------------------------------------------------------- Soto et al. (2016)
def _eq3_mpmath(t, T, prior=None):
    """Eq. 3 by brute force over all urn contents, exact rationals via mpmath."""
    l = len(t)
    num = den = mp.mpf(0)
    lab = int(np.argmax(t))
    for Tv in itertools.product(range(T + 1), repeat=l - 1):
        Tv = list(Tv) + [T - sum(Tv)]
        if Tv[-1] < 0 or any(Ti < ti for Ti, ti in zip(Tv, t)):
            continue
        w = mp.fprod(mp.binomial(Ti, ti) for Ti, ti in zip(Tv, t))
        if prior is not None:
            w *= prior[Tv[0]]
        den += w
        if int(np.argmax(Tv)) == lab:
            num += w
    return num / den


@pytest.mark.parametrize("t,T", [((3, 1), 11), ((1, 3), 11), ((4, 4), 12), ((2, 1, 0), 9), ((1, 1, 2), 8)])
def test_eq3_uniform_against_brute_force(t, T):
    assert ev.finite_confidence(t, T) == pytest.approx(float(_eq3_mpmath(t, T)), rel=1e-12)


def test_eq3_with_prior_against_brute_force():
    T = 15
    rng = np.random.default_rng(ev.SEED)
    prior = rng.random(T + 1)
    prior /= prior.sum()
    for t in [(3, 1), (0, 4), (6, 6), (2, 9)]:
        ref = _eq3_mpmath(t, T, [mp.mpf(float(p)) for p in prior])
        assert ev.finite_confidence(t, T, prior=prior) == pytest.approx(float(ref), rel=1e-12)


@pytest.mark.parametrize("T", [101, 1000, 10_000])
def test_finite_uniform_mpmath_relative(T):
    mp.mp.dps = 50
    for t0, t1 in [(7, 2), (30, 25), (T // 3, T // 4)]:
        m0 = (T + 1) // 2
        ref = mp.fsum(mp.binomial(k, t0) * mp.binomial(T - k, t1) for k in range(max(t0, m0), T - t1 + 1))
        ref /= mp.binomial(T + 1, t0 + t1 + 1)  # Prop. 2 normaliser
        if t1 > t0:
            ref = 1 - ref
        assert ev.finite_confidence([t0, t1], T) == pytest.approx(float(ref), rel=1e-10)
    mp.mp.dps = 15


def test_finite_with_prior_mpmath_relative_large_T():
    T = 10_000
    k = np.arange(T + 1)
    prior = np.exp(-0.5 * ((k - 7000) / 900.0) ** 2)
    prior /= prior.sum()
    t = (40, 25)
    mp.mp.dps = 40
    w = [mp.mpf(float(prior[K])) * mp.binomial(K, t[0]) * mp.binomial(T - K, t[1]) for K in range(T + 1)]
    ref = mp.fsum(w[(T + 1) // 2:]) / mp.fsum(w)
    mp.mp.dps = 15
    assert ev.finite_confidence(t, T, prior=prior) == pytest.approx(float(ref), rel=1e-10)


def test_finite_stable_at_a_million():
    T = 10**6
    v = ev.finite_confidence([[300, 200], [10, 0], [T // 2, T // 2 - 1], [T - 5, 5]], T)
    assert np.all(np.isfinite(v)) and np.all((v >= 0) & (v <= 1))
    assert v[3] == 1.0
    prior = np.full(T + 1, 1.0 / (T + 1))
    w = ev.finite_confidence([[300, 200], [10, 0]], T, prior=prior)
    np.testing.assert_allclose(w, v[:2], rtol=1e-9)


def test_prop3_explicit_uniform_prior_equals_closed_form():
    # Prop. 3: the hypergeometric model with a uniform prior is the Dirichlet (SIBA) posterior
    for T, l in [(21, 2), (20, 2), (12, 3), (7, 4)]:
        states = np.array([c for s in range(T + 1) for c in ev.compositions(s, l)])
        closed = ev.finite_confidence(states, T)
        explicit = ev.finite_confidence(states, T, prior=ev.uniform_prior(T, l))
        np.testing.assert_allclose(closed, explicit, rtol=1e-10, atol=1e-13)


def test_finite_tends_to_infinite_as_T_grows():
    t = np.array([[7, 3], [12, 9], [20, 5], [4, 2, 1]], dtype=object)
    for row in t:
        inf = ev.infinite_confidence_exact(list(row))
        gaps = [abs(ev.finite_confidence(list(row), T) - inf) for T in (50, 500, 5000)]
        assert gaps[0] > gaps[1] > gaps[2]
        assert gaps[2] < 2e-3


def test_finite_multiclass_monte_carlo_fallback_agrees_with_exact():
    t = [3, 2, 1, 0]
    T = 40
    exact = ev.finite_confidence(t, T)
    mc = ev.finite_confidence(t, T, max_terms=10, n_mc=100_000)
    assert mc == pytest.approx(exact, abs=4 * 0.5 / np.sqrt(100_000))
    # seeded: the same call gives the same number
    assert mc == ev.finite_confidence(t, T, max_terms=10, n_mc=100_000)


def test_finite_full_count_is_certain_and_ties_go_low():
    assert ev.finite_confidence([6, 5], 11) == 1.0
    assert ev.finite_confidence([5, 5], 10) == 1.0  # final tie -> class 0, the current majority
    assert ev.finite_confidence([5, 5], 10, label=1) == 0.0


def test_impossible_state_under_prior_is_nan():
    T = 10
    prior = np.zeros(T + 1)
    prior[T] = 1.0  # every member votes class 0
    assert np.isnan(ev.finite_confidence([0, 3], T, prior=prior))
    assert ev.finite_confidence([3, 0], T, prior=prior) == 1.0


def test_compositions():
    c = ev.compositions(5, 3)
    assert c.shape == (21, 3)
    assert np.all(c.sum(axis=1) == 5)
    assert len(np.unique(c, axis=0)) == 21


def test_check_prior_forms():
    s, p = check_prior(np.full(6, 1 / 6), 5)
    assert s.shape == (6, 2) and np.all(s.sum(1) == 5)
    s3, p3 = check_prior(ev.uniform_prior(5, 3), 5)
    assert s3.shape == (21, 3)


def test_vote_vectors_differing_in_one_vote_are_distinct_for_any_integer_dtype():
    # codes near 1e17 (T = 100, 10 classes): one vote apart is one apart, exactly, whatever the dtype
    a = np.zeros((2, 10), dtype=np.int64)
    a[:, 0], a[0, 8], a[1, 9] = 99, 1, 1
    for dtype in (np.int64, np.uint64, np.int32):
        assert check_prior((a.astype(dtype), np.array([0.5, 0.5])), 100).support.shape == (2, 10)


@pytest.mark.parametrize("T, l", [(5, 2), (5, 3), (201, 3), (100, 12)])  # (100, 12): no int64 code of a row
def test_a_prior_with_a_repeated_vote_vector_is_refused(T, l):
    rng = np.random.default_rng(0)
    support = np.array([rng.multinomial(T, np.full(l, 1 / l)) for _ in range(40)])
    support = support[np.sort(np.unique(support, axis=0, return_index=True)[1])]
    probs = np.full(len(support), 1 / len(support))
    assert check_prior((support, probs), T).support.shape == support.shape  # distinct rows: accepted
    for i, j in [(0, 1), (len(support) - 1, 0), (5, len(support) - 2)]:
        twice = support.copy()
        twice[i] = support[j]
        for dtype in (np.int64, np.uint64, np.int32):
            with pytest.raises(ValueError, match="prior support rows must be distinct"):
                check_prior((twice.astype(dtype), probs), T)


@given(st.integers(0, 60), st.integers(0, 60), st.sampled_from([121, 1000, 10**6]))
def test_finite_confidence_monotone(ti, tj, T):
    # uniform prior: one more vote for the leader never lowers its confidence,
    # one more for the runner-up never raises it
    if ti >= tj:
        assert ev.finite_confidence([ti + 1, tj], T) >= ev.finite_confidence([ti, tj], T) - 1e-12
    if ti >= tj + 1:
        assert ev.finite_confidence([ti, tj + 1], T) <= ev.finite_confidence([ti, tj], T) + 1e-12
