"""The compiled Bellman recursions against the level-by-level NumPy recursion, bit for bit.

``ensvote.optimal`` runs the backward induction, the policy evaluation and
the one-flip search in numba loops over a compact layout (one cell per vote
vector, level after level).  They promise the
very floating-point results of the NumPy formulation (one array per level,
NumPy's pairwise sums for the level totals), so that a rule, and every
committed experiment record built from one, does not depend on which of the
two computed it.  The NumPy formulation is kept here as the reference.
"""

import hashlib

import numpy as np
import pytest

from ensvote import OptimalRule, UrnRule, clear_caches
from ensvote.confidence import check_prior, uniform_prior
from ensvote._bellman import _model, _pairwise_sum
from ensvote._urn import log_levels
from ensvote.optimal import UNIFORM_ROWS, cross_validated_budget, policy_value
from ensvote.priors import VoteMixture


# --------------------------------------------------------------------------
# the reference: one NumPy array per level
# --------------------------------------------------------------------------
def _levels(model):
    """The model's arrays level by level, on each level's grid ``(s + 1,) * (l - 1)`` (zero off the vote vectors)."""
    T = model.T
    trans = [np.moveaxis(model.level(model.trans, s), -1, 0) for s in range(T)]
    loss = [model.level(model.loss, s) for s in range(T + 1)]
    valid = [model.level(model.valid, s) for s in range(T + 1)]
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


def ref_model_arrays(T, support, probs):
    """The model's ``valid``, ``loss`` and ``trans`` from the level-by-level NumPy recursion (``log_levels``)."""
    l = support.shape[1]
    model = _model(T, check_prior((support, probs), T))
    trans, loss, valid = np.zeros_like(model.trans), np.zeros_like(model.loss), np.zeros_like(model.valid)
    states = model.level_states
    for s, _, logq, logr, terms in log_levels(T, support, probs):
        cells = slice(model.base[s], model.base[s + 1])
        on = model._on(s)
        logq = logq[on]
        ok = np.isfinite(logq)
        if terms is not None:
            with np.errstate(invalid="ignore"):
                tr = np.exp(terms[:, 0][:, on] - np.log(s + 1.0) - logq)
            trans[cells] = np.where(ok, tr, 0.0).T
        cur = np.argmax(states(s), axis=1)
        others = np.where(np.arange(l)[:, None] == cur[None], -np.inf, logr[:, on])
        with np.errstate(invalid="ignore"):
            lo = np.exp(np.logaddexp.reduce(others, axis=0) - logq)
        valid[cells], loss[cells] = ok, np.where(ok, np.clip(lo, 0.0, 1.0), 0.0)
    return model, valid, loss, trans


def _cell(model, s, idx):
    """The model's cell of the vote vector at grid index ``idx`` of level ``s``."""
    return model.cell(tuple(idx) + (s - sum(idx),))


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
    """Random stop policies (valid states only), level by level and as the model's cells."""
    T = model.T
    _, _, valid = _levels(model)
    for q in np.linspace(0.1, 0.9, n):
        levels = [v & (rng.random(v.shape) < q) for v in valid]
        levels[0][...] = False
        levels[T] = valid[T].copy()
        yield levels, model.from_levels(levels)


def test_pairwise_sum_is_numpys_sum_bit_for_bit():
    rng = np.random.default_rng(0)
    for n in list(range(1, 300)) + [1000, 1024, 8191, 8192, 8193, 10404, 20001]:
        x = rng.random(n) * 10.0 ** rng.integers(-18, 3, n)
        assert _pairwise_sum(x, 0, n, 0, n) == np.sum(x), n
        if n > 5:
            assert _pairwise_sum(x, 3, n - 5, 3, n - 2) == np.sum(x[3:n - 2]), n
        # zero outside [i, j): the parts of the tree that hold only zeros are not read
        i, j = sorted(rng.integers(0, n + 1, 2))
        y = np.zeros(n)
        y[i:j] = x[i:j]
        assert _pairwise_sum(y, 0, n, i, j) == np.sum(y), (n, i, j)
        assert _pairwise_sum(x, 0, n, j, j) == 0.0


