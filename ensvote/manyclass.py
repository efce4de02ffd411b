"""The urn rule for any number of classes.

The exact confidence of Soto, Suárez & Martínez-Muñoz (2016, Eq. 3) sums over
every completion of the vote; for ``l`` classes there are
``C(T - t + l - 1, l - 1)`` of them, and a dense table of it over every vote
vector has ``(T + 1) ** l`` entries.  Both explode with ``l``.  This module
replaces the sum by a **union bound over the rivals of the current leader**:

* :func:`urn_confidence_bound` with ``prior=None`` (uniform prior): by the
  paper's Prop. 3 the unseen votes follow a Dirichlet-multinomial with
  parameters ``t + 1``.  Merging every class but the leader ``c`` and one rival
  ``j`` keeps it Dirichlet-multinomial, with parameters
  ``(t_c + 1, t_j + 1, t - t_c - t_j + l - 2)``, so the chance ``f`` that ``j``
  ends ahead of ``c`` (level with it, if ``j < c``: ties go to the lowest
  index) depends on ``(t, t_c, t_j)`` only.  ``f`` is tabulated once per
  ``(T, l)``; the confidence ``1 - sum_j f`` is a **lower bound** on Eq. 3
  (the leader loses exactly when some rival beats it; the probability of a
  union is at most the sum), exact for two classes.
* :func:`urn_confidence_exact`: Eq. 3 itself under the uniform prior, for any
  ``l``, from Prop. 3's product form (independent negative binomials
  conditioned on their sum; one polynomial product per final count of the
  leader).  Cost ``O(l (T - t)^3)`` per vote vector: a reference, not a rule.
* :class:`PairPrior` (estimated by :func:`ensvote.priors.pair_oob_prior`): a prior estimated from
  out-of-bag votes that scales with ``l`` (beyond the paper): for every class
  ``c`` the distribution of ``(T_c, T_j)``, the votes of ``c`` and of one of its
  rivals in the full ensemble, pooled over the rivals ``j``.  For two classes it
  is the paper's prior.  The rule combines the per-rival posteriors of Eq. 3
  under these pair priors by the same union bound; unlike the uniform case it
  is a model of its own (no prior over the full vote vector reproduces it), so
  its calibration is measured, not proved.

:class:`ensvote.UrnRule` uses these tables when its dense exact table does not
fit (``prior=None``, ``l >= 3``), when given a :class:`PairPrior`, or when
built with ``method="bound"``.
"""

import hashlib

import numpy as np
from scipy import special

from ._cache import BoundedCache
from ._urn import backward_levels
from ._validation import check_counts, check_positive_int

__all__ = [
    "MAX_PAIR_TABLE_BYTES",
    "check_pair_table_size",
    "PairPrior",
    "max_pair_table_T",
    "PairTable",
    "pair_table",
    "pair_table_nbytes",
    "urn_confidence_bound",
    "urn_confidence_exact",
]

#: Largest pair table (bytes, all classes together) that :func:`pair_table` builds.
#: The uniform prior's table holds ``2 * n(T)`` float32 values with
#: ``n(T) ~ T**3 / 12``, whatever ``l``: up to ``T = 462``.  A :class:`PairPrior`
#: needs one table per class: ``l = 10`` up to ``T = 213``, ``l = 26`` up to ``T = 154``
#: (:func:`max_pair_table_T`; ``tests/test_many_classes.py`` checks these figures).
MAX_PAIR_TABLE_BYTES = 64 * 2 ** 20

_TABLES = BoundedCache("pair tables", 6)
#: Small tables are kept in greater number (a vote over many distinct answers, :class:`ensvote.VoteStream`,
#: asks for one table per number of answers seen): each at most MAX_PAIR_TABLE_BYTES / maxsize bytes.
_SMALL_TABLES = BoundedCache("small pair tables", 64)


