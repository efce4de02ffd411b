"""The Bayes-optimal stopping policy: brute force on tiny ensembles, the urn rule, the engine, bad input."""

import inspect
import itertools
import math

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote.optimal import MAX_OPTIMAL_T, OptimalRule, policy_value


# ---------------------------------------------------------------- brute force
def _sequences(T, l, prior):
    """Every vote sequence of T members with its probability under the urn model and the prior.

    An urn content K (probability prior[K]) gives each of its distinct orderings the
    same probability; the final majority is argmax K (lowest index on ties).
    """
    support, probs = prior
    weight = {tuple(int(v) for v in k): float(p) for k, p in zip(support, probs)}
    seqs, w, final = [], [], []
    for seq in itertools.product(range(l), repeat=T):
        K = tuple(int(np.sum(np.array(seq) == c)) for c in range(l))
        n_orders = math.factorial(T) // math.prod(math.factorial(k) for k in K)
        seqs.append(seq)
        w.append(weight.get(K, 0.0) / n_orders)
        final.append(int(np.argmax(K)))
    return np.array(seqs), np.array(w), np.array(final)


def _brute_force(T, l, prior):
    """(members, disagreement) of every deterministic policy over the vote vectors with 1..T-1 votes."""
    states = [tuple(c) for s in range(1, T) for c in ev.compositions(s, l)]
    index = {st: k for k, st in enumerate(states)}
    seqs, w, final = _sequences(T, l, prior)
    onehot = np.eye(l, dtype=int)[seqs]  # (n_seq, T, l)
    counts = np.cumsum(onehot, axis=1)
    path = np.array([[index[tuple(counts[q, s - 1])] for s in range(1, T)] for q in range(len(seqs))])
    label = np.argmax(counts, axis=2)  # current majority after each vote
    policies = (np.arange(2 ** len(states))[:, None] >> np.arange(len(states))) & 1
    stop = policies[:, path].astype(bool)  # (n_pol, n_seq, T - 1)
    stop = np.concatenate([stop, np.ones(stop.shape[:2] + (1,), dtype=bool)], axis=2)
    at = np.argmax(stop, axis=2)  # index of the stop: members - 1
    members = (at + 1) @ w
    wrong = label[np.arange(len(seqs))[None, :], at] != final[None, :]
    disagreement = wrong.astype(float) @ w
    return policies.astype(bool), states, members, disagreement


def _lower_hull_at(d, n, x):
    """Lower convex envelope of the points (d, n) at abscissa x (the best randomised mixture), and minus its slope
    there (the price of a disagreement at which the envelope's two ends cost the same)."""
    pts = sorted(set(zip(np.round(d, 15), np.round(n, 15))))
    hull = []
    for p in pts:
        while len(hull) >= 2:
            (x1, y1), (x2, y2) = hull[-2], hull[-1]
            if (x2 - x1) * (p[1] - y1) - (y2 - y1) * (p[0] - x1) <= 0:
                hull.pop()
            else:
                break
        hull.append(p)
    hx, hy = np.array(hull).T
    # the budget is an upper bound: past the fewest-members point the envelope stays flat
    cut = int(np.argmin(hy)) + 1
    hx, hy = hx[:cut], hy[:cut]
    k = int(np.searchsorted(hx, x, side="right"))  # the segment from vertex k - 1 (within x) to k (above it)
    slope = 0.0 if k >= len(hx) else (hy[k] - hy[k - 1]) / (hx[k] - hx[k - 1])
    return float(np.interp(x, hx, hy)), -slope


def _priors(T, l):
    rng = np.random.default_rng(ev.SEED)
    sup, p = ev.uniform_prior(T, l) if l > 2 else ev.confidence.check_prior(ev.uniform_prior(T), T)
    skew = rng.random(len(p)) ** 3
    return {"uniform": (sup, p), "random": (sup, skew / skew.sum())}


TINY = [(5, 2), (3, 3)]


@pytest.fixture(scope="module", params=[(T, l, name) for T, l in TINY for name in ("uniform", "random")],
                ids=lambda p: f"T{p[0]}-l{p[1]}-{p[2]}")
def tiny(request):
    T, l, name = request.param
    prior = _priors(T, l)[name]
    return T, l, prior, _brute_force(T, l, prior)


@pytest.mark.parametrize("price", [0.0, 0.7, 3.0, 11.0, 250.0])
def test_bellman_value_is_the_minimum_over_all_policies(tiny, price):
    T, l, prior, (policies, states, members, disagreement) = tiny
    rule = OptimalRule(T, price=price, prior=prior)
    brute = members + price * disagreement
    assert rule.expected_members + price * rule.expected_disagreement == pytest.approx(brute.min(), abs=1e-12)
    # the tabulated decisions are one of the minimisers, evaluated independently
    mine = np.array([bool(rule.stop(np.array(st))) for st in states])
    k = int(np.flatnonzero((policies == mine).all(axis=1))[0])
    assert brute[k] == pytest.approx(brute.min(), abs=1e-12)
    assert members[k] == pytest.approx(rule.expected_members, abs=1e-12)
    assert disagreement[k] == pytest.approx(rule.expected_disagreement, abs=1e-12)


