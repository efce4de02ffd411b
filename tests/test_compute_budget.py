"""A compute budget (OptimalRule(max_members=K), HaltingClassifier(rule="optimal", max_members=K)): at most K
expected members under the prior, evaluated exactly, and the least disagreement of any λ-optimal policy
within K."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import _bellman
from ensvote.confidence import check_prior


def _random_prior(T, l, seed):
    rng = np.random.default_rng(seed)
    support = ev.compositions(T, l)
    p = rng.random(len(support)) ** 3
    return support, p / p.sum()


@pytest.mark.parametrize("T,l,kind", [(101, 2, "uniform"), (61, 2, "random"), (25, 3, "uniform"), (21, 3, "random")])
def test_members_within_the_budget_and_the_least_disagreement_of_the_frontier(T, l, kind):
    prior = None if kind == "uniform" else _random_prior(T, l, T)
    parsed = check_prior(prior, T, l)
    model = _bellman._model(T, parsed)
    frontier = [model.policy_at(price)[1] for price in np.geomspace(0.05, 1e6, 120)]
    last = np.inf
    for K in sorted((1.0, 2.5, 6.0, 11.0, T / 3)):
        rule = ev.OptimalRule(T, max_members=K, prior=prior, n_classes=l)
        exact = ev.policy_value(rule, prior, n_classes=l)  # the rule's table, evaluated afresh
        assert exact.members == pytest.approx(rule.expected_members, abs=1e-12)
        assert exact.disagreement == pytest.approx(rule.expected_disagreement, abs=1e-12)
        assert rule.expected_members <= K + 1e-12
        within = [v.disagreement for v in frontier if v.members <= K]
        assert rule.expected_disagreement <= min(within, default=np.inf) + 1e-12
        assert rule.expected_disagreement <= last + 1e-12  # a larger budget never disagrees more
        last = rule.expected_disagreement
        # the price is λ*: just below it the policy is within K, just above it the policy is not (or, when K
        # buys the least disagreement there is, no longer lowers the disagreement)
        below, above = (model.evaluate(model.solve(rule.price * f)[1]) for f in (1 - 1e-9, 1 + 1e-9))
        assert below.members <= K + 1e-12
        assert above.members > K or above.disagreement < below.disagreement


def test_the_compute_budget_and_the_disagreement_budget_meet_on_the_frontier():
    K = 20.0
    by_members = ev.OptimalRule(101, max_members=K)
    by_delta = ev.OptimalRule(101, by_members.expected_disagreement)
    assert by_delta.expected_members == pytest.approx(by_members.expected_members, rel=1e-3)
    assert ev.OptimalRule(101, max_members=101).expected_disagreement == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize("T,l,kind,delta", [(101, 2, "uniform", 0.01), (61, 2, "random", 0.005),
                                           (25, 3, "uniform", 0.02), (21, 3, "random", 0.01)])
def test_at_a_disagreement_budgets_members_the_compute_budget_disagrees_no_more(T, l, kind, delta):
    # the two budgets are one frontier: asked for the members of the disagreement budget's table, the compute
    # budget finds that table's disagreement (or less) within those members
    prior = None if kind == "uniform" else _random_prior(T, l, T)
    by_delta = ev.OptimalRule(T, delta, prior=prior, n_classes=l)
    by_members = ev.OptimalRule(T, max_members=by_delta.expected_members, prior=prior, n_classes=l)
    assert by_members.expected_members <= by_delta.expected_members + 1e-12
    assert by_members.expected_disagreement <= by_delta.expected_disagreement + 1e-12


def test_classifier_compute_budget_and_its_errors():
    X, y = ev.datasets.load("pima")
    forest = RandomForestClassifier(n_estimators=101, random_state=ev.SEED)
    clf = ev.HaltingClassifier(forest, rule="optimal", max_members=12).fit(X[:500], y[:500])
    assert clf.expected_members_ <= 12 and 0 < clf.expected_disagreement_ < 0.5
    assert clf.rule_.max_members == 12 and clf.rule_.disagreement is None
    uni = ev.HaltingClassifier(forest, rule="optimal", max_members=12, prior="uniform").fit(X[:500], y[:500])
    assert uni.expected_members_ <= 12 and uni.prior_ is None
    for bad, exc, match in [
        (dict(rule="urn", max_members=5), ValueError, "compute budget of rule='optimal'"),
        (dict(rule="optimal", max_members=5, disagreement=0.01), ValueError, "one budget"),
        (dict(rule="optimal", max_members=0.5), ValueError, "at least 1"),
        (dict(rule="optimal", max_members=float("nan")), ValueError, "at least 1"),
        (dict(rule="optimal", max_members="5"), TypeError, "real number"),
        (dict(voting="soft", max_members=5), ValueError, "voting"),
    ]:
        with pytest.raises(exc, match=match):
            ev.HaltingClassifier(RandomForestClassifier(n_estimators=11), **bad).fit(X[:100], y[:100])
    with pytest.raises(ValueError, match="one of disagreement"):
        ev.OptimalRule(31, 0.01, max_members=5)