# --------------------------------------------------------------------------
# layout of a pair table
# --------------------------------------------------------------------------
def _layout_size(T):
    s = np.arange(T + 1)[:, None]
    a = np.arange(T + 1)[None, :]
    width = np.where(a <= s, np.minimum(a, s - a) + 1, 0)
    return width, int(width.sum())


def _n_entries(T):
    """Entries of one table variant: ``sum over t <= T of sum over a <= t of (min(a, t - a) + 1)``.

    The inner sum is ``floor(t^2 / 4) + t + 1``, and ``sum_{t <= T} floor(t^2 / 4) = floor(T (T + 2) (2T - 1) / 24)``.
    """
    return T * (T + 2) * (2 * T - 1) // 24 + (T + 1) * (T + 2) // 2


def pair_table_nbytes(T, n_classes, per_class=False):
    """Bytes of the pair table for ``T`` members (``per_class``: one table per class, as for a :class:`PairPrior`).

    Parameters
    ----------
    T : int >= 1
        Ensemble size.
    n_classes : int >= 2
        Number of classes ``l``.
    per_class : bool, default=False
        One table per class (a :class:`PairPrior`) instead of one in all.

    Returns
    -------
    int

    Examples
    --------
    >>> from ensvote.manyclass import pair_table_nbytes
    >>> pair_table_nbytes(101, 3), pair_table_nbytes(101, 10, per_class=True)
    (739024, 7390240)
    """
    T = check_positive_int(T, name="T")
    n_classes = check_positive_int(n_classes, name="n_classes", minimum=2)
    return 2 * 4 * _n_entries(T) * (n_classes if per_class else 1)


def max_pair_table_T(n_classes, per_class=False):
    """Largest ``T`` whose pair table fits in :data:`MAX_PAIR_TABLE_BYTES` (see :func:`pair_table_nbytes`).

    Parameters
    ----------
    n_classes : int >= 2
        Number of classes ``l``.
    per_class : bool, default=False
        One table per class (a :class:`PairPrior`).

    Returns
    -------
    int

    Examples
    --------
    >>> from ensvote.manyclass import max_pair_table_T
    >>> max_pair_table_T(3), max_pair_table_T(10, per_class=True)
    (462, 213)
    """
    n_classes = check_positive_int(n_classes, name="n_classes", minimum=2)
    T = 1
    while pair_table_nbytes(T + 1, n_classes, per_class) <= MAX_PAIR_TABLE_BYTES:
        T += 1
    return T


def check_pair_table_size(T, n_classes, per_class=False):
    """The bytes of the pair table for ``T`` members and ``n_classes`` classes, refused above the limit.

    Parameters
    ----------
    T : int
    n_classes : int
    per_class : bool, default=False
        One table per class (a :class:`PairPrior`) instead of one for all.

    Returns
    -------
    int
        :func:`pair_table_nbytes`.

    Raises
    ------
    ValueError
        Above :data:`MAX_PAIR_TABLE_BYTES`, naming the largest ``T`` and what to use instead.

    Examples
    --------
    >>> from ensvote.manyclass import check_pair_table_size
    >>> check_pair_table_size(21, 4)
    8624
    >>> check_pair_table_size(2001, 4)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
        ...
    ValueError: the many-class urn table for T=2001 members takes ... MiB, above the limit ...
    """
    nbytes = pair_table_nbytes(T, n_classes, per_class)
    if nbytes > MAX_PAIR_TABLE_BYTES:
        limit = f"MAX_PAIR_TABLE_BYTES = {MAX_PAIR_TABLE_BYTES / 2**20:.0f} MiB"
        t_max = max_pair_table_T(n_classes, per_class)
        if per_class:
            what = (f"the out-of-bag pair prior needs one table per class: {n_classes} classes x T={T} "
                    f"members take {nbytes / 2**20:.0f} MiB, above the limit {limit} (T <= {t_max} for "
                    f"{n_classes} classes); use prior='uniform' (one table for all classes, up to "
                    f"T = {max_pair_table_T(n_classes)}), a smaller ensemble, or rule='infinite' "
                    "(InfiniteRule needs no table)")
        else:
            what = (f"the many-class urn table for T={T} members takes {nbytes / 2**20:.0f} MiB, above the "
                    f"limit {limit} (T <= {t_max}); use a smaller ensemble or rule='infinite' "
                    "(InfiniteRule needs no table)")
        raise ValueError(what)
    return nbytes


