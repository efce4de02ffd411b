"""Checks that used to run inside the theory chapters of the book.

The urn chapter (book/urn.ipynb) states that every route by which ``ensvote``
computes the confidence (SSM 3) of Soto, Suárez & Martínez-Muñoz (2016) agrees
with the definition evaluated in exact rational arithmetic, and that the
uniform-prior ``UrnRule`` table equals the beta-binomial (Dirichlet) confidence
of SIBA for a forest of 101 trees. These exhaustive checks live here, so the
chapter can state them without re-running them.
"""

from fractions import Fraction
from math import comb, prod

import numpy as np
import pytest
from scipy import stats

import ensvote as ev


def pstar_definition(t, T, prior):
    """(SSM 3) from its definition, exact.

    ``prior`` maps each urn content (a tuple summing to ``T``) to a Fraction.
    Returns None when every content compatible with ``t`` has prior probability 0.
    """
    c = int(ev.current_majority(t))
    num = den = Fraction(0)
    for urn, p in prior.items():
        if all(Ti >= ti for Ti, ti in zip(urn, t)):
            w = p * prod(comb(Ti, ti) for Ti, ti in zip(urn, t))
            den += w
            if int(ev.current_majority(urn)) == c:
                num += w
    return None if den == 0 else num / den


def _random_prior(T, l, rng):
    """A random prior over all urn contents, some of them with probability 0.

    Returns the exact prior (dict of Fractions) and the same prior in the form
    ``ensvote`` takes: ``prior[k] = P(T_0 = k)`` for two classes, else
    ``(support, probabilities)``.
    """
    support = ev.compositions(T, l)
    w = rng.integers(0, 20, size=len(support))
    w[rng.integers(len(support))] += 1  # at least one content has positive weight
    exact = {tuple(int(v) for v in row): Fraction(int(wi), int(w.sum()))
             for row, wi in zip(support, w)}
    if l == 2:
        given = np.zeros(T + 1)
        given[support[:, 0]] = w / w.sum()
    else:
        given = (support, w / w.sum())
    return exact, given


@pytest.mark.parametrize("T,l", [(12, 2), (9, 3)])
@pytest.mark.parametrize("kind", ["uniform", "random"])
def test_every_route_to_ssm3_matches_the_definition(T, l, kind):
    rng = np.random.default_rng([ev.SEED, T, l])
    support = ev.compositions(T, l)
    if kind == "uniform":
        exact = {tuple(int(v) for v in row): Fraction(1, len(support)) for row in support}
        given = None
    else:
        exact, given = _random_prior(T, l, rng)
    rule = ev.UrnRule(T, 0.9, prior=given)
    table = rule.table(l)
    n_defined = n_undefined = 0
    for s in range(T + 1):
        for t in ev.compositions(s, l):
            key = tuple(int(v) for v in t)
            ref = pstar_definition(key, T, exact)
            routes = [ev.finite_confidence(t, T, prior=given), table[key], rule.confidence_of(t)]
            if given is None:  # the explicit uniform prior takes the log-space route
                routes.append(ev.finite_confidence(t, T, prior=ev.uniform_prior(T, l)))
            if ref is None:
                assert all(np.isnan(r) for r in routes[:2]), key
                n_undefined += 1
                continue
            for r in routes:
                assert float(r) == pytest.approx(float(ref), abs=1e-12), key
            n_defined += 1
    assert n_defined > 0
    if kind == "uniform":
        assert n_undefined == 0


def test_uniform_urn_table_is_the_beta_binomial_confidence_of_siba():
    """SSM Prop. 3: with the uniform prior, every entry of the dense two-class
    table equals P(t_c + R_c >= (T + 1) / 2), R_c ~ BetaBinomial(T - t, t_c + 1, t_c' + 1)."""
    T = 101
    table = ev.UrnRule(T, 0.99).table(2)
    a0, a1 = np.meshgrid(np.arange(T + 1), np.arange(T + 1), indexing="ij")
    ok = a0 + a1 <= T
    c_is0 = a0 >= a1  # the current majority, ties to class 0
    tc, to = np.where(c_is0, a0, a1), np.where(c_is0, a1, a0)
    n_left = np.where(ok, T - a0 - a1, 0)
    bb = stats.betabinom.sf((T + 1) // 2 - tc - 1, n_left, tc + 1, to + 1)
    np.testing.assert_allclose(table[ok], bb[ok], rtol=0, atol=1e-10)
    assert np.all(np.isnan(table[~ok]))
