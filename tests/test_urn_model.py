"""The urn of Soto et al. (2016), written once (ensvote._urn): its level-by-level recursion against the
multivariate hypergeometric law by brute force (exact fractions), its two evaluations (level by level and
vote vector by vote vector) against each other, and the four users of the model against the module."""

import itertools
from fractions import Fraction
from math import comb

import numpy as np
import pytest

from ensvote import UrnRule, _bellman, finite_confidence
from ensvote._urn import (backward_levels, grid, level_index, level_vectors, log_cells, log_levels, log_split,
                          ratio_from_logs)
from ensvote.confidence import check_prior, compositions
from ensvote.manyclass import PairPrior, pair_table


def _random_prior(T, l, seed):
    rng = np.random.default_rng(seed)
    support = compositions(T, l)
    w = rng.integers(0, 5, len(support))
    w[0] += 1
    return support, w


def _vote_vectors(level_t):
    """The vote vectors of one level (grid points whose last count is non-negative), in C order."""
    full = np.stack([np.broadcast_to(g, np.broadcast(*level_t).shape) for g in level_t])
    nz = np.nonzero(full[-1] >= 0)
    return [tuple(int(f[nz][k]) for f in full) for k in range(len(nz[0]))], nz


@pytest.mark.parametrize("T,l,seed", [(6, 2, 0), (7, 3, 1), (5, 4, 2)])
def test_levels_are_the_hypergeometric_law_and_its_split_by_final_majority(T, l, seed):
    # brute force with exact fractions: P(t after s draws) = sum_T P(T) prod_i C(T_i, t_i) / C(T, s),
    # and its part whose urn has majority c (lowest index on ties)
    support, w = _random_prior(T, l, seed)
    prior = w / w.sum()
    total = int(w.sum())
    seen = 0
    for s, t, logq, logr, _ in log_levels(T, support, prior):
        vecs, nz = _vote_vectors(t)
        for k, v in enumerate(vecs):
            q = Fraction(0)
            r = [Fraction(0)] * l
            for u, wu in zip(support, w):
                h = Fraction(int(wu), total)
                for ui, vi in zip(u, v):
                    h *= comb(int(ui), vi)
                h /= comb(T, s)
                q += h
                r[int(np.argmax(u))] += h
            idx = tuple(a[k] for a in nz)
            assert np.exp(logq[idx]) == pytest.approx(float(q), rel=1e-12, abs=1e-300)
            for c in range(l):
                assert np.exp(logr[(c,) + idx]) == pytest.approx(float(r[c]), rel=1e-12, abs=1e-300)
        seen += 1
    assert seen == T + 1