class PairTable:
    """``f`` for every ``(t, t_c, t_j)``: the chance that rival ``j`` ends ahead of leader ``c``.

    Attributes
    ----------
    values : ndarray of float32, shape (k, 2, size)
        ``values[g, w, base[t, a] + b]`` for leader-count ``a``, rival-count
        ``b <= min(a, t - a)`` and ``t`` votes seen; ``w = 0``: the rival has a
        higher index than the leader (it must end strictly ahead), ``w = 1``: a
        lower index (ending level is enough).  ``g`` is the leader's class for a
        :class:`PairPrior` (``k = l``), else 0 (``k = 1``).  Values are rounded
        *up* to float32, so the bound stays on the safe side.
    base : ndarray of int64, shape (T + 1, T + 1)
    T, n_classes : int

    Examples
    --------
    Built by :func:`pair_table`:

    >>> import numpy as np
    >>> from ensvote.manyclass import pair_table
    >>> tab = pair_table(21, 4)
    >>> tab.T, tab.n_classes, tab.values.shape
    (21, 4, (1, 2, 1078))
    >>> np.round(tab.confidence([[8, 1, 1, 0], [4, 3, 2, 1]]), 4)
    array([0.9995, 0.6181])
    """

    def __init__(self, values, base, T, n_classes):
        self.values, self.base, self.T, self.n_classes = values, base, T, n_classes
        values.setflags(write=False)
        base.setflags(write=False)

    @property
    def nbytes(self):
        """Bytes of the arrays held (``values`` and ``base``).

        Examples
        --------
        >>> from ensvote.manyclass import pair_table
        >>> pair_table(21, 4).nbytes
        12496
        """
        return int(self.values.nbytes + self.base.nbytes)

    def failure_sum(self, counts):
        """``sum_j f`` over the rivals of the current leader, for int counts of shape ``(..., l)``.

        Parameters
        ----------
        counts : ndarray of int, shape (..., l)
            Vote counts, not validated (each total at most ``T``).

        Returns
        -------
        ndarray of float, shape (...)

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote.manyclass import pair_table
        >>> np.round(pair_table(21, 4).failure_sum(np.array([[8, 1, 1, 0], [4, 3, 2, 1]])), 4)
        array([0.0005, 0.3819])
        """
        t = np.asarray(counts)
        l = t.shape[-1]
        flat = t.reshape(-1, l)
        n = flat.shape[0]
        if n == 0:
            return np.zeros(t.shape[:-1])
        s = flat.sum(axis=1)
        c = np.argmax(flat, axis=1)
        a = flat[np.arange(n), c]
        j = np.arange(l)
        lead = j[None, :] == c[:, None]
        size = self.values.shape[-1]
        cls = c if self.values.shape[0] > 1 else 0
        off = (np.asarray(cls) * 2)[..., None] * size + (j[None, :] < c[:, None]) * size
        idx = off + self.base[s, a][:, None] + np.where(lead, 0, flat)
        vals = self.values.reshape(-1).take(idx).astype(np.float64)
        vals[lead] = 0.0
        return vals.sum(axis=1).reshape(t.shape[:-1])

    def confidence(self, counts):
        """``max(0, 1 - sum_j f)`` for the current majority.

        Parameters
        ----------
        counts : ndarray of int, shape (..., l)
            Vote counts, not validated (each total at most ``T``).

        Returns
        -------
        ndarray of float, shape (...)

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote.manyclass import pair_table
        >>> np.round(pair_table(21, 4).confidence(np.array([[8, 1, 1, 0], [4, 3, 2, 1]])), 4)
        array([0.9995, 0.6181])
        """
        return np.maximum(0.0, 1.0 - self.failure_sum(counts))


