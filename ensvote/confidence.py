"""Confidence that a partial majority vote equals the final one.

Two models, one per paper:

* :func:`infinite_confidence` and :func:`infinite_confidence_exact` —
  Hernández-Lobato, Martínez-Muñoz & Suárez (2011): the class probabilities
  ``p`` of one ensemble member have a Dirichlet posterior (Eq. 5); the target
  is the majority of an *infinite* ensemble, ``argmax p`` (Eq. 6–8).
* :func:`finite_confidence` — Soto, Suárez & Martínez-Muñoz (2016):
  the ``T`` members are marbles in an urn, ``t`` of them drawn without
  replacement (hypergeometric likelihood, Eq. 1); the target is the majority
  of all ``T`` (Eq. 3), under a uniform or an arbitrary prior on the urn.

Conventions used throughout the package
---------------------------------------
``counts`` holds integer vote counts per class, shape ``(..., l)`` with
``l >= 2``; every function vectorises over the leading axes.

**Tie policy.**  The *current majority* is ``argmax(counts)`` with ties going
to the lowest class index (``numpy.argmax``); the same rule decides the *final*
majority of a finite ensemble whose ``T`` votes end tied (possible only for
even ``T`` or ``l > 2``).  In the infinite limit ties have probability zero.
A tie between the leading classes therefore gives the lower index, and the
confidence reported is the probability that *this* class wins: e.g.
``infinite_confidence([3, 3]) == 0.5``.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from ._urn import log_split, ratio_from_logs
from ._utils import check_random_state
from ._validation import (MAX_ENTRIES, MAX_T, check_counts, check_label, check_nonnegative_float, check_positive_int,
                          check_probability, check_size, power_exceeds, prior_argument)

#: What a ``prior`` argument may be: None or "uniform", ``P(T_0 = k)`` for two classes, ``(support, probs)``
#: (see :func:`check_prior`).
PriorLike = None | Literal["uniform"] | ArrayLike | tuple[ArrayLike, ArrayLike]

__all__ = [
    "soft_lead_needed",
    "current_majority",
    "infinite_confidence",
    "infinite_confidence_exact",
    "finite_confidence",
    "uniform_prior",
    "check_prior",
    "Prior",
    "compositions",
]


def current_majority(counts: ArrayLike) -> NDArray[np.intp]:
    """Index of the current majority class (lowest index on ties).

    Parameters
    ----------
    counts : array_like of int, shape (..., l)
        Votes per class, ``l >= 2``.

    Returns
    -------
    ndarray of int, shape (...)
        ``argmax(counts)`` along the last axis.

    Raises
    ------
    ValueError, TypeError
        Counts that are not non-negative integers over at least two classes.

    Examples
    --------
    >>> from ensvote import current_majority
    >>> current_majority([[3, 1], [2, 2], [1, 4]])
    array([0, 0, 1])
    """
    return np.argmax(check_counts(counts), axis=-1)


def _label_or_majority(t, label):
    lab = check_label(label, t.shape[-1], shape=t.shape[:-1])
    if lab is None:
        return np.argmax(t, axis=-1)
    return np.broadcast_to(lab, t.shape[:-1]).astype(np.int64)


# --------------------------------------------------------------------------
# Hernández-Lobato et al. (2011): the infinite ensemble
# --------------------------------------------------------------------------
def infinite_confidence(counts: ArrayLike, label: ArrayLike | None = None) -> NDArray[np.float64]:
    r"""Confidence that ``label`` is the infinite ensemble's majority (Hernández-Lobato et al. 2011).

    For two classes this is Eq. 7 exactly,
    :math:`P(\hat y_\infty = y_i \mid \mathbf t) = I_{1/2}(t_j + 1, t_i + 1)`;
    for ``l > 2`` it is the lower bound of Eq. 8,
    :math:`L(y_i \mid \mathbf t) = \prod_{j \ne i} I_{1/2}(t_j + 1, t_i + 1)`,
    where :math:`I_x(a, b)` is the regularised incomplete beta function
    (:func:`scipy.special.betainc`).  The product is accumulated in log space.

    Parameters
    ----------
    counts : array_like of int, shape (..., l)
        Votes seen so far per class.
    label : int or array_like of int, optional
        Class whose confidence is wanted; default the current majority.

    Returns
    -------
    ndarray of float, shape (...)
        Values in ``[0, 1]``.  With no votes (all counts 0) this is
        ``2 ** -(l - 1)``.

    Raises
    ------
    ValueError, TypeError
        Bad counts (negative, non-integer, fewer than two classes) or a label
        outside ``0..l-1``.

    Examples
    --------
    Seven votes to three, and a tie (which goes to class 0, with confidence 1/2):

    >>> import numpy as np
    >>> from ensvote import infinite_confidence
    >>> np.round(infinite_confidence([[7, 3], [3, 3]]), 4)
    array([0.8867, 0.5   ])

    Three classes (the lower bound of Eq. 8), for the leader and for class 1:

    >>> float(np.round(infinite_confidence([6, 2, 1]), 4))
    0.8782
    >>> float(np.round(infinite_confidence([6, 2, 1], label=1), 4))
    0.0618
    """
    t = check_counts(counts)
    i = _label_or_majority(t, label)
    ti = np.take_along_axis(t, i[..., None], axis=-1)
    with np.errstate(divide="ignore"):
        logf = np.log(special.betainc(t + 1.0, ti + 1.0, 0.5))
    others = np.arange(t.shape[-1]) != i[..., None]
    return np.exp(np.sum(np.where(others, logf, 0.0), axis=-1))


def infinite_confidence_exact(counts: ArrayLike, label: ArrayLike | None = None, *, epsabs: float = 1e-13,
                              epsrel: float = 1e-11) -> NDArray[np.float64]:
    r"""Exact :math:`P(\hat y_\infty = y_i \mid \mathbf t)` (Eq. 6 of Hernández-Lobato et al. 2011) for any ``l``.

    Eq. 6 asks for :math:`P(p_i > p_j\ \forall j \ne i)` under the Dirichlet
    posterior :math:`\mathrm{Dir}(t_1 + 1, \dots, t_l + 1)` (Eq. 5).  Writing
    :math:`p_k = G_k / \sum_m G_m` with independent
    :math:`G_k \sim \mathrm{Gamma}(t_k + 1)` turns the ``(l-1)``-dimensional
    integral into a one-dimensional one,

    .. math:: P = \int_0^\infty g_{t_i+1}(x) \prod_{j \ne i} P(t_j + 1, x)\, dx,

    with :math:`g_a` the Gamma density and :math:`P(a, x)` the regularised
    lower incomplete gamma function.  It is evaluated with
    :func:`scipy.integrate.quad` over the Gamma quantiles ``1e-18 .. 1 - 1e-18``
    of :math:`G_i` (the neglected mass is below ``2e-18``).

    Accuracy: absolute error below ``1e-10`` (tested against Eq. 7 for
    ``l = 2`` and against an ``mpmath`` quadrature of the Dirichlet integral
    for ``l = 3, 4``).  Cost grows with the number of rows, not with ``l``.

    Parameters
    ----------
    counts : array_like of int, shape (..., l)
    label : int or array_like of int, optional
        Class of interest; default the current majority.
    epsabs, epsrel : float >= 0
        Tolerances passed to :func:`scipy.integrate.quad` (finite; with
        ``epsabs=0``, ``epsrel`` must be at least ``50 * machine epsilon``).

    Returns
    -------
    ndarray of float, shape (...)
        The probability, clipped to ``[0, 1]``.

    Raises
    ------
    ValueError, TypeError
        Bad counts or label (as for :func:`infinite_confidence`), or bad
        tolerances.

    Examples
    --------
    For two classes it equals Eq. 7; for three it is slightly above the
    bound of :func:`infinite_confidence` (0.8782 here):

    >>> import numpy as np
    >>> from ensvote import infinite_confidence_exact
    >>> np.round(infinite_confidence_exact([[7, 3]]), 4)
    array([0.8867])
    >>> float(np.round(infinite_confidence_exact([6, 2, 1]), 4))
    0.8861
    """
    epsabs = check_nonnegative_float(epsabs, name="epsabs")
    epsrel = check_nonnegative_float(epsrel, name="epsrel")
    if epsabs == 0.0 and epsrel < 50 * np.finfo(float).eps:
        raise ValueError(f"with epsabs=0, epsrel must be at least 50 * machine epsilon ({50 * np.finfo(float).eps:.1e}) "
                         f"for the quadrature to reach it, got {epsrel}")
    t = check_counts(counts)
    i = _label_or_majority(t, label)
    flat_t = t.reshape(-1, t.shape[-1])
    flat_i = i.reshape(-1)
    out = np.empty(flat_t.shape[0])
    for r, (row, k) in enumerate(zip(flat_t, flat_i)):
        out[r] = _dirichlet_argmax_prob(tuple(int(v) for v in row), int(k), epsabs, epsrel)
    return np.clip(out, 0.0, 1.0).reshape(t.shape[:-1])


@lru_cache(maxsize=4096)
def _dirichlet_argmax_prob(row, k, epsabs, epsrel):
    a = np.asarray(row, dtype=float) + 1.0
    ai = a[k]
    aj = np.delete(a, k)
    from scipy import integrate, stats  # imported on first use: they cost a noticeable part of `import ensvote`

    lo = stats.gamma.ppf(1e-18, ai)
    hi = stats.gamma.isf(1e-18, ai)

    def integrand(x):
        with np.errstate(divide="ignore"):
            logv = stats.gamma.logpdf(x, ai) + np.sum(np.log(special.gammainc(aj, x)))
        return np.exp(logv)

    # split at the mode so quad sees the peak
    mode = max(ai - 1.0, lo)
    pts = sorted({lo, mode, hi})
    total = 0.0
    for x0, x1 in zip(pts[:-1], pts[1:]):
        if x1 > x0:
            val, _ = integrate.quad(integrand, x0, x1, epsabs=epsabs, epsrel=epsrel, limit=200)
            total += val
    return total


# --------------------------------------------------------------------------
# Soto et al. (2016): the urn (finite ensemble)
# --------------------------------------------------------------------------
@lru_cache(maxsize=64)
def _compositions_cached(n, l):
    if l == 1:
        return np.array([[n]], dtype=np.int64)
    parts = []
    for first in range(n + 1):
        rest = _compositions_cached(n - first, l - 1)
        parts.append(np.column_stack([np.full(len(rest), first, dtype=np.int64), rest]))
    out = np.concatenate(parts)
    out.setflags(write=False)
    return out


def compositions(n: int, l: int) -> NDArray[np.int64]:
    """All vectors of ``l`` non-negative integers summing to ``n``.

    There are ``C(n + l - 1, l - 1)`` of them; rows are in lexicographic order.

    Parameters
    ----------
    n : int >= 0
        The sum (e.g. an ensemble size ``T``).
    l : int >= 1
        Number of parts (classes).

    Returns
    -------
    ndarray of int, shape (C(n + l - 1, l - 1), l), read-only

    Raises
    ------
    ValueError
        ``n`` or ``l`` out of range, or more rows than the array size limit.

    Examples
    --------
    Every way three classes can share two votes:

    >>> from ensvote import compositions
    >>> compositions(2, 3)
    array([[0, 0, 2],
           [0, 1, 1],
           [0, 2, 0],
           [1, 0, 1],
           [1, 1, 0],
           [2, 0, 0]])
    """
    n = check_positive_int(n, name="n", minimum=0)
    l = check_positive_int(l, name="l", minimum=1)
    rows = _n_compositions(n, l)
    check_size(rows * l, what=f"compositions({n}, {l}) ({rows:,} rows of {l})")
    return _compositions_cached(n, l)


def _n_compositions(n, l):
    return int(special.comb(n + l - 1, l - 1, exact=True))


def uniform_prior(T: int, n_classes: int = 2) -> NDArray[np.float64] | tuple[NDArray[np.int64], NDArray[np.float64]]:
    """The uniform prior over urn contents, written out explicitly.

    Every vector ``(T_1, ..., T_l)`` of non-negative integers summing to ``T``
    gets probability ``1 / C(T + l - 1, l - 1)``.  ``finite_confidence(...,
    prior=None)`` uses this prior through a closed form; this explicit version
    exists so the two can be compared (Prop. 3 of Soto et al. 2016).

    Parameters
    ----------
    T : int >= 1
        Ensemble size.
    n_classes : int >= 2, default=2
        Number of classes ``l``.

    Returns
    -------
    prior : ndarray of shape (T + 1,) for two classes, else ``(support, probs)``
        See :func:`check_prior` for the accepted forms.

    Raises
    ------
    ValueError
        ``T`` or ``n_classes`` out of range, or a support too large to write out.

    Examples
    --------
    >>> import numpy as np
    >>> from ensvote import uniform_prior
    >>> uniform_prior(4)
    array([0.2, 0.2, 0.2, 0.2, 0.2])
    >>> support, probs = uniform_prior(2, n_classes=3)
    >>> support.shape, np.round(probs, 4)
    ((6, 3), array([0.1667, 0.1667, 0.1667, 0.1667, 0.1667, 0.1667]))
    """
    T = check_positive_int(T, name="T")
    n_classes = check_positive_int(n_classes, name="n_classes", minimum=2)
    m = T + 1 if n_classes == 2 else _n_compositions(T, n_classes)
    check_size(m * (1 if n_classes == 2 else n_classes + 1),
               what=f"uniform_prior({T}, {n_classes}) ({m:,} vote vectors)")
    if n_classes == 2:
        return np.full(T + 1, 1.0 / (T + 1))
    support = compositions(T, n_classes)
    return support, np.full(len(support), 1.0 / len(support))


class Prior(NamedTuple):
    """A prior over the urn's content, as :func:`check_prior` returns it: the one form every module uses.

    A named tuple ``(support, probs)``: ``support, probs = prior`` unpacks it,
    and it is accepted wherever a prior ``(support, probs)`` is.

    Attributes
    ----------
    support : ndarray of int64, shape (m, l)
        Distinct vote vectors, each summing to ``T``.
    probs : ndarray of float, shape (m,)
        Their probabilities (finite, non-negative, summing to 1).

    Examples
    --------
    >>> from ensvote.confidence import check_prior
    >>> prior = check_prior([0.5, 0.0, 0.5], T=2)
    >>> prior.T, prior.n_classes, len(prior.key)
    (2, 2, 64)
    >>> support, probs = prior
    >>> probs
    array([0.5, 0. , 0.5])
    """

    support: NDArray[np.int64]
    probs: NDArray[np.float64]

    @property
    def T(self) -> int:
        """The ensemble size the prior is over.

        Examples
        --------
        >>> from ensvote.confidence import check_prior
        >>> check_prior(None, T=7, n_classes=3).T
        7
        """
        return int(self.support[0].sum())

    @property
    def n_classes(self) -> int:
        """The number of classes ``l``.

        Examples
        --------
        >>> from ensvote.confidence import check_prior
        >>> check_prior(None, T=7, n_classes=3).n_classes
        3
        """
        return int(self.support.shape[1])

    @property
    def key(self) -> str:
        """A hash of the support and the probabilities: the cache key of what is built for the prior.

        Examples
        --------
        >>> from ensvote.confidence import check_prior
        >>> check_prior([0.25] * 4, T=3).key == check_prior(None, T=3).key
        True
        """
        h = hashlib.sha256()
        h.update(np.ascontiguousarray(self.support, dtype=np.int64).tobytes())
        h.update(np.ascontiguousarray(self.probs, dtype=np.float64).tobytes())
        return h.hexdigest()


def _prior_size(prior):
    """The ensemble size ``T`` a prior array or ``(support, probs)`` is over."""
    if isinstance(prior, tuple):
        if len(prior) != 2:
            raise ValueError("a prior given as a tuple must be (support, probs)")
        support = np.asarray(prior[0])
        if support.ndim != 2 or len(support) == 0 or support.dtype.kind not in "iu":
            raise ValueError(f"prior support must be an int array of shape (m, n_classes), got {support!r:.80}")
        T = int(support[0].sum())
    else:
        p = np.asarray(prior)
        if p.ndim != 1:
            raise ValueError(f"a two-class prior must be a 1-D array of length T + 1, got shape {p.shape}")
        T = len(p) - 1
    if T < 1:
        raise ValueError("prior must describe an ensemble of at least one member")
    return T


def check_prior(prior, T=None, n_classes=None):
    """Validate a prior over the urn's content and return ``(support, probs)``.

    Accepted forms
    --------------
    * ``None`` or ``"uniform"``: the uniform prior, written out by
      :func:`uniform_prior` (``n_classes`` classes, default 2);
    * two classes: a 1-D array of length ``T + 1`` with ``prior[k] = P(T_0 = k)``,
      the probability that ``k`` of the ``T`` members vote for class 0;
    * any number of classes: a pair ``(support, probs)`` where ``support`` is an
      int array of shape ``(m, l)`` whose rows are distinct vote vectors summing
      to ``T`` and ``probs`` has shape ``(m,)``.

    Probabilities must be finite, non-negative and sum to 1 (within 1e-9).

    Parameters
    ----------
    prior : None, "uniform", array of shape (T + 1,) or (support, probs)
        The prior, in one of the forms above.
    T : int >= 1, optional
        Ensemble size the prior is over; by default the size the prior
        describes (required for the uniform prior).
    n_classes : int, optional
        Number of classes the prior must have (default: any; 2 for the
        uniform prior).

    Returns
    -------
    Prior
        ``(support, probs)``: ``support`` of int64, shape ``(m, l)``;
        ``probs`` of float, shape ``(m,)``.

    Raises
    ------
    ValueError, TypeError
        A prior of the wrong shape or class count, rows not summing to ``T``,
        repeated rows, or probabilities that are not finite, non-negative and
        summing to 1.

    Examples
    --------
    A two-class prior over ``T = 3`` members, ``P(T_0 = k)`` for ``k = 0..3``:

    >>> import numpy as np
    >>> from ensvote.confidence import check_prior
    >>> support, probs = check_prior(np.full(4, 0.25), T=3)
    >>> support
    array([[0, 3],
           [1, 2],
           [2, 1],
           [3, 0]])
    >>> probs
    array([0.25, 0.25, 0.25, 0.25])
    """
    if T is None:
        if prior_argument(prior) is None:
            raise ValueError("the uniform prior needs the ensemble size T")
        T = _prior_size(prior)
    T = check_positive_int(T, name="T")
    if prior_argument(prior) is None:
        return check_prior(uniform_prior(T, 2 if n_classes is None else n_classes), T, n_classes)
    if isinstance(prior, tuple):
        if len(prior) != 2:
            raise ValueError("a prior given as a tuple must be (support, probs)")
        support = np.asarray(prior[0])
        probs = _prior_probs(prior[1])
        if support.ndim != 2 or support.shape[1] < 2:
            raise ValueError(f"prior support must have shape (m, n_classes >= 2), got {support.shape}")
        if support.dtype.kind not in "iu":
            raise TypeError("prior support must hold integer vote vectors")
        if probs.shape != (support.shape[0],):
            raise ValueError(
                f"prior probs must have shape ({support.shape[0]},) to match the support, got {probs.shape}"
            )
        if np.any(support < 0) or np.any(support > T) or np.any(support.sum(axis=1) != T):
            raise ValueError(f"every prior support row must be non-negative and sum to T={T}")
        if _has_repeated_rows(support, T):
            raise ValueError("prior support rows must be distinct")
        support = support.astype(np.int64)
    else:
        probs = _prior_probs(prior)
        if probs.ndim != 1 or probs.shape[0] != T + 1:
            raise ValueError(
                f"a two-class prior must be a 1-D array of length T+1={T + 1}, got shape {probs.shape}; "
                "for more classes pass (support, probs)"
            )
        k = np.arange(T + 1)
        support = np.column_stack([k, T - k])
    if not np.all(np.isfinite(probs)):
        raise ValueError("prior probabilities must be finite (no NaN or inf)")
    if np.any(probs < 0):
        raise ValueError("prior probabilities must be non-negative")
    if not np.isclose(probs.sum(), 1.0, rtol=0, atol=1e-9):
        raise ValueError(f"prior probabilities must sum to 1, got {probs.sum()!r}")
    if n_classes is not None and support.shape[1] != n_classes:
        raise ValueError(
            f"prior is over {support.shape[1]} classes but counts have {n_classes}"
        )
    return Prior(support, probs)


def _has_repeated_rows(support, T):
    """Whether two rows of ``support`` (counts in ``0..T`` summing to ``T``) are the same vote vector."""
    l = support.shape[1]
    if power_exceeds(T + 1, l - 1, 2**62):  # no int64 code: compare the rows themselves
        return len(np.unique(support, axis=0)) != len(support)
    code = np.zeros(len(support), dtype=np.int64)  # the first l - 1 counts in base T + 1 (the last follows)
    for j in range(l - 1):
        code = code * (T + 1) + support[:, j].astype(np.int64)  # (an unsigned column would make it float)
    code.sort()
    return bool(np.any(code[1:] == code[:-1]))


def _prior_probs(values):
    try:
        probs = np.asarray(values, dtype=float)
    except (TypeError, ValueError):
        raise TypeError(f"prior probabilities must be numbers, got {values!r:.80}") from None
    return probs


def finite_confidence(counts: ArrayLike, T: int, prior: PriorLike = None, label: ArrayLike | None = None, *,
                      max_terms: int = 2_000_000, n_mc: int = 200_000,
                      random_state: int | np.random.Generator | None = None) -> NDArray[np.float64]:
    r"""Probability that the full ``T``-member majority equals ``label`` (Eq. 3 of Soto et al. 2016).

    The ``T`` members are an urn of coloured marbles; ``counts`` (``t``
    of them, drawn in random order) have been seen.  With a prior
    :math:`P(\mathbf T)` over the urn's content, Bayes' theorem with the
    multivariate hypergeometric likelihood (Eq. 1) gives the posterior Eq. 2,
    and Eq. 3 sums it over the urn contents whose majority is ``label``:

    .. math:: P^*(\mathbf t, T) = \frac{\sum_{\mathbf T \in \mathcal T_t}
              \prod_i \binom{T_i}{t_i} P(\mathbf T)}
              {\sum_{\mathbf T \in \Omega_t} \prod_i \binom{T_i}{t_i} P(\mathbf T)}.

    Computation
    -----------
    * ``prior`` given: Eq. 3 summed over the prior's support in log space
      (exact; cost ``O(m)`` per row for a support of ``m`` vectors).
    * ``prior=None`` (uniform over all vote vectors), two classes: the posterior
      of :math:`T_0` is ``C(k, t_0) C(T-k, t_1) / C(T+1, t+1)`` (Prop. 2), whose
      tail is a hypergeometric CDF: :math:`P(T_0 \ge m) =
      F_{\mathrm{hyp}}(t_0;\, T+1, t+1, m)`.  Exact; its cost grows with ``T``,
      which is therefore limited to ``ensvote._validation.MAX_T`` (10**8).
    * ``prior=None``, ``l > 2``: by Prop. 3 the unseen votes follow a
      Dirichlet-multinomial with parameters ``t + 1``; its pmf is summed over all
      ``C(T - t + l - 1, l - 1)`` completions when that number is at most
      ``max_terms`` and the completions fit in ``MAX_ENTRIES`` (5e7) array
      entries (exact).  Otherwise the sum is estimated by Monte Carlo with
      ``n_mc`` seeded draws (``p ~ Dir(t + 1)``, unseen votes ``~ Mult(T - t, p)``);
      its standard error is at most ``0.5 / sqrt(n_mc)`` (``~0.0011`` by default).

    Ties in the final ``T`` votes go to the lowest class index (module docstring).

    Parameters
    ----------
    counts : array_like of int, shape (..., l)
        Votes seen so far; each row must sum to at most ``T``.
    T : int
        Size of the full ensemble.
    prior : None, "uniform", array of shape (T + 1,) or (support, probs)
        Prior over the full vote vector; None and ``"uniform"`` both mean the
        uniform prior (closed form); see :func:`check_prior`.
    label : int or array_like of int, optional
        Class of interest, one index or one per row (broadcastable to the
        rows' shape ``counts.shape[:-1]``); default the current majority.
    max_terms : int >= 1
        Largest number of completions summed exactly (uniform prior, ``l > 2``).
    n_mc : int >= 1
        Monte Carlo draws when the exact sum is too large; ``n_mc * l`` must
        not exceed ``MAX_ENTRIES`` (5e7).
    random_state : None, int or numpy Generator
        Seed for the Monte Carlo fallback (None: :data:`ensvote.SEED`).

    Returns
    -------
    ndarray of float, shape (...)
        ``NaN`` where the counts are impossible under the given prior
        (every compatible urn content has prior probability 0).

    Raises
    ------
    ValueError, TypeError
        Bad counts (negative, non-integer, not below 2**53, a row summing to
        more than ``T``), ``T`` outside ``1..MAX_T``, a bad prior, label,
        ``max_terms`` or ``n_mc``; the message names the argument.

    Examples
    --------
    Seven votes to three out of ``T = 11``, and a 3-3 tie, under the uniform
    prior (SIBA):

    >>> import numpy as np
    >>> from ensvote import finite_confidence
    >>> np.round(finite_confidence([[7, 3], [3, 3]], T=11), 4)
    array([1. , 0.5])

    The same seven to three out of ``T = 101`` is far less certain, and a
    prior that favours lopsided urns raises it:

    >>> float(np.round(finite_confidence([7, 3], T=101), 4))
    0.8999
    >>> k = np.arange(102)
    >>> prior = (k - 50.5) ** 2 / np.sum((k - 50.5) ** 2)
    >>> float(np.round(finite_confidence([7, 3], T=101, prior=prior), 4))
    0.9836
    """
    T = check_positive_int(T, name="T", maximum=MAX_T,
                           why="the exact two-class sum costs time proportional to T")
    t = check_counts(counts, max_sum=T, max_sum_desc=f"the ensemble size T={T}")
    l = t.shape[-1]
    prior = prior_argument(prior)
    max_terms = check_positive_int(max_terms, name="max_terms")
    n_mc = check_positive_int(n_mc, name="n_mc")
    check_random_state(random_state)
    i = _label_or_majority(t, label)
    if prior is None and l > 2:
        check_size(n_mc * l, what=f"n_mc={n_mc:,} Monte Carlo draws of {l} classes")
    if prior is not None:
        support, probs = check_prior(prior, T, n_classes=l)
        return _finite_with_prior(t, i, support, probs)
    if l == 2:
        return _finite_uniform_binary(t, i, T)
    return _finite_uniform_multiclass(t, i, T, max_terms, n_mc, random_state)


def _finite_uniform_binary(t, i, T):
    s = t.sum(axis=-1)
    m0 = (T + 1) // 2  # class 0 wins the final vote iff T_0 >= ceil(T / 2)
    t0 = t[..., 0]
    from scipy import stats  # imported on first use

    p0 = stats.hypergeom.cdf(t0, T + 1, s + 1, m0)  # P(T_0 >= m0)
    p1 = stats.hypergeom.sf(t0, T + 1, s + 1, m0)  # P(T_0 <  m0)
    return np.where(i == 0, p0, p1)


def _finite_uniform_multiclass(t, i, T, max_terms, n_mc, random_state):
    l = t.shape[-1]
    flat_t = t.reshape(-1, l)
    flat_i = i.reshape(-1)
    out = np.empty(len(flat_t))
    rng = None
    for r, (row, k) in enumerate(zip(flat_t, flat_i)):
        n = T - int(row.sum())
        n_terms = _n_compositions(n, l)
        if n_terms <= max_terms and n_terms * l <= MAX_ENTRIES:
            rem = _compositions_cached(n, l)
            alpha = row + 1.0
            logpmf = (special.gammaln(n + 1) + special.gammaln(alpha.sum())
                      - special.gammaln(n + alpha.sum())
                      + np.sum(special.gammaln(rem + alpha) - special.gammaln(alpha)
                               - special.gammaln(rem + 1.0), axis=1))
            win = np.argmax(rem + row, axis=1) == k
            out[r] = ratio_from_logs(special.logsumexp(np.where(win, logpmf, -np.inf)),
                                      special.logsumexp(np.where(win, -np.inf, logpmf)))
        else:
            if rng is None:
                rng = check_random_state(random_state)
            p = rng.dirichlet(row + 1.0, size=n_mc)
            rem = rng.multinomial(n, p)
            out[r] = np.mean(np.argmax(rem + row, axis=1) == k)
    return out.reshape(t.shape[:-1])


def _finite_with_prior(t, i, support, probs):
    l = t.shape[-1]
    num, rest = log_split(t.reshape(-1, l), i.reshape(-1), support, probs)
    return ratio_from_logs(num, rest).reshape(t.shape[:-1])


#: The memoised functions of this module, emptied by :func:`ensvote.clear_caches`.
_LRU_FUNCTIONS = (_dirichlet_argmax_prob, _compositions_cached)


def soft_lead_needed(T: int, n_classes: int = 2, disagreement: float = 0.01) -> NDArray[np.float64]:
    r"""The lead in summed class probabilities at which a soft vote may stop, after each member.

    A member adds its class-probability vector :math:`\mathbf p_j` to the
    row's sums; for two classes :math:`c, k` the difference
    :math:`d_j = p_{jc} - p_{jk}` lies in :math:`[-1, 1]`.  In a random member
    order the first :math:`t` of the :math:`T` members are a sample without
    replacement, and Serfling's inequality (Serfling 1974, Cor. 1.1) bounds,
    for a pair whose full sum :math:`\sum_j d_j` is at most 0,

    .. math:: P\Bigl(\sum_{j \le t} d_j \ge h\Bigr) \le
              \exp\Bigl(-\frac{h^2}{2 t (1 - (t - 1)/T)}\Bigr).

    A union bound over the :math:`T - 1` members after which a row can stop
    and the :math:`l - 1` classes that can be ahead of the full vote's winner
    makes

    .. math:: h_t = \sqrt{2 t (1 - (t - 1)/T) \ln\bigl((l - 1)(T - 1)/\delta\bigr)}

    a lead after which a row's label differs from the full forest's soft
    vote with probability at most :math:`\delta`, **for every row**, whatever
    its members' probabilities (no prior).  A lead above the :math:`T - t`
    members left is final (the exact soft stop); the lead needed is the
    smaller of the two, and 0 after the last member (the argmax).

    Parameters
    ----------
    T : int >= 1
        Ensemble size.
    n_classes : int >= 2, default=2
    disagreement : float in (0, 0.5), default=0.01
        δ, the per-row bound.

    Returns
    -------
    ndarray of float, shape (T,)
        Entry ``t - 1``: the lead over every other class needed after ``t`` members.

    Examples
    --------
    With 101 members, two classes and δ = 1 %, a row whose trees all agree
    stops after 16 of them (the exact soft stop needs 51):

    >>> import numpy as np
    >>> from ensvote.confidence import soft_lead_needed
    >>> need = soft_lead_needed(101, 2, 0.01)
    >>> int(np.argmax(np.arange(1, 102) > need)) + 1
    16
    >>> round(float(need[50]), 2), float(need[-1])  # after 51 members: 50 left, a lead of 21.78 is enough
    (21.78, 0.0)
    """
    T = check_positive_int(T, name="T")
    l = check_positive_int(n_classes, name="n_classes", minimum=2)
    delta = check_probability(disagreement, name="disagreement")
    if not delta < 0.5:
        raise ValueError(f"disagreement must lie strictly between 0 and 0.5, got {delta}")
    t = np.arange(1, T + 1, dtype=float)
    left = T - t
    if T == 1:
        return left
    h = np.sqrt(2.0 * t * (1.0 - (t - 1.0) / T) * np.log((l - 1) * (T - 1) / delta))
    return np.minimum(left, h)
