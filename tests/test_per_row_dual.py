"""The per-row guarantee beyond the linear program's sizes: its Lagrangian dual (:mod:`ensvote._perrow`).

Checked here: the inner problem's backward induction against every
deterministic policy of tiny urns, the forward propagation against the
linear program's matrices, the dual's tables against the linear program's
optimum at the sizes both solve, and the tables above the program's sizes
against an independent walk of the urn (one composition at a time, the next
vote drawn without replacement).
"""

import itertools
import time

import numpy as np
import pytest

from ensvote import OptimalRule, compositions
from ensvote._perrow import (LP_T, MAX_PER_ROW_T, TIE_BREAK, LevelModel, PerRowModel, _cost, _dual_table,
                             dual_policy, lp_optimum, lp_policy, model)
from ensvote.optimal import row_values


def _urn_walk(table, urn):
    """Exact (members, disagreement) of a stop table for one composition: the urn emptied vote by vote.

    Reach probabilities over the vote vectors of each level on a dense grid
    of the last ``l - 1`` counts; the next vote is class ``i`` with
    probability ``(n_i - t_i) / (T - s)``.
    """
    urn = np.asarray(urn)
    T, l = int(urn.sum()), len(urn)
    full = int(np.argmax(urn))
    grid = np.indices((T + 1,) * (l - 1))  # the counts of classes 1 .. l - 1
    reach = np.zeros((T + 1,) * (l - 1))
    reach[(0,) * (l - 1)] = 1.0
    members = wrong = 0.0
    for s in range(T):
        t0 = s - grid.sum(axis=0)
        ok = t0 >= 0
        nxt = np.zeros_like(reach)
        left = T - s
        p0 = np.where(ok, (urn[0] - t0) / left, 0.0)
        nxt += reach * p0
        for i in range(1, l):
            pi = np.where(ok, (urn[i] - grid[i - 1]) / left, 0.0) * reach
            nxt += np.roll(pi, 1, axis=i - 1)  # one more vote for class i (nothing wraps: counts <= n_i)
        s1 = s + 1
        t0 = s1 - grid.sum(axis=0)
        valid = t0 >= 0
        counts = np.concatenate([np.where(valid, t0, 0)[None], grid])
        if s1 == T:
            stop = valid
        else:
            stop = valid & table[tuple(counts)]
        lead = np.argmax(counts, axis=0)
        mass = np.where(stop, nxt, 0.0)
        members += s1 * mass.sum()
        wrong += mass[lead != full].sum()
        reach = np.where(stop, 0.0, nxt)
    return members, wrong


@pytest.mark.parametrize("T,l", [(5, 2), (3, 3)])
def test_backward_induction_is_the_best_deterministic_policy(T, l):
    m = LevelModel(T, l)
    rng = np.random.default_rng(0)
    a, lam = rng.random(len(m.urns)), 20 * rng.random(len(m.urns))
    value, stops = m.lagrangian(a, lam)
    members, disagreement = m.evaluate(stops)
    assert value == pytest.approx(a @ members + lam @ disagreement, rel=1e-12)
    free = np.nonzero((m.sums > 0) & (m.sums < T))[0]
    best = np.inf
    for bits in itertools.product([0.0, 1.0], repeat=len(free)):
        stop = np.zeros(len(m.states))
        stop[free] = bits
        mem, dis = m.evaluate(stop)
        best = min(best, a @ mem + lam @ dis)
    assert value == pytest.approx(best, rel=1e-12)
    assert np.array_equal(stops[free].astype(float), stops[free])  # deterministic


@pytest.mark.parametrize("T,l", [(12, 2), (40, 2), (9, 3), (16, 3)])
def test_propagation_matches_the_linear_programs_matrices(T, l):
    lp, lm = PerRowModel(T, l), LevelModel(T, l)
    assert np.array_equal(lp.states, lm.states) and np.array_equal(lp.sums, lm.sums)
    assert np.array_equal(lp.urns, lm.urns)
    rng = np.random.default_rng(1)
    for stop in (rng.random(len(lp.states)), rng.random(len(lp.states)) < 0.3):
        for a, b in zip(lp.evaluate(stop.astype(float)), lm.evaluate(stop)):
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    support, probs = lp.urns[rng.choice(len(lp.urns), 7)], rng.random(7)
    np.testing.assert_allclose(lp.urn_weights(support, probs), lm.urn_weights(support, probs), rtol=1e-15)