def test_budget_optimum_is_the_lower_convex_hull(tiny):
    T, l, prior, (policies, states, members, disagreement) = tiny
    lo, hi = disagreement.min(), min(disagreement.max(), 0.499)
    for delta in np.linspace(lo, hi, 9)[1:-1]:
        rule = OptimalRule(T, float(delta), prior=prior)
        hull, price = _lower_hull_at(disagreement, members, delta)
        assert rule.optimum_members == pytest.approx(hull, abs=1e-9)
        # the price is λ*, the slope of the envelope where the budget meets it (the two adjacent policies tie)
        assert rule.price == pytest.approx(price, rel=1e-9)
        # the tabulated policy is deterministic, feasible, and no better than the best deterministic one
        assert rule.expected_disagreement <= delta + 1e-12
        assert rule.expected_members >= members[disagreement <= delta + 1e-12].min() - 1e-12
        assert rule.expected_members >= rule.optimum_members - 1e-12
        if rule.boundary_state is not None:
            p = rule.stop_probability(np.array(states))
            assert np.sum((p > 0) & (p < 1)) == 1
            assert 0.0 <= rule.boundary_stop_probability <= 1.0


def test_policy_value_of_any_rule_matches_brute_force(tiny):
    T, l, prior, (policies, states, members, disagreement) = tiny
    for rule in (ev.UrnRule(T, 0.8, prior=prior), ev.ExactRule(T), ev.FixedRule(2), ev.InfiniteRule(0.7)):
        mine = np.array([bool(rule.stop(np.array(st))) for st in states])
        k = int(np.flatnonzero((policies == mine).all(axis=1))[0])
        pv = policy_value(rule, prior)
        assert pv.members == pytest.approx(members[k], abs=1e-12)
        assert pv.disagreement == pytest.approx(disagreement[k], abs=1e-12)


# ---------------------------------------------------------------- T = 101
def _oob_like_prior(l, seed):
    """A prior from simulated out-of-bag votes: most rows easy, some borderline (as a forest's are)."""
    rng = np.random.default_rng(seed)
    n = 600
    alpha = np.where(rng.random((n, 1)) < 0.8, 0.3, 3.0) * np.ones((1, l))
    alpha[np.arange(n), rng.integers(0, l, n)] += 6.0
    p = np.array([rng.dirichlet(a) for a in alpha])
    oob = np.array([rng.multinomial(37, q) for q in p])
    return ev.oob_prior(oob, 101)


PRIORS_101 = {
    "uniform-2": (None, 2), "uniform-3": (None, 3),
    "oob-2": (_oob_like_prior(2, 1), 2), "oob-3": (_oob_like_prior(3, 2), 3),
}


@pytest.mark.parametrize("name", list(PRIORS_101))
def test_optimal_never_needs_more_members_than_the_urn_rule(name):
    prior, l = PRIORS_101[name]
    for alpha in (0.99, 0.999):
        urn = ev.UrnRule(101, alpha, prior=prior)
        n_urn, d_urn = policy_value(urn, prior, n_classes=l)
        opt = OptimalRule(101, d_urn, prior=prior, n_classes=l)
        assert opt.optimum_members <= n_urn + 1e-9
        assert opt.expected_disagreement <= d_urn * (1 + 1e-12)
        assert opt.optimum_members <= opt.expected_members + 1e-12
        # the budget is met: the tabulated rule leaves at most a sliver of it unused
        assert opt.expected_disagreement >= 0.9 * d_urn


def test_uniform_binary_threshold_rule_is_near_optimal_and_budget_monotone():
    urn = ev.UrnRule(101, 0.99)
    n_urn, d_urn = policy_value(urn, None)
    assert n_urn == pytest.approx(ev.expected_queries(urn, ev.uniform_prior(101), method="exact"), abs=1e-9)
    opt = OptimalRule(101, d_urn)
    assert opt.optimum_members < n_urn  # strictly better, but by little
    assert n_urn - opt.optimum_members < 0.02 * n_urn
    budgets = [0.02, 0.01, d_urn, 0.003, 0.001]
    need = [OptimalRule(101, d).optimum_members for d in budgets]
    assert np.all(np.diff(need) > 0)  # a smaller budget always costs members


