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
  (:class:`ensvote.UrnRule`) and the many-class pair tables
  (:mod:`ensvote.manyclass`, on the reduced urn leader / rival / the rest);
  the optimal rule's model (:class:`ensvote.optimal.OptimalRule`) runs it
  compiled, in logs, over the vote vectors only (:func:`log_cells`, the same
  bits); for three classes beyond the dense table, :func:`stop_bits3` runs
  it compiled in probabilities rather than logs, and keeps only each
  vote vector's stop decision (one bit).

Level ``s`` is stored over the grid of the first ``l - 1`` counts, shape
``(s + 1,) * (l - 1)``; the last count is ``s`` minus their sum, and grid
points where it is negative are not vote vectors.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange
from scipy import special

__all__ = ["grid", "backward_levels", "log_levels", "log_cells", "log_split", "ratio_from_logs", "stop_bits3", "level_index", "level_vectors"]


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


@njit(cache=True, nogil=True, inline="always")
def _logaddexp(x, y):
    """NumPy's ``logaddexp`` of two floats, the same operations (and so the same bits)."""
    # a term of probability zero: NumPy's steps give the other plus log1p(exp(-inf)) = +0.0 (x - y is
    # +-inf, or x == y when both are -inf); adding the +0.0 is kept (it turns a -0.0 into +0.0)
    if y == -math.inf:
        return x + 0.0
    if x == -math.inf:
        return y + 0.0
    if x == y:  # infinities of the same sign
        return x + 0.693147180559945309417232121458176568
    tmp = x - y
    if tmp > 0:
        return x + math.log1p(math.exp(-tmp))
    if tmp <= 0:
        return y + math.log1p(math.exp(tmp))
    return tmp  # NaN


@njit(cache=True, nogil=True)
def _log_cells(T, d, base, cell_T, logp, label, logs, logq, logr, terms):
    """The recursion of :func:`log_levels` over the vote vectors only, in level order (see :func:`log_cells`)."""
    l = d + 1
    logq[:] = -np.inf
    logr[:] = -np.inf
    for k in range(cell_T.size):  # level T: the prior
        logq[cell_T[k]] = logp[k]
        logr[cell_T[k], label[k]] = logp[k]
    for s in range(T - 1, -1, -1):
        f, g = base[s], base[s + 1]  # level s's first vote vector, and level s + 1's
        for a in range(s + 1 if d == 2 else 1):
            n = s + 1 - a if d == 2 else s + 1
            for b in range(n):
                # t = (a, b, s - a - b) with three classes, (b, s - b) with two; t + e_i is cell h[i] above
                if d == 2:
                    h0, h1, h2 = g + n + 1 + b, g + b + 1, g + b
                    w0, w1, w2 = logs[a + 1], logs[b + 1], logs[s - a - b + 1]
                else:
                    h0, h1, h2 = g + b + 1, g + b, 0
                    w0, w1, w2 = logs[b + 1], logs[s - b + 1], 0.0
                for c in range(l + 1):  # q, then r_0 .. r_{l-1}
                    if c == 0:
                        x0, x1 = logq[h0] + w0, logq[h1] + w1
                        x2 = logq[h2] + w2 if d == 2 else 0.0
                        terms[f, 0], terms[f, 1] = x0, x1
                        if d == 2:
                            terms[f, 2] = x2
                    else:
                        x0, x1 = logr[h0, c - 1] + w0, logr[h1, c - 1] + w1
                        x2 = logr[h2, c - 1] + w2 if d == 2 else 0.0
                    v = _logaddexp(x0, x1)
                    if d == 2:
                        v = _logaddexp(v, x2)
                    v = v - logs[s + 1]
                    if c == 0:
                        logq[f] = v
                    else:
                        logr[f, c - 1] = v
                f += 1
            g += n + 1


