"""The per-row guarantee of the optimal rule (``guarantee="per-row"`` / ``"minimax"``).

Every row's probability of disagreeing with the full ensemble is at most δ,
whatever its full vote, under a random member order.  Checked here exactly:
by enumerating every member order of every urn (small T, exact fractions),
and at T = 101 by counting vote sequences in integers.  The linear program is
checked against an independent formulation (Kalman & Moscovich's variables,
with the label at the stop left free).
"""

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linprog
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import OptimalRule
from ensvote._perrow import LP_T, MAX_PER_ROW_T, model
from ensvote.optimal import row_values


def _orders(urn):
    """Every distinct order of the votes of an urn (each equally likely)."""
    labels = [c for c, k in enumerate(urn) for _ in range(k)]
    return set(itertools.permutations(labels))


def _enumerate(rule, T, l):
    """Exact (members, disagreement) per composition, by walking every member order through ``rule.stop``."""
    out = []
    for urn in ev.compositions(T, l):
        full = int(np.argmax(urn))
        orders = sorted(_orders(urn))
        members = disagree = Fraction(0)
        for order in orders:
            t = np.zeros(l, dtype=np.int64)
            for s, c in enumerate(order, start=1):
                t[c] += 1
                if s == T or rule.stop(t[None])[0]:
                    break
            members += s
            disagree += int(np.argmax(t)) != full
        out.append((members / len(orders), disagree / len(orders)))
    return out


@pytest.mark.parametrize("guarantee", ["per-row", "minimax"])
@pytest.mark.parametrize("T,l,delta", [(9, 2, 0.05), (10, 2, 0.2), (6, 3, 0.1)])
def test_every_urn_meets_delta_by_enumeration(guarantee, T, l, delta):
    rule = OptimalRule(T, delta, guarantee=guarantee, n_classes=l)
    exact = _enumerate(rule, T, l)
    assert max(d for _, d in exact) <= Fraction(delta)
    assert min(m for m, _ in exact) < T  # the rule stops early somewhere, not only at T
    np.testing.assert_allclose(rule.row_members, [float(m) for m, _ in exact], rtol=1e-12)
    np.testing.assert_allclose(rule.row_disagreement, [float(d) for _, d in exact], rtol=1e-9, atol=1e-15)
    assert (rule.compositions == ev.compositions(T, l)).all()


def _counted(rule, T):
    """Exact per-composition disagreement of a two-class rule at any T, from integer counts of vote sequences.

    ``paths[k]`` is the number of sequences of ``s`` votes with ``k`` for class 1 that the rule has not
    stopped; a composition with ``n`` votes for class 1 orders its votes in ``C(T, n)`` equally likely
    ways, ``C(T - s, n - k)`` of them continuing a given such sequence.
    """
    tab = rule.table()
    stops_at = []  # (s, k, number of sequences stopping there)
    paths = [1]
    for s in range(1, T + 1):
        new = [0] * (s + 1)
        for k, c in enumerate(paths):
            new[k] += c          # a vote for class 0
            new[k + 1] += c      # a vote for class 1
        stay = []
        for k, c in enumerate(new):
            if s == T or tab[s - k, k]:
                stops_at.append((s, k, c))
                stay.append(0)
            else:
                stay.append(c)
        paths = stay
    worst = Fraction(0)
    for n in range(T + 1):
        full = 1 if n > T - n else 0
        wrong = sum(c * math.comb(T - s, n - k) for s, k, c in stops_at
                    if 0 <= n - k <= T - s and (1 if k > s - k else 0) != full)
        worst = max(worst, Fraction(wrong, math.comb(T, n)))
    return worst


@pytest.mark.parametrize("delta", [0.01, 0.001])
def test_every_full_vote_meets_delta_at_101_exactly(delta):
    for guarantee in ("per-row", "minimax"):
        rule = OptimalRule(101, delta, guarantee=guarantee)
        worst = _counted(rule, 101)
        assert worst <= Fraction(delta)
        assert float(worst) == pytest.approx(rule.worst_disagreement, rel=1e-9)


@pytest.mark.parametrize("delta", [0.01, 0.001])
def test_table_within_one_percent_of_the_randomised_optimum(delta):
    per_row = OptimalRule(101, delta, guarantee="per-row")
    assert per_row.optimum_members <= per_row.expected_members <= 1.01 * per_row.optimum_members
    minimax = OptimalRule(101, delta, guarantee="minimax")
    assert minimax.optimum_members <= minimax.worst_members <= 1.01 * minimax.optimum_members
    # the two objectives: each optimum is no worse than the other rule on its own objective
    assert minimax.optimum_members <= per_row.worst_members
    assert per_row.optimum_members <= minimax.expected_members