def _round_up_f32(x):
    y = x.astype(np.float32)
    low = y.astype(np.float64) < x
    y[low] = np.nextafter(y[low], np.float32(np.inf))
    return y


def _level_index(s):
    """Grid positions ``(a, b)`` of level ``s`` kept in the table (``b <= min(a, s - a)``), in layout order."""
    a = np.arange(s + 1)[:, None]
    b = np.arange(s + 1)[None, :]
    return np.nonzero(b <= np.minimum(a, s - a))


def _store(out, base, s, vals):
    """Put level ``s`` (``vals[k, 2, n]``, in the order of :func:`_level_index`) into the layout, rounded up."""
    out[:, :, base[s, 0]:base[s, 0] + vals.shape[-1]] = _round_up_f32(vals)


def _uniform_values(T, l, base, size):
    """Dirichlet-multinomial recursion (Pólya urn with weights ``t_c+1, t_j+1, rest + l - 2``)."""
    out = np.empty((1, 2, size), dtype=np.float32)
    a = np.arange(T + 1)[:, None].astype(float)
    b = np.arange(T + 1)[None, :].astype(float)
    G = np.stack([(b > a), (b >= a)]).astype(float)  # level T: the rival is ahead at the end
    _store(out, base, T, G[None][(slice(None), slice(None)) + _level_index(T)])
    for s in range(T - 1, -1, -1):
        aa, bb = a[: s + 1], b[:, : s + 1]
        rest = np.maximum(s - aa - bb + l - 2, 0.0)
        G = ((aa + 1) * G[:, 1: s + 2, : s + 1] + (bb + 1) * G[:, : s + 1, 1: s + 2]
             + rest * G[:, : s + 1, : s + 1]) / (s + l)
        _store(out, base, s, G[None][(slice(None), slice(None)) + _level_index(s)])
    return out


def _prior_values(T, probs, base, size):
    """Eq. 3 per leader class for a prior on the reduced urn ``(T_c, T_j, T - T_c - T_j)``.

    Backward induction on the number of votes seen (the urn's recursion,
    :func:`ensvote._urn.backward_levels`, on the three colours leader, rival
    and the rest): the probability ``Q`` of a reduced count vector
    ``(a, b, o)`` under the prior and its part ``R`` with the rival ahead at
    the end;
    ``f = R / Q`` (1 where ``Q = 0``: a vote vector the prior rules out never stops).
    """
    k = probs.shape[0]
    out = np.empty((k, 2, size), dtype=np.float32)
    a = np.arange(T + 1)[:, None]
    b = np.arange(T + 1)[None, :]
    p = probs.astype(float)
    # X[:, 0] = Q, X[:, 1] = R (rival strictly ahead at the end), X[:, 2] = R (rival level or ahead);
    # level T is the urn itself.  Q_s sums to 1 over (a, b) at every level (it is the law of the
    # reduced counts after s votes), so no rescaling is needed against underflow.
    X = np.stack([p, p * (b > a), p * (b >= a)], axis=1)

    def ratio(X, s):
        ia, ib = _level_index(s)
        q, r = X[:, 0:1, ia, ib], X[:, 1:3, ia, ib]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(q > 0, np.minimum(r / q, 1.0), 1.0)

    for s, _, Xs, _ in backward_levels(X, 3, log=False):
        _store(out, base, s, ratio(Xs, s))
    return out


