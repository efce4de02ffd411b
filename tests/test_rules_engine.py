"""Halting rules, their tables, the engine and the expected number of queries."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import special, stats

import ensvote as ev


def _random_votes(n_rows, T, l, seed=ev.SEED):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.ones(l), size=n_rows)
    u = rng.random((n_rows, T, 1))
    return np.argmax(u < np.cumsum(p, axis=1)[:, None, :], axis=2)


# ---------------------------------------------------------------- t*(t; pi)
def test_t_star_definition_and_monotone():
    rule = ev.InfiniteRule(0.99)
    ts = rule.t_star(500)
    for t in range(1, 501):
        x = ts[t]
        if x <= t:
            assert special.betainc(t - x + 1, x + 1, 0.5) > 0.99
        if x - 1 >= (t + 1) // 2:
            assert special.betainc(t - x + 2, x, 0.5) <= 0.99
    assert np.all(np.diff(ts[1:]) >= 0)
    assert ts[6] == 6 and ts[5] == 6  # unanimity: 1 - 2^-7 > 0.99 > 1 - 2^-6


def test_t_star_large_table_and_cache():
    ts = ev.InfiniteRule(0.99).t_star(10_000)
    assert ts.shape == (10_001,)
    # near t = 10^4 the rule needs a 2.33-sigma lead: t* / t -> 1/2 + z / (2 sqrt t)
    z = stats.norm.ppf(0.99)
    assert ts[10_000] / 10_000 == pytest.approx(0.5 + z / (2 * 100), abs=2e-3)


def test_infinite_rule_multiclass_matches_direct_bound():
    rule = ev.InfiniteRule(0.95)
    states = np.array([c for s in range(1, 30) for c in ev.compositions(s, 3)])
    direct = ev.infinite_confidence(states) > 0.95
    assert np.array_equal(rule.stop(states), direct)


# ---------------------------------------------------------------- urn tables
@pytest.mark.parametrize("T,l", [(25, 2), (24, 2), (101, 2), (15, 3), (6, 4)])
def test_urn_table_matches_eq3_direct(T, l):
    rule = ev.UrnRule(T, 0.99)
    states = np.array([c for s in range(T + 1) for c in ev.compositions(s, l)])
    np.testing.assert_allclose(rule.confidence_of(states), ev.finite_confidence(states, T), atol=1e-12)


def test_urn_table_with_prior_matches_eq3_direct():
    T = 31
    rng = np.random.default_rng(ev.SEED)
    prior = rng.random(T + 1) ** 3
    prior /= prior.sum()
    rule = ev.UrnRule(T, 0.9, prior=prior)
    states = np.array([c for s in range(T + 1) for c in ev.compositions(s, 2)])
    np.testing.assert_allclose(rule.confidence_of(states), ev.finite_confidence(states, T, prior=prior), atol=1e-12)
    sup, p = ev.uniform_prior(9, 3)
    p = rng.random(len(p))
    p /= p.sum()
    r3 = ev.UrnRule(9, 0.9, prior=(sup, p))
    states3 = np.array([c for s in range(10) for c in ev.compositions(s, 3)])
    np.testing.assert_allclose(r3.confidence_of(states3), ev.finite_confidence(states3, 9, prior=(sup, p)), atol=1e-12)


def test_urn_rule_uniform_equals_siba_table():
    """Soto, Suárez & Martínez-Muñoz (2016), Prop. 3: the uniform-prior urn rule and SIBA's table agree.

    SIBA's table is built here from the Dirichlet posterior of Hernández-Lobato et al. (2011) with
    finitely many members left (beta-binomial predictive of the unseen votes),
    the urn rule's from backward induction over the hypergeometric model.
    """
    T, alpha = 101, 0.99
    urn_need = ev.UrnRule(T, alpha).lookup_table()
    for m in range(T + 1):  # m votes for the minority class
        siba = -1
        for x in range(m, T - m + 1):
            n = T - x - m
            # class 0 (x votes) keeps the majority iff its unseen votes k satisfy x + k >= (T + 1) / 2
            need_k = max(0, (T + 1) // 2 - x)
            p = stats.betabinom.sf(need_k - 1, n, x + 1, m + 1) if n > 0 else float(x >= (T + 1) // 2)
            if x + m == T or p > alpha:
                siba = x
                break
        assert urn_need[0, m] == siba, m
    # odd T: no ties, so the two classes' tables coincide wherever defined
    both = (urn_need[0] >= 0) & (urn_need[1] >= 0)
    assert np.array_equal(urn_need[0][both], urn_need[1][both])


@pytest.mark.parametrize("T", [51, 101])
def test_urn_uniform_table_monotone(T):
    conf = ev.UrnRule(T, 0.99).table(2)
    for m in range(T // 2):
        col = conf[m + 1: T - m + 1, m]  # leader count x > m
        assert np.all(np.diff(col) >= -1e-12)
        row = conf[T - m, : m + 1]
        assert np.all(np.diff(row[: min(m, T - m - 1) + 1]) <= 1e-12)


def test_urn_lookup_table_sorted():
    need = ev.UrnRule(101, 0.99).lookup_table()
    defined = need[0][need[0] >= 0]
    assert np.all(np.diff(defined) >= 0)
    assert need[0, 0] >= 1


def test_urn_rule_large_l_on_demand_matches_direct():
    # (31)^5 entries > MAX_DENSE_TABLE: method="exact" computes Eq. 3 on demand (the default
    # switches to the union bound of ensvote.manyclass there; see tests/test_many_classes.py)
    rule = ev.UrnRule(30, 0.9, method="exact")
    assert rule.table(5) is None
    states = np.array([[5, 1, 0, 0, 0], [2, 2, 1, 1, 0], [9, 0, 0, 0, 1]])
    np.testing.assert_allclose(rule.confidence_of(states), ev.finite_confidence(states, 30), atol=1e-12)


def test_on_demand_confidences_are_memoised_in_a_bounded_cache_that_clear_caches_empties(monkeypatch):
    rule = ev.UrnRule(30, 0.9, method="exact")
    states = np.array([[5, 1, 0, 0, 0], [2, 2, 1, 1, 0], [9, 0, 0, 0, 1]])
    ev.clear_caches()
    first = rule.confidence_of(states)
    memos = ev.rules._URN_MEMOS
    assert len(memos) == 1 and len(next(iter(memos._data.values()))) == 3
    np.testing.assert_array_equal(ev.UrnRule(30, 0.5, method="exact").confidence_of(states), first)  # shared
    monkeypatch.setattr(ev.rules, "_MEMO_MAX", 2)
    rule.confidence_of(states[:1] + [[1, 0, 0, 0, 0]])
    assert len(next(iter(memos._data.values()))) == 1  # above the bound: started again
    ev.clear_caches()
    assert len(memos) == 0


def _two_class_states(T):
    s = np.repeat(np.arange(T + 1), np.arange(T + 1) + 1)
    t0 = np.arange(len(s)) - s * (s + 1) // 2
    return np.column_stack([t0, s - t0])


def _priors(T):
    K = np.arange(T + 1)
    bimodal = np.exp(-0.5 * ((K - 0.2 * T) / (0.05 * T)) ** 2) + np.exp(-0.5 * ((K - 0.85 * T) / (0.03 * T)) ** 2)
    gappy = np.where((K % 7 == 0) | (K > 0.9 * T), 1.0, 0.0)  # states of probability 0 in between
    skew = np.random.default_rng(ev.SEED).random(T + 1) ** 4
    return {"uniform": None, "bimodal": bimodal / bimodal.sum(), "gappy": gappy / gappy.sum(),
            "skew": skew / skew.sum()}


@pytest.mark.parametrize("prior", ["uniform", "bimodal", "gappy", "skew"])
@pytest.mark.parametrize("alpha", [0.9, 0.99, 0.999])
def test_urn_stop_bits_equal_the_dense_table_and_eq3_on_every_vote_vector(monkeypatch, prior, alpha):
    # beyond the dense table a two-class UrnRule keeps one stop bit per vote vector; here the dense
    # limit is lowered so that both exist at T = 61 and every vote vector is compared
    T = 61
    p = _priors(T)[prior]
    t = _two_class_states(T)
    dense = ev.UrnRule(T, alpha, prior=p)
    assert dense._stop_bits(2) is None
    expected = dense.decide(t)
    monkeypatch.setattr(ev.rules, "MAX_DENSE_TABLE", 100)
    ev.clear_caches()
    rule = ev.UrnRule(T, alpha, prior=p)
    assert rule.table(2) is None and rule._stop_bits(2) is not None
    np.testing.assert_array_equal(rule.decide(t), expected)
    support = None if p is None else ev.confidence.check_prior(p, T)
    on_demand = ev.finite_confidence(t, T, prior=support) > alpha
    np.testing.assert_array_equal(rule.decide(t), on_demand | (t.sum(axis=1) == T))
    assert rule.decide(t[None, :7].repeat(2, axis=0)).shape == (2, 7)


def test_urn_stop_bits_at_T_5001_match_eq3_where_the_decision_changes():
    T = 5001
    rule = ev.UrnRule(T, 0.99, prior=_priors(T)["bimodal"])
    assert rule.table(2) is None and rule.on_demand_warning(2) is None
    t = _two_class_states(T)
    stop = rule.decide(t)
    # the vote vectors next to a change of decision along each level, and a sample of the rest
    edge = np.flatnonzero(np.diff(stop.astype(int)) != 0)
    edge = edge[t[edge].sum(axis=1) == t[edge + 1].sum(axis=1)]
    assert len(edge) > 1.9 * T  # nearly every level has two thresholds
    level = t[edge].sum(axis=1)
    edge = edge[(level % 16 == 0) | (level > T - 50)]
    pick = np.unique(np.concatenate([edge, edge + 1, np.random.default_rng(ev.SEED).integers(0, len(t), 300)]))
    support = ev.confidence.check_prior(_priors(T)["bimodal"], T)
    ref = (ev.finite_confidence(t[pick], T, prior=support) > 0.99) | (t[pick].sum(axis=1) == T)
    np.testing.assert_array_equal(stop[pick], ref)


def _three_class_states(T):
    return np.array([(a, b, s - a - b) for s in range(T + 1) for a in range(s + 1) for b in range(s + 1 - a)])


def _three_class_priors(T):
    support, _ = ev.confidence.check_prior(None, T, 3)
    skew = np.random.default_rng(ev.SEED).random(len(support)) ** 6
    gappy = np.where((support[:, 0] % 5 == 0) | (support[:, 2] > 0.75 * T), 1.0, 0.0)  # zeros in between
    return {"uniform": None, "skew": (support, skew / skew.sum()), "gappy": (support, gappy / gappy.sum())}


def test_level_index_numbers_the_vote_vectors_level_by_level():
    t = _three_class_states(12)
    np.testing.assert_array_equal(ev.engine.level_index(t), np.arange(len(t)))
    assert ev.engine.level_index([[0, 0, 13]]).tolist() == [len(t)]


@pytest.mark.parametrize("prior", ["uniform", "skew", "gappy"])
@pytest.mark.parametrize("alpha", [0.9, 0.99, 0.999])
def test_three_class_stop_bits_equal_the_dense_table_and_eq3_on_every_vote_vector(monkeypatch, prior, alpha):
    # three classes beyond the dense table: one stop bit per vote vector from the compiled recursion
    # (ensvote._urn.stop_bits3); the dense limit is lowered so that both exist at T = 40
    T = 40
    p = _three_class_priors(T)[prior]
    method = "exact" if p is None else "auto"  # the uniform prior's default beyond the table is the bound
    t = _three_class_states(T)
    dense = ev.UrnRule(T, alpha, prior=p, method=method)
    assert dense._stop_bits(3) is None
    expected = dense.decide(t)
    monkeypatch.setattr(ev.rules, "MAX_DENSE_TABLE", 100)
    ev.clear_caches()
    rule = ev.UrnRule(T, alpha, prior=p, method=method)
    assert rule.table(3) is None and rule._stop_bits(3) is not None and rule.on_demand_warning(3) is None
    np.testing.assert_array_equal(rule.decide(t), expected)
    on_demand = rule._on_demand(t) > alpha
    np.testing.assert_array_equal(rule.decide(t), on_demand | (t.sum(axis=1) == T))
    assert rule.decide(t[None, :7].repeat(2, axis=0)).shape == (2, 7)


def test_three_class_stop_bits_leave_near_vectors_to_eq3_and_never_stop_at_probability_zero():
    # what the compiled recursion cannot decide safely it returns; the rule decides those with Eq. 3
    T = 30
    support, probs = _three_class_priors(T)["gappy"]
    t = _three_class_states(T)
    below = t.sum(axis=1) < T
    zero = np.isnan(ev.finite_confidence(t, T, prior=(support, probs))) & below  # no urn of the prior holds t
    assert zero.sum() > 100
    bits, ask = ev._urn.stop_bits3(T, support, probs, 0.99, near_tol=1e-9)
    stop = np.unpackbits(bits)[: len(t)].astype(bool)
    assert not stop[zero].any() and not set(map(tuple, t[zero])) & set(map(tuple, ask))
    # a tolerance of 1 leaves every vector of positive probability below level T to Eq. 3, none set
    bits, ask = ev._urn.stop_bits3(T, support, probs, 0.99, near_tol=1.0)
    assert len(ask) == (below & ~zero).sum() > 4096  # more than the first buffer: the second pass holds them all
    np.testing.assert_array_equal(np.sort(ev.engine.level_index(ask)), np.flatnonzero(below & ~zero))
    np.testing.assert_array_equal(np.unpackbits(bits)[: len(t)].astype(bool), ~below)


def test_urn_rule_warns_only_where_it_evaluates_on_demand():
    assert ev.UrnRule(101).on_demand_warning(2) is None
    assert ev.UrnRule(10_000).on_demand_warning(2) is None
    w = ev.UrnRule(10_001).on_demand_warning(2)
    assert isinstance(w, ev.SlowVoteWarning) and "MAX_STOP_BITS_T = 10,000" in str(w)
    assert ev.UrnRule(169, prior=ev.uniform_prior(169, 3)).on_demand_warning(3) is None
    assert ev.UrnRule(1001, prior=ev.uniform_prior(1001, 3)).on_demand_warning(3) is None
    w = ev.UrnRule(1002, prior=ev.uniform_prior(1002, 3)).on_demand_warning(3)
    assert "MAX_STOP_BITS_T3 = 1,001" in str(w) and "at most 1,001 members for 3 classes" in str(w)
    assert "rule='infinite'" in str(w)
    assert ev.UrnRule(170).on_demand_warning(3) is None  # the uniform prior: the union bound, a table


# ---------------------------------------------------------------- engine
def test_exact_rule_never_disagrees_with_full_vote():
    for l, T in [(2, 101), (3, 50), (4, 20), (2, 100)]:
        votes = _random_votes(400, T, l, seed=l)
        full = ev.halt(votes, ev.FixedRule(T), n_classes=l)
        ex = ev.halt(votes, ev.ExactRule(T), n_classes=l)
        assert np.array_equal(ex.labels, full.labels)
        assert np.all(full.n_queried == T)
        assert np.mean(ex.n_queried) < T


def test_exact_rule_stops_as_soon_as_decided():
    votes = np.array([[0, 1] * 50 + [0]])
    assert ev.halt(votes, ev.ExactRule(101)).n_queried[0] == 101
    votes = np.array([[0] * 51 + [1] * 50])
    assert ev.halt(votes, ev.ExactRule(101)).n_queried[0] == 51
    votes = np.array([[0] * 101])
    assert ev.halt(votes, ev.ExactRule(101)).n_queried[0] == 51
    # even T: a 5-5 final tie goes to class 0, so class 0 is safe at 5 of 10
    assert ev.halt(np.array([[0] * 5 + [1] * 5]), ev.ExactRule(10)).n_queried[0] == 5


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([2, 3]))
def test_halt_matches_step_by_step_reference(seed, l):
    T = 41
    votes = _random_votes(30, T, l, seed=seed)
    for rule in (ev.InfiniteRule(0.9), ev.UrnRule(T, 0.95), ev.ExactRule(T), ev.FixedRule(7)):
        res = ev.halt(votes, rule, n_classes=l)
        for r in range(len(votes)):
            c = np.zeros(l, dtype=int)
            for j in range(T):
                c[votes[r, j]] += 1
                if rule.stop(c) or j == T - 1:
                    break
            assert res.n_queried[r] == j + 1
            assert np.array_equal(res.counts[r], c)
            assert res.labels[r] == np.argmax(c)


def test_confidence_to_one_recovers_full_vote():
    T = 101
    votes = _random_votes(300, T, 2, seed=3)
    full = ev.halt(votes, ev.FixedRule(T))
    for conf in (0.999999, 1 - 1e-12):
        assert np.array_equal(ev.halt(votes, ev.UrnRule(T, conf)).labels, full.labels)
    # the infinite rule near 1 queries every member of borderline rows and agrees too
    assert np.array_equal(ev.halt(votes, ev.InfiniteRule(1 - 1e-12)).labels, full.labels)


def test_disagreement_of_urn_rule_is_below_one_minus_alpha_on_average():
    T, alpha = 101, 0.99
    rng = np.random.default_rng(ev.SEED)
    # urns drawn from the uniform prior: the rule's own model, so its guarantee holds exactly
    k = rng.integers(0, T + 1, size=20_000)
    votes = (np.argsort(rng.random((20_000, T)), axis=1) >= k[:, None]).astype(int)
    res = ev.halt(votes, ev.UrnRule(T, alpha))
    full = ev.halt(votes, ev.FixedRule(T))
    assert np.mean(res.labels != full.labels) < 1 - alpha
    assert res.mean_queried < 40


def test_fixed_rule_and_result_properties():
    votes = _random_votes(10, 20, 3)
    res = ev.halt(votes, ev.FixedRule(5))
    assert np.all(res.n_queried == 5)
    assert np.all(res.counts.sum(1) == 5)
    assert res.mean_queried == 5.0 and res.speedup == 4.0
    assert "mean_queried=5.000" in repr(res)


def test_halt_empty_rows():
    res = ev.halt(np.zeros((0, 5), dtype=int), ev.ExactRule(5))
    assert res.labels.shape == (0,)


# ---------------------------------------------------------------- priors, expected queries
def test_smooth_moving_average_is_matlab_smooth():
    y = np.array([1.0, 2, 4, 8, 16, 32, 64])
    out = ev.priors.smooth_moving_average(y, 5)
    expect = [1, (1 + 2 + 4) / 3, (1 + 2 + 4 + 8 + 16) / 5, (2 + 4 + 8 + 16 + 32) / 5,
              (4 + 8 + 16 + 32 + 64) / 5, (16 + 32 + 64) / 3, 64]
    np.testing.assert_allclose(out, expect)


def test_oob_prior_binary():
    T = 11
    oob = np.array([[30, 0], [0, 37], [20, 20], [9, 1], [9, 1], [0, 0]])
    prior = ev.oob_prior(oob, T, window=1)
    expect = np.zeros(T + 1)
    for k in [11, 0, 6, 10, 10]:  # 20/40 * 11 = 5.5 rounds half up to 6
        expect[k] += 1
    np.testing.assert_allclose(prior, expect / 5)
    sm = ev.oob_prior(oob, T)
    assert sm.shape == (T + 1,) and sm.sum() == pytest.approx(1.0) and np.all(sm >= 0)


def test_oob_prior_multiclass_sums_to_T():
    rng = np.random.default_rng(ev.SEED)
    oob = rng.integers(0, 40, size=(200, 3))
    support, probs = ev.oob_prior(oob, 101)
    assert np.all(support.sum(1) == 101) and probs.sum() == pytest.approx(1.0)
    raw_support, raw = ev.oob_prior(oob, 101, window=1)
    assert raw.sum() == pytest.approx(1.0)
    # unsmoothed histogram: each row rounds to a vector summing to 101
    assert len(raw_support) <= 200


@pytest.mark.parametrize("T,alpha", [(101, 0.99), (40, 0.9)])
def test_expected_queries_mc_matches_exact(T, alpha):
    k = np.arange(T + 1)
    prior = 0.5 * stats.betabinom.pmf(k, T, 0.3, 0.2) + 0.5 * stats.betabinom.pmf(k, T, 4, 4)
    prior /= prior.sum()
    for rule in (ev.UrnRule(T, alpha, prior=prior), ev.UrnRule(T, alpha), ev.InfiniteRule(alpha)):
        exact = ev.expected_queries(rule, prior, method="exact")
        mc, sem = ev.expected_queries(rule, prior, n_samples=20_000, return_sem=True)
        assert abs(mc - exact) < 4 * sem, (rule, mc, exact, sem)


def test_expected_queries_exact_for_three_classes_is_the_policy_value_and_the_monte_carlo_mean():
    # one exact evaluator (ensvote._bellman.evaluate_rule) behind expected_queries and policy_value
    T = 21
    rng = np.random.default_rng(ev.SEED)
    sup = ev.compositions(T, 3)
    p = rng.random(len(sup)) ** 4
    p /= p.sum()
    for rule in (ev.UrnRule(T, 0.95), ev.ExactRule(T), ev.InfiniteRule(0.9), ev.FixedRule(5)):
        exact = ev.expected_queries(rule, (sup, p), method="exact")
        assert exact == ev.policy_value(rule, (sup, p)).members
        mc, sem = ev.expected_queries(rule, (sup, p), n_samples=20_000, return_sem=True)
        assert abs(mc - exact) < 4 * sem + 1e-12, (rule, mc, exact)


def test_expected_queries_fixed_and_exact_rules():
    prior = ev.uniform_prior(21)
    assert ev.expected_queries(ev.FixedRule(7), prior, method="exact") == pytest.approx(7.0)
    sup, p = ev.uniform_prior(10, 3)
    assert ev.expected_queries(ev.FixedRule(4), (sup, p)) == 4.0


def test_stopped_flags_rows_the_rule_called():
    T = 101
    votes = _random_votes(500, T, 2, seed=11)
    rule = ev.InfiniteRule(0.99)
    res = ev.halt(votes, rule)
    assert np.array_equal(res.stopped, rule.stop(res.counts))
    assert np.all(res.stopped[res.n_queried < T])
    assert not np.all(res.stopped)  # some borderline rows exhaust the 101 members
    fixed = ev.halt(votes, ev.FixedRule(T))
    assert np.all(fixed.stopped)


def test_halt_warns_where_the_rule_evaluates_on_demand():
    votes = np.tile([0, 1], (2, 5001))[:, :10_001]  # T = 10,001: beyond the stop bits
    with pytest.warns(ev.SlowVoteWarning, match="T=10001 members and 2 classes"):
        res = ev.halt(votes, ev.UrnRule(10_001, 0.6))
    assert res.labels.shape == (2,)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error", ev.SlowVoteWarning)
        ev.halt(votes[:, :101], ev.UrnRule(101))
        ev.halt(votes, ev.InfiniteRule())


@pytest.mark.parametrize("bad", [[[1, 2, 3, 4]], [[5]]])
def test_level_index_refuses_other_than_two_or_three_classes(bad):
    with pytest.raises(ValueError, match="level order is defined for 2 or 3 classes"):
        ev.engine.level_index(bad)


@pytest.mark.parametrize("bad, err", [(1, ValueError), (0, ValueError), (2.5, TypeError), ("3", TypeError)])
def test_max_flat_table_T_refuses_bad_class_counts(bad, err):
    with pytest.raises(err, match="n_classes"):
        ev.engine.max_flat_table_T(bad)
    assert ev.engine.max_flat_table_T(3) == 129 and (129 + 1) ** 3 <= ev.engine.MAX_STOP_TABLE < 131 ** 3
