"""Priors over the urn (§2.2 of Soto et al. 2016) and the expected number of members queried."""

import numpy as np

from ._utils import check_random_state
from ._validation import MAX_ENTRIES, _fmt, check_counts, check_positive_int, check_size, power_exceeds
from .confidence import check_prior
from .engine import run_halting
from .rules import HaltingRule

__all__ = ["oob_prior", "smooth_moving_average", "expected_queries"]

#: Most work (about ``len(support) * T**2`` operations) ``expected_queries(method="exact")``
#: accepts: some seconds.
MAX_EXACT_WORK = 250_000_000


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
    v = check_counts(oob_votes, name="oob_votes")
    if v.ndim != 2:
        raise ValueError(f"oob_votes must have shape (n_rows, n_classes), got {v.shape}")
    T = check_positive_int(T, name="T")
    window = check_positive_int(window, name="window")
    if window % 2 == 0:
        raise ValueError(f"window must be odd, got {window}")
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


def expected_queries(rule, prior, *, method="mc", n_samples=10_000, random_state=None, return_sem=False):
    """Expected number of members a rule queries when urns are drawn from ``prior``.

    ``method="mc"`` is the Monte Carlo estimate of Soto et al. (2016): draw an urn content
    ``T`` from the prior, shuffle its ``T`` votes, query them until the rule
    stops, average over ``n_samples`` draws.  ``method="exact"`` (two classes)
    computes the same expectation by dynamic programming: for each urn content
    ``k`` the probability of being still voting at each vote vector follows
    hypergeometric transitions; ``E[N] = sum_s P(N > s)``.

    Parameters
    ----------
    rule : HaltingRule
    prior : array of shape (T + 1,) or (support, probs)
        Distribution of the full vote vector (see :func:`ensvote.confidence.check_prior`),
        e.g. :func:`ensvote.uniform_prior` ``(T, n_classes)``.
    method : {"mc", "exact"}
        ``"exact"`` costs about ``len(support) * T**2`` operations and is
        refused beyond ``MAX_EXACT_WORK`` (2.5e8, some seconds; ``T`` about 600
        for a prior with full support).
    n_samples : int
        Monte Carlo draws; ``n_samples * T`` must not exceed ``MAX_ENTRIES`` (5e7).
    random_state : None, int or numpy Generator
        Seed for the draws (None: :data:`ensvote.SEED`).
    return_sem : bool
        Also return the Monte Carlo standard error (0.0 for ``"exact"``).

    Returns
    -------
    float, or (float, float) with ``return_sem``
    """
    if not isinstance(rule, HaltingRule):
        raise TypeError(f"rule must be a HaltingRule, got {type(rule).__name__}")
    if prior is None or isinstance(prior, str):
        raise TypeError("prior must be the distribution the urns are drawn from: an array of shape "
                        "(T + 1,) or a pair (support, probs), e.g. ensvote.uniform_prior(T, n_classes); "
                        f"got {prior!r}")
    from .manyclass import PairPrior

    if isinstance(prior, PairPrior):
        raise TypeError("expected_queries draws full urns from the prior; a PairPrior (the many-class "
                        "out-of-bag prior) describes leader-rival pairs only and cannot be sampled; "
                        "pass a prior over the full vote vector, e.g. ensvote.uniform_prior(T, n_classes)")
    if isinstance(prior, tuple):
        if len(prior) != 2:
            raise ValueError("a prior given as a tuple must be (support, probs)")
        support0 = np.asarray(prior[0])
        if support0.ndim != 2 or len(support0) == 0 or support0.dtype.kind not in "iu":
            raise ValueError(f"prior support must be an int array of shape (m, n_classes), got {support0!r:.80}")
        T = int(support0[0].sum())
    else:
        p = np.asarray(prior)
        if p.ndim != 1:
            raise ValueError(f"a two-class prior must be a 1-D array of length T + 1, got shape {p.shape}")
        T = len(p) - 1
    if T < 1:
        raise ValueError("prior must describe an ensemble of at least one member")
    support, probs = check_prior(prior, T)
    l = support.shape[1]
    rule._prepare(T, l)
    if method == "mc":
        n_samples = check_positive_int(n_samples, name="n_samples")
        check_size(n_samples * T, what=f"n_samples={n_samples:,} draws of T={T} votes")
        rng = check_random_state(random_state)
        draws = support[rng.choice(len(support), size=n_samples, p=probs)]
        votes = np.repeat(np.tile(np.arange(l), (n_samples, 1)).ravel(), draws.ravel()).reshape(n_samples, T)
        votes = rng.permuted(votes, axis=1)
        res = run_halting(lambda rows, a, b: votes[rows, a:b], n_samples, T, l, rule)
        n = res.n_queried.astype(float)
        mean = float(n.mean())
        sem = float(n.std(ddof=1) / np.sqrt(n_samples)) if n_samples > 1 else float("nan")
        return (mean, sem) if return_sem else mean
    if method == "exact":
        if l != 2:
            raise ValueError("method='exact' is implemented for two classes; use method='mc'")
        work = len(support) * T * T
        if work > MAX_EXACT_WORK:
            raise ValueError(f"method='exact' would cost about len(support) * T**2 = {_fmt(work)} operations "
                             f"(T={T}), more than the limit of {_fmt(MAX_EXACT_WORK)}; use method='mc'")
        mean = _expected_queries_exact_binary(rule, support[:, 0], probs, T)
        return (mean, 0.0) if return_sem else mean
    raise ValueError(f"method must be 'mc' or 'exact', got {method!r}")


def _expected_queries_exact_binary(rule, k_values, probs, T):
    k = k_values.astype(float)[:, None]  # urn contents (class-0 votes), one row each
    alive = np.ones((len(k_values), 1))  # alive[u, x0]: P(still voting after s votes, x0 for class 0)
    expected = np.ones(len(k_values))  # P(N > 0) = 1
    for s in range(T - 1):
        x0 = np.arange(s + 1)[None, :]
        x1 = s - x0
        p0 = np.clip((k - x0) / (T - s), 0.0, 1.0)
        p1 = np.clip((T - k - x1) / (T - s), 0.0, 1.0)
        nxt = np.zeros((len(k_values), s + 2))
        nxt[:, 1:] += alive * p0
        nxt[:, :-1] += alive * p1
        states = np.column_stack([np.arange(s + 2), s + 1 - np.arange(s + 2)])
        stops = rule._stop(states)
        nxt[:, stops] = 0.0
        alive = nxt
        expected += alive.sum(axis=1)
    return float(np.dot(probs, expected))
