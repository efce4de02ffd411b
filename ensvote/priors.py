"""Priors over the urn (§2.2 of Soto et al. 2016): the out-of-bag prior (HYPER) and its smoothing.

:func:`oob_prior` is the paper's prior (HYPER).  :func:`deconvolved_oob_prior`
goes beyond the paper: it estimates the same distribution by deconvolution
instead of rescaling and smoothing, for the budget mode of
:class:`ensvote.OptimalRule` (:meth:`ensvote.OptimalRule.from_oob_votes`).

The expected number of members a rule queries under a prior is in :mod:`ensvote.expected`.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from ._validation import MAX_ENTRIES, _fmt, check_counts, check_positive_int, power_exceeds
from .manyclass import MAX_PAIR_TABLE_BYTES, PairPrior, max_pair_table_T

__all__ = ["oob_prior", "pair_oob_prior", "deconvolved_oob_prior", "VoteMixture", "smooth_moving_average"]


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

    Examples
    --------
    The end points stay, and spread into their neighbours:

    >>> from ensvote.priors import smooth_moving_average
    >>> smooth_moving_average([9.0, 0, 0, 0, 0, 0, 6]).round(2)
    array([9. , 3. , 1.8, 0. , 1.2, 2. , 6. ])
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


def oob_prior(oob_votes: ArrayLike, T: int, *,
              window: int = 5) -> NDArray[np.float64] | tuple[NDArray[np.int64], NDArray[np.float64]] | PairPrior:
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
        (:func:`pair_oob_prior`: the same rescaled out-of-bag
        votes, as a prior on leader-rival pairs, which scales with ``l``; this
        goes beyond the paper).

    Examples
    --------
    Five training rows' out-of-bag votes (two classes), as a prior for 101 members:

    >>> import numpy as np
    >>> from ensvote import oob_prior
    >>> prior = oob_prior(np.array([[0, 37], [2, 33], [30, 4], [18, 19], [36, 0]]), T=101)
    >>> prior.shape, round(float(prior.sum()), 6), int(np.argmax(prior))
    ((102,), 1.0, 0)
    """
    v, T, window = _check_oob_arguments(oob_votes, T, window)
    v = v[v.sum(axis=1) > 0]
    if len(v) == 0:
        raise ValueError("no training row has an out-of-bag vote; cannot estimate the prior "
                         "(use bootstrap=True, or prior=None for the uniform prior)")
    l = v.shape[1]
    if l >= 4:  # the full histogram has (T + 1) ** (l - 1) cells: the pair prior instead
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


def pair_oob_prior(oob_votes, T, *, window=5):
    """The pair prior from out-of-bag votes, for any number of classes (beyond the paper).

    Each training row's out-of-bag votes are rescaled to ``T`` votes exactly as
    in :func:`ensvote.oob_prior` (largest remainders).  For every class ``c``
    the histogram of ``(T_c, T_j)`` over the rows and over the rivals ``j != c``
    is smoothed and normalised:

    * two classes: the pairs are ``(T_0, T - T_0)`` and ``(T_1, T - T_1)``; the
      smoothing is the paper's moving average along ``T_0``, so the prior is
      the paper's :func:`ensvote.oob_prior`, read from either class;
    * ``l >= 3``: the mean over a ``window x window`` box of lattice points
      inside the triangle ``x + y <= T`` (as the authors' three-class code
      smooths its histogram).

    Parameters
    ----------
    oob_votes : array_like of int, shape (n_rows, l)
    T : int
    window : odd int

    Returns
    -------
    PairPrior

    Raises
    ------
    ValueError, TypeError
        Bad votes, ``T`` or ``window``, no row with an out-of-bag vote, or a
        prior above :data:`ensvote.manyclass.MAX_PAIR_TABLE_BYTES`.

    Examples
    --------
    Out-of-bag votes of 200 training rows over four classes (here simulated),
    rescaled to an ensemble of ``T = 21``:

    >>> import numpy as np
    >>> from ensvote import UrnRule
    >>> from ensvote.priors import pair_oob_prior
    >>> rng = np.random.default_rng(0)
    >>> p = rng.dirichlet([5, 2, 1, 1], size=200)
    >>> oob_votes = np.array([rng.multinomial(11, q) for q in p])
    >>> prior = pair_oob_prior(oob_votes, T=21)
    >>> prior
    PairPrior(n_classes=4, T=21)
    >>> UrnRule(T=21, prior=prior).stop([[8, 0, 0, 0], [3, 2, 1, 0]])
    array([ True, False])
    """
    v, T, window = _check_oob_arguments(oob_votes, T, window)
    l = v.shape[1]
    if l * (T + 1) ** 2 * 8 > MAX_PAIR_TABLE_BYTES:
        raise ValueError(f"a pair prior for {l} classes and T={T} would take "
                         f"{l * (T + 1) ** 2 * 8 / 2**20:.0f} MiB, above MAX_PAIR_TABLE_BYTES; use "
                         f"rule='infinite' (InfiniteRule needs no table), prior='uniform' (up to "
                         f"T = {max_pair_table_T(l)}) or a smaller ensemble")
    if l == 2:
        p0 = oob_prior(v, T, window=window)
        x = np.arange(T + 1)
        probs = np.zeros((2, T + 1, T + 1))
        probs[0, x, T - x] = p0
        probs[1, T - x, x] = p0
        return PairPrior(probs)
    v = v[v.sum(axis=1) > 0]
    if len(v) == 0:
        raise ValueError("no training row has an out-of-bag vote; cannot estimate the prior "
                         "(use bootstrap=True, or prior=None for the uniform prior)")
    V = _hamilton_round(v.astype(float), T)  # (n, l)
    cc, jj = np.nonzero(~np.eye(l, dtype=bool))  # ordered pairs (c, j), c != j
    codes = (cc[None, :] * (T + 1) + V[:, cc]) * (T + 1) + V[:, jj]
    hist = np.bincount(codes.ravel(), minlength=l * (T + 1) ** 2).reshape(l, T + 1, T + 1).astype(float)
    x = np.arange(T + 1)
    inside = ((x[:, None] + x[None, :]) <= T).astype(float)
    h = window // 2
    num, den = hist, inside
    for axis in (0, 1):
        num = _box_sum(num, axis + 1, h)
        den = _box_sum(den, axis, h)
    with np.errstate(invalid="ignore", divide="ignore"):
        sm = np.where(inside > 0, num / den, 0.0)
    return PairPrior(sm / sm.sum(axis=(1, 2), keepdims=True))