def _km_lp(T, delta, weights, leader_only=False):
    """Kalman & Moscovich's LP written independently: p = pi + pi_bar per state (i draws, j votes for class 1),
    one stop variable per label (free, or only the current majority's), no stop before the first vote."""
    idx = {(i, j): a for a, (i, j) in enumerate((i, j) for i in range(T + 1) for j in range(i + 1))}
    S = len(idx)
    # variables: stop-with-label-0, stop-with-label-1, continue (pi_bar)
    nv = 3 * S
    eq_r, eq_c, eq_v, rhs = [], [], [], []
    for (i, j), a in idx.items():
        for v in (a, S + a, 2 * S + a):
            eq_r.append(a); eq_c.append(v); eq_v.append(1.0)
        if i == 0:
            rhs.append(1.0)
            continue
        if j < i:
            eq_r.append(a); eq_c.append(2 * S + idx[(i - 1, j)]); eq_v.append(-Fraction(i - j, i))
        if j > 0:
            eq_r.append(a); eq_c.append(2 * S + idx[(i - 1, j - 1)]); eq_v.append(-Fraction(j, i))
        rhs.append(0.0)
    A_eq = sp.csr_matrix(([float(v) for v in eq_v], (eq_r, eq_c)), shape=(S, nv))
    prob = np.zeros((T + 1, S))
    for (i, j), a in idx.items():
        for n in range(T + 1):
            if 0 <= j <= n and 0 <= i - j <= T - n:
                prob[n, a] = math.comb(n, j) * math.comb(T - n, i - j) / math.comb(T, i)
    draws = np.array([i for (i, j) in idx])
    A_ub = np.zeros((T + 1, nv))
    for n in range(T + 1):
        wrong_label = 0 if n > T - n else 1
        A_ub[n, wrong_label * S:(wrong_label + 1) * S] = prob[n]
    cost = weights @ prob * draws
    c = np.concatenate([cost, cost, np.zeros(S)])
    ub = np.full(nv, np.inf)
    ub[[idx[(0, 0)], S + idx[(0, 0)]]] = 0.0
    ub[2 * S + np.array([idx[(T, j)] for j in range(T + 1)])] = 0.0
    if leader_only:  # the engine's label: the current majority, class 0 on ties
        for (i, j), a in idx.items():
            ub[a if j > i - j else S + a] = 0.0
    res = linprog(c, A_ub=A_ub, b_ub=np.full(T + 1, delta), A_eq=A_eq, b_eq=rhs,
                  bounds=np.column_stack([np.zeros(nv), ub]), method="highs")
    assert res.status == 0
    return res.fun


@pytest.mark.parametrize("T,delta", [(21, 0.01), (30, 0.05)])
def test_linear_program_matches_an_independent_formulation(T, delta):
    weights = np.random.default_rng(ev.SEED).dirichlet(np.ones(T + 1))
    prior = (np.column_stack([T - np.arange(T + 1), np.arange(T + 1)]), weights)
    rule = OptimalRule(T, delta, guarantee="per-row", prior=prior)
    # weights[n]: n votes for class 1, as the support says.  Kalman & Moscovich label a stop with the
    # current majority (their disagreement mask), as the engine does: the same optimum
    assert rule.optimum_members == pytest.approx(_km_lp(T, delta, weights, leader_only=True), rel=1e-9)
    # a free label at the stop can only help, and hardly does
    free = _km_lp(T, delta, weights)
    assert free <= rule.optimum_members * (1 + 1e-9) and free >= rule.optimum_members * (1 - 1e-3)


@pytest.mark.parametrize("T", [51, LP_T[2] + 50])  # the linear program, and its dual above its sizes
def test_prior_weighs_the_members_not_the_guarantee(T):
    easy = np.zeros(T + 1)
    easy[[0, 1, T - 1, T]] = 1.0  # nearly unanimous rows
    a = OptimalRule(T, 0.01, guarantee="per-row", prior=easy / easy.sum())
    b = OptimalRule(T, 0.01, guarantee="per-row")
    assert a.worst_disagreement <= 0.01 and b.worst_disagreement <= 0.01
    assert a.expected_members < b.expected_members
    assert policy_members_under(a, easy / easy.sum()) < policy_members_under(b, easy / easy.sum())


def policy_members_under(rule, prior):
    return ev.policy_value(rule, prior).members


def test_smaller_budget_queries_more():
    m = [OptimalRule(51, d, guarantee="per-row").expected_members for d in (0.1, 0.01, 0.001)]
    assert m[0] < m[1] < m[2]


def test_classifier_per_row_end_to_end():
    X, y = ev.datasets.load("twonorm", n_samples=600, random_state=0)
    est = RandomForestClassifier(n_estimators=31, random_state=0)
    clf = ev.HaltingClassifier(est, rule="optimal", disagreement=0.01, guarantee="per-row").fit(X[:300], y[:300])
    assert clf.rule_.guarantee == "per-row" and clf.rule_.worst_disagreement <= 0.01
    res = clf.halt(X[300:])
    assert (clf.classes_[res.labels] == clf.predict(X[300:])).all()
    assert res.n_queried.mean() < 31
    # the engine looks the same table up as the rule decides from
    assert (res.stopped == clf.rule_.stop(res.counts)).all()
    uniform = ev.HaltingClassifier(est, rule="optimal", disagreement=0.01, guarantee="per-row",
                                   prior="uniform").fit(X[:300], y[:300])
    assert uniform.rule_.worst_disagreement <= 0.01
    assert clf.expected_members_ == pytest.approx(clf.rule_.expected_members)