def _uniform(T, l):
    return np.full(len(compositions(T, l)), 1.0 / len(compositions(T, l)))


# (T, l, δ, how far above the LP's optimum the deterministic table may be).  At T = 51 the linear
# program's own rounded table is 1.26 % above its optimum: no deterministic table is within 1 % there.
@pytest.mark.parametrize("T,l,delta,within", [(51, 2, 0.01, 0.013), (101, 2, 0.01, 0.01), (101, 2, 0.001, 0.01),
                                              (201, 2, 0.01, 0.01), (21, 3, 0.01, 0.01), (41, 3, 0.01, 0.01)])
def test_per_row_dual_within_one_percent_of_the_linear_program(T, l, delta, within):
    weights = _uniform(T, l)
    lp_stops, lp_members, _, optimum = lp_policy(PerRowModel(T, l), delta, weights, "per-row")
    sol = dual_policy(LevelModel(T, l), delta, weights, "per-row")
    assert sol.disagreement.max() <= delta  # exactly feasible
    assert sol.bound <= optimum * (1 + 1e-9) <= sol.mixture * (1 + 2e-9)  # the LP optimum between the bounds
    assert sol.value == pytest.approx(weights @ sol.members, rel=1e-12)
    assert sol.value <= (1 + within) * optimum
    assert sol.gap <= within + 0.005
    # the propagation's exact evaluation is the linear program's, policy for policy
    members, disagreement = model(T, l).evaluate(sol.stops.astype(float))
    np.testing.assert_allclose(members, sol.members, rtol=1e-12)
    np.testing.assert_allclose(disagreement, sol.disagreement, rtol=1e-9, atol=1e-15)


# Minimax: a deterministic table hedges worse than the randomised optimum on the near ties.  With two
# classes it is within 1 % of the LP optimum; with three at T = 21 the LP's own table is 1.5 % above it,
# and the dual's table is checked against that table instead.
@pytest.mark.parametrize("T,l,delta", [(51, 2, 0.01), (101, 2, 0.01), (101, 2, 0.001), (21, 3, 0.01)])
def test_minimax_dual_against_the_linear_program(T, l, delta):
    weights = _uniform(T, l)
    _, lp_members, _, optimum = lp_policy(PerRowModel(T, l), delta, weights, "minimax")
    stops, members, disagreement, bound = _dual_table(LevelModel(T, l), delta, weights, "minimax")
    assert disagreement.max() <= delta
    assert bound <= optimum * (1 + 1e-9)
    if l == 2:
        assert members.max() <= 1.01 * optimum
    else:
        assert members.max() <= 1.005 * lp_members.max()
    assert members.max() <= (1 + 0.02) * bound  # certified: within 2 % of any randomised policy


def test_kalman_moscovich_minimax_at_101():
    # Kalman & Moscovich publish 51.03 trees for their minimax at N = 101, α = 0.001.  The per-row minimax
    # optimum (max_n E[members | n]) is 99.84 there: a near tie needs nearly every member.  Their 51.03 is
    # the uniform average of E[members | n] of one optimal vertex; the dual's table does better on average.
    T, delta = 101, 0.001
    weights = _uniform(T, 2)
    *_, optimum = lp_policy(model(T, 2), delta, weights, "minimax")
    assert optimum == pytest.approx(99.84, abs=0.01)
    _, members, disagreement, bound = _dual_table(LevelModel(T, 2), delta, weights, "minimax")
    assert disagreement.max() <= delta
    assert bound <= optimum <= members.max() <= 1.01 * optimum
    assert weights @ members < 51.03
    # their program has no tie-break: it has many optima, and the solver returns one.  HiGHS's averages within 2 %
    # of their 51.03 over the full votes (51.70); the worst full vote is the same 99.84 in every optimum.  (The
    # worst case constrained at the near ties, as lp_policy does, and at any full vote that exceeds it.)
    pure, _, worst = lp_optimum(model(T, 2), delta, weights, "minimax", tie_break=0.0)
    assert worst == pytest.approx(99.84, abs=0.01) and pure.max() <= worst * (1 + 1e-9)
    assert weights @ pure == pytest.approx(51.03, rel=0.02)