def log_cells(T, support, probs):
    """:func:`log_levels` compiled, every vote vector at once in level order (:func:`level_index`).

    Returns ``(log_q, log_r, terms)``: ``log_q`` of shape ``(n,)`` over the
    ``n`` vote vectors with at most ``T`` votes, ``log_r`` of shape ``(n, l)``,
    ``terms`` of shape ``(m, l)`` for the ``m`` vote vectors with fewer than
    ``T`` votes (the summands ``log q(t + e_i) + log(t_i + 1)`` of ``log_q``).
    The same floating-point operations, in the same order, as the NumPy
    recursion (NumPy's ``logaddexp`` is replayed in :func:`_logaddexp`;
    the logarithms are NumPy's, tabulated): the same bits (tested).

    Examples
    --------
    >>> import numpy as np
    >>> from ensvote._urn import log_cells
    >>> logq, logr, terms = log_cells(2, np.array([[2, 0], [1, 1], [0, 2]]), np.array([0.25, 0.5, 0.25]))
    >>> np.round(np.exp(logq), 4).tolist()  # q of (0, 0); (0, 1), (1, 0); (0, 2), (1, 1), (2, 0)
    [1.0, 0.5, 0.5, 0.25, 0.5, 0.25]
    """
    support = np.asarray(support, dtype=np.int64)
    l = support.shape[1]
    if l not in (2, 3):
        raise ValueError(f"log_cells is written for 2 or 3 classes, got {l}")
    base = _level_base(T, l - 1)
    with np.errstate(divide="ignore"):
        logp = np.log(probs)
        logs = np.log(np.arange(T + 2, dtype=float))
    logq, logr, terms = np.empty(base[T + 1]), np.empty((base[T + 1], l)), np.empty((base[T], l))
    _log_cells(T, l - 1, base, level_index(support), logp, np.argmax(support, axis=1), logs, logq, logr, terms)
    return logq, logr, terms


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


def level_index(t):
    """Place of each vote vector ``t`` (shape ``(..., l)``, ``l`` = 2 or 3) in level order.

    Fewer votes first (the ``C(s + l - 1, l)`` vectors with fewer than ``s =
    sum(t)`` votes come before ``t``), then by ``t_0``, then ``t_1``: the
    order of the urn rule's stop bits (:func:`stop_bits3`,
    :meth:`ensvote.HaltingRule.stop_bits`).

    Examples
    --------
    >>> from ensvote.engine import level_index
    >>> level_index([[0, 0], [0, 1], [1, 0], [0, 2]]).tolist()
    [0, 1, 2, 3]
    >>> level_index([[0, 0, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0], [0, 0, 2]]).tolist()
    [0, 1, 2, 3, 4]
    """
    t = np.asarray(t, dtype=np.int64)
    if t.shape[-1] not in (2, 3):
        raise ValueError(f"level order is defined for 2 or 3 classes, got {t.shape[-1]}")
    s = t.sum(axis=-1)
    t0 = t[..., 0]
    if t.shape[-1] == 2:
        return s * (s + 1) // 2 + t0
    return s * (s + 1) * (s + 2) // 6 + t0 * (s + 1) - t0 * (t0 - 1) // 2 + t[..., 1]


def level_vectors(T, l):
    """Every vote vector of ``l`` = 2 or 3 classes with at most ``T`` votes, in level order (:func:`level_index`).

    Examples
    --------
    >>> from ensvote._urn import level_vectors
    >>> level_vectors(2, 2).tolist()
    [[0, 0], [0, 1], [1, 0], [0, 2], [1, 1], [2, 0]]
    """
    return _cell_states(T, l - 1, _level_base(T, l - 1)).astype(np.int64)