def test_bad_guarantee_arguments_are_refused():
    with pytest.raises(ValueError, match="guarantee must be one of"):
        OptimalRule(51, 0.01, guarantee="every row")
    with pytest.raises(ValueError, match="give disagreement=δ, not price or max_members"):
        OptimalRule(51, price=10.0, guarantee="per-row")
    with pytest.raises(ValueError, match="give disagreement=δ, not price or max_members"):
        OptimalRule(51, max_members=10.0, guarantee="minimax")
    # the per-row limits are the optimal policy's own (MAX_OPTIMAL_T): refused as any optimal rule is
    with pytest.raises(ValueError, match=r"T <= 1,001 with 2 classes"):
        OptimalRule(MAX_PER_ROW_T[2] + 2, 0.01, guarantee="per-row")
    with pytest.raises(ValueError, match=r"T <= 201 with 3 classes"):
        OptimalRule(MAX_PER_ROW_T[3] + 2, 0.01, guarantee="per-row", n_classes=3)
    with pytest.raises(ValueError, match="2 or 3 classes"):
        OptimalRule(11, 0.01, guarantee="per-row", n_classes=4)


@pytest.mark.parametrize("params,match", [
    ({"rule": "urn", "guarantee": "per-row"}, "is a mode of rule='optimal'"),
    ({"rule": "optimal", "disagreement": 0.01, "guarantee": "each"}, "guarantee must be one of"),
    ({"rule": "optimal", "max_members": 5.0, "guarantee": "per-row"}, "not max_members"),
    ({"rule": "optimal", "disagreement": 0.01, "guarantee": None}, "guarantee must be one of"),
])
def test_classifier_refuses_bad_guarantee_before_fitting(params, match):
    X, y = ev.datasets.load("twonorm", n_samples=100, random_state=0)
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=11, random_state=0), **params)
    with pytest.raises(ValueError, match=match):
        clf.fit(X, y)
    assert not hasattr(clf, "estimator_")


def test_model_flow_reaches_every_vote_vector_once():
    m = model(12, 3)
    # the policy that never stops before T reaches every vote vector with w = 1 and stops at T
    members, disagreement = m.evaluate(np.zeros(len(m.states)))
    assert np.allclose(members, 12) and np.allclose(disagreement, 0)


@pytest.mark.parametrize("rule,l", [(ev.UrnRule(9, 0.9), 2), (ev.InfiniteRule(0.8), 2), (OptimalRule(7, 0.05), 2),
                                    (ev.UrnRule(6, 0.8), 3)])
def test_row_values_of_any_rule_match_enumeration(rule, l):
    T = rule.n_members or 9
    if rule.n_members is None:
        rule.prepare(T, l)
    if isinstance(rule, ev.InfiniteRule):
        with pytest.raises(ValueError, match="size T"):
            row_values(rule, n_classes=l)
        return
    v = row_values(rule, n_classes=l)
    exact = _enumerate(rule, T, l)
    np.testing.assert_allclose(v.members, [float(m) for m, _ in exact], rtol=1e-12)
    np.testing.assert_allclose(v.disagreement, [float(d) for _, d in exact], rtol=1e-9, atol=1e-15)
    # averaged under the uniform prior: policy_value's number
    pv = ev.policy_value(rule, None, n_classes=l)
    assert v.members.mean() == pytest.approx(pv.members, rel=1e-9)
    assert v.disagreement.mean() == pytest.approx(pv.disagreement, rel=1e-9, abs=1e-15)


def test_row_values_refuses_bad_input():
    with pytest.raises(TypeError, match="HaltingRule"):
        row_values("urn")
    # the budget mode stops at the same size: the message names what works beyond it, not guarantee='average'
    with pytest.raises(ValueError, match=r"T <= 1,001 with 2 classes.*MAX_PER_ROW_T\); use an ensemble of at most "
                                         r"1,001 members, or rule='urn' / rule='infinite'"):
        row_values(ev.ExactRule(MAX_PER_ROW_T[2] + 1))
    with pytest.raises(ValueError, match="2 or 3 classes"):
        row_values(ev.ExactRule(11), n_classes=4)


def test_a_prior_with_few_support_points_is_solved():
    # the calibration histogram of one partition of votes (perrow suite): HiGHS's presolve stalls on it at δ = 0.1 %
    support = np.array([[0, 101], [3, 98], [27, 74], [30, 71], [61, 40], [91, 10], [93, 8], [96, 5], [101, 0]])
    probs = np.array([1, 1, 1, 1, 1, 1, 1, 1, 6]) / 14
    rule = OptimalRule(101, 0.001, prior=(support, probs), guarantee="per-row")
    assert rule.worst_disagreement <= 0.001
    assert rule.optimum_members <= rule.expected_members <= 1.01 * rule.optimum_members