def test_fit_time_build_at_1001_two_classes():
    t0 = time.perf_counter()
    rule = OptimalRule(1001, 0.01, guarantee="per-row")
    elapsed = time.perf_counter() - t0
    assert elapsed < 60  # seconds; about one on an idle core
    assert rule.compositions.shape == (1002, 2) and rule.table().shape == (1002, 1002)
    assert rule.row_disagreement.max() <= 0.01
    assert rule.optimum_members <= rule.expected_members <= 1.01 * rule.optimum_members
    # every composition, exactly, from the rule's own table (the propagation of row_values)
    v = row_values(rule)
    np.testing.assert_allclose(v.disagreement, rule.row_disagreement, rtol=1e-12, atol=1e-16)
    assert v.disagreement.max() <= 0.01
    # an independent walk of the urn for the compositions that bind and a few others
    table = rule.table()
    for k in (500, 501, 499, 520, 480, 560, 700, 1001):
        members, wrong = _urn_walk(table, (1001 - k, k))
        i = 1001 - k  # compositions(1001, 2) is lexicographic: (0, 1001), (1, 1000), ...
        assert members == pytest.approx(rule.row_members[i], rel=1e-10)
        assert wrong == pytest.approx(rule.row_disagreement[i], rel=1e-8, abs=1e-15)
        assert wrong <= 0.01
    assert rule.stop([[30, 0], [30, 29]]).tolist() == [True, False]


def test_minimax_at_1001_two_classes():
    rule = OptimalRule(1001, 0.001, guarantee="minimax")
    assert rule.row_disagreement.max() <= 0.001
    assert rule.optimum_members <= rule.worst_members <= 1.01 * rule.optimum_members


@pytest.mark.parametrize("T", [LP_T[3] + 20, MAX_PER_ROW_T[3]])  # the largest: about 10 s
def test_three_classes_above_the_linear_programs_size(T):
    rule = OptimalRule(T, 0.01, guarantee="per-row", n_classes=3)
    assert rule.row_disagreement.max() <= 0.01
    assert rule.optimum_members <= rule.expected_members <= 1.01 * rule.optimum_members
    # every composition, exactly, from the rule's own table (the propagation of row_values)
    v = row_values(rule, n_classes=3)
    assert len(v.disagreement) == (T + 1) * (T + 2) // 2 and v.disagreement.max() <= 0.01
    np.testing.assert_allclose(v.disagreement, rule.row_disagreement, rtol=1e-12, atol=1e-16)
    table = rule.table()
    urns = compositions(T, 3)
    for i in [int(np.argmax(rule.row_disagreement)), 0, len(urns) // 2, len(urns) - 1]:
        members, wrong = _urn_walk(table, urns[i])
        assert members == pytest.approx(rule.row_members[i], rel=1e-10)
        assert wrong == pytest.approx(rule.row_disagreement[i], rel=1e-8, abs=1e-15)


def test_limits():
    assert MAX_PER_ROW_T == {2: 1001, 3: 201} and LP_T == {2: 101, 3: 21}
    assert isinstance(model(LP_T[2], 2), PerRowModel) and isinstance(model(LP_T[2] + 1, 2), LevelModel)
    with pytest.raises(ValueError, match="2 or 3 classes"):
        LevelModel(11, 4)
    assert _cost(np.array([1.0, 3.0]), np.array([0.5, 0.5]), "minimax") == 3.0 + TIE_BREAK * 2.0