def pair_table(T, n_classes, prior=None):
    """The pair table for ``T`` members and ``n_classes`` classes (cached).

    Parameters
    ----------
    T : int
    n_classes : int >= 2
    prior : None or PairPrior
        None: the uniform prior (one table, a certified lower bound on Eq. 3);
        a :class:`PairPrior`: one table per class.

    Returns
    -------
    PairTable

    Raises
    ------
    ValueError
        If the table would exceed :data:`MAX_PAIR_TABLE_BYTES`, or the prior
        is for another ``T`` or number of classes.
    TypeError
        ``prior`` is neither None nor a :class:`PairPrior`.

    Examples
    --------
    >>> from ensvote.manyclass import pair_table
    >>> tab = pair_table(21, 4)
    >>> tab.T, tab.n_classes
    (21, 4)
    >>> pair_table(21, 4) is tab
    True
    """
    T = check_positive_int(T, name="T")
    l = check_positive_int(n_classes, name="n_classes", minimum=2)
    if prior is not None:
        if not isinstance(prior, PairPrior):
            raise TypeError(f"prior must be None or a PairPrior, got {type(prior).__name__}")
        if prior.T != T or prior.n_classes != l:
            raise ValueError(f"the PairPrior is for T={prior.T} and {prior.n_classes} classes, "
                             f"not T={T} and {l}")
    key = (T, l, None if prior is None else prior.key)
    hit = _SMALL_TABLES.get(key)
    if hit is None:
        hit = _TABLES.get(key)
    if hit is not None:
        return hit
    check_pair_table_size(T, l, prior is not None)
    width, size = _layout_size(T)
    base = (np.cumsum(width.ravel()) - width.ravel()).reshape(width.shape).astype(np.int64)
    if prior is None:
        vals = _uniform_values(T, l, base, size)
    else:
        vals = _prior_values(T, prior.probs, base, size)
    tab = PairTable(vals, base, T, l)
    if tab.nbytes * _SMALL_TABLES.maxsize <= MAX_PAIR_TABLE_BYTES:
        _SMALL_TABLES[key] = tab
    else:
        _TABLES[key] = tab
    return tab


def urn_confidence_bound(counts, T, prior=None):
    r"""Union-bound confidence that the current majority is the full ``T``-member majority.

    With ``c`` the current majority (lowest index on ties) and ``t`` votes
    seen, the vote ends with another class ``j`` in front exactly when some
    rival ``j`` ends with more votes than ``c`` (or as many, if ``j < c``), so

    .. math:: P^*(\mathbf t, T) = 1 - P\Big(\bigcup_{j \ne c} E_j\Big)
              \ge 1 - \sum_{j \ne c} P(E_j \mid t, t_c, t_j).

    With ``prior=None`` (uniform prior over the urn) ``P(E_j)`` is exact, and the
    value returned is a lower bound on Eq. 3 (:func:`ensvote.finite_confidence`),
    equal to it for two classes.  With a :class:`PairPrior`, ``P(E_j)`` is Eq. 3
    for the leader-rival pair under that prior (see the module docstring).

    Parameters
    ----------
    counts : array_like of int, shape (..., l)
    T : int
    prior : None or PairPrior

    Returns
    -------
    ndarray of float, shape (...)
        ``max(0, 1 - sum_j P(E_j))``.

    Raises
    ------
    ValueError, TypeError
        Bad counts or ``T``, a prior that does not match, or a table above
        :data:`MAX_PAIR_TABLE_BYTES`.

    Examples
    --------
    Four classes, ``T = 21``: the bound is tight for a clear leader and lower
    than Eq. 3 (0.6797, :func:`urn_confidence_exact`) for a close race:

    >>> import numpy as np
    >>> from ensvote.manyclass import urn_confidence_bound
    >>> np.round(urn_confidence_bound([[8, 1, 1, 0], [4, 3, 2, 1]], T=21), 4)
    array([0.9995, 0.6181])
    """
    T = check_positive_int(T, name="T")
    t = check_counts(counts, max_sum=T, max_sum_desc=f"the ensemble size T={T}")
    return pair_table(T, t.shape[-1], prior).confidence(t)


