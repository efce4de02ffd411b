"""The compiled Bellman recursions against the level-by-level NumPy recursion, bit for bit.

``ensvote.optimal`` runs the backward induction, the policy evaluation and
the one-flip search in numba loops over padded levels.  They promise the
very floating-point results of the NumPy formulation (one array per level,
NumPy's pairwise sums for the level totals), so that a rule, and every
committed experiment record built from one, does not depend on which of the
two computed it.  The NumPy formulation is kept here as the reference.
"""

import numpy as np
import pytest

from ensvote import OptimalRule, clear_caches
from ensvote.confidence import check_prior, uniform_prior
from ensvote._bellman import _model, _pairwise_sum
from ensvote.optimal import UNIFORM_ROWS, cross_validated_budget
from ensvote.priors import VoteMixture


# --------------------------------------------------------------------------
# the reference: one NumPy array per level
# --------------------------------------------------------------------------
def _levels(model):
    T, l = model.T, model.l
    d = l - 1
    trans = [model.trans[s].reshape((l,) + (T + 1,) * d)[(slice(None),) + (slice(0, s + 1),) * d] for s in range(T)]
    loss = [model.level(model.loss[s], s) for s in range(T + 1)]
    valid = [model.level(model.valid[s], s) for s in range(T + 1)]
    return trans, loss, valid


def _shift(d, s, i):
    return tuple(slice(1, s + 2) if a == i else slice(0, s + 1) for a in range(d))


def ref_solve(model, price):
    T, l = model.T, model.l
    trans, loss, valid = _levels(model)
    V = np.zeros((T + 1,) * (l - 1))
    stops = [None] * (T + 1)
    stops[T] = valid[T].copy()
    for s in range(T - 1, -1, -1):
        cont = 1.0 + sum(trans[s][i] * V[_shift(l - 1, s, i)] for i in range(l))
        stop = np.zeros(cont.shape, dtype=bool) if s == 0 else valid[s] & (price * loss[s] <= cont)
        stops[s] = stop
        V = np.where(stop, price * loss[s], cont)
    return float(V.reshape(-1)[0]), stops


def ref_evaluate(model, stops, state=None, prob=0.0):
    T, l = model.T, model.l
    trans, loss, _ = _levels(model)
    reach = np.ones((1,) * (l - 1))
    members = disagreement = 0.0
    for s in range(T):
        p = stops[s].astype(float)
        if state is not None and state[0] == s:
            p[state[1]] = prob
        members += float(np.sum(reach * (1.0 - p)))
        disagreement += float(np.sum(reach * p * loss[s]))
        cont = reach * (1.0 - p)
        nxt = np.zeros((s + 2,) * (l - 1))
        for i in range(l):
            nxt[_shift(l - 1, s, i)] += cont * trans[s][i]
        reach = nxt
    return members, disagreement


def ref_best_flip(model, stops, slack):
    T, l = model.T, model.l
    trans, loss, valid = _levels(model)
    reach = [np.ones((1,) * (l - 1))]
    for s in range(T):
        cont = reach[s] * (1.0 - stops[s])
        nxt = np.zeros((s + 2,) * (l - 1))
        for i in range(l):
            nxt[_shift(l - 1, s, i)] += cont * trans[s][i]
        reach.append(nxt)
    nval = np.zeros((T + 1,) * (l - 1))
    dval = np.zeros((T + 1,) * (l - 1))
    best = None
    effects = [None] * T
    for s in range(T - 1, -1, -1):
        n_go = 1.0 + sum(trans[s][i] * nval[_shift(l - 1, s, i)] for i in range(l))
        d_go = sum(trans[s][i] * dval[_shift(l - 1, s, i)] for i in range(l))
        effects[s] = (-reach[s] * n_go, reach[s] * (loss[s] - d_go))
        nval = np.where(stops[s], 0.0, n_go)
        dval = np.where(stops[s], loss[s], d_go)
    for s in range(1, T):
        dn, dd = effects[s]
        ok = valid[s] & ~stops[s] & (dd <= slack) & (dn < -1e-12)
        if ok.any():
            gain = np.where(ok, dn, 0.0)
            idx = np.unravel_index(np.argmin(gain), gain.shape)
            if best is None or gain[idx] < best[0]:
                best = (gain[idx], s, idx)
    return None if best is None else (best[1], best[2])


def _cell(model, idx):
    """Padded cell of a level's index tuple."""
    return int(np.ravel_multi_index(idx, (model.T + 1,) * (model.l - 1)))