def test_log_and_linear_recursions_agree():
    T, l = 12, 3
    support, w = _random_prior(T, l, 3)
    p = w / w.sum()
    X = np.zeros((2,) + (T + 1,) * (l - 1))
    X[(0,) + tuple(support[:, :-1].T)] = p
    X[(1,) + tuple(support[:, :-1].T)] = p * (np.argmax(support, axis=1) == 1)
    with np.errstate(divide="ignore"):
        logs = list(backward_levels(np.log(X), l, log=True))
    for (s, t, lin, _), (s2, _, lg, _) in zip(backward_levels(X, l, log=False), logs):
        assert s == s2
        ok = np.broadcast_to(t[-1] >= 0, lin.shape[1:])
        np.testing.assert_allclose(np.exp(lg)[:, ok], lin[:, ok], rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("T,l", [(9, 2), (8, 3)])
def test_level_by_level_equals_vote_vector_by_vote_vector(T, l):
    support, w = _random_prior(T, l, 4)
    p = w / w.sum()
    for s, t, logq, logr, _ in log_levels(T, support, p):
        vecs, nz = _vote_vectors(t)
        v = np.array(vecs)
        label = np.argmax(v, axis=1)
        num, rest = log_split(v, label, support, p)
        by_vector = ratio_from_logs(num, rest)
        with np.errstate(invalid="ignore"):
            by_level = np.exp(np.take_along_axis(logr[(slice(None),) + nz], label[None], axis=0)[0] - logq[nz])
        ok = np.isfinite(logq[nz])
        assert np.array_equal(ok, ~np.isnan(by_vector))
        np.testing.assert_allclose(by_level[ok], by_vector[ok], rtol=1e-11)


def test_grid_last_count():
    g = grid(3, 3)
    assert [a.shape for a in g[:2]] == [(4, 1), (1, 4)]
    assert g[2][1, 2] == 0 and g[2][3, 3] == -3


@pytest.mark.parametrize("l", [2, 3])
def test_the_users_of_the_model_agree(l):
    # UrnRule's table, the optimal rule's loss and finite_confidence: three users, one model
    T = 14 if l == 2 else 9
    support, w = _random_prior(T, l, 5)
    p = w / w.sum()
    table = UrnRule(T, prior=(support, p)).table(l)
    model = _bellman._model(T, check_prior((support, p), T))
    t = compositions(T // 2, l)
    conf = finite_confidence(t, T, prior=(support, p))
    ok = ~np.isnan(conf)
    np.testing.assert_allclose(table[tuple(t.T)][ok], conf[ok], rtol=1e-11)
    loss = model.loss[[model.cell(v) for v in t]]
    np.testing.assert_allclose(loss[ok], 1 - conf[ok], atol=1e-12)


def test_pair_table_is_eq3_on_the_reduced_urn():
    # under a PairPrior the pair table holds, for leader c and rival j, the chance that j ends ahead
    # (strictly if j > c) given (t_c, t_j, the rest): Eq. 3 on the urn of three colours, here by direct
    # summation with exact binomials; the table rounds each value up to float32
    T, l = 9, 4
    rng = np.random.default_rng(6)
    probs = rng.random((l, T + 1, T + 1)) * (PairPrior.uniform(T, l).probs > 0)
    probs /= probs.sum(axis=(1, 2), keepdims=True)
    tab = pair_table(T, l, PairPrior(probs))
    x, y = np.meshgrid(np.arange(T + 1), np.arange(T + 1), indexing="ij")
    keep = x + y <= T
    urns = np.column_stack([x[keep], y[keep], T - x[keep] - y[keep]])
    for t in ([3, 2, 1, 0], [1, 2, 2, 1], [4, 0, 0, 0], [2, 3, 3, 1]):
        t = np.array(t)
        c = int(np.argmax(t))
        expected = 0.0
        for j in range(l):
            if j == c:
                continue
            seen = (t[c], t[j], t.sum() - t[c] - t[j])
            w = np.array([probs[c][u[0], u[1]] * np.prod([comb(int(ui), int(si)) for ui, si in zip(u, seen)])
                          for u in urns])
            ahead = urns[:, 1] > urns[:, 0] if j > c else urns[:, 1] >= urns[:, 0]
            expected += w[ahead].sum() / w.sum()
        got = tab.failure_sum(t[None])[0]
        assert expected <= got <= expected * (1 + 1e-6) + 1e-12


@pytest.mark.parametrize("T, l", [(0, 2), (5, 2), (40, 2), (0, 3), (6, 3), (25, 3)])
def test_level_vectors_are_every_vote_vector_in_level_order(T, l):
    t = level_vectors(T, l)
    assert t.dtype == np.int64 and np.array_equal(level_index(t), np.arange(len(t)))
    counts = np.array(list(itertools.product(range(T + 1), repeat=l)))
    assert len(t) == np.count_nonzero(counts.sum(1) <= T) and np.all(t >= 0) and np.all(t.sum(1) <= T)


def test_log_cells_is_written_for_two_or_three_classes():
    with pytest.raises(ValueError, match="2 or 3 classes"):
        log_cells(3, np.array([[3, 0, 0, 0]]), np.array([1.0]))


def test_logaddexp_is_numpys_bit_for_bit_including_infinities_and_signed_zeros():
    from numba import njit

    from ensvote._urn import _logaddexp

    call = njit(lambda x, y: _logaddexp(x, y))
    rng = np.random.default_rng(0)
    special = [-np.inf, np.inf, 0.0, -0.0, 1e-300, -1e-300, 5e-324, 700.0, -745.2, 1.0, -1.0, 0.6931471805599453]
    values = np.concatenate([special, rng.normal(0, 30, 60), -np.exp(rng.normal(0, 5, 30))])
    for x in values:
        for y in values:
            want, got = np.logaddexp(x, y), call(x, y)
            assert np.float64(got).tobytes() == np.float64(want).tobytes(), (x, y, got, want)
    assert np.isnan(call(np.nan, -np.inf)) and np.isnan(call(-np.inf, np.nan)) and np.isnan(call(np.nan, 1.0))
