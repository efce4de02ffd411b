"""The public engine surface: the rule protocol a user implements, and the bounded table caches."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import _cache, engine
from ensvote.datasets import load


class Lead(ev.HaltingRule):
    """A user's rule: stop once the leader is ``k`` votes ahead (LightGBM's ``pred_early_stop`` margin)."""

    def __init__(self, k, tabulate=True):
        self.k, self.tabulate = k, tabulate
        self.decided = 0

    def decide(self, counts):
        self.decided += 1
        top2 = -np.sort(-counts, axis=-1)[..., :2]
        return top2[..., 0] - top2[..., 1] >= self.k

    def table_key(self, n_classes):
        return (type(self), self.k) if self.tabulate else None


def _brute(votes, k, l):
    """Members each row queries under Lead(k), row by row (the definition)."""
    out = []
    for row in votes:
        c = np.zeros(l, dtype=int)
        for j, v in enumerate(row):
            c[v] += 1
            top = np.sort(c)[::-1]
            if top[0] - top[1] >= k:
                break
        out.append(j + 1)
    return np.array(out)


@pytest.mark.parametrize("tabulate", [True, False])
def test_custom_rule_through_halt_and_the_classifier(tabulate):
    X, y = load("waveform", n_samples=900, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(41, random_state=ev.SEED), rule=Lead(5, tabulate)).fit(
        X[:300], y[:300])
    votes = clf.member_votes(X[300:])
    want = _brute(votes, 5, 3)
    res = clf.halt(X[300:])
    assert np.array_equal(res.n_queried, want)
    assert np.array_equal(ev.halt(votes, Lead(5, tabulate), n_classes=3).n_queried, want)
    assert np.array_equal(clf.predict(X[300:]), res.labels)
    assert np.array_equal(clf.predict(X[300:301]), res.labels[:1])  # the one-row path
    # with a table key the engine evaluated decide once, on every count vector; without, per block
    assert (clf._ensemble.plan(clf.rule_) is not None) == tabulate


def test_a_rule_without_decide_is_refused_clearly():
    class Empty(ev.HaltingRule):
        pass

    with pytest.raises(NotImplementedError, match="Empty must implement decide"):
        ev.halt(np.zeros((2, 5), dtype=int), Empty())
    with pytest.raises(TypeError, match="HaltingRule"):
        ev.halt(np.zeros((2, 5), dtype=int), object())


def test_prepare_refuses_another_ensemble_size():
    with pytest.raises(ValueError, match="built for T=11 members, but the ensemble has 7"):
        ev.halt(np.zeros((2, 7), dtype=int), ev.UrnRule(11))


def test_clear_caches_empties_every_cache_and_results_do_not_change():
    votes = np.random.default_rng(ev.SEED).integers(0, 3, (500, 41))
    rules = [ev.UrnRule(41), ev.InfiniteRule(0.99), ev.ExactRule(41)]
    before = [ev.halt(votes, r, n_classes=3) for r in rules]
    assert sum(c.entries for c in ev.cache_info()) > 0
    assert sum(c.nbytes for c in ev.cache_info()) > 0
    ev.clear_caches()
    assert all(c.entries == 0 and c.nbytes == 0 for c in ev.cache_info())
    after = [ev.halt(votes, r, n_classes=3) for r in rules]
    for a, b in zip(before, after):
        assert np.array_equal(a.n_queried, b.n_queried) and np.array_equal(a.labels, b.labels)
    names = {c.name for c in ev.cache_info()}
    assert {"stop tables", "label tables", "urn confidence tables", "t*(t; π) tables", "pair tables"} <= names


def test_caches_are_bounded():
    cache = engine._STOP_TABLES
    ev.clear_caches()
    votes = np.zeros((3, 9), dtype=int)
    for k in range(cache.maxsize + 10):  # more distinct rules than the cache keeps
        ev.halt(votes, Lead(1 + k % 9 + 9 * (k // 9)))
    assert len(cache) == cache.maxsize
    # least recently used goes first
    c = _cache.BoundedCache("test cache", 2)
    try:
        c["a"], c["b"] = 1, 2
        assert c.get("a") == 1  # a is now the most recent
        c["c"] = 3
        assert c.get("b") is None and c.get("a") == 1 and c.get("c") == 3
        assert c.info().entries == 2 and c.info().maxsize == 2
    finally:
        _cache._REGISTRY.remove(c)