@pytest.mark.parametrize("price", [0.0, 0.3, 4.0, 37.0, 1e4])
def test_solve_matches_the_numpy_recursion(model, price):
    value, stops = model.solve(price)
    ref_value, ref_stops = ref_solve(model, price)
    assert value == ref_value
    np.testing.assert_array_equal(stops, model.from_levels(ref_stops))


def test_evaluate_matches_the_numpy_recursion(model):
    rng = np.random.default_rng(1)
    for levels, cells in _random_policies(model, rng):
        assert tuple(model.evaluate(cells)) == ref_evaluate(model, levels)
        s = int(rng.integers(0, model.T))
        states = model.level_states(s)  # a vote vector of level s
        idx = tuple(int(c) for c in states[rng.integers(len(states))][:-1])
        got = model.evaluate(cells, random_state=_cell(model, s, idx), stop_prob=0.37)
        assert tuple(got) == ref_evaluate(model, levels, (s, idx), 0.37)


@pytest.mark.parametrize("T, l, kind", CASES + [(201, 3, "random"), (1001, 2, "random")])
def test_model_arrays_match_the_numpy_recursion(T, l, kind):
    # the compiled recursion over the cells (log_cells) gives the level-by-level NumPy one's bits
    rng = np.random.default_rng(T * 10 + l)
    support, probs = check_prior(uniform_prior(T, l), T) if kind == "uniform" else _random_prior(T, l, rng)
    model, valid, loss, trans = ref_model_arrays(T, support, probs)
    if kind == "random" and T >= 7:
        assert not valid.all()  # vote vectors of probability 0 arise
    np.testing.assert_array_equal(model.valid, valid)
    np.testing.assert_array_equal(model.loss, loss)
    np.testing.assert_array_equal(model.trans, trans)


@pytest.mark.parametrize("price", [0.3, 37.0, 1e4])
def test_evaluate_and_flip_of_optimal_policies_match_the_numpy_recursion(model, price):
    # an optimal policy stops most urns early: most vote vectors are never reached, the loops skip them
    stops = model.solve(price)[1]
    levels = [model.level(stops, s) for s in range(model.T + 1)]
    assert tuple(model.evaluate(stops)) == ref_evaluate(model, levels)
    if model.T > 1:
        s = model.T // 2
        idx = tuple(int(c) for c in model.level_states(s)[0][:-1])
        got = model.evaluate(stops, random_state=_cell(model, s, idx), stop_prob=0.37)
        assert tuple(got) == ref_evaluate(model, levels, (s, idx), 0.37)
    for slack in (0.0, 1e-3):
        ref = ref_best_flip(model, levels, slack)
        assert model.best_flip(stops, slack) == (None if ref is None else _cell(model, ref[0], ref[1]))


def test_best_flip_matches_the_numpy_search(model):
    rng = np.random.default_rng(2)
    for levels, cells in _random_policies(model, rng):
        for slack in (0.0, 1e-4, 0.01, 1.0):
            ref = ref_best_flip(model, levels, slack)
            got = model.best_flip(cells, slack)
            assert got == (None if ref is None else _cell(model, ref[0], ref[1]))


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


# --------------------------------------------------------------------------
# the rules themselves, as the padded layout built them
# --------------------------------------------------------------------------
def _summary(x):
    """A rule's table (12 hex digits of SHA-256), boundary state and numbers, or a PolicyValue's numbers."""
    if isinstance(x, OptimalRule):
        table = hashlib.sha256(np.packbits(x.table()).tobytes()).hexdigest()[:12]
        b = None if x.boundary_state is None else tuple(int(v) for v in x.boundary_state)
        vals = (x.expected_members, x.expected_disagreement, x.optimum_members, x.price,
                x.boundary_stop_probability, x.disagreement)
        return table, b, tuple(None if v is None else float(v) for v in vals)
    return None, None, tuple(float(v) for v in x)