# --------------------------------------------------------------------------
# the deconvolved out-of-bag prior (beyond the paper)
# --------------------------------------------------------------------------
#: Default grid resolution of :func:`deconvolved_oob_prior` per number of classes
#: (a member's class probabilities on multiples of 1/resolution).
DECONVOLUTION_RESOLUTION = {2: 100, 3: 50}


_TINY = np.finfo(float).tiny


def _simplex_grid(resolution, l):
    """Every probability vector over ``l`` classes (2 or 3) with entries in multiples of ``1/resolution``."""
    if l == 2:
        a = np.arange(resolution + 1)
        return np.stack([a, resolution - a], 1) / resolution
    a, b = np.meshgrid(np.arange(resolution + 1), np.arange(resolution + 1), indexing="ij")
    ok = a + b <= resolution
    return np.stack([a[ok], b[ok], resolution - a[ok] - b[ok]], 1) / resolution


class VoteMixture:
    """A member's class probabilities ``p`` per row, their distribution ``G`` fitted to out-of-bag votes.

    Row ``i``'s ``n_i`` out-of-bag votes are ``n_i`` independent draws of a
    member's vote, ``v_i ~ Multinomial(n_i, p_i)``, with ``p_i ~ G``.  ``G`` is
    estimated on a grid by non-parametric maximum likelihood (EM; Laird 1978),
    and the urn of ``T`` fresh members then has the posterior predictive
    distribution ``P(K) = Σ_j g_j Multinomial(K; T, p_j)``
    (:func:`deconvolved_oob_prior`; the budget mode's cross-validation fits
    one per fold).

    Parameters
    ----------
    votes : array_like of int, shape (n_rows, l), l in {2, 3}
        Out-of-bag votes, rows with at least one vote (see :meth:`checked_votes`).
    resolution : int
        The grid of ``p``: multiples of ``1 / resolution``.
    weights : array_like of float, shape (n_rows,), optional
        Weights of the rows in the likelihood (default equal).
    max_iter : int, default=2000
    tol : float, default=1e-10
        EM stops when the mean log-likelihood gains less than ``tol``.

    Attributes
    ----------
    grid : ndarray, shape (m, l)
        The probability vectors of the grid.
    weights : ndarray, shape (m,)
        The fitted ``G`` on the grid.
    n_iter : int
        EM iterations run.

    Examples
    --------
    >>> import numpy as np
    >>> from ensvote.priors import VoteMixture
    >>> mix = VoteMixture(np.array([[0, 37], [2, 33], [30, 4], [18, 19], [36, 0]]), resolution=20)
    >>> mix.grid.shape, round(float(mix.weights.sum()), 6)
    ((21, 2), 1.0)
    """

    @staticmethod
    def checked_votes(oob_votes, T, resolution=None):
        """Validated ``(votes, T, resolution)``: rows without a vote dropped, the default resolution filled in.

        Parameters
        ----------
        oob_votes : array_like of int, shape (n_rows, l), l in {2, 3}
        T : int
        resolution : int, optional
            Default :data:`DECONVOLUTION_RESOLUTION` for ``l`` classes; at most 200.

        Returns
        -------
        votes : ndarray of int64, shape (n, l)
        T, resolution : int

        Raises
        ------
        ValueError, TypeError
            Bad votes, ``T`` or ``resolution``, more than three classes, or
            fewer than two rows with an out-of-bag vote.

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote.priors import VoteMixture
        >>> v, T, resolution = VoteMixture.checked_votes(np.array([[0, 3], [0, 0], [2, 1]]), T=11)
        >>> v.tolist(), T, resolution
        ([[0, 3], [2, 1]], 11, 100)
        """
        return _check_deconvolution_arguments(oob_votes, T, resolution)

    def __init__(self, votes, resolution, *, weights=None, max_iter=2000, tol=1e-10):
        v = np.asarray(votes, dtype=float)
        self.grid = _simplex_grid(resolution, v.shape[1])
        loglik = special.xlogy(v[:, None, :], self.grid[None]).sum(-1)  # (rows, grid points), up to a row constant
        self.lik = np.exp(loglik - loglik.max(axis=1, keepdims=True))
        u = np.full(len(v), 1.0 / len(v)) if weights is None else weights / weights.sum()
        g = np.full(len(self.grid), 1.0 / len(self.grid))
        prev = -np.inf
        for self.n_iter in range(1, max_iter + 1):
            f = self.lik @ g
            obj = float(u @ np.log(f))
            g = g * (self.lik.T @ (u / f))
            # weights below the smallest normal float (2.2e-308) are set to 0: such a weight adds nothing
            # a row's likelihood f can hold, but every product with a subnormal number takes the CPU's
            # slow path (the fit ran three times longer; the weights come out the same but for those)
            g[g < _TINY] = 0.0
            if obj - prev < tol:
                break
            prev = obj
        self.weights = g / g.sum()

    def posterior_mixture(self, votes):
        """Mean over ``votes``' rows of each row's posterior over the grid (given the fitted ``G``).

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote.priors import VoteMixture
        >>> mix = VoteMixture(np.array([[0, 37], [2, 33], [30, 4], [36, 0]]), resolution=20)
        >>> w = mix.posterior_mixture(np.array([[1, 20]]))
        >>> w.shape, bool(mix.grid[np.argmax(w), 0] < 0.2)
        ((21,), True)
        """
        v = np.asarray(votes, dtype=float)
        ll = special.xlogy(v[:, None, :], self.grid[None]).sum(-1)
        w = np.exp(ll - ll.max(axis=1, keepdims=True)) * self.weights
        w /= w.sum(axis=1, keepdims=True)
        return w.mean(axis=0)

    def prior(self, T, weights=None, uniform=0.0):
        """The urn prior ``Σ_j g_j Multinomial(K; T, p_j)`` (``weights`` in place of ``g`` if given).

        With ``uniform = w > 0`` it is mixed with the uniform urn prior (``p``
        uniform on the simplex: every vote vector equally likely) in the
        ratio ``1 - w : w``.

        Returns
        -------
        ndarray of shape (T + 1,) for two classes, ``(support, probs)`` for three

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote.priors import VoteMixture
        >>> mix = VoteMixture(np.array([[0, 37], [2, 33], [30, 4], [36, 0]]), resolution=20)
        >>> p = mix.prior(11)
        >>> p.shape, round(float(p.sum()), 6)
        ((12,), 1.0)
        """
        g = self.weights if weights is None else weights
        l = self.grid.shape[1]
        if l == 2:
            k = np.arange(T + 1)
            logpmf = (special.gammaln(T + 1) - special.gammaln(k + 1) - special.gammaln(T - k + 1))[:, None] \
                + special.xlogy(k[:, None], self.grid[None, :, 0]) + special.xlogy(T - k[:, None], self.grid[None, :, 1])
            pr = np.exp(logpmf) @ g
            pr = pr / pr.sum()
            return pr if not uniform else (1.0 - uniform) * pr + uniform / len(pr)
        a, b = np.meshgrid(np.arange(T + 1), np.arange(T + 1), indexing="ij")
        ok = a + b <= T
        support = np.stack([a[ok], b[ok], T - a[ok] - b[ok]], 1).astype(np.int64)
        const = special.gammaln(T + 1) - special.gammaln(support + 1).sum(1)
        # log pmf = const + xlogy(support, grid) summed over the classes, left to right; the terms are
        # taken from a (T + 1) x m table per class and the support's rows with first count a0 come in
        # one block (second count 0, 1, ..., T - a0): no (rows, m, 3) array (650 MB at T = 201)
        k = np.arange(T + 1, dtype=float)[:, None]
        terms = [special.xlogy(k, self.grid[None, :, j]) for j in range(3)]
        pmf = np.empty((len(support), len(self.grid)))
        lo = 0
        for a0 in range(T + 1):
            n = T - a0 + 1
            np.exp(const[lo:lo + n, None] + ((terms[0][a0] + terms[1][:n]) + terms[2][n - 1::-1]),
                   out=pmf[lo:lo + n])
            lo += n
        pr = pmf @ g
        if uniform:
            pr = (1.0 - uniform) * (pr / pr.sum()) + uniform / len(pr)
            return support, pr / pr.sum()
        keep = pr > 0
        return support[keep], pr[keep] / pr[keep].sum()


