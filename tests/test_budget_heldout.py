"""The budget mode out of sample: the deconvolved out-of-bag prior and the cross-validated budget."""

import mpmath
import numpy as np
import pytest
from scipy import special, stats

from ensvote.optimal import CrossValidatedBudget, OptimalRule, cross_validated_budget, policy_value
from ensvote.priors import VoteMixture, deconvolved_oob_prior, oob_prior

T = 101


def _mixture_rows(rng, n):
    """A member's probability of class 0 per row: mostly near-unanimous rows, a tenth contested."""
    c = rng.choice(3, size=n, p=[0.55, 0.35, 0.10])
    return np.where(c == 0, rng.beta(40, 0.6, n), np.where(c == 1, rng.beta(0.6, 40, n), rng.uniform(0.25, 0.75, n)))


def _true_prior():
    """The distribution of a T-member urn under the mixture above (numerical integration)."""
    x = np.linspace(0, 1, 20001)[1:-1]
    dens = (0.55 * stats.beta.pdf(x, 40, 0.6) + 0.35 * stats.beta.pdf(x, 0.6, 40)
            + 0.10 * stats.uniform.pdf(x, 0.25, 0.5))
    pr = stats.binom.pmf(np.arange(T + 1)[:, None], T, x[None]) @ (dens / dens.sum())
    return pr / pr.sum()


def _oob_votes(rng, p):
    """Each row's out-of-bag votes: about T / e members, each votes class 0 with probability p."""
    m = rng.binomial(T, np.exp(-1), len(p))
    k = rng.binomial(m, p)
    return np.stack([k, m - k], 1)


# ---------------------------------------------------------------- held out
def test_budget_mode_meets_the_budget_on_fresh_urns():
    """The defect: the policy built under oob_prior overshoots δ on fresh urns; the budget mode does not.

    The rows' urns are drawn from a known distribution, so the disagreement on
    fresh rows is computed exactly (no test-row noise).
    """
    rng = np.random.default_rng(0)
    oob = _oob_votes(rng, _mixture_rows(rng, 1000))
    truth = _true_prior()
    delta = 0.01
    plug_in = OptimalRule(T, delta, prior=oob_prior(oob, T))
    assert plug_in.expected_disagreement <= delta  # met under its own prior ...
    assert policy_value(plug_in, truth).disagreement > 1.15 * delta  # ... not on fresh urns
    rule = OptimalRule.from_oob_votes(oob, T, delta)
    fresh = policy_value(rule, truth)
    assert fresh.disagreement <= delta
    assert fresh.members < 0.1 * T  # still a large saving
    assert rule.target_disagreement == delta
    assert isinstance(rule.cross_validation, CrossValidatedBudget)
    assert rule.disagreement == rule.cross_validation.budget <= delta
    assert rule.expected_disagreement <= rule.disagreement


# ---------------------------------------------------------------- the deconvolved prior
def test_deconvolved_prior_recovers_a_binomial_urn():
    """Rows that all share p = 0.3: the urn of T fresh members is Binomial(T, 0.3)."""
    rng = np.random.default_rng(1)
    oob = _oob_votes(rng, np.full(2000, 0.3))
    prior = deconvolved_oob_prior(oob, T)
    assert prior.shape == (T + 1,) and np.isclose(prior.sum(), 1.0)
    truth = stats.binom.pmf(np.arange(T + 1), T, 0.3)
    assert 0.5 * np.abs(prior - truth).sum() < 0.05
    # the rescaled, smoothed histogram of the paper is far wider (the out-of-bag votes are only ~T/e)
    assert 0.5 * np.abs(oob_prior(oob, T) - truth).sum() > 0.2


def test_deconvolved_prior_keeps_the_contested_mass():
    """oob_prior's smoothing inflates the unanimous end points; the deconvolved prior does not."""
    rng = np.random.default_rng(2)
    oob = _oob_votes(rng, _mixture_rows(rng, 2000))
    truth = _true_prior()
    k = np.arange(T + 1)
    contested = (k >= 25) & (k <= 76)
    true_mass = truth[contested].sum()
    assert abs(deconvolved_oob_prior(oob, T)[contested].sum() / true_mass - 1) < 0.1
    assert oob_prior(oob, T)[contested].sum() / true_mass < 0.9


def test_deconvolved_prior_three_classes():
    rng = np.random.default_rng(3)
    p = rng.dirichlet([0.3, 0.3, 0.3], size=300)
    oob = np.array([rng.multinomial(37, q) for q in p])
    support, probs = deconvolved_oob_prior(oob, T)
    assert support.shape[1] == 3 and np.all(support.sum(1) == T)
    assert np.isclose(probs.sum(), 1.0) and np.all(probs > 0)
    rule = OptimalRule(T, 0.01, prior=(support, probs))
    assert rule.expected_disagreement <= 0.01