def test_uniform_binary_policy_is_symmetric_and_stops_at_T():
    rule = OptimalRule(101, 0.01)
    tab = rule.table()
    s = np.add.outer(np.arange(102), np.arange(102))
    both = tab & tab.T
    assert np.all(tab[s == 101])
    assert not np.any(tab[s > 101]) and not tab[0, 0]
    # symmetric except possibly at the one pair of vote vectors where the budget is filled
    assert np.sum(tab != tab.T) <= 4
    assert both.sum() > 0


def test_halt_with_the_table_matches_policy_value_on_simulated_urns():
    prior, l = PRIORS_101["oob-2"]
    rule = OptimalRule(101, 0.01, prior=prior)
    rng = np.random.default_rng(ev.SEED)
    n = 40_000
    k = rng.choice(102, size=n, p=prior)
    votes = rng.permuted((np.arange(101)[None, :] >= k[:, None]).astype(np.int8), axis=1)
    res = ev.halt(votes, rule)
    full = (101 - k > k).astype(int)  # class 1 wins iff it has the majority of the urn
    members = res.n_queried.astype(float)
    wrong = (res.labels != full).astype(float)
    assert members.mean() == pytest.approx(rule.expected_members, abs=4 * members.std() / math.sqrt(n))
    assert wrong.mean() == pytest.approx(rule.expected_disagreement, abs=4 * math.sqrt(0.01 / n))
    # the engine's look-up is the rule's own decision
    counts = np.column_stack([np.arange(102), 101 - np.arange(102)])
    assert np.array_equal(rule.stop(counts), np.ones(102, dtype=bool))


def test_three_class_halt_uses_the_table():
    rule = OptimalRule(31, 0.02, n_classes=3)
    rng = np.random.default_rng(ev.SEED)
    votes = rng.integers(0, 3, size=(500, 31))
    res = ev.halt(votes, rule, n_classes=3)
    cum = np.stack([np.cumsum(votes == c, axis=1) for c in range(3)], axis=2)
    first = np.argmax(rule.stop(cum), axis=1)
    assert np.array_equal(res.n_queried, first + 1)


def test_build_is_deterministic():
    a = OptimalRule(101, 0.005, prior=PRIORS_101["oob-2"][0])
    from ensvote import _bellman

    _bellman._MODELS.clear()
    b = OptimalRule(101, 0.005, prior=PRIORS_101["oob-2"][0])
    assert np.array_equal(a.table(), b.table()) and a.price == b.price
    assert a.optimum_members == b.optimum_members


@pytest.mark.parametrize("l", [2, 3])
def test_remembered_policies_are_the_solved_ones(l):
    """A budget search reuses the policies of the searches before it; they must be the ones a solve gives."""
    from ensvote import _bellman

    _bellman._MODELS.clear()
    T = 31 if l == 3 else 101
    prior = ev.uniform_prior(T, l)
    model = _bellman._model(T, ev.confidence.check_prior(prior, T))
    for price in (0.0, 1.0, 3.7, 1.0, 0.0):  # misses, then hits
        stops, value = model.policy_at(price)
        fresh = model.solve(price)[1]
        assert stops.dtype == bool and np.array_equal(stops, fresh) and value == model.evaluate(fresh)
    stops[:] = False  # a caller's copy: changing it leaves the remembered policy alone
    assert np.array_equal(model.policy_at(3.7)[0], model.solve(3.7)[1])
    for price in np.linspace(0.5, 50.0, model.POLICY_MEMO + 10):
        model.policy_at(price)
    assert len(model._policies) == model.POLICY_MEMO  # bounded
    # budgets built one after the other (remembering) and each on a fresh model agree exactly
    warm = [OptimalRule(T, d, prior=prior) for d in (0.02, 0.01, 0.005)]
    cold = []
    for d in (0.02, 0.01, 0.005):
        _bellman._MODELS.clear()
        cold.append(OptimalRule(T, d, prior=prior))
    for a, b in zip(warm, cold):
        assert np.array_equal(a.table(), b.table()) and a.price == b.price
        assert (a.expected_members, a.expected_disagreement, a.optimum_members) == \
            (b.expected_members, b.expected_disagreement, b.optimum_members)


def test_large_budget_stops_after_one_vote():
    rule = OptimalRule(101, 0.45)
    assert rule.expected_members == 1.0 and rule.price == 0.0
    assert rule.expected_disagreement <= 0.45


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize("bad", [0, 0.0, -0.01, 0.5, 0.7, 1.0, float("nan"), float("inf")])
def test_bad_budget_value(bad):
    with pytest.raises(ValueError, match="disagreement"):
        OptimalRule(101, bad)


@pytest.mark.parametrize("bad", ["0.01", True, [0.01], object()])
def test_bad_budget_type(bad):
    with pytest.raises(TypeError, match="disagreement"):
        OptimalRule(101, bad)