# --------------------------------------------------------------------------
def _random_prior(T, l, rng):
    support, probs = check_prior(uniform_prior(T, l), T)
    w = rng.gamma(0.3, size=len(probs)) * (rng.random(len(probs)) < 0.8)
    w[0] += 1e-3
    return support, w / w.sum()


CASES = [(T, l, kind) for l in (2, 3) for T in (1, 2, 7, 40, 101) for kind in ("uniform", "random")]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: f"T{c[0]}-l{c[1]}-{c[2]}")
def model(request):
    T, l, kind = request.param
    rng = np.random.default_rng(T * 10 + l)
    support, probs = check_prior(uniform_prior(T, l), T) if kind == "uniform" else _random_prior(T, l, rng)
    return _model(T, check_prior((support, probs), T))


def _random_policies(model, rng, n=4):
    """Random stop policies (valid states only), level by level and padded."""
    T = model.T
    _, _, valid = _levels(model)
    for q in np.linspace(0.1, 0.9, n):
        levels = [v & (rng.random(v.shape) < q) for v in valid]
        levels[0][...] = False
        levels[T] = valid[T].copy()
        yield levels, model.pad(levels)


def test_pairwise_sum_is_numpys_sum_bit_for_bit():
    rng = np.random.default_rng(0)
    for n in list(range(1, 300)) + [1000, 1024, 8191, 8192, 8193, 10404, 20001]:
        x = rng.random(n) * 10.0 ** rng.integers(-18, 3, n)
        assert _pairwise_sum(x, 0, n) == np.sum(x), n
        if n > 5:
            assert _pairwise_sum(x, 3, n - 5) == np.sum(x[3:n - 2]), n


@pytest.mark.parametrize("price", [0.0, 0.3, 4.0, 37.0, 1e4])
def test_solve_matches_the_numpy_recursion(model, price):
    value, stops = model.solve(price)
    ref_value, ref_stops = ref_solve(model, price)
    assert value == ref_value
    np.testing.assert_array_equal(stops, model.pad(ref_stops))


def test_evaluate_matches_the_numpy_recursion(model):
    rng = np.random.default_rng(1)
    for levels, padded in _random_policies(model, rng):
        assert tuple(model.evaluate(padded)) == ref_evaluate(model, levels)
        s = int(rng.integers(0, model.T))
        idx = tuple(int(rng.integers(0, s + 1)) for _ in range(model.l - 1))
        got = model.evaluate(padded, random_state=(s, _cell(model, idx)), stop_prob=0.37)
        assert tuple(got) == ref_evaluate(model, levels, (s, idx), 0.37)


def test_best_flip_matches_the_numpy_search(model):
    rng = np.random.default_rng(2)
    for levels, padded in _random_policies(model, rng):
        for slack in (0.0, 1e-4, 0.01, 1.0):
            ref = ref_best_flip(model, levels, slack)
            got = model.best_flip(padded, slack)
            assert got == (None if ref is None else (ref[0], _cell(model, ref[1])))


def test_fold_fits_are_reused_only_for_a_seed():
    rng = np.random.default_rng(3)
    n, p = rng.binomial(101, 0.368, 200), rng.beta(0.4, 0.4, 200)
    k = rng.binomial(n, p)
    v = np.column_stack([n - k, k])
    clear_caches()
    first = [cross_validated_budget(v, 101, d) for d in (0.05, 0.01)]
    again = [cross_validated_budget(v, 101, d) for d in (0.05, 0.01)]
    clear_caches()
    fresh = [cross_validated_budget(v, 101, d) for d in (0.01, 0.05)][::-1]
    assert first == again == fresh
    # a Generator draws new folds each call: the second call must not see the first's folds
    gen = np.random.default_rng(9)
    a = cross_validated_budget(v, 101, 0.01, random_state=gen)
    b = cross_validated_budget(v, 101, 0.01, random_state=gen)
    a_again = cross_validated_budget(v, 101, 0.01, random_state=np.random.default_rng(9))
    assert a == a_again and a != b
    # a seed that was cached does not let an invalid one through
    cross_validated_budget(v, 101, 0.01, random_state=1)
    with pytest.raises(TypeError, match="random_state"):
        cross_validated_budget(v, 101, 0.01, random_state=True)
    rule = OptimalRule.from_oob_votes(v, 101, 0.01)
    rows = v[v.sum(1) > 0]  # the final table's prior: all the rows' deconvolved one, with uniform_rows mixed in
    w = UNIFORM_ROWS / (len(rows) + UNIFORM_ROWS)
    ref = OptimalRule(101, rule.disagreement, prior=VoteMixture(rows, 100).prior(101, uniform=w))
    assert rule.table_key(2) == ref.table_key(2) and rule.expected_members == ref.expected_members