def _assert_same_rule(got, want):
    """Two :func:`_summary` results: the same table and boundary state, the numbers within 1e-9 (relative)."""
    (table, boundary, values), (want_table, want_boundary, want_values) = got, want
    assert (table, boundary) == (want_table, want_boundary)
    assert [v is None for v in values] == [w is None for w in want_values]
    assert [v for v in values if v is not None] == pytest.approx([w for w in want_values if w is not None],
                                                                 rel=1e-9)


def _fp_prior(T, l, seed):
    support, probs = check_prior(uniform_prior(T, l), T)
    rng = np.random.default_rng(seed)
    w = rng.gamma(0.3, size=len(probs)) * (rng.random(len(probs)) < 0.8)
    w[0] += 1e-3
    return support, w / w.sum()


def _fp_votes(T, l, n, seed):
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(l, 0.4), n)
    m = rng.binomial(T, 0.368, n)
    return np.array([rng.multinomial(k, q) for k, q in zip(m, p)])


LAYOUT_CASES = {
    "u3-T30": lambda: OptimalRule(30, 0.01, n_classes=3),
    "u3-T101": lambda: OptimalRule(101, 0.01, n_classes=3),
    "u3-T101-d05": lambda: OptimalRule(101, 0.05, n_classes=3),
    "r3-T30": lambda: OptimalRule(30, 0.02, prior=_fp_prior(30, 3, 1)),
    "r3-T101": lambda: OptimalRule(101, 0.01, prior=_fp_prior(101, 3, 2)),
    "price3-T101": lambda: OptimalRule(101, price=20.0, n_classes=3),
    "members3-T101": lambda: OptimalRule(101, max_members=15, n_classes=3),
    "pv3-T101": lambda: policy_value(UrnRule(101, 0.99), None, n_classes=3),
    "pv3-T30": lambda: policy_value(UrnRule(30, 0.95), _fp_prior(30, 3, 3)),
    "oob3-T30": lambda: OptimalRule.from_oob_votes(_fp_votes(30, 3, 300, 4), 30, 0.01),
    "u2-T101": lambda: OptimalRule(101, 0.01),
    "u2-T1001": lambda: OptimalRule(1001, 0.01),
    "r2-T301": lambda: OptimalRule(301, 0.005, prior=_fp_prior(301, 2, 6)),
    "members2-T1001": lambda: OptimalRule(1001, max_members=40),
    "pv2-T1001": lambda: policy_value(UrnRule(1001, 0.99), None),
}
#: What the padded layout (commit aa43979, before the compact one) gave for each case above: the table, the
#: boundary state, and the numbers at 12 significant digits.  On the machine they were recorded on, every later
#: layout and loop gave these numbers bit for bit (16-hex-digit SHA-256 fingerprints of their exact values,
#: replaced by this table when it showed that the last digits depend on the CPU: NumPy's vectorised exp and
#: log, OpenBLAS's kernels; under the emulated older CPU of CI the tables are the same and the numbers within
#: 5e-12).  So the tables and boundary states must be equal and the numbers within 1e-9 (relative), on any
#: CPU.  The price (the fourth number) is since then the exact price λ* where the two policies the
#: bisection ends at cost the same (:func:`ensvote._bellman._tie_price`); it used to be the geometric mean of
#: the last bracket, which contains λ*.  The compute budgets (``members*``) then also search the disagreement
#: budget's tables between the two policies and find tables closer to K that disagree less (before:
#: 14.9979387225 members, disagreement 0.0949209927343 at K = 15; 39.9971032652 and 0.0229485957187 at
#: K = 40).  Every other number and every table is as the padded layout gave them.  Also checked then, not
#: kept here because they take 5-20 s:
#: ``OptimalRule.from_oob_votes(_fp_votes(101, 3, 300, 5), 101, 0.01)`` and
#: ``OptimalRule.from_oob_votes(_fp_votes(1001, 2, 400, 7), 1001, 0.01)``.
PADDED_LAYOUT = {
    "u3-T30": ('ff4366d4af91', (0, 1, 6), (16.2736973557, 0.00999997813041, 16.2729177915, 207.806285988, 0.880380399588, 0.01)),
    "u3-T101": ('0b552a2eda5c', (2, 4, 12), (37.0328807601, 0.00999999423953, 37.0323573587, 652.827147734, 0.580866525734, 0.01)),
    "u3-T101-d05": ('e366e1044923', (11, 17, 7), (23.01103773, 0.0499998852482, 23.010975384, 225.098453819, 0.595235794603, 0.05)),
    "r3-T30": ('78780e8ea573', (11, 1, 7), (14.5075047267, 0.0199995958594, 14.5069479302, 131.258775672, 0.567250490704, 0.02)),
    "r3-T101": ('17538f6de75f', (8, 0, 1), (34.5115956175, 0.00999999752867, 34.5113930542, 664.625484761, 0.164104620777, 0.01)),
    "price3-T101": ('f01e0d984664', None, (2.71428571429, 0.285728057008, 2.71428571429, 20, None, None)),
    "members3-T101": ('8fd85da17deb', None, (14.9999746442, 0.0949086302381, 14.9999746442, 145.332017552, None, None)),
    "pv3-T101": (None, None, (39.6595087789, 0.00687603468752)),
    "pv3-T30": (None, None, (13.4775102839, 0.0299042452468)),
    "oob3-T30": ('f3986f1236af', (1, 0, 6), (12.4177640991, 0.00775347056844, 12.4118248306, 237.57394214, 0.341093094024, 0.00775584936282)),
    "u2-T101": ('1a70dd7073ce', (2, 9), (24.1615712243, 0.00999165820577, 24.1487513367, 571.799964588, 0.474103329307, 0.01)),
    "u2-T1001": ('a661a65b0950', (30, 47), (65.979499719, 0.00999999204722, 65.97945659, 2875.25266993, 0.48341958907, 0.01)),
    "r2-T301": ('b972e44b4e79', (84, 102), (51.5344219771, 0.00499935298548, 51.5329986568, 2199.8274098, 0.353276463564, 0.005)),
    "members2-T1001": ('1d110462dc32', None, (39.9999655381, 0.0229479775536, 39.9999655381, 1430.40556276, None, None)),
    "pv2-T1001": (None, None, (81.8081356765, 0.00770087134484)),
}


@pytest.mark.parametrize("case", list(LAYOUT_CASES))
def test_rules_are_those_of_the_padded_layout(case):
    """Tables and boundary states as before; expected members and disagreement, optimum, price within 1e-9."""
    _assert_same_rule(_summary(LAYOUT_CASES[case]()), PADDED_LAYOUT[case])


def test_the_budget_mode_does_not_depend_on_openblas_threads_at_the_kept_precision():
    # OpenBLAS splits a large matrix-vector product over its threads (one per core), which changes the last
    # bits of the deconvolution's EM and of its urn prior (the 5,253 x 1,326 product at T = 101): the same
    # table and boundary, and the numbers within 1e-9, on one thread as on two
    from threadpoolctl import threadpool_info, threadpool_limits

    if not any(i["internal_api"] == "openblas" for i in threadpool_info()):
        pytest.skip("NumPy is not linked to OpenBLAS here")
    votes = _fp_votes(101, 3, 300, 5)
    got = {}
    for threads in (1, 2):
        clear_caches()
        with threadpool_limits(threads):
            got[threads] = _summary(OptimalRule.from_oob_votes(votes, 101, 0.01))
    _assert_same_rule(got[1], got[2])
