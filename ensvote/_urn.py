"""The urn of Soto, Suárez & Martínez-Muñoz (2016), written once.

The ``T`` members of an ensemble are marbles in an urn, one colour per class;
``t`` of them have been drawn without replacement.  Everything the package
knows about that model is computed here, in one of two ways:

* **vote vector by vote vector** — :func:`log_split`: Eq. 3 summed over a
  prior's support (the posterior of each urn content is its prior times the
  multivariate hypergeometric likelihood, Eq. 1–2), used by
  :func:`ensvote.finite_confidence`;
* **level by level** — :func:`backward_levels`: the law of the votes seen
  after ``s`` draws, for every vote vector at once, from ``s = T`` (the urn
  itself) down to ``s = 0``.  Dropping one of ``s + 1`` draws at random gives

      X_s(t) = sum_i X_{s+1}(t + e_i) (t_i + 1) / (s + 1),

  the same recursion for the prior-marginal probability ``q(t)`` of the vote
  vector and for its part ``r_c(t)`` whose urn has majority ``c``, so that
  ``P*(t, T) = r_{c(t)}(t) / q(t)`` (Eq. 3).  Used by the urn rule's tables
  (:class:`ensvote.UrnRule`), the optimal rule's model
  (:class:`ensvote.optimal.OptimalRule`) and the many-class pair tables
  (:mod:`ensvote.manyclass`, on the reduced urn leader / rival / the rest).

Level ``s`` is stored over the grid of the first ``l - 1`` counts, shape
``(s + 1,) * (l - 1)``; the last count is ``s`` minus their sum, and grid
points where it is negative are not vote vectors.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange
from scipy import special

__all__ = ["grid", "backward_levels", "log_levels", "log_split", "ratio_from_logs"]


def grid(s, l):
    """The counts ``t_0 .. t_{l-1}`` of level ``s`` as broadcastable arrays (the last may be negative)."""
    g = list(np.indices((s + 1,) * (l - 1), sparse=True))
    return g + [s - sum(g)]


def _shift(s, i, d):
    """Index into level ``s + 1`` of ``t + e_i`` for every ``t`` of level ``s`` (``d = l - 1`` grid axes)."""
    return tuple(slice(1, s + 2) if a == i else slice(0, s + 1) for a in range(d))


def backward_levels(X, l, *, log):
    """Run the urn's recursion from level ``T`` down: yields ``(s, t, X_s, terms)`` for ``s = T, ..., 0``.

    Parameters
    ----------
    X : ndarray, shape (..., (T + 1,) * (l - 1))
        Level ``T``: any quantities (leading axes) over the grid, e.g. the
        prior ``q`` and its parts ``r_c``; zero (``-inf`` with ``log``) off the
        vote vectors.
    l : int
        Number of colours of the urn.
    log : bool
        Whether ``X`` holds logarithms (log-sum-exp, ``-inf`` outside the
        vote vectors) or values.

    Yields
    ------
    s : int
    t : list of ndarray
        The counts of level ``s`` (:func:`grid`).
    X_s : ndarray, shape (..., (s + 1,) * (l - 1))
    terms : ndarray or None
        With ``log``: the ``l`` summands ``log X_{s+1}(t + e_i) + log(t_i + 1)``
        stacked on a new first axis (``-inf`` where ``t_i + 1 <= 0``); None at
        ``s = T`` and without ``log``.
    """
    d = l - 1
    T = X.shape[-1] - 1
    lead = (slice(None),) * (X.ndim - d)
    yield T, grid(T, l), X, None
    for s in range(T - 1, -1, -1):
        t = grid(s, l)
        shp = (s + 1,) * d
        if log:
            terms = []
            for i in range(l):
                with np.errstate(divide="ignore", invalid="ignore"):
                    w = np.broadcast_to(np.log(np.maximum(t[i] + 1.0, 0.0)), shp)
                terms.append(X[lead + _shift(s, i, d)] + w)
            terms = np.stack(terms)
            with np.errstate(invalid="ignore"):
                new = np.logaddexp.reduce(terms, axis=0) - np.log(s + 1.0)
            X = np.where(t[-1] >= 0, new, -np.inf)
            yield s, t, X, terms
        else:
            new = None
            for i in range(l):
                term = (np.maximum(t[i] + 1.0, 0.0) / (s + 1)) * X[lead + _shift(s, i, d)]
                new = term if new is None else new + term
            X = new
            yield s, t, X, None


def log_levels(T, support, probs):
    """The urn under the prior ``(support, probs)``, level by level, in log space.

    Yields ``(s, t, log_q, log_r, terms)`` for ``s = T, ..., 0`` (see
    :func:`backward_levels`): ``log_q`` the log prior-marginal probability of
    each vote vector of level ``s``, ``log_r[c]`` its part whose urn has
    majority ``c`` (lowest index on ties), ``terms[i, 0]`` the summands of
    ``log_q`` (None at ``s = T``).  Memory ``O(l (T+1)^(l-1))``, time
    ``O(l^2 (T+1)^l)`` in all.
    """
    l = support.shape[1]
    with np.errstate(divide="ignore"):
        logp = np.log(probs)
    idx = tuple(support[:, :-1].T)
    X = np.full((l + 1,) + (T + 1,) * (l - 1), -np.inf)
    X[(0,) + idx] = logp
    X[(np.argmax(support, axis=1) + 1,) + idx] = logp
    for s, t, Xs, terms in backward_levels(X, l, log=True):
        yield s, t, Xs[0], Xs[1:], terms


def ratio_from_logs(log_num, log_rest):
    """``num / (num + rest)`` from their logs, accurate when either is tiny (NaN when both are 0)."""
    with np.errstate(invalid="ignore"):
        return np.where(np.isneginf(log_num) & np.isneginf(log_rest), np.nan, special.expit(log_num - log_rest))


@njit(cache=True, nogil=True, parallel=True)
def _split_log_mass(t, label, support, base, final, log_fact):
    """Per vote vector ``t[r]``: log of the posterior mass on urns whose majority is ``label[r]``, and on the rest.

    Up to a term common to all urns (``-sum_c log t_c!``, which cancels in
    P*), the log posterior of support point ``k`` is ``base[k] - sum_c
    log (support[k, c] - t[r, c])!`` with ``base[k] = log P(k) + sum_c log
    support[k, c]!`` (zero where ``t`` exceeds the urn); each group is summed
    as log-sum-exp, shifted by its maximum.
    """
    n, l = t.shape
    m = support.shape[0]
    num = np.empty(n)
    rest = np.empty(n)
    for r in prange(n):
        logw = np.empty(m)
        top_win = -np.inf
        top_rest = -np.inf
        for k in range(m):
            lw = base[k]
            for c in range(l):
                d = support[k, c] - t[r, c]
                if d < 0:
                    lw = -np.inf
                    break
                lw -= log_fact[d]
            logw[k] = lw
            if final[k] == label[r]:
                top_win = max(top_win, lw)
            else:
                top_rest = max(top_rest, lw)
        sum_win = 0.0
        sum_rest = 0.0
        for k in range(m):
            if logw[k] > -np.inf:
                if final[k] == label[r]:
                    sum_win += np.exp(logw[k] - top_win)
                else:
                    sum_rest += np.exp(logw[k] - top_rest)
        num[r] = top_win + np.log(sum_win) if sum_win > 0 else -np.inf
        rest[r] = top_rest + np.log(sum_rest) if sum_rest > 0 else -np.inf
    return num, rest


def log_split(t, label, support, probs):
    """Eq. 3's numerator and the rest of its denominator, in logs, for each vote vector of ``t`` (shape ``(n, l)``).

    ``label[r]`` is the class whose final majority the numerator counts; the
    prior is ``(support, probs)`` (checked by the caller).
    """
    t = np.ascontiguousarray(t, dtype=np.int64)
    support = np.ascontiguousarray(support, dtype=np.int64)
    keep = probs > 0
    support, probs = support[keep], probs[keep]
    log_fact = special.gammaln(np.arange(int(max(support.max(initial=0), t.max(initial=0))) + 1) + 1.0)
    base = np.log(probs) + log_fact[support].sum(axis=1)
    return _split_log_mass(t, np.ascontiguousarray(label, dtype=np.int64), support, base,
                           np.argmax(support, axis=1), log_fact)