def _check_deconvolution_arguments(oob_votes, T, resolution):
    v = check_counts(oob_votes, name="oob_votes")
    if v.ndim != 2:
        raise ValueError(f"oob_votes must have shape (n_rows, n_classes), got {v.shape}")
    l = v.shape[1]
    if l not in DECONVOLUTION_RESOLUTION:
        raise ValueError(f"the deconvolved out-of-bag prior is computed for 2 or 3 classes, got n_classes={l}")
    T = check_positive_int(T, name="T")
    resolution = DECONVOLUTION_RESOLUTION[l] if resolution is None else check_positive_int(
        resolution, name="resolution", minimum=2, maximum=200, why="(the grid would be too large)")
    v = v[v.sum(axis=1) > 0]
    if len(v) < 2:
        raise ValueError("the deconvolved out-of-bag prior needs at least two training rows with an "
                         f"out-of-bag vote, got {len(v)}")
    return v, T, resolution


def deconvolved_oob_prior(oob_votes, T, *, resolution=None):
    """The distribution of a fresh ``T``-member urn, deconvolved from out-of-bag votes.

    :func:`oob_prior` (Soto et al. 2016) rescales each row's out-of-bag vote
    shares to ``T`` votes and smooths the histogram.  That smoothing keeps the
    end points of the histogram and also spreads them into their neighbours,
    so a peak at unanimity (most rows of an easy problem) gains mass, and every
    contested urn, where a stopping rule disagrees with the full ensemble,
    loses it in proportion; and the rescaled shares of ``n_i`` out-of-bag votes
    (about ``T / e``) are noisier than ``T`` votes.  Here instead a row's
    out-of-bag votes are what they are under the ensemble's own model:
    ``n_i`` independent draws of a fresh member's vote with class
    probabilities ``p_i``, and ``p_i`` varies over rows with a distribution
    ``G``.  ``G`` is estimated on a grid by non-parametric maximum likelihood
    (the EM algorithm for a mixture with fixed components), and the urn of
    ``T`` fresh members has the distribution
    ``P(K) = Σ_j g_j Multinomial(K; T, p_j)`` — no window and no rescaling.
    Used by the budget mode, :meth:`ensvote.OptimalRule.from_oob_votes`.

    Parameters
    ----------
    oob_votes : array_like of int, shape (n_rows, l), l in {2, 3}
        Out-of-bag vote counts per training row and class; rows without an
        out-of-bag vote are ignored, at least two must remain.
    T : int
        Ensemble size the prior is for.
    resolution : int, optional
        Grid of ``p``: multiples of ``1 / resolution`` (default 100 for two
        classes, 50 for three).

    Returns
    -------
    prior : ndarray of shape (T + 1,) for two classes (``prior[k] = P(T_0 = k)``),
        ``(support, probs)`` for three (as :func:`oob_prior`).

    Examples
    --------
    >>> import numpy as np
    >>> from ensvote.priors import deconvolved_oob_prior
    >>> prior = deconvolved_oob_prior(np.array([[0, 37], [2, 33], [30, 4], [18, 19], [36, 0]]), T=101)
    >>> prior.shape, round(float(prior.sum()), 6)
    ((102,), 1.0)
    """
    v, T, resolution = _check_deconvolution_arguments(oob_votes, T, resolution)
    return VoteMixture(v, resolution).prior(T)