def test_unsupported_sizes_and_classes():
    assert MAX_OPTIMAL_T == {2: 1001, 3: 201}
    with pytest.raises(ValueError, match=r"T <= 1,001 with 2 classes and T <= 201 with 3 classes\); use rule='urn'"):
        OptimalRule(MAX_OPTIMAL_T[2] + 1, 0.01)
    with pytest.raises(ValueError, match=r"T=202 is above .* T <= 201 with 3 classes\); use rule='urn'"):
        OptimalRule(MAX_OPTIMAL_T[3] + 1, 0.01, n_classes=3)
    with pytest.raises(ValueError, match="T=203 is above"):
        ev.policy_value(ev.UrnRule(203), None, n_classes=3)
    with pytest.raises(ValueError, match="T=202 is above"):  # refused before any prior is estimated
        OptimalRule.from_oob_votes(np.ones((10, 3), dtype=int), 202)
    with pytest.raises(ValueError, match="2 or 3 classes"):
        OptimalRule(11, 0.01, n_classes=4)
    with pytest.raises(ValueError, match="2 or 3 classes"):
        OptimalRule(5, 0.01, prior=ev.uniform_prior(5, 4))
    with pytest.raises(ValueError, match="n_classes=3 but the prior is over 2"):
        OptimalRule(5, 0.01, prior=ev.uniform_prior(5), n_classes=3)
    with pytest.raises(ValueError, match="T <= 1,001 with 2 classes"):
        policy_value(ev.UrnRule(1003, 0.99), None)
    # within the limit: the policy of a 301-member urn rule, evaluated exactly
    assert 0 < policy_value(ev.UrnRule(301, 0.99), None).members < 301


def test_check_ensemble_size_refuses_bad_arguments():
    from ensvote.optimal import check_ensemble_size

    assert check_ensemble_size(201, 3) == 201 and check_ensemble_size(1001, 2, "minimax") == 1001
    with pytest.raises(TypeError, match="n_estimators"):
        check_ensemble_size("101", 2, name="n_estimators")
    with pytest.raises(ValueError, match="n_estimators"):
        check_ensemble_size(0, 2, name="n_estimators")
    with pytest.raises(ValueError, match="2 or 3 classes, got n_classes=4"):
        check_ensemble_size(11, 4)
    with pytest.raises(ValueError, match="guarantee must be one of"):
        check_ensemble_size(11, 2, "worst")
    with pytest.raises(ValueError, match=r"T=202 is above .*T <= 201 with 3 classes"):
        check_ensemble_size(202, 3)
    with pytest.raises(ValueError, match=r"T=1002 is above .*MAX_PER_ROW_T"):
        check_ensemble_size(1002, 2, "per-row")


class _NotToBeGrown(RandomForestClassifier):
    """A forest whose fit fails loudly: the classifier must refuse the configuration before it grows it."""

    def fit(self, X, y, sample_weight=None):
        raise AssertionError("the forest was grown before the configuration was checked")


#: The budgets and guarantees of rule="optimal", and what the refusal of a too-large forest names.
_OPTIMAL_MODES = [(dict(disagreement=0.01), r"; use rule='urn'"), (dict(max_members=5), r"; use rule='urn'"),
                  (dict(disagreement=0.01, guarantee="per-row"), r"MAX_PER_ROW_T\); use an ensemble .*rule='urn'"),
                  (dict(disagreement=0.01, guarantee="minimax"), r"MAX_PER_ROW_T\); use an ensemble .*rule='urn'")]


@pytest.mark.parametrize("mode,use", _OPTIMAL_MODES)
def test_classifier_refuses_sizes_and_classes_before_growing_the_forest(mode, use):
    X, y = ev.datasets.load("twonorm", n_samples=120, random_state=0)
    y3 = np.arange(len(y)) % 3
    for T, labels, match in [
        (MAX_OPTIMAL_T[2] + 2, y, r"T=1003 is above .*" + use),
        (MAX_OPTIMAL_T[3] + 2, y3, r"T=203 is above .*T <= 201 with 3 classes"),
        (11, np.arange(len(y)) % 4, r"2 or 3 classes, got n_classes=4; rule='urn' and rule='infinite' take any"),
    ]:
        clf = ev.HaltingClassifier(_NotToBeGrown(n_estimators=T), rule="optimal", **mode)
        with pytest.raises(ValueError, match=match):
            clf.fit(X, labels)
    with pytest.raises(AssertionError, match="grown"):  # within the limits the forest is grown
        ev.HaltingClassifier(_NotToBeGrown(n_estimators=MAX_OPTIMAL_T[3]), rule="optimal", **mode).fit(X, y3)
    with pytest.raises(AssertionError, match="grown"):  # the limits are the optimal rule's: others grow any forest
        ev.HaltingClassifier(_NotToBeGrown(n_estimators=MAX_OPTIMAL_T[2] + 2), rule="urn").fit(X, y)