# --------------------------------------------------------------------------
# exact Eq. 3, uniform prior, any number of classes
# --------------------------------------------------------------------------
def _exact_one(t, T):
    l = len(t)
    s = int(t.sum())
    n = T - s
    if n == 0:
        return 1.0
    c = int(np.argmax(t))
    alpha = t + 1.0
    # R_k ~ NegBin(alpha_k, q) independent; given sum R = n they are Dirichlet-multinomial(n, alpha)
    q = n / (n + s + l)
    r = np.arange(n + 1)

    def nb(al):
        return np.exp(special.gammaln(r + al) - special.gammaln(al) - special.gammaln(r + 1.0)
                      + al * np.log1p(-q) + r * np.log(q))

    m = t[c] + r  # final count of the leader, one row per value of R_c
    P = np.zeros((n + 1, n + 1))
    P[:, 0] = 1.0  # product over no rivals yet
    for j in range(l):
        if j == c:
            continue
        cap = m - t[j] - (1 if j < c else 0)  # R_j <= cap keeps c ahead of j
        g = np.where(r[None, :] <= cap[:, None], nb(alpha[j])[None, :], 0.0)
        new = np.zeros_like(P)
        for k in range(n + 1):
            new[:, k:] += P[:, : n + 1 - k] * g[:, k: k + 1]
        P = new
    win = float(np.sum(nb(alpha[c]) * P[r, n - r]))
    total = float(np.exp(special.gammaln(n + alpha.sum()) - special.gammaln(alpha.sum())
                         - special.gammaln(n + 1.0) + alpha.sum() * np.log1p(-q) + n * np.log(q)))
    return min(1.0, win / total)


def urn_confidence_exact(counts, T):
    r"""Eq. 3 under the uniform prior, exactly, for any number of classes.

    By Prop. 3 the unseen votes :math:`\mathbf R` follow a Dirichlet-multinomial
    with parameters :math:`\mathbf t + 1`; equivalently, independent negative
    binomials :math:`R_k \sim \mathrm{NB}(t_k + 1, q)` conditioned on
    :math:`\sum_k R_k = T - t` (for any ``q``).  For each final count ``m`` of the
    leader, the chance that every rival stays below it is the coefficient of
    :math:`x^{T - t - (m - t_c)}` in the product of the rivals' truncated
    generating functions.  Cost ``O(l (T - t)^3)`` per row: a reference for
    tests and for the book, not a stopping rule.

    Parameters
    ----------
    counts : array_like of int, shape (..., l)
    T : int

    Returns
    -------
    ndarray of float, shape (...)

    Raises
    ------
    ValueError, TypeError
        Bad counts or ``T``.

    Examples
    --------
    >>> import numpy as np
    >>> from ensvote import finite_confidence
    >>> from ensvote.manyclass import urn_confidence_exact
    >>> np.round(urn_confidence_exact([[8, 1, 1, 0], [4, 3, 2, 1]], T=21), 4)
    array([0.9995, 0.6797])
    >>> np.round(finite_confidence([[8, 1, 1, 0], [4, 3, 2, 1]], T=21), 4)
    array([0.9995, 0.6797])
    """
    T = check_positive_int(T, name="T")
    t = check_counts(counts, max_sum=T, max_sum_desc=f"the ensemble size T={T}")
    flat = t.reshape(-1, t.shape[-1])
    out = np.array([_exact_one(row, T) for row in flat])
    return out.reshape(t.shape[:-1])


