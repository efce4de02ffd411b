"""The statistical soft stop: ``HaltingClassifier(voting="soft", disagreement=δ)``.

Every row's probability of a label other than the forest's own soft vote is at most δ under a random member order
(Serfling's inequality with a union bound: ``ensvote.confidence.soft_lead_needed``).  Checked by simulating many
member orders of adversarial rows (near ties of probability vectors), against the numpy reference loop, and end to
end on forests with mixed leaves.
"""

import numpy as np
import pytest
from scipy import stats
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote.confidence import soft_lead_needed
from ensvote.kernel import soft_margin


def test_lead_needed_is_the_smaller_of_the_bound_and_the_members_left():
    T, l, d = 101, 3, 0.05
    need = soft_lead_needed(T, l, d)
    t = np.arange(1, T + 1)
    h = np.sqrt(2 * t * (1 - (t - 1) / T) * np.log((l - 1) * (T - 1) / d))
    assert np.allclose(need, np.minimum(T - t, h)) and need[-1] == 0
    assert (need < T - t)[10:80].all()  # the bound bites in the middle ...
    # a vanishing δ stops where the exact stop does: wherever a lead is possible (at most t), it needs T - t
    assert np.array_equal(np.minimum(soft_lead_needed(T, l, 1e-300), t), np.minimum(T - t, t))


def _orders(P, n_orders, rng, scale=1.0):
    """Label at the stop and members queried of a row with member probabilities P (T, l), per random order
    (the numpy reference loop's rule, with the lead needed multiplied by ``scale``)."""
    T, l = P.shape
    need = scale * soft_lead_needed(T, l, DELTA)
    full = np.argmax(P.sum(axis=0) / T)
    labels, used = np.empty(n_orders, dtype=int), np.empty(n_orders, dtype=int)
    for o in range(n_orders):
        S = np.cumsum(P[rng.permutation(T)], axis=0)
        c = np.argmax(S, axis=1)
        lead = S[np.arange(T), c][:, None] - S
        lead[np.arange(T), c] = np.inf
        ok = (lead.min(axis=1) > need + soft_margin(T))
        ok[-1] = True
        k = int(np.argmax(ok))
        labels[o], used[o] = (c[k] if k < T - 1 else np.argmax(S[-1] / T)), k + 1
    return labels, used, full


DELTA = 0.2


def _rows(l, rng):
    """Adversarial rows: one-hot votes split 51 / 50 (the hardest), and near ties of probability vectors."""
    T = 101
    onehot = np.zeros((T, l))
    onehot[np.arange(T), (np.arange(T) >= 51).astype(int)] = 1.0
    yield onehot
    for margin in (0.0, 0.01):
        P = rng.dirichlet(np.ones(l) * 0.3, size=T)
        P[:, 0] += margin
        yield P / P.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("l", [2, 3])
def test_every_adversarial_row_meets_delta(l):
    rng = np.random.default_rng(ev.SEED)
    n_orders = 1500
    for P in _rows(l, rng):
        labels, used, full = _orders(P, n_orders, rng)
        # one-sided: at most δ unless the count of wrong labels is improbably large under Bin(n, δ)
        assert stats.binom.sf(int(np.sum(labels != full)) - 1, n_orders, DELTA) > 1e-4
    # the check can fail: a lead a fifth as large breaks δ on the one-hot near tie
    labels, _, full = _orders(next(_rows(l, rng)), n_orders, rng, scale=0.2)
    assert np.mean(labels != full) > DELTA


def _forest(seed=0, **kw):
    X, y = ev.datasets.load("twonorm", n_samples=1200, random_state=seed)
    est = RandomForestClassifier(n_estimators=101, min_samples_leaf=5, random_state=seed, **kw)
    return X[:600], y[:600], X[600:], est


def test_compiled_loop_equals_the_numpy_reference():
    from scipy import sparse

    Xtr, ytr, Xte, est = _forest()
    clf = ev.HaltingClassifier(est, voting="soft", disagreement=0.05).fit(Xtr, ytr)
    dense = clf.halt(Xte)
    csr = clf.halt(sparse.csr_matrix(Xte))
    assert np.array_equal(dense.labels, csr.labels) and np.array_equal(dense.n_queried, csr.n_queried)
    two = ev.HaltingClassifier(est, voting="soft", disagreement=0.05, n_jobs=2).fit(Xtr, ytr).halt(Xte)
    assert np.array_equal(dense.n_queried, two.n_queried)


def test_fewer_trees_than_the_exact_soft_stop_and_labels_of_predict():
    Xtr, ytr, Xte, est = _forest()
    exact = ev.HaltingClassifier(est, voting="soft").fit(Xtr, ytr)
    bound = ev.HaltingClassifier(est, voting="soft", disagreement=0.01).fit(Xtr, ytr)
    e, b = exact.halt(Xte), bound.halt(Xte)
    assert b.mean_queried < 0.8 * e.mean_queried
    assert (b.n_queried <= e.n_queried).all()
    forest = exact.estimator_.predict(Xte)
    assert np.mean(bound.predict(Xte) != forest) <= 0.01
    assert np.array_equal(bound.soft_lead_, soft_lead_needed(101, 2, 0.01))
    # a vanishing δ is the exact stop
    tiny = ev.HaltingClassifier(est, voting="soft", disagreement=1e-300).fit(Xtr, ytr).halt(Xte)
    assert np.array_equal(tiny.n_queried, e.n_queried)


@pytest.mark.parametrize("params,match", [
    ({"voting": "soft", "disagreement": 0.6}, "between 0 and 0.5"),
    ({"voting": "soft", "disagreement": 0.01, "guarantee": "minimax"}, "per-row bound"),
    ({"voting": "soft", "max_members": 5.0}, "takes no rule"),
    ({"voting": "soft", "disagreement": 0.01, "rule": "exact"}, "takes no rule"),
])
def test_bad_soft_arguments_are_refused_before_fitting(params, match):
    Xtr, ytr, _, est = _forest()
    clf = ev.HaltingClassifier(est, **params)
    with pytest.raises(ValueError, match=match):
        clf.fit(Xtr, ytr)
    assert not hasattr(clf, "estimator_")


@pytest.mark.parametrize("args,exc", [((0,), ValueError), ((10, 1), ValueError), ((10, 2, 0.5), ValueError),
                                      ((10, 2, "0.1"), TypeError)])
def test_lead_needed_refuses_bad_input(args, exc):
    with pytest.raises(exc):
        soft_lead_needed(*args)


def test_soft_halt_refuses_a_lead_of_the_wrong_shape():
    Xtr, ytr, Xte, est = _forest()
    clf = ev.HaltingClassifier(est, voting="soft").fit(Xtr, ytr)
    with pytest.raises(ValueError, match=r"one lead per member, shape \(101,\)"):
        clf._ensemble.soft_halt(np.ascontiguousarray(Xte[:5], dtype=np.float32), need=np.zeros(100))