def test_three_classes_up_to_201_members():
    rule = OptimalRule(MAX_OPTIMAL_T[3], 0.01, n_classes=3)  # uniform prior, the largest size
    assert rule.table().shape == (202,) * 3 and rule.expected_disagreement <= 0.01
    assert 1 < rule.optimum_members <= rule.expected_members < 201
    exact = policy_value(rule, None, n_classes=3)  # the table, evaluated afresh
    assert (exact.members, exact.disagreement) == (rule.expected_members, rule.expected_disagreement)


def test_bad_price_and_both_modes():
    for bad in (-1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError, match="price"):
            OptimalRule(11, price=bad)
    with pytest.raises(TypeError, match="price"):
        OptimalRule(11, price="3")
    with pytest.raises(ValueError, match="give one of disagreement"):
        OptimalRule(11, 0.01, price=3.0)


def test_rule_refuses_other_ensembles_and_class_counts():
    rule = OptimalRule(21, 0.01)
    with pytest.raises(ValueError, match="T=21"):
        ev.halt(np.zeros((3, 25), dtype=int), rule)
    with pytest.raises(ValueError, match="built for 2 classes"):
        ev.halt(np.zeros((3, 21), dtype=int), rule, n_classes=3)
    with pytest.raises(TypeError, match="HaltingRule"):
        policy_value("urn", None)


# ---------------------------------------------------------------- budget mode
@pytest.fixture(scope="module")
def binary_data():
    from sklearn.datasets import make_classification

    X, y = make_classification(900, 8, n_informative=4, flip_y=0.05, random_state=ev.SEED)
    return X[:600], y[:600], X[600:], y[600:]


def test_budget_mode_builds_the_optimal_rule_on_the_oob_prior(binary_data):
    from sklearn.base import clone
    from sklearn.ensemble import RandomForestClassifier

    X, y, Xt, yt = binary_data
    clf = ev.HaltingClassifier(RandomForestClassifier(101, random_state=0), rule="optimal", disagreement=0.01)
    assert clone(clf).get_params()["disagreement"] == 0.01
    clf.fit(X, y)
    # the out-of-bag prior: the rule of OptimalRule.from_oob_votes (deconvolved prior, cross-validated budget)
    ref = OptimalRule.from_oob_votes(clf.oob_votes(X), 101, 0.01)
    assert isinstance(clf.rule_, OptimalRule) and clf.rule_.target_disagreement == 0.01
    assert clf.rule_.disagreement == ref.disagreement <= 0.01
    assert np.array_equal(clf.prior_, ref.prior) and clf.prior_ is clf.rule_.prior
    assert np.array_equal(clf.rule_.table(), ref.table())
    assert clf.expected_members_ == clf.rule_.expected_members
    assert clf.expected_disagreement_ == clf.rule_.expected_disagreement <= 0.01
    assert 1 < clf.expected_members_ < 101
    res = clf.halt(Xt)
    assert np.array_equal(clf.predict(Xt), res.labels)
    assert np.array_equal(res.n_queried, ev.halt(clf.member_votes(Xt), clf.rule_).n_queried)
    # the other rules report no expectation; the uniform prior is available too
    assert ev.HaltingClassifier(RandomForestClassifier(101, random_state=0)).fit(X, y).expected_members_ is None
    uni = ev.HaltingClassifier(RandomForestClassifier(101, random_state=0), rule="optimal", disagreement=0.01,
                               prior="uniform").fit(X, y)
    assert uni.prior_ is None and uni.expected_members_ == pytest.approx(OptimalRule(101, 0.01).expected_members)


def test_budget_mode_three_classes():
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    X, y = make_classification(600, 8, n_informative=5, n_classes=3, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(41, random_state=0), rule="optimal",
                               disagreement=0.02).fit(X[:400], y[:400])
    assert clf.rule_.n_classes == 3 and clf.expected_disagreement_ <= 0.02
    assert np.mean(clf.predict(X[400:]) == y[400:]) > 0.6