@pytest.mark.parametrize("T_urn", [1, 2, 17, 60])
@pytest.mark.parametrize("uniform", [0.0, 0.25])
def test_three_class_urn_prior_is_the_mixture_of_multinomials_to_the_last_bit(T_urn, uniform):
    """VoteMixture.prior builds log pmf block by block; the direct (vote vectors x grid x classes) formula agrees bit for bit."""
    rng = np.random.default_rng(5)
    p = rng.dirichlet([0.4, 0.4, 0.4], size=120)
    mix = VoteMixture(np.array([rng.multinomial(rng.integers(3, 40), q) for q in p]), 20)
    a, b = np.meshgrid(np.arange(T_urn + 1), np.arange(T_urn + 1), indexing="ij")
    ok = a + b <= T_urn
    support = np.stack([a[ok], b[ok], T_urn - a[ok] - b[ok]], 1)
    logpmf = (special.gammaln(T_urn + 1) - special.gammaln(support + 1).sum(1))[:, None] \
        + special.xlogy(support[:, None, :], mix.grid[None]).sum(-1)
    pr = np.exp(logpmf) @ mix.weights
    if uniform:
        pr = (1.0 - uniform) * (pr / pr.sum()) + uniform / len(pr)
    keep = pr > 0
    got_support, got = mix.prior(T_urn, uniform=uniform)
    np.testing.assert_array_equal(got_support, support[keep])
    np.testing.assert_array_equal(got, pr[keep] / pr[keep].sum())
    if not uniform:  # and the formula is the mixture of multinomials (mpmath, 30 digits, a few vote vectors)
        mpmath.mp.dps = 30
        for row in support[keep][::max(1, len(got) // 5)]:
            pmf = [mpmath.factorial(T_urn) * mpmath.fprod(mpmath.mpf(float(q)) ** int(k) / mpmath.factorial(int(k))
                                                        for q, k in zip(pt, row)) for pt in mix.grid]
            exact = mpmath.fsum(mpmath.mpf(float(w)) * f for w, f in zip(mix.weights, pmf))
            i = np.nonzero((got_support == row).all(1))[0][0]
            assert abs(got[i] * pr[keep].sum() / float(exact) - 1) < 1e-12


@pytest.mark.parametrize("votes, kwargs, match", [
    (np.ones((5, 4), dtype=int), {}, "2 or 3 classes"),
    (np.ones(5, dtype=int), {}, "shape"),
    (np.array([[3, 1], [0, 0]]), {}, "at least two"),
    (np.array([[3, 1], [2, 2]]), {"resolution": 1}, "resolution"),
    (np.array([[3, -1], [2, 2]]), {}, "oob_votes"),
])
def test_deconvolved_prior_bad_input(votes, kwargs, match):
    with pytest.raises(ValueError, match=match):
        deconvolved_oob_prior(votes, T, **kwargs)


# ---------------------------------------------------------------- the cross-validated budget
def test_cross_validated_budget_is_at_most_the_target():
    rng = np.random.default_rng(4)
    oob = _oob_votes(rng, _mixture_rows(rng, 400))
    cv = cross_validated_budget(oob, T, 0.01)
    assert cv.target == 0.01
    assert 0 < cv.budget <= 0.01
    assert cv.cv_disagreement <= 0.01
    assert cv == cross_validated_budget(oob, T, 0.01)  # seeded folds: reproducible


@pytest.mark.parametrize("kwargs, error, match", [
    ({"disagreement": 0.0}, ValueError, "disagreement"),
    ({"disagreement": float("nan")}, ValueError, "disagreement"),
    ({"disagreement": 0.01, "n_folds": 1}, ValueError, "n_folds"),
    ({"disagreement": 0.01, "n_folds": 2.5}, TypeError, "n_folds"),
    ({"disagreement": 0.01, "n_folds": 20}, ValueError, "at least 40 rows"),
    ({"disagreement": 0.01, "T": 1002}, ValueError, "T=1002"),
    ({"disagreement": 0.01, "rtol": 0.0}, ValueError, "rtol"),
    ({"disagreement": 0.01, "rtol": float("nan")}, ValueError, "rtol"),
    ({"disagreement": 0.01, "max_rounds": 0}, ValueError, "max_rounds"),
])
def test_cross_validated_budget_bad_input(kwargs, error, match):
    oob = np.array([[3, 1], [2, 2], [4, 0], [0, 4], [1, 3], [2, 1], [3, 3], [0, 5], [5, 0], [1, 1]] * 2)
    kw = {"T": T, **kwargs}
    with pytest.raises(error, match=match):
        cross_validated_budget(oob, kw.pop("T"), kw.pop("disagreement"), **kw)


def test_from_oob_votes_bad_input():
    with pytest.raises(ValueError, match="disagreement"):
        OptimalRule.from_oob_votes(np.array([[3, 1], [2, 2]] * 10), T, 0.6)
    with pytest.raises(ValueError, match="2 or 3 classes"):
        OptimalRule.from_oob_votes(np.ones((20, 4), dtype=int), T, 0.01)


# ---------------------------------------------------------------- how held-out rows are scored
def test_deconvolved_scoring_is_closer_to_the_truth_than_rescaled_votes():
    """For a fixed policy, a fold's deconvolved prior tracks the true disagreement better than its rescaled votes.

    Rescaled out-of-bag votes (about T / e of them, scaled up to T) are
    noisier than the urn they stand for; the deconvolution models that noise.
    """
    truth = _true_prior()
    policies = {delta: OptimalRule(T, delta, prior=truth) for delta in (0.05, 0.1)}
    for seed in (11, 12, 13):  # three samples of 4,000 rows
        rng = np.random.default_rng(seed)
        oob = _oob_votes(rng, _mixture_rows(rng, 4000))
        rescaled, deconvolved = oob_prior(oob, T, window=1), deconvolved_oob_prior(oob, T)
        for policy in policies.values():
            exact = policy_value(policy, truth).disagreement
            error_rescaled = policy_value(policy, rescaled).disagreement - exact
            error_deconvolved = policy_value(policy, deconvolved).disagreement - exact
            assert error_rescaled < 0  # the rescaled votes see too little disagreement ...
            assert abs(error_deconvolved) < abs(error_rescaled)  # ... the deconvolved fold less so


def test_cross_validated_budget_heldout_choices():
    rng = np.random.default_rng(4)
    oob = _oob_votes(rng, _mixture_rows(rng, 400))
    dec = cross_validated_budget(oob, T, 0.01)
    assert dec == cross_validated_budget(oob, T, 0.01, heldout="deconvolved")  # the default
    resc = cross_validated_budget(oob, T, 0.01, heldout="rescaled")
    assert 0 < resc.budget <= 0.01 and resc.cv_disagreement <= 0.01
    assert dec != resc  # scored differently, so a different budget
    assert resc == cross_validated_budget(oob, T, 0.01, heldout="rescaled")  # reproducible (and the cache
    assert dec == cross_validated_budget(oob, T, 0.01)                      # keeps the two apart)
    for heldout, cv in (("deconvolved", dec), ("rescaled", resc)):
        rule = OptimalRule.from_oob_votes(oob, T, 0.01, heldout=heldout)
        assert rule.cross_validation == cv and rule.disagreement == cv.budget
    assert OptimalRule.from_oob_votes(oob, T, 0.01).cross_validation == dec  # the same default


@pytest.mark.parametrize("heldout", ["smoothed", None, 1])
def test_cross_validated_budget_bad_heldout(heldout):
    oob = np.array([[3, 1], [2, 2], [4, 0], [0, 4], [1, 3], [2, 1], [3, 3], [0, 5], [5, 0], [1, 1]] * 2)
    with pytest.raises(ValueError, match="heldout must be 'rescaled' or 'deconvolved'"):
        cross_validated_budget(oob, T, 0.01, heldout=heldout)
    with pytest.raises(ValueError, match="heldout"):
        OptimalRule.from_oob_votes(oob, T, 0.01, heldout=heldout)


@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf"), True, "3"])
def test_bad_uniform_rows(bad):
    oob = _oob_votes(np.random.default_rng(0), _mixture_rows(np.random.default_rng(0), 60))
    with pytest.raises(ValueError, match="uniform_rows must be a finite number >= 0"):
        cross_validated_budget(oob, T, 0.01, uniform_rows=bad)
    with pytest.raises(ValueError, match="uniform_rows"):
        OptimalRule.from_oob_votes(oob, T, 0.01, uniform_rows=bad)


@pytest.mark.parametrize("l", [2, 3])
def test_uniform_rows_mix_the_uniform_prior_in(l):
    """The prior a policy is built under is the deconvolved one and the uniform one, as m : uniform_rows."""
    from ensvote.optimal import _mixture_prior
    from ensvote.priors import VoteMixture

    rng = np.random.default_rng(5)
    m, Tl = 80, (T if l == 2 else 31)
    oob = rng.multinomial(37, rng.dirichlet(np.full(l, 0.5), size=m))
    mix = VoteMixture(oob, 50)
    plain, mixed = _mixture_prior(oob, Tl, 50, 0.0), _mixture_prior(oob, Tl, 50, 4.0)
    if l == 2:
        assert np.array_equal(plain, mix.prior(Tl))  # 0 changes nothing
        np.testing.assert_allclose(mixed, (m * plain + 4.0 / (Tl + 1)) / (m + 4.0), rtol=1e-12)
    else:
        support, probs = mixed
        assert len(support) == (Tl + 1) * (Tl + 2) // 2 and (support.sum(axis=1) == Tl).all()  # every vote vector
        full = dict(zip(map(tuple, plain[0]), plain[1]))
        expect = np.array([(m * full.get(tuple(s), 0.0) + 4.0 / len(support)) / (m + 4.0) for s in support])
        np.testing.assert_allclose(probs, expect, rtol=1e-10)
        assert abs(probs.sum() - 1) < 1e-12


def test_vote_mixture_checked_votes_refuses_bad_votes():
    from ensvote.priors import VoteMixture

    v, T, resolution = VoteMixture.checked_votes(np.array([[0, 3], [0, 0], [2, 1]]), 11)
    assert v.tolist() == [[0, 3], [2, 1]] and (T, resolution) == (11, 100)
    for votes, match in [(np.ones((5, 4), dtype=int), "2 or 3 classes"), (np.array([[1, 2], [0, 0]]), "at least two"),
                         (np.array([[1, -2], [3, 0]]), "oob_votes"), (np.ones(5, dtype=int), "shape")]:
        with pytest.raises(ValueError, match=match):
            VoteMixture.checked_votes(votes, 11)
    with pytest.raises(ValueError, match="resolution"):
        VoteMixture.checked_votes(np.ones((5, 2), dtype=int), 11, resolution=1000)


def test_vote_mixture_em_is_plain_em_with_subnormal_weights_set_to_zero():
    # the fit sets weights below the smallest normal float to 0 (products with subnormal numbers are slow);
    # the other weights must come out as plain EM's, bit for bit (three classes: the grid where it arises)
    l, resolution = 3, 50
    rng = np.random.default_rng(5)
    p = rng.dirichlet(np.full(l, 0.3), 150)
    v = np.array([rng.multinomial(n, q) for n, q in zip(rng.binomial(201, 0.368, 150), p)])
    mix = VoteMixture(v, resolution, max_iter=400)
    lik, u = mix.lik, np.full(len(v), 1.0 / len(v))
    g = np.full(len(mix.grid), 1.0 / len(mix.grid))
    for _ in range(mix.n_iter):
        g = g * (lik.T @ (u / (lik @ g)))
    tiny = np.finfo(float).tiny
    assert np.count_nonzero((g > 0) & (g < tiny)) > 0  # the case arises
    np.testing.assert_array_equal(mix.weights, np.where(g < tiny, 0.0, g) / g.sum())


def test_cross_validated_budget_is_the_same_on_threads():
    # the folds' policies are built and scored on n_jobs threads, added in fold order: the same bits
    rng = np.random.default_rng(11)
    p = rng.dirichlet([0.4, 0.4, 0.4], 120)
    v = np.array([rng.multinomial(n, q) for n, q in zip(rng.binomial(31, 0.368, 120), p)])
    from ensvote import clear_caches
    results = []
    for n_jobs in (None, 2, -1):
        clear_caches()
        rule = OptimalRule.from_oob_votes(v, 31, 0.02, n_jobs=n_jobs)
        results.append((rule.cross_validation, rule.expected_members, np.packbits(rule.table()).tobytes()))
    assert results[0] == results[1] == results[2]
    for bad in (0, 1.5, "2", True):
        with pytest.raises(ValueError, match="n_jobs"):
            cross_validated_budget(v, 31, 0.02, n_jobs=bad)


def test_classifier_builds_the_budget_mode_on_its_n_jobs_threads(monkeypatch):
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    from ensvote import HaltingClassifier, clear_caches
    from ensvote import optimal
    pools = []

    class Recording(optimal.ThreadPoolExecutor):
        def __init__(self, max_workers):
            pools.append(max_workers)
            super().__init__(max_workers)

    monkeypatch.setattr(optimal, "ThreadPoolExecutor", Recording)
    X, y = make_classification(200, 6, n_informative=4, n_classes=3, random_state=0)
    fitted = []
    for n_jobs in (None, 2):
        clear_caches()
        clf = HaltingClassifier(RandomForestClassifier(21, random_state=0), rule="optimal", disagreement=0.02,
                                n_jobs=n_jobs).fit(X, y)
        fitted.append((clf.rule_.cross_validation, clf.expected_members_, np.packbits(clf.rule_.table()).tobytes()))
    assert fitted[0] == fitted[1] and pools == [2]  # one thread pool, for n_jobs=2 only
    with pytest.raises(ValueError, match="n_jobs"):
        HaltingClassifier(RandomForestClassifier(21, random_state=0), rule="optimal", disagreement=0.02,
                          n_jobs=0).fit(X, y)
