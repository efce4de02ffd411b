"""Priors over the urn (§2.2 of Soto et al. 2016): the out-of-bag prior (HYPER) and its smoothing.

The expected number of members a rule queries under a prior is in :mod:`ensvote.expected`.
"""

import numpy as np

from ._validation import MAX_ENTRIES, _fmt, check_counts, check_positive_int, power_exceeds

__all__ = ["oob_prior", "smooth_moving_average"]


def smooth_moving_average(y, span=5):
    """MATLAB's ``smooth(y, span)`` (moving average), which the authors' code uses.

    Point ``k`` is the mean of the ``2h + 1`` points centred on it, with the
    half-width ``h`` shrinking near the ends so the window stays symmetric:
    the first and last points are left unchanged, the second and second-to-last
    average three points, and so on.

    Parameters
    ----------
    y : array_like, shape (n,)
    span : odd int >= 1

    Returns
    -------
    ndarray, shape (n,)
    """
    y = np.asarray(y, dtype=float)
    span = check_positive_int(span, name="span")
    if span % 2 == 0:
        raise ValueError(f"span must be odd, got {span}")
    if y.ndim != 1:
        raise ValueError("y must be one-dimensional")
    n = len(y)
    c = np.concatenate([[0.0], np.cumsum(y)])
    k = np.arange(n)
    h = np.minimum(np.minimum(k, n - 1 - k), span // 2)
    return (c[k + h + 1] - c[k - h]) / (2 * h + 1)


def _hamilton_round(oob, T):
    """Scale each row to ``T`` votes, rounding by largest remainders (ties: lower class)."""
    x = T * oob / oob.sum(axis=1, keepdims=True)
    base = np.floor(x).astype(np.int64)
    short = T - base.sum(axis=1)
    frac = x - base
    # rank classes by fractional part, descending; stable so ties favour the lower index
    order = np.argsort(-frac, axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(oob.shape[1])[None, :].repeat(len(oob), 0), axis=1)
    return base + (rank < short[:, None])


def _check_oob_arguments(oob_votes, T, window):
    """Validated ``(votes, T, window)`` for the out-of-bag priors (here and in manyclass)."""
    v = check_counts(oob_votes, name="oob_votes")
    if v.ndim != 2:
        raise ValueError(f"oob_votes must have shape (n_rows, n_classes), got {v.shape}")
    T = check_positive_int(T, name="T")
    window = check_positive_int(window, name="window")
    if window % 2 == 0:
        raise ValueError(f"window must be odd, got {window}")
    return v, T, window


def oob_prior(oob_votes, T, *, window=5):
    """The non-parametric prior P(T) of Soto et al. (2016) from out-of-bag votes (HYPER).

    For each training row with at least one out-of-bag vote, its out-of-bag
    class shares are rescaled to ``T`` votes and rounded; the histogram of these
    vote vectors, smoothed by a sliding window of ``window`` and normalised, is
    the prior (§2.2 of Soto et al. 2016).

    Details, following the authors' MATLAB code where the paper is silent:

    * rounding: two classes ``round(T * v_0 / V)`` half up; in general the
      largest-remainder method, so every vector sums to ``T`` (the two agree for
      two classes);
    * smoothing, two classes: MATLAB's ``smooth(h, 5)`` (:func:`smooth_moving_average`);
      ``l > 2``: the mean over a ``window``-wide box on the grid of the first
      ``l - 1`` counts, taken over lattice points inside the simplex only (the
      authors' 3-class code: a 5 x 5 box with NaN outside the triangle).

    Parameters
    ----------
    oob_votes : array_like of int, shape (n_rows, l)
        Out-of-bag vote counts per training row and class.
    T : int
        Ensemble size the prior is for.
    window : odd int
        Width of the smoothing window (1: no smoothing).

    Returns
    -------
    prior : ndarray of shape (T + 1,) for two classes (``prior[k] = P(T_0 = k)``),
        ``(support, probs)`` over every vote vector with positive probability for
        three, and for four or more classes a :class:`ensvote.manyclass.PairPrior`
        (:func:`ensvote.manyclass.pair_oob_prior`: the same rescaled out-of-bag
        votes, as a prior on leader-rival pairs, which scales with ``l``; this
        goes beyond the paper).
    """
    v, T, window = _check_oob_arguments(oob_votes, T, window)
    v = v[v.sum(axis=1) > 0]
    if len(v) == 0:
        raise ValueError("no training row has an out-of-bag vote; cannot estimate the prior "
                         "(use bootstrap=True, or prior=None for the uniform prior)")
    l = v.shape[1]
    if l >= 4:  # the full histogram has (T + 1) ** (l - 1) cells: the pair prior instead
        from .manyclass import pair_oob_prior

        return pair_oob_prior(v, T, window=window)
    if power_exceeds(T + 1, l - 1, MAX_ENTRIES):
        raise ValueError(f"the histogram of oob_prior over {l} classes with T={T} would need (T + 1) ** "
                         f"(l - 1) entries, more than the limit of {_fmt(MAX_ENTRIES)}")
    scaled = _hamilton_round(v.astype(float), T)
    if l == 2:
        hist = np.bincount(scaled[:, 0], minlength=T + 1).astype(float)
        sm = smooth_moving_average(hist, window)
        return sm / sm.sum()
    shape = (T + 1,) * (l - 1)
    hist = np.zeros(shape)
    np.add.at(hist, tuple(scaled[:, :-1].T), 1.0)
    inside = (sum(np.indices(shape, sparse=True)) <= T).astype(float)
    num, den = hist, inside
    h = window // 2
    for axis in range(l - 1):
        num = _box_sum(num, axis, h)
        den = _box_sum(den, axis, h)
    with np.errstate(invalid="ignore", divide="ignore"):
        sm = np.where(inside > 0, num / den, 0.0)
    idx = np.nonzero(sm > 0)
    support = np.column_stack(idx + (T - sum(idx),)).astype(np.int64)
    probs = sm[idx]
    return support, probs / probs.sum()


def _box_sum(a, axis, h):
    c = np.cumsum(a, axis=axis)
    pad = [(0, 0)] * a.ndim
    pad[axis] = (1, 0)
    c = np.pad(c, pad)
    n = a.shape[axis]
    k = np.arange(n)
    hi = np.minimum(k + h, n - 1) + 1
    lo = np.maximum(k - h, 0)
    return np.take(c, hi, axis=axis) - np.take(c, lo, axis=axis)