def test_budget_mode_bad_input(binary_data):
    from sklearn.ensemble import RandomForestClassifier

    X, y, _, _ = binary_data
    rf = RandomForestClassifier(11, random_state=0)
    with pytest.raises(ValueError, match="needs a budget"):
        ev.HaltingClassifier(rf, rule="optimal").fit(X, y)
    with pytest.raises(ValueError, match="takes confidence instead"):
        ev.HaltingClassifier(rf, rule="urn", disagreement=0.01).fit(X, y)
    for bad in (0.0, 0.5, float("nan"), -1):
        with pytest.raises(ValueError, match="disagreement"):
            ev.HaltingClassifier(rf, rule="optimal", disagreement=bad).fit(X, y)
    with pytest.raises(TypeError, match="disagreement"):
        ev.HaltingClassifier(rf, rule="optimal", disagreement="1%").fit(X, y)
    with pytest.raises(ValueError, match="T=202 is above .* T <= 201 with 3 classes"):
        ev.HaltingClassifier(RandomForestClassifier(202, random_state=0), rule="optimal",
                             disagreement=0.01).fit(X, np.arange(len(y)) % 3)
    with pytest.raises(ValueError, match="2 or 3 classes"):
        ev.HaltingClassifier(rf, rule="optimal", disagreement=0.01).fit(X, np.arange(len(y)) % 4)


def test_budget_mode_out_of_sample_on_soto_problems():
    """δ = 1 % on sonar, pima, votes and breast (one stratified 10-fold CV each, T = 101).

    The budget holds in expectation under each fold's out-of-bag prior; on
    held-out rows the disagreement pooled over the four problems is not
    significantly above δ (exact one-sided binomial test at 5 %, the pass
    criterion of the chapter *A disagreement budget*, which reports
    per-problem figures over ten partitions).  Where
    HYPER at α = 1 − δ disagrees on well under δ of the rows, the budget mode
    queries fewer members.
    """
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.model_selection import StratifiedKFold

    from ensvote import datasets

    delta, T = 0.01, 101
    wrong, rows = 0, 0
    for name in ("sonar", "pima", "votes", "breast"):
        X, y = datasets.load(name)
        opt_n, opt_w, hyp_n, hyp_w = [], [], [], []
        folds = StratifiedKFold(10, shuffle=True, random_state=ev.SEED).split(X, y)
        for k, (tr, te) in enumerate(folds):
            clf = ev.HaltingClassifier(RandomForestClassifier(T, random_state=ev.SEED + k), rule="optimal",
                                       disagreement=delta).fit(X[tr], y[tr])
            assert clf.expected_disagreement_ <= delta
            votes = clf.member_votes(X[te])
            full = ev.halt(votes, ev.FixedRule(T), n_classes=2).labels
            res = clf.halt(X[te])
            assert np.array_equal(res.labels, clf.classes_[ev.halt(votes, clf.rule_, n_classes=2).labels])
            hyp = ev.halt(votes, ev.UrnRule(T, 1 - delta, prior=clf.prior_), n_classes=2)
            opt_n.append(res.n_queried)
            opt_w.append(res.labels != clf.classes_[full])
            hyp_n.append(hyp.n_queried)
            hyp_w.append(hyp.labels != full)
        opt_w, hyp_w = np.concatenate(opt_w), np.concatenate(hyp_w)
        wrong += opt_w.sum()
        rows += len(opt_w)
        if hyp_w.mean() < delta / 2:
            assert np.concatenate(opt_n).mean() < np.concatenate(hyp_n).mean(), name
    from scipy import stats

    assert stats.binomtest(int(wrong), rows, delta, alternative="greater").pvalue >= 0.05, (wrong, rows)


# ---------------------------------------------------------------- head to head
def test_margin_rule_stops_at_the_lead():
    from ensvote.experiments import MarginRule

    rule = MarginRule(3)
    assert rule.stop(np.array([[3, 0], [4, 2], [5, 2], [0, 3]])).tolist() == [True, False, True, True]
    assert rule.stop(np.array([[2, 5, 1], [4, 1, 2], [3, 3, 0]])).tolist() == [True, False, False]
    votes = np.array([[0, 0, 1, 0, 0, 1, 1], [1, 0, 1, 0, 1, 0, 0]])
    res = ev.halt(votes, rule)
    assert res.n_queried.tolist() == [5, 7]
    with pytest.raises(ValueError, match="k must be >= 1"):
        MarginRule(0)