# --------------------------------------------------------------------------
# a prior from out-of-bag votes that scales with the number of classes
# --------------------------------------------------------------------------
class PairPrior:
    """Prior on the leader-rival pairs of the urn (beyond Soto et al. 2016).

    ``probs[c, x, y]`` is the probability that class ``c`` gets ``x`` of the
    ``T`` votes and a rival of ``c`` (pooled over the rivals) gets ``y``; for two
    classes ``x + y = T`` and ``probs[0, x, T - x]`` is the paper's ``P(T_0 = x)``.
    Built by :func:`ensvote.priors.pair_oob_prior`; used by :class:`ensvote.UrnRule`.

    Parameters
    ----------
    probs : array_like, shape (l, T + 1, T + 1)
        Non-negative, zero where ``x + y > T`` (for two classes: wherever
        ``x + y != T``), each class's slice summing to 1.

    Raises
    ------
    ValueError
        ``probs`` of the wrong shape, negative or not finite, non-zero
        outside the triangle, or a class's slice not summing to 1.

    Examples
    --------
    >>> from ensvote import UrnRule
    >>> from ensvote.manyclass import PairPrior
    >>> prior = PairPrior.uniform(21, 4)
    >>> prior, prior.probs.shape
    (PairPrior(n_classes=4, T=21), (4, 22, 22))
    >>> UrnRule(T=21, prior=prior).stop([[8, 0, 0, 0], [3, 2, 1, 0]])
    array([ True, False])
    """

    def __init__(self, probs):
        p = np.asarray(probs, dtype=float)
        if p.ndim != 3 or p.shape[0] < 2 or p.shape[1] != p.shape[2] or p.shape[1] < 2:
            raise ValueError(f"probs must have shape (n_classes >= 2, T + 1, T + 1), got {p.shape}")
        if not np.all(np.isfinite(p)) or np.any(p < 0):
            raise ValueError("probs must be finite and non-negative")
        T = p.shape[1] - 1
        x = np.arange(T + 1)
        tot = x[:, None] + x[None, :]
        outside = tot != T if p.shape[0] == 2 else tot > T
        if np.any(p[:, outside] != 0):
            raise ValueError("probs must be zero where x + y > T (two classes: where x + y != T)")
        sums = p.sum(axis=(1, 2))
        if not np.allclose(sums, 1.0, rtol=0, atol=1e-9):
            raise ValueError(f"each class's pair prior must sum to 1, got sums {sums}")
        self.probs = p / sums[:, None, None]
        self.probs.setflags(write=False)
        h = hashlib.sha256(np.ascontiguousarray(self.probs).tobytes())
        self.key = h.hexdigest()

    @property
    def T(self):
        """Ensemble size the prior is over.

        Examples
        --------
        >>> from ensvote.manyclass import PairPrior
        >>> PairPrior.uniform(11, 3).T
        11
        """
        return self.probs.shape[1] - 1

    @property
    def n_classes(self):
        """Number of classes ``l``.

        Examples
        --------
        >>> from ensvote.manyclass import PairPrior
        >>> PairPrior.uniform(11, 3).n_classes
        3
        """
        return self.probs.shape[0]

    def __repr__(self):
        return f"PairPrior(n_classes={self.n_classes}, T={self.T})"

    @classmethod
    def uniform(cls, T, n_classes):
        """The pair marginals of the uniform prior over the urn: ``P(x, y) ∝ C(T - x - y + l - 3, l - 3)``.

        Parameters
        ----------
        T : int >= 1
            Ensemble size.
        n_classes : int >= 2
            Number of classes ``l``.

        Returns
        -------
        PairPrior

        Examples
        --------
        For two classes the pairs are ``(x, T - x)``, each with probability
        ``1 / (T + 1)``:

        >>> import numpy as np
        >>> from ensvote.manyclass import PairPrior
        >>> p = PairPrior.uniform(5, 2)
        >>> np.round(p.probs[0, np.arange(6), 5 - np.arange(6)], 4)
        array([0.1667, 0.1667, 0.1667, 0.1667, 0.1667, 0.1667])
        """
        T = check_positive_int(T, name="T")
        l = check_positive_int(n_classes, name="n_classes", minimum=2)
        x = np.arange(T + 1)
        rest = T - x[:, None] - x[None, :]
        if l == 2:
            w = (rest == 0).astype(float)
        else:
            with np.errstate(invalid="ignore"):
                lw = special.gammaln(rest + l - 2.0) - special.gammaln(rest + 1.0) - special.gammaln(l - 2.0)
            w = np.where(rest >= 0, np.exp(lw - lw[0, 0]), 0.0)
        w /= w.sum()
        return cls(np.broadcast_to(w, (l,) + w.shape).copy())