@njit(cache=True, nogil=True)
def _level_base(T, d):
    """The first position (:func:`level_index`) of each level ``s = 0 .. T``, and one past the last (length ``T + 2``)."""
    base = np.zeros(T + 2, dtype=np.int64)
    for s in range(T + 1):
        base[s + 1] = base[s] + (s + 1 if d == 1 else (s + 1) * (s + 2) // 2)
    return base


@njit(cache=True, nogil=True)
def _cell_states(T, d, base):
    """The vote vector at every position of level order (int32, shape ``(base[T + 1], d + 1)``; :func:`level_vectors`)."""
    out = np.empty((base[T + 1], d + 1), dtype=np.int32)
    f = 0
    for s in range(T + 1):
        for a in range(s + 1):
            if d == 1:
                out[f, 0], out[f, 1] = a, s - a
                f += 1
            else:
                for b in range(s + 1 - a):
                    out[f, 0], out[f, 1], out[f, 2] = a, b, s - a - b
                    f += 1
    return out


@njit(cache=True, nogil=True)
def _stop_bits3(T, support, probs, alpha, near_tol, tiny, ask):
    T2 = T + 2
    cur = np.zeros((3, T2, T2))  # level s + 1: cur[c, t0, t1] = r_c(t), the part whose urn has majority c
    new = np.zeros((3, T2, T2))
    # whether some urn of positive prior probability holds t (else q(t) is 0 exactly: no confidence, no stop)
    held = np.zeros((T2, T2), dtype=np.uint8)
    held_new = np.zeros((T2, T2), dtype=np.uint8)
    for k in range(support.shape[0]):
        a, b, c = support[k, 0], support[k, 1], support[k, 2]
        m = 0 if (a >= b and a >= c) else (1 if b >= c else 2)
        cur[m, a, b] += probs[k]
        held[a, b] |= probs[k] > 0
    n_vec = (T + 1) * (T + 2) * (T + 3) // 6
    bits = np.zeros((n_vec + 7) // 8, dtype=np.uint8)
    for i in range(T * (T + 1) * (T + 2) // 6, n_vec):  # level T: every vector stops
        bits[i >> 3] |= np.uint8(128 >> (i & 7))
    n_ask = 0
    for s in range(T - 1, -1, -1):
        inv = 1.0 / (s + 1)
        base = s * (s + 1) * (s + 2) // 6
        for t0 in range(s + 1):
            n1 = s + 1 - t0
            w0 = float(t0 + 1)
            for c in range(3):  # one draw fewer: X_s(t) = sum_i X_{s+1}(t + e_i) (t_i + 1) / (s + 1)
                up, here, out = cur[c, t0 + 1], cur[c, t0], new[c, t0]
                for t1 in range(n1):
                    out[t1] = (w0 * up[t1] + (t1 + 1.0) * here[t1 + 1] + (s - t0 - t1 + 1.0) * here[t1]) * inv
            h_up, h_here, h_out = held[t0 + 1], held[t0], held_new[t0]
            for t1 in range(n1):
                h_out[t1] = h_up[t1] | h_here[t1 + 1] | h_here[t1]
            r0, r1, r2 = new[0, t0], new[1, t0], new[2, t0]
            row = base + t0 * (s + 1) - t0 * (t0 - 1) // 2
            byte = row >> 3  # the bits of a row are consecutive: set them a byte at a time
            acc = bits[byte]
            for t1 in range(n1):
                i = row + t1
                if (i >> 3) != byte:
                    bits[byte] = acc
                    byte = i >> 3
                    acc = bits[byte]
                t2 = s - t0 - t1
                q = r0[t1] + r1[t1] + r2[t1]
                lead = r0[t1] if (t0 >= t1 and t0 >= t2) else (r1[t1] if t1 >= t2 else r2[t1])
                if not h_out[t1]:
                    continue
                conf = lead / q if q >= tiny else np.nan
                if abs(conf - alpha) > near_tol:  # False for NaN
                    if conf > alpha:
                        acc |= np.uint8(128 >> (i & 7))
                else:
                    if n_ask < ask.shape[0]:
                        ask[n_ask, 0], ask[n_ask, 1], ask[n_ask, 2], ask[n_ask, 3] = i, t0, t1, t2
                    n_ask += 1
            bits[byte] = acc
        cur, new = new, cur
        held, held_new = held_new, held
    return bits, n_ask


def stop_bits3(T, support, probs, alpha, *, near_tol, tiny=1e-280):
    """Three classes: whether P*(t, T) > α for every vote vector, one bit each (see :func:`level_index`).

    The urn's recursion (:func:`backward_levels`) run compiled, level by level
    from the prior at ``s = T`` down to ``s = 0``, in probabilities: each level
    is a law over its vote vectors (it sums to 1), and what rounding below the
    smallest double drops from all levels together is below ``1e-299``
    (``T <= 1001``), far below ``tiny``.  Bit :func:`level_index` of ``t``
    (most significant bit first, as :func:`numpy.packbits`) is set where
    ``P*(t, T) = r_{c(t)}(t) / q(t) > α`` (``c(t)`` the current majority, the
    lowest index on ties) or ``s == T``.  Vectors whose confidence is within
    ``near_tol`` of α, or whose probability ``q(t)`` is positive but below
    ``tiny`` (there rounding could decide), are left unset and returned in
    ``ask``, for the caller to decide with the on-demand formula and set.  A vector no urn of positive prior probability holds
    has probability 0 exactly (tracked apart, in integers) and no confidence:
    its bit is unset, as the on-demand ``NaN > α`` is False.  Time ``O(T^3)`` (about 1.5 s at ``T = 1001``),
    memory ``C(T + 3, 3) / 8`` bytes and ``6 (T + 2)^2`` floats.

    Returns
    -------
    bits : ndarray of uint8
    ask : ndarray of int64, shape (n, 3)
        The vote vectors left to the caller.
    """
    args = (int(T), np.ascontiguousarray(support, dtype=np.int64), np.ascontiguousarray(probs, dtype=np.float64),
            float(alpha), float(near_tol), float(tiny))
    ask = np.empty((4096, 4), dtype=np.int64)  # position, t_0, t_1, t_2
    bits, n_ask = _stop_bits3(*args, ask)
    if n_ask > len(ask):  # more than the buffer held: once more with room for all
        ask = np.empty((n_ask, 4), dtype=np.int64)
        bits, n_ask = _stop_bits3(*args, ask)
    return bits, ask[:n_ask, 1:].copy()