def test_headtohead_task_record_is_checked_and_aggregated(tmp_path):
    from ensvote import experiments
    from ensvote.experiments import headtohead

    rec = experiments.run_task("headtohead", "smoke", "sonar", 0)
    experiments.check_record(rec, ("headtohead", "smoke", "sonar", 0))
    res = rec["result"]
    p = experiments.SUITES["headtohead"].params["smoke"]
    fs = res["rules"]["FS"]
    assert fs["members"] == [float(n) for n in p["fs_grid"]] and fs["disagree"][-1] == 0
    for name in ("opt-unif", "opt-oob"):
        assert all(d <= b for d, b in zip(res["rules"][name]["expected_disagreement"], p["delta_grid"]))
    # the budget mode is cross-validated with the suite's held-out scoring, the package's default
    defaults = inspect.signature(OptimalRule.from_oob_votes).parameters
    assert p["heldout"] == "deconvolved" == defaults["heldout"].default
    assert p["uniform_rows"] == defaults["uniform_rows"].default == ev.optimal.UNIFORM_ROWS
    from ensvote.experiments import soto2016
    Xtr, ytr, _, _ = soto2016.split("sonar", 0, p["n_test_synthetic"])
    clf = ev.HaltingClassifier(RandomForestClassifier(n_estimators=p["T"], random_state=soto2016.seeds("sonar", 0)[0],
                                                   n_jobs=1)).fit(Xtr, ytr)
    variants = {"suite": {}, "rescaled": {"heldout": "rescaled"}, "no uniform": {"uniform_rows": 0.0}}
    same = {k: [OptimalRule.from_oob_votes(clf.oob_votes_, p["T"], d, **kw).expected_disagreement == e
                for d, e in zip(p["delta_grid"], res["rules"]["opt-oob"]["expected_disagreement"])]
            for k, kw in variants.items()}
    assert all(same["suite"]) and not all(same["rescaled"]) and not all(same["no uniform"])
    hyper = {**res["rules"]["HYPER"], "members": [0.5] * 3}
    bad = {**rec, "result": {**res, "rules": {**res["rules"], "HYPER": hyper}}}
    with pytest.raises(ValueError, match="HYPER.members"):
        experiments.check_record(bad)
    # interpolation at a realized disagreement: two partitions, one rule bracketing the target
    recs = {"x": [{"n_test": 100, "rules": {r: {"param": [1, 2], "members": [10.0 + k, 20.0 + k],
                                                  "disagree": [4, 0]} for r in headtohead.RULES},
                   "params": {"T": 101}} for k in (0, 2)]}
    t = headtohead.at_disagreement(recs, 1.0).set_index("rule")
    # pooled disagreement 4 % -> 0 %: the target 1 % sits three quarters of the way
    assert t.loc["HYPER", "members"] == pytest.approx(np.mean([17.5, 19.5]))
    assert t.loc["opt-oob", "ratio_to_reference"] == 1.0 and np.isnan(t.loc["opt-oob", "pvalue"])


def test_headtohead_budget_table_tests_the_pooled_rows():
    from scipy import stats

    from ensvote.experiments import headtohead

    def rec(n, k_opt, k_hyp, m_opt, m_hyp, n_train=300):
        return {"n_test": n, "n_train": n_train, "params": {},
                "rules": {"opt-oob": {"param": [0.01, 0.001], "members": [m_opt, 30.0], "disagree": [k_opt, 0]},
                          "HYPER": {"param": [0.99, 0.999], "members": [m_hyp, 31.0], "disagree": [k_hyp, 0]}}}

    # fresh test rows: 13 + 12 of 2,000 rows: 1.25 %, above 1 % but not significantly; HYPER 1 + 0 rows, well below
    recs = {"a": [rec(1000, 13, 1, 10.0, 12.0), rec(1000, 12, 0, 11.0, 12.5)],
            # 40 of 1,000 rows: 4 %, significantly above 1 % even after Holm's correction; HYPER at 1 %: not well below
            "b": [rec(1000, 40, 10, 9.0, 8.0)]}
    t = headtohead.budget(recs, [0.01], fresh_rows={"a", "b"}).set_index("problem")
    a, b = t.loc["a"], t.loc["b"]
    assert (a.n_test, a.n_effective, a.opt_disagree, a.hyper_disagree) == (2000, 2000, 25, 1)
    assert a.opt_pct == pytest.approx(1.25) and a.opt_members == pytest.approx(10.5)
    ci = stats.binomtest(25, 2000).proportion_ci(method="exact")
    assert (a.opt_ci_low, a.opt_ci_high) == pytest.approx((100 * ci.low, 100 * ci.high))
    p_a = stats.binomtest(25, 2000, 0.01, alternative="greater").pvalue
    p_b = stats.binomtest(40, 1000, 0.01, alternative="greater").pvalue
    assert (a.opt_pvalue_over, b.opt_pvalue_over) == pytest.approx((p_a, p_b))
    # Holm over the two problems of δ = 1 %: the smaller p times 2, then the larger one (never below the first)
    assert (a.opt_pvalue_holm, b.opt_pvalue_holm) == pytest.approx((max(p_a, 2 * p_b), 2 * p_b))
    assert a.hyper_pvalue_below == pytest.approx(stats.binomtest(1, 2000, 0.01, alternative="less").pvalue)
    assert a.members_pvalue == pytest.approx(stats.ttest_rel([10.0, 11.0], [12.0, 12.5]).pvalue)
    assert a.above_budget and not a.significantly_over and a.hyper_well_below and a.fewer_than_hyper
    assert b.above_budget and b.significantly_over and not b.hyper_well_below and not b.fewer_than_hyper
    assert np.isnan(b.members_pvalue)  # one partition: no paired test
    # cross-validated: ten repetitions of 100 rows test each row ten times; a row counts once
    cv = {"c": [rec(10, 4 if r == 0 else 0, 0, 5.0 + r % 3, 6.0, n_train=90) for r in range(100)]}
    c = headtohead.budget(cv, [0.01]).iloc[0]
    assert (c.n_test, c.n_effective, c.opt_disagree, c.opt_pct) == (1000, 100, 4, pytest.approx(0.4))
    ci = stats.binomtest(4, 1000).proportion_ci(method="exact")  # as if the 1,000 tests were independent
    assert 0 < c.opt_ci_low < 0.01 and c.opt_ci_high > 100 * ci.high + 2
    assert c.opt_ci_high == pytest.approx(100 * stats.beta.ppf(0.975, 1.4, 99.6))
    assert not c.hyper_well_below  # 0 of 100 distinct rows cannot show a rate below 1 %
    # exactly δ is not above it
    edge = headtohead.budget({"d": [rec(1000, 10, 0, 1.0, 1.0)]}, [0.01], fresh_rows={"d"}).iloc[0]
    assert not edge.above_budget and edge.opt_pct == pytest.approx(1.0)
    with pytest.raises(ValueError, match="opt-oob has no parameter 0.005"):
        headtohead.budget(recs, [0.005])
    with pytest.raises(ValueError, match=r"delta must be in \(0, 0.5\)"):
        headtohead.budget(recs, [0.0])
    for bad in (0.0, 1.0, float("nan")):
        with pytest.raises(ValueError, match="level must lie strictly between 0 and 1"):
            headtohead.budget(recs, [0.01], level=bad)
    with pytest.raises(TypeError, match="level must be a real number"):
        headtohead.budget(recs, [0.01], level="95%")


@pytest.mark.parametrize("k", [0, 1, 7, 30])
def test_binomial_tails_and_intervals_for_real_counts_match_scipy_at_whole_counts(k):
    from scipy import stats

    from ensvote.experiments.headtohead import _binom_tail, _clopper_pearson

    n = 30
    ci = stats.binomtest(k, n).proportion_ci(confidence_level=0.9, method="exact")
    assert _clopper_pearson(k, n, 0.9) == pytest.approx((ci.low, ci.high))
    for p in (0.01, 0.2, 0.5):
        assert _binom_tail(k, n, p, "greater") == pytest.approx(stats.binom.sf(k - 1, n, p))
        assert _binom_tail(k, n, p, "less") == pytest.approx(stats.binom.cdf(k, n, p))
    # between whole counts the tails move monotonically
    assert _binom_tail(k + 0.5, n + 1, 0.2, "greater") <= _binom_tail(k, n + 1, 0.2, "greater")


def test_against_reference_counts_significant_differences_by_direction():
    import pandas as pd

    from ensvote.experiments.headtohead import against_reference

    t = pd.DataFrame({"problem": list("abcd") * 2, "rule": ["urn"] * 4 + ["opt-oob"] * 4, "target_pct": 0.1,
                      "ratio_to_reference": [0.9, 1.2, 1.5, np.nan] + [1.0] * 4,
                      "pvalue": [0.01, 0.04, 0.3, np.nan] + [np.nan] * 4})
    r = against_reference(t).iloc[0]
    assert (r.rule, r.problems, r.median_ratio, r.more, r.fewer) == ("urn", 3, pytest.approx(1.2), 1, 1)
    strict = against_reference(t, level=0.98).iloc[0]  # p < 0.02: only the 0.01
    assert (strict.more, strict.fewer) == (0, 1)
    assert (against_reference(t, level=0.99).iloc[0][["more", "fewer"]] == 0).all()  # 0.01 is not below 0.01
    with pytest.raises(ValueError, match="level must lie strictly between 0 and 1"):
        against_reference(t, level=1.5)


def test_two_classes_up_to_1001_members():
    # the budget mode beyond T = 101 with two classes: the table meets its budget under its prior, exactly
    rule = OptimalRule(1001, 0.01)
    exact = policy_value(rule, None)
    assert exact.disagreement <= 0.01 and exact.members == pytest.approx(rule.expected_members, abs=1e-9)
    X, y = ev.datasets.load("pima")
    clf = ev.HaltingClassifier(RandomForestClassifier(301, random_state=ev.SEED), rule="optimal",
                               disagreement=0.01).fit(X[:400], y[:400])
    assert clf.rule_.T == 301 and clf.expected_disagreement_ <= clf.rule_.disagreement <= 0.01
    assert clf.halt(X[400:]).mean_queried < 301 / 4
