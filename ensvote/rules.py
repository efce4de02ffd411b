"""Halting rules and their lookup tables.

A rule answers one question for a vector of vote counts: *may the vote stop
here?*  Each rule precomputes what it needs once, so that during voting a stop
decision is a table look-up (the table t*(t; π) of §2.2 of Hernández-Lobato
et al. 2011; one table per class in §2.2 of Soto et al. 2016).

=================  =========================================================
rule               stops when
=================  =========================================================
``InfiniteRule``   confidence that the current majority is the infinite
                   ensemble's (Hernández-Lobato et al. 2011, Eq. 7 /
                   Eq. 8 bound) exceeds π
``UrnRule``        confidence that it is the full ``T``-member majority
                   (Eq. 3 of Soto et al. 2016, uniform or given prior)
                   exceeds α
``ExactRule``      the remaining votes cannot change the outcome (RF*)
``FixedRule``      ``n`` members have voted (the fixed-size strategy FS)
=================  =========================================================

Every finite rule also stops once all ``T`` members have voted.  A stop needs
at least one vote.  Confidence must be strictly greater than the threshold.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import special

from ._cache import BoundedCache
from ._urn import level_index, level_vectors, log_levels, stop_bits3
from ._validation import (MAX_COUNT, MAX_T, check_counts, check_positive_int, check_probability,
                          check_size, largest_T, power_exceeds, prior_argument)
from .confidence import PriorLike, check_prior, finite_confidence, infinite_confidence
from .manyclass import PairPrior, check_pair_table_size, pair_table, urn_confidence_exact

__all__ = ["HaltingRule", "InfiniteRule", "UrnRule", "ExactRule", "FixedRule", "MarginRule", "REGISTRY", "register",
           "make_rule", "SlowVoteWarning"]

#: Largest dense confidence table (number of entries, ``(T + 1) ** l``) an
#: :class:`UrnRule` builds; beyond it confidences are computed on demand.
MAX_DENSE_TABLE = 5_000_000
#: Largest ``l * T**3`` for which ``UrnRule(method="exact")`` computes the
#: uniform-prior Eq. 3 vote vector by vector beyond the dense table (about
#: 10 ms each at the limit); beyond it, use the union bound (``method="auto"``).
MAX_EXACT_WORK = 5_000_000
#: Largest number of votes the table t*(t; π) of :class:`InfiniteRule` covers
#: (a second or two to build); beyond it the confidence is evaluated directly
#: (cost per row, not per vote).
MAX_T_STAR = 10**5
#: Largest ``T`` for which a two-class :class:`UrnRule` beyond the dense table
#: stores its stop decisions for every vote vector (one bit each, built at
#: ``prepare`` by the same backward induction, ``O(T^2)``: 2.5 s at T = 5,001,
#: 11 s at the limit); beyond it confidences are computed on demand.
MAX_STOP_BITS_T = 10_000
#: The same for three classes (a prior given as ``(support, probs)``, or the
#: uniform prior with ``method="exact"``): every vote vector's stop bit, built
#: at ``prepare`` by the urn's recursion compiled (:func:`ensvote._urn.stop_bits3`,
#: ``O(T^3)``: 0.16 s at T = 501, 1.4 s and 21 MB at the limit); beyond it
#: confidences are computed on demand.
MAX_STOP_BITS_T3 = 1_001
#: Confidences this close to the threshold are recomputed with
#: :func:`ensvote.finite_confidence` when stop decisions are tabulated beyond the
#: dense table, so that a stop is ``finite_confidence(t) > α`` exactly.
_NEAR_THRESHOLD = 1e-9


class SlowVoteWarning(UserWarning):
    """A rule that computes its decisions on demand, slowly (see :meth:`UrnRule.on_demand_warning`).

    Raised as a warning at ``fit`` by :class:`ensvote.HaltingClassifier`;
    filter it with ``warnings.simplefilter("ignore", SlowVoteWarning)``.

    Examples
    --------
    >>> from ensvote import SlowVoteWarning, UrnRule
    >>> isinstance(UrnRule(T=20_001).on_demand_warning(2), SlowVoteWarning)
    True
    """


def decided(rule: HaltingRule, counts: NDArray[np.int64]) -> NDArray[np.bool_]:
    """``rule.decide(counts)``, checked against the protocol: a boolean array of shape ``counts.shape[:-1]``.

    A custom rule that returns ``True``, ``None``, floats or another shape gets a
    TypeError / ValueError naming the rule, instead of an error deep in the
    engine or, for floats, silently wrong stops.
    """
    out = rule.decide(counts)
    want = counts.shape[:-1]
    if not isinstance(out, (np.ndarray, np.bool_, bool)) or np.asarray(out).dtype != np.bool_:
        got = f"an array of dtype {out.dtype}" if isinstance(out, np.ndarray) else type(out).__name__
        raise TypeError(f"{type(rule).__name__}.decide must return a boolean numpy array of shape {want}, got {got}")
    out = np.asarray(out)
    if out.shape != want:
        raise ValueError(f"{type(rule).__name__}.decide must return one decision per vote vector, shape {want}, "
                         f"got shape {out.shape}")
    return out


class HaltingRule:
    """Base class of the halting rules; subclass it for a rule of your own.

    The rule protocol
    -----------------
    The engine (:func:`ensvote.halt`, :class:`ensvote.HaltingClassifier`,
    :func:`ensvote.expected_queries`) talks to a rule through three methods:

    ``decide(counts)`` (required)
        ``counts`` is an int64 array of shape ``(..., l)``, already validated
        (non-negative, each total at most ``T``; all-zero vectors may occur
        and are never stopped by the engine).  Return a bool array of shape
        ``(...)``: True where the vote may stop.  Vectorised, no side effects.
    ``prepare(n_members, n_classes)`` (optional)
        Called before voting with the ensemble size ``T`` and the number of
        classes ``l`` (None when not known yet): check compatibility (raise
        ``ValueError``) and build any tables; idempotent.  The default checks
        ``n_members`` against :attr:`n_members` when that is set.
    ``table_key(n_classes)`` (optional)
        A hashable identity of the stop decision (e.g. ``(type(self), k)``) or
        None, the default.  With a key the engine evaluates ``decide`` once on
        every count vector with at most ``T`` votes and caches the answers as a
        flat table (:func:`ensvote.engine.stop_table`) where that table has at
        most ``MAX_STOP_TABLE`` entries; beyond, it looks them up in the
        rule's ``stop_bits`` if it keeps any, or else decides the count vectors
        the votes reach, together, and caches those decisions
        (:func:`ensvote.engine.stop_memo`).  Two rules with equal keys must
        decide alike.  With None the engine decides the count vectors reached
        the same way and keeps the decisions for one call only.  Either way
        the votes run through the fast paths (the compiled loop of
        :mod:`ensvote.kernel` included).

    ``min_votes(n_members, n_classes)`` (optional)
        The fewest votes at which ``decide`` can return True (1, the default:
        no bound).  Where the compiled loop (dense ``X``) decides only the
        count vectors reached (no flat table), it neither looks up nor decides
        the vectors with fewer votes; a rule that stops only at a fixed number
        of votes then needs no decision before the last member.
    ``stop_bits(n_members, n_classes)`` (optional)
        Every vote vector's decision as packed bits in level order, or None
        (the default): for two or three classes, where the flat table would
        be too large, the compiled loop looks the decisions up there instead
        of deciding the vectors reached (:class:`UrnRule` builds them at
        ``prepare``).

    Every finite rule is stopped at ``T`` by the engine whatever ``decide``
    says there.

    Examples
    --------
    A margin rule (stop once the leader is ``k`` votes ahead, as LightGBM's
    ``pred_early_stop`` does):

    >>> import numpy as np
    >>> from ensvote import HaltingRule, halt
    >>> class Lead(HaltingRule):
    ...     def __init__(self, k):
    ...         self.k = k
    ...     def decide(self, counts):
    ...         top2 = -np.sort(-counts, axis=-1)[..., :2]
    ...         return top2[..., 0] - top2[..., 1] >= self.k
    ...     def table_key(self, n_classes):
    ...         return (type(self), self.k)
    >>> votes = np.array([[1, 1, 0, 1, 1], [0, 1, 0, 1, 1]])
    >>> halt(votes, Lead(2)).n_queried
    array([2, 5])
    >>> Lead(2).stop([[3, 1], [2, 1]])
    array([ True, False])
    """

    #: Size of the ensemble the rule is built for (``None``: any size).
    n_members = None
    #: The name that selects the rule (:func:`register`); None: the rule is passed as an object.
    name: str | None = None
    #: The one parameter :meth:`from_params` takes as ``strength`` (``"confidence"``,
    #: ``"disagreement"``, ``"k"``, ...), or None for a rule without one.
    strength: str | None = None

    @classmethod
    def from_params(cls, strength: float | None = None, *, n_members: int, n_classes: int | None = None,
                    prior: Any = None, oob_votes: Callable[[], NDArray[np.int64]] | None = None) -> HaltingRule:
        """Build the rule selected by name (:func:`make_rule`, :class:`ensvote.HaltingClassifier`).

        Parameters
        ----------
        strength : number or None
            The rule's one parameter, named by :attr:`strength` (None: its default).
        n_members : int
            Ensemble size ``T``.
        n_classes : int, optional
            Number of classes ``l``.
        prior : None, "uniform", "oob", array or (support, probs), optional
            The prior of a rule that takes one; ``"oob"`` estimates it from
            ``oob_votes``.
        oob_votes : callable, optional
            Returns the out-of-bag votes of the training rows (called only
            by a rule that needs them).

        Returns
        -------
        HaltingRule

        Examples
        --------
        >>> from ensvote import UrnRule
        >>> UrnRule.from_params(0.95, n_members=101, prior="uniform")
        UrnRule(T=101, confidence=0.95, prior=None)
        """
        raise NotImplementedError(f"{cls.__name__} has no name to be built by; pass it as an object")

    def stop(self, counts: ArrayLike) -> NDArray[np.bool_]:
        """Whether the vote may stop at these counts (validated; see :meth:`decide`).

        Parameters
        ----------
        counts : array_like of int, shape (..., l)
            Votes per class; each total at most :attr:`n_members` when set.

        Returns
        -------
        ndarray of bool, shape (...)
            True where the rule stops; never at an all-zero vector.

        Examples
        --------
        >>> from ensvote import UrnRule
        >>> UrnRule(T=101, confidence=0.99).stop([[10, 0], [6, 4]])
        array([ True, False])
        """
        t = check_counts(counts, max_sum=self.n_members,
                         max_sum_desc=f"the rule's ensemble size T={self.n_members}")
        s = t.sum(axis=-1)
        self.prepare(self.n_members, t.shape[-1])
        return decided(self, t) & (s > 0)

    def decide(self, counts: NDArray[np.int64]) -> NDArray[np.bool_]:
        """True where the vote may stop at ``counts`` (int64, shape ``(..., l)``, validated).

        The one method a rule must implement (see the class docstring).
        Unlike :meth:`stop` it does not validate ``counts``.

        Parameters
        ----------
        counts : ndarray of int64, shape (..., l)
            Validated vote counts (non-negative, totals at most ``T``).

        Returns
        -------
        ndarray of bool, shape (...)

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote import ExactRule
        >>> ExactRule(5).decide(np.array([[3, 0], [2, 1]]))
        array([ True, False])
        """
        raise NotImplementedError(f"{type(self).__name__} must implement decide(counts)")

    def on_demand_warning(self, n_classes: int) -> SlowVoteWarning | None:
        """A :class:`SlowVoteWarning` if deciding for ``n_classes`` classes computes per vote vector, slowly; else None.

        :class:`~ensvote.HaltingClassifier` (at ``fit``) and :func:`ensvote.halt`
        warn with it.  The rules of ensvote that need no table, or build one,
        return None; :class:`UrnRule` returns a warning where it has neither.

        Parameters
        ----------
        n_classes : int
            Number of classes ``l``.

        Returns
        -------
        SlowVoteWarning or None

        Examples
        --------
        >>> from ensvote import ExactRule
        >>> ExactRule(5).on_demand_warning(2) is None
        True
        """
        check_positive_int(n_classes, name="n_classes", minimum=2)
        return None

    def prepare(self, n_members: int | None, n_classes: int | None) -> None:
        """Check compatibility with an ensemble of ``n_members`` and build tables (idempotent).

        Parameters
        ----------
        n_members : int
            Ensemble size ``T``.
        n_classes : int or None
            Number of classes ``l`` (None: not known yet).

        Raises
        ------
        ValueError
            If the rule was built for another ensemble size.

        Examples
        --------
        >>> from ensvote import UrnRule
        >>> UrnRule(T=11).prepare(11, 2)
        >>> UrnRule(T=11).prepare(21, 2)
        Traceback (most recent call last):
            ...
        ValueError: UrnRule was built for T=11 members, but the ensemble has 21
        """
        if self.n_members is not None and n_members != self.n_members:
            raise ValueError(
                f"{type(self).__name__} was built for T={self.n_members} members, "
                f"but the ensemble has {n_members}"
            )

    def min_votes(self, n_members: int, n_classes: int) -> int:
        """The fewest votes at which :meth:`decide` can stop a vote (a lower bound; 1: none known).

        Part of the rule protocol (optional): every count vector with fewer
        votes must not stop.  The compiled loop (dense ``X``) skips their
        look-ups and decisions where it has no flat stop table.

        Parameters
        ----------
        n_members : int
            Ensemble size ``T``.
        n_classes : int
            Number of classes ``l``.

        Returns
        -------
        int

        Examples
        --------
        >>> from ensvote import ExactRule, FixedRule, HaltingRule
        >>> HaltingRule().min_votes(101, 3), FixedRule(40).min_votes(101, 3), ExactRule(101).min_votes(101, 3)
        (1, 40, 51)
        """
        return 1

    def stop_bits(self, n_members: int, n_classes: int) -> NDArray[np.uint8] | None:
        """Every vote vector's stop decision as packed bits, or None (the default: none kept).

        Part of the rule protocol (optional), for two or three classes: bit
        ``i`` (most significant first, as :func:`numpy.packbits`) of the
        vote vector of place ``i`` in level order, fewer votes first, then
        by ``t_0``, then ``t_1`` (:func:`ensvote.engine.level_index`), is
        ``decide(t)``.  Beyond the flat table's size the compiled loop looks
        the decisions up there.  Called after :meth:`prepare`.

        Parameters
        ----------
        n_members : int
            Ensemble size ``T``.
        n_classes : int
            Number of classes ``l``.

        Returns
        -------
        ndarray of uint8 or None

        Examples
        --------
        >>> from ensvote import HaltingRule, UrnRule
        >>> HaltingRule().stop_bits(101, 2) is None
        True
        >>> len(UrnRule(T=2001).stop_bits(2001, 2))  # one bit for each of the 2,005,003 vote vectors
        250626
        """
        return None

    def table_key(self, n_classes: int) -> Hashable | None:
        """Hashable identity of the stop decision, for cached stop tables.

        ``None`` (the default) means: do not tabulate, call :meth:`decide`
        on the counts instead.

        Parameters
        ----------
        n_classes : int
            Number of classes ``l``.

        Returns
        -------
        hashable or None

        Examples
        --------
        >>> from ensvote import ExactRule, HaltingRule
        >>> ExactRule(5).table_key(2) == ExactRule(5).table_key(2)
        True
        >>> HaltingRule().table_key(2) is None
        True
        """
        return None

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self._params().items())
        return f"{type(self).__name__}({args})"

    def _params(self):
        return {}


# --------------------------------------------------------------------------
#: The rules selectable by name, in the order error messages list them: name -> rule class.
REGISTRY: dict[str, type[HaltingRule]] = {}


def register(cls: type[HaltingRule]) -> type[HaltingRule]:
    """Class decorator: make the rule class selectable by its :attr:`~HaltingRule.name`.

    A rule class that sets ``name`` and ``strength`` and implements
    :meth:`~HaltingRule.from_params` becomes selectable as
    ``HaltingClassifier(rule=name)`` (when its strength is ``confidence``,
    ``disagreement`` or None), by :func:`make_rule` and in the head-to-head.

    Parameters
    ----------
    cls : type
        A subclass of :class:`HaltingRule` with a str ``name`` not yet registered.

    Returns
    -------
    type
        ``cls`` itself.

    Raises
    ------
    TypeError
        ``cls`` is not a :class:`HaltingRule` subclass with a str name.
    ValueError
        Another class is registered under the name.

    Examples
    --------
    >>> import numpy as np
    >>> from ensvote.rules import REGISTRY, HaltingRule, make_rule, register
    >>> @register
    ... class Unanimous(HaltingRule):
    ...     name, strength = "unanimous", "n"
    ...     def __init__(self, n):
    ...         self.n = n
    ...     @classmethod
    ...     def from_params(cls, strength=None, *, n_members, n_classes=None, prior=None, oob_votes=None):
    ...         return cls(strength)
    ...     def decide(self, t):
    ...         return np.max(t, axis=-1) >= self.n
    >>> make_rule("unanimous", n_members=11, strength=3).stop([[3, 0], [2, 1]])
    array([ True, False])
    >>> del REGISTRY["unanimous"]
    """
    if not (isinstance(cls, type) and issubclass(cls, HaltingRule) and isinstance(cls.name, str)):
        raise TypeError("register takes a HaltingRule subclass with a str name")
    if REGISTRY.get(cls.name, cls) is not cls:
        raise ValueError(f"a rule named {cls.name!r} is already registered: {REGISTRY[cls.name].__name__}")
    REGISTRY[cls.name] = cls
    return cls


_TSTAR_CACHE = BoundedCache("t*(t; π) tables", 16)


def _t_star_table(pi, t_max):
    """t*(t; π) for t = 0..t_max (cached; grows by recomputation only)."""
    cached = _TSTAR_CACHE.get(pi)
    if cached is not None and len(cached) > t_max:
        return cached
    t_max = min(max(t_max, 2 * (len(cached) if cached is not None else 0), 128), max(t_max, MAX_T_STAR))
    t = np.arange(t_max + 1)
    lo = (t + 1) // 2  # smallest majority count (a tie for even t)
    hi = t + 1  # sentinel: "cannot stop at this t"
    while np.any(lo < hi):
        mid = (lo + hi) // 2
        ok = np.zeros(t.shape, dtype=bool)
        m = (lo < hi) & (mid <= t)
        ok[m] = special.betainc(t[m] - mid[m] + 1.0, mid[m] + 1.0, 0.5) > pi
        upd = lo < hi
        hi = np.where(upd & ok, mid, hi)
        lo = np.where(upd & ~ok, mid + 1, lo)
    lo[0] = 1  # no stop before the first vote
    lo.setflags(write=False)
    _TSTAR_CACHE[pi] = lo
    return lo


@register
class InfiniteRule(HaltingRule):
    """The stopping rule of Hernández-Lobato et al. (2011): stop when L(y*|t) > π.

    ``L`` is Eq. 7 for two classes and the lower bound Eq. 8 otherwise; ``y*``
    is the current majority.  For two classes the decision is the look-up
    ``t_{y*} >= t*(t; π)`` (:meth:`t_star`); for more classes the same table
    applied to the two leading classes is a necessary condition (every factor
    of Eq. 8 is at most 1), and the product is evaluated only for the rows that
    pass it.

    Parameters
    ----------
    confidence : float in (0, 1)
        The threshold π.

    Examples
    --------
    >>> import numpy as np
    >>> import ensvote
    >>> from ensvote import InfiniteRule, halt
    >>> rule = InfiniteRule(confidence=0.99)
    >>> rule.stop([[7, 0], [6, 4]])
    array([ True, False])

    Members that are right 80 % of the time, 1,000 rows of ``T = 101``:

    >>> rng = np.random.default_rng(ensvote.SEED)
    >>> votes = (rng.random((1000, 101)) < 0.8).astype(int)
    >>> res = halt(votes, rule)
    >>> round(res.mean_queried, 3), bool(np.all(res.labels == 1))
    (15.435, True)
    """

    name, strength = "infinite", "confidence"

    def __init__(self, confidence: float = 0.99):
        self.confidence = check_probability(confidence, name="confidence")

    @classmethod
    def from_params(cls, strength: float | None = None, *, n_members: int, n_classes: int | None = None,
                    prior: Any = None, oob_votes: Callable[[], NDArray[np.int64]] | None = None) -> HaltingRule:
        """Part of the registry: see :meth:`HaltingRule.from_params` (the prior is not used)."""
        return cls() if strength is None else cls(strength)

    def _params(self):
        return {"confidence": self.confidence}

    def t_star(self, t_max: int) -> NDArray[np.int64]:
        """The table t*(t; π): fewest majority votes out of ``t`` that allow a stop.

        Parameters
        ----------
        t_max : int
            Largest number of votes, ``0..MAX_T_STAR``.

        Returns
        -------
        ndarray of int, shape (t_max + 1,)
            ``t_star[t]`` for ``t = 0..t_max``; the value ``t + 1`` means no
            split of ``t`` votes allows a stop (e.g. ``t = 0``).

        Raises
        ------
        ValueError
            ``t_max`` negative or above ``MAX_T_STAR``.

        Examples
        --------
        At π = 0.99 no split of one vote allows a stop, 6 of 6 does, and
        so do 9 of 10:

        >>> from ensvote import InfiniteRule
        >>> InfiniteRule(0.99).t_star(10)
        array([1, 2, 3, 4, 5, 6, 6, 7, 8, 9, 9])
        """
        t_max = check_positive_int(t_max, name="t_max", minimum=0, maximum=MAX_T_STAR,
                                   why="MAX_T_STAR, the largest table built")
        return _t_star_table(self.confidence, t_max)[: t_max + 1].copy()

    def table_key(self, n_classes: int) -> Hashable | None:
        """Part of the rule protocol: see :class:`HaltingRule`."""
        return (type(self), self.confidence)

    def confidence_of(self, counts: ArrayLike) -> NDArray[np.float64]:
        """L(y*|t) for the current majority (see :func:`infinite_confidence`).

        Parameters
        ----------
        counts : array_like of int, shape (..., l)
            Votes per class.

        Returns
        -------
        ndarray of float, shape (...)

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote import InfiniteRule
        >>> np.round(InfiniteRule(0.99).confidence_of([[7, 0], [6, 4]]), 4)
        array([0.9961, 0.7256])
        """
        return infinite_confidence(counts)

    def decide(self, t: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Part of the rule protocol: see :class:`HaltingRule`."""
        s = t.sum(axis=-1)
        big = s > MAX_T_STAR
        if np.any(big):  # beyond the table: the confidence itself (the same test, per row)
            out = np.zeros(s.shape, dtype=bool)
            out[big] = infinite_confidence(t[big]) > self.confidence
            out[~big] = self.decide(t[~big])
            return out
        table = _t_star_table(self.confidence, int(s.max(initial=0)))
        if t.shape[-1] == 2:
            return t.max(axis=-1) >= table[s]
        top2 = -np.partition(-t, 1, axis=-1)[..., :2]
        cand = top2[..., 0] >= table[top2[..., 0] + top2[..., 1]]
        out = np.zeros(s.shape, dtype=bool)
        if np.any(cand):
            out[cand] = infinite_confidence(t[cand]) > self.confidence
        return out


# --------------------------------------------------------------------------
_URN_TABLES = BoundedCache("urn confidence tables", 16)
#: Confidences evaluated on demand (no table), per ``(T, l, prior)``: vote vector -> P*(t, T).
_URN_MEMOS = BoundedCache("urn confidences computed on demand", 8)
#: Vote vectors one memo keeps at most (then it starts again empty).
_MEMO_MAX = 1_000_000


def _urn_stop_bits(T, support, probs, alpha):
    """Two classes: whether the urn rule stops at each vote vector, one bit per vector (see :func:`_urn_levels`).

    Bit :func:`~ensvote.engine.level_index` of ``(t_0, s - t_0)`` of the packed array is its stop:
    ``P*(t, T) > α`` or ``s == T``.  Confidences within ``_NEAR_THRESHOLD`` of
    α are recomputed with :func:`ensvote.finite_confidence` (the on-demand
    formula), so the bits are exactly the on-demand decisions.
    """
    stop = np.zeros((T + 1) * (T + 2) // 2, dtype=bool)
    near = []
    for s, (t0, _), conf in _urn_levels(T, 2, support, probs):
        with np.errstate(invalid="ignore"):
            stop[level_index(np.column_stack([t0, s - t0]))] = (conf > alpha) | (s == T)
            close = np.abs(conf - alpha) <= _NEAR_THRESHOLD
        if s < T and close.any():
            near.append(np.column_stack([t0[close], s - t0[close]]))
    if near:
        t = np.concatenate(near)
        stop[level_index(t)] = finite_confidence(t, T, prior=(support, probs)) > alpha
    return np.packbits(stop)


def _urn_levels(T, l, support, probs):
    """P*(t, T) of the current majority, level by level: yields ``(s, idx, conf)`` for ``s = T, ..., 0``.

    From the urn's recursion (:func:`ensvote._urn.log_levels`):
    ``P*(t, T) = r_{c(t)}(t) / q(t)`` with ``c(t)`` the current majority
    (lowest index on ties).  ``idx`` is the tuple of the ``l`` coordinate
    arrays of the vote vectors with ``s`` votes and ``conf`` their confidences
    (NaN for vote vectors of probability 0).
    """
    for s, t, logq, logr, _ in log_levels(T, support, probs):
        full = np.stack([np.broadcast_to(g, logq.shape) for g in t])
        cur = np.argmax(full, axis=0)  # current majority, lowest index on ties
        with np.errstate(invalid="ignore"):
            val = np.exp(np.take_along_axis(logr, cur[None], axis=0)[0] - logq)
        val = np.where(np.isneginf(logq), np.nan, val)
        nz = np.nonzero(full[-1] >= 0)
        yield s, tuple(f[nz] for f in full), val[nz]


def _urn_confidence_table(T, l, support, probs):
    """Dense table ``conf[t_0, ..., t_{l-1}]`` of P*(t, T) for the current majority (see :func:`_urn_levels`).

    Entries with ``sum(t) > T`` are NaN, and so are states of probability 0.
    Cost ``O(l^2 (T+1)^l)``.
    """
    conf = np.full((T + 1,) * l, np.nan)
    for _, idx, val in _urn_levels(T, l, support, probs):
        conf[idx] = val
    conf.setflags(write=False)
    return conf


@register
class UrnRule(HaltingRule):
    """The rule of Soto et al. (2016): stop when P*(t, T) > α (their Eq. 3).

    With ``prior=None`` the prior over the urn is uniform, and the rule equals
    SIBA, the finite-ensemble version of the rule of Hernández-Lobato et al.
    (2011) (Prop. 3).  With a
    prior from out-of-bag votes (:func:`ensvote.oob_prior`) it is HYPER.

    The confidence of the current majority is tabulated once for every vote
    vector with at most ``T`` votes (a dense table of ``(T + 1) ** l`` entries,
    built by backward induction and cached by ``(T, l, prior)``); a stop is then
    a look-up.  When that table would exceed ``MAX_DENSE_TABLE`` entries
    (e.g. ``l >= 4`` at ``T = 101``) the uniform prior switches to a union
    bound over the leader's rivals (``method``, below), a look-up too; a prior
    given as ``(support, probs)`` is evaluated on demand with
    :func:`ensvote.finite_confidence` and memoised per vote vector.

    Parameters
    ----------
    T : int
        Size of the full ensemble.
    confidence : float in (0, 1)
        The threshold α.
    prior : None, "uniform", array of shape (T + 1,), (support, probs) or PairPrior
        Prior over the full vote vector (see :func:`ensvote.confidence.check_prior`);
        None and ``"uniform"`` both mean the uniform prior (SIBA).  A
        :class:`ensvote.manyclass.PairPrior` (what :func:`ensvote.oob_prior`
        returns for four or more classes) is a prior on leader-rival pairs,
        used through the union bound below.
    method : {"auto", "exact", "bound"}, default="auto"
        How the confidence is computed for three or more classes (two classes
        are always exact).  ``"exact"``: Eq. 3 itself, from the dense table or,
        beyond it, on demand per vote vector (slow for many classes).
        ``"bound"``: the union bound over the leader's rivals of
        :mod:`ensvote.manyclass`, a look-up in a table of ``O(T^3)`` entries
        whatever ``l``; with the uniform prior it never exceeds Eq. 3, so the
        rule stops only where the exact rule would.  ``"auto"``: exact where the
        dense table fits (``(T + 1) ** l <= MAX_DENSE_TABLE``) or a prior is
        given as ``(support, probs)``, the bound otherwise (e.g. ``l >= 4`` at
        ``T = 101``) and always with a ``PairPrior``.

    Raises
    ------
    ValueError, TypeError
        ``T`` or ``confidence`` out of range, an unknown ``method``, or a prior
        that does not fit ``T`` or ``method``.

    Examples
    --------
    >>> import numpy as np
    >>> import ensvote
    >>> from ensvote import UrnRule, halt
    >>> rule = UrnRule(T=101, confidence=0.99)
    >>> rule.stop([[7, 0], [6, 4]])
    array([ True, False])
    >>> np.round(rule.confidence_of([[7, 0], [6, 4]]), 4)
    array([0.9971, 0.7375])

    Members that are right 80 % of the time, 1,000 rows of ``T = 101``:

    >>> rng = np.random.default_rng(ensvote.SEED)
    >>> votes = (rng.random((1000, 101)) < 0.8).astype(int)
    >>> res = halt(votes, rule)
    >>> round(res.mean_queried, 3), bool(np.all(res.labels == 1))
    (13.511, True)
    """

    def __init__(self, T: int, confidence: float = 0.99, prior: PriorLike | PairPrior = None, *,
                 method: Literal["auto", "exact", "bound"] = "auto"):
        self.n_members = check_positive_int(T, name="T", maximum=MAX_T,
                                            why="the confidences cost time proportional to T")
        self.confidence = check_probability(confidence, name="confidence")
        if method not in ("auto", "exact", "bound"):
            raise ValueError(f"method must be 'auto', 'exact' or 'bound', got {method!r}")
        self.method = method
        prior = prior_argument(prior)
        self.prior = prior
        self._pair_prior = None
        if prior is None:
            self._support = self._probs = None
            self.n_classes = None
        elif isinstance(prior, PairPrior):
            if prior.T != self.n_members:
                raise ValueError(f"the PairPrior is for T={prior.T} members, the rule for T={self.n_members}")
            if method == "exact":
                raise ValueError("a PairPrior has no exact Eq. 3 (it is not a prior over the full vote); "
                                 "use method='auto' or 'bound'")
            self._pair_prior = prior
            self._support = self._probs = None
            self.n_classes = prior.n_classes
            self._check_bound_size(prior.n_classes)
        else:
            if method == "bound":
                raise ValueError("method='bound' needs the uniform prior (None) or a PairPrior, "
                                 "not a prior given as (support, probs)")
            self._parsed_prior = check_prior(prior, self.n_members)
            self._support, self._probs = self._parsed_prior
            self._prior_key = self._parsed_prior.key
            self.n_classes = self._support.shape[1]

    name, strength = "urn", "confidence"

    @classmethod
    def from_params(cls, strength: float | None = None, *, n_members: int, n_classes: int | None = None,
                    prior: Any = None, oob_votes: Callable[[], NDArray[np.int64]] | None = None) -> HaltingRule:
        """Part of the registry: see :meth:`HaltingRule.from_params`; ``prior="oob"`` is :func:`ensvote.oob_prior`."""
        if isinstance(prior, str) and prior == "oob":
            from .priors import oob_prior

            prior = oob_prior(oob_votes(), n_members)
        return cls(n_members, 0.99 if strength is None else strength, prior=prior)

    def __getstate__(self):
        # the tables the rule keeps are rebuilt on first use: a pickle holds the parameters only
        return {k: v for k, v in self.__dict__.items() if k not in ("_dense_tables", "_bits")}

    @property
    def T(self) -> int:
        """Size of the full ensemble the rule is built for (the same as :attr:`n_members`).

        Examples
        --------
        >>> from ensvote import UrnRule
        >>> UrnRule(T=101).T
        101
        """
        return self.n_members

    def _params(self):
        out = {"T": self.n_members, "confidence": self.confidence,
               "prior": None if self.prior is None else "<given>"}
        if self.method != "auto":
            out["method"] = self.method
        return out

    def prepare(self, n_members: int | None, n_classes: int | None) -> None:
        """Part of the rule protocol: see :class:`HaltingRule`."""
        super().prepare(n_members, n_classes)
        if n_classes is not None and self.n_classes is not None and n_classes != self.n_classes:
            raise ValueError(f"the rule's prior is over {self.n_classes} classes, the votes have {n_classes}")
        if n_classes is None:
            return
        if self._uses_bound(n_classes):
            self._check_bound_size(n_classes, build=True)
        elif (n_classes > 2 and self.method == "exact" and self._support is None
              and self._beyond_dense(n_classes) and not self._has_stop_bits(n_classes)
              and n_classes * self.n_members ** 3 > MAX_EXACT_WORK):
            raise ValueError(
                f"method='exact' computes Eq. 3 for {n_classes} classes vote vector by vector, at a cost of "
                f"about l * T**3 = {n_classes * self.n_members ** 3:,} operations each, above the limit "
                f"MAX_EXACT_WORK = {MAX_EXACT_WORK:,}; use method='auto' (the union bound, a table look-up "
                "that never stops where the exact rule would not)")
        elif self._dense(n_classes) is None:  # tables are built now, not on the first request
            self._stop_bits(n_classes)

    def _beyond_dense(self, l):
        """Whether the dense table of ``l`` classes would exceed ``MAX_DENSE_TABLE`` entries."""
        return power_exceeds(self.n_members + 1, l, MAX_DENSE_TABLE)

    def _has_stop_bits(self, l):
        """Whether ``l``-class decisions are kept as stop bits (two or three classes beyond the dense table)."""
        limit = {2: MAX_STOP_BITS_T, 3: MAX_STOP_BITS_T3}.get(l, -1)
        return self.n_members <= limit and self._beyond_dense(l) and not self._uses_bound(l)

    def _uses_bound(self, l):
        """Whether ``l``-class confidences come from the union bound (:mod:`ensvote.manyclass`)."""
        if self._pair_prior is not None:
            return True
        if self._support is not None or self.method == "exact" or l == 2:
            return False
        return self.method == "bound" or self._beyond_dense(l)

    def _check_bound_size(self, l, build=False):
        """Refuse (ValueError naming the limit) a union-bound table above ``MAX_PAIR_TABLE_BYTES``.

        With ``build``, also build (and cache) the table, so that voting is look-ups only.
        """
        check_pair_table_size(self.n_members, l, self._pair_prior is not None)
        if build:
            pair_table(self.n_members, l, self._pair_prior)

    def _prior_for(self, l):
        """The rule's prior as a :class:`~ensvote.confidence.Prior` (the uniform one written out for ``l`` classes)."""
        if self._support is not None:
            return self._parsed_prior
        return check_prior(None, self.n_members, l)

    def table(self, n_classes: int = 2) -> NDArray[np.float64] | None:
        """The dense table of P*(t, T) for the current majority, or ``None``.

        ``None`` when the table would exceed ``MAX_DENSE_TABLE`` entries or the
        rule uses the union bound (``method``; :func:`ensvote.manyclass.pair_table`
        holds that rule's table).

        ``table[t_0, ..., t_{l-1}]`` is the confidence at that vote vector (NaN
        for vectors with more than ``T`` votes or of probability 0 under the prior).

        Parameters
        ----------
        n_classes : int >= 2, default=2
            Number of classes ``l``.

        Returns
        -------
        ndarray of float, shape (T + 1,) * l, read-only, or None

        Raises
        ------
        ValueError
            ``n_classes`` below 2 or incompatible with the rule's prior.

        Examples
        --------
        >>> from ensvote import UrnRule
        >>> tab = UrnRule(T=11).table()
        >>> tab.shape, round(float(tab[5, 0]), 4), round(float(tab[4, 2]), 4)
        ((12, 12), 0.9989, 0.8788)
        """
        l = check_positive_int(n_classes, name="n_classes", minimum=2)
        self.prepare(self.n_members, l)
        return self._dense(l)

    def _dense(self, l):
        """:meth:`table` without the checks (cached; None beyond ``MAX_DENSE_TABLE`` or with the bound)."""
        T = self.n_members
        if self._beyond_dense(l) or self._uses_bound(l):
            return None
        own = self.__dict__.setdefault("_dense_tables", {})  # the rule's own, then the shared cache
        if l in own:
            return own[l]
        prior = self._prior_for(l)
        support, probs = prior
        key = (T, l, prior.key)
        tab = _URN_TABLES.get(key)
        if tab is None:
            tab = _urn_confidence_table(T, l, support, probs)
            _URN_TABLES[key] = tab
        own[l] = tab
        return tab

    def lookup_table(self) -> NDArray[np.int64]:
        """The per-class tables of Soto et al. (2016) for two classes.

        Returns
        -------
        ndarray of int, shape (2, T + 1)
            ``need[c, m]``: fewest votes for class ``c``, with ``m`` votes for
            the other class, at which the vote stops with ``c`` as the current
            majority; ``-1`` if there is none.

        Raises
        ------
        ValueError
            If ``T`` is too large to enumerate every two-class vote vector.

        Examples
        --------
        With ``T = 11`` and α = 0.99, 4 votes to 0 stop, 5 to 1 stop, and from
        2 rival votes on the vote runs to a sure majority (6 of 11):

        >>> from ensvote import UrnRule
        >>> UrnRule(T=11).lookup_table()
        array([[ 4,  5,  6,  6,  6,  6, -1, -1, -1, -1, -1, -1],
               [ 4,  5,  6,  6,  6,  6, -1, -1, -1, -1, -1, -1]])
        """
        T = self.n_members
        check_size((T + 1) ** 2, what=f"lookup_table() of T={T} (every vote vector of two classes)")
        x = np.arange(T + 1)
        need = np.full((2, T + 1), -1)
        for c in range(2):
            for m in range(T + 1):
                xs = x[: T - m + 1]
                cnt = np.zeros((len(xs), 2), dtype=np.int64)
                cnt[:, c] = xs
                cnt[:, 1 - c] = m
                ok = self.stop(cnt) & (np.argmax(cnt, axis=1) == c)
                if ok.any():
                    need[c, m] = xs[np.argmax(ok)]
        return need

    def table_key(self, n_classes: int) -> Hashable | None:
        """Part of the rule protocol: see :class:`HaltingRule`."""
        # beyond the dense confidence table too: there (T + 1) ** l exceeds the engine's dense stop table
        # (MAX_STOP_TABLE <= MAX_DENSE_TABLE), so the engine memoises the decisions of the vectors reached
        T = self.n_members
        prior = None if self._support is None else self._prior_key
        if self._uses_bound(n_classes):
            prior = ("bound", None if self._pair_prior is None else self._pair_prior.key)
        return (type(self), T, self.confidence, prior)

    def confidence_of(self, counts: ArrayLike) -> NDArray[np.float64]:
        """P*(t, T) of the current majority (table look-up where available).

        Parameters
        ----------
        counts : array_like of int, shape (..., l)
            Votes per class; each total at most ``T``.

        Returns
        -------
        ndarray of float, shape (...)
            Eq. 3 of Soto et al. (2016), or its union bound (``method``).

        Raises
        ------
        ValueError, TypeError
            Bad counts (see :func:`ensvote.finite_confidence`).

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote import UrnRule
        >>> np.round(UrnRule(T=11).confidence_of([[5, 0], [4, 2]]), 4)
        array([0.9989, 0.8788])
        """
        t = check_counts(counts, max_sum=self.n_members,
                         max_sum_desc=f"the rule's ensemble size T={self.n_members}")
        self.prepare(self.n_members, t.shape[-1])
        return self._confidence(t)

    def _confidence(self, t):
        if self._uses_bound(t.shape[-1]):  # union bound over the leader's rivals (ensvote.manyclass)
            return pair_table(self.n_members, t.shape[-1], self._pair_prior).confidence(t)
        tab = self._dense(t.shape[-1])
        if tab is not None:
            return tab[tuple(np.moveaxis(t, -1, 0))]
        flat = t.reshape(-1, t.shape[-1])
        uniq, inv = np.unique(flat, axis=0, return_inverse=True)
        vals = np.empty(len(uniq))
        todo = []
        key = (self.n_members, t.shape[-1], None if self._support is None else self._prior_key)
        memo = _URN_MEMOS.get(key)
        if memo is None or len(memo) > _MEMO_MAX:
            memo = _URN_MEMOS[key] = {}
        for r, row in enumerate(uniq):
            v = memo.get(row.tobytes())
            if v is None:
                todo.append(r)
            else:
                vals[r] = v
        if todo:
            new = self._on_demand(uniq[todo])
            vals[todo] = new
            for r, v in zip(todo, new):
                memo[uniq[r].tobytes()] = float(v)
        return vals[inv.reshape(-1)].reshape(t.shape[:-1])

    def _on_demand(self, t):
        """Eq. 3 for the vote vectors ``t`` (shape ``(n, l)``), each a sum over the prior's support."""
        if self._support is None and t.shape[-1] > 2:  # exact Eq. 3 from Prop. 3's product form
            return urn_confidence_exact(t, self.n_members)
        prior = None if self._support is None else (self._support, self._probs)
        return finite_confidence(t, self.n_members, prior=prior)

    def stop_bits(self, n_members: int, n_classes: int) -> NDArray[np.uint8] | None:
        """Part of the rule protocol: the stop bits beyond the dense table (two classes up to
        ``MAX_STOP_BITS_T``, three up to ``MAX_STOP_BITS_T3``); with a dense confidence table, its decisions
        packed the same way (two or three classes); else None."""
        self.prepare(n_members, n_classes)
        bits = self._stop_bits(n_classes)
        if bits is not None or n_classes > 3 or self._uses_bound(n_classes) or self._dense(n_classes) is None:
            return bits
        key = (self.n_members, n_classes, "stop bits of the table", self._prior_for(n_classes).key, self.confidence)
        bits = _URN_TABLES.get(key)
        if bits is None:
            t = level_vectors(self.n_members, n_classes)
            bits = np.packbits(self.decide(t) | (t.sum(axis=1) == self.n_members))
            bits.setflags(write=False)
            _URN_TABLES[key] = bits
        return bits

    def decide(self, t: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Part of the rule protocol: see :class:`HaltingRule`."""
        bits = self._stop_bits(t.shape[-1])
        if bits is not None:
            i = level_index(t)
            return ((bits[i >> 3] >> (7 - (i & 7))) & 1).astype(bool)
        conf = self._confidence(t)
        return (conf > self.confidence) | (t.sum(axis=-1) >= self.n_members)

    def _stop_bits(self, l):
        """Two or three classes beyond the dense table (``T <= MAX_STOP_BITS_T``, ``MAX_STOP_BITS_T3``): every
        stop decision, one bit per vote vector.

        None where the decisions come from a confidence table or on demand.
        """
        T = self.n_members
        if not self._has_stop_bits(l):
            return None
        bits = self.__dict__.get("_bits")  # the rule's own, then the shared cache
        if bits is None:
            prior = self._prior_for(l)
            support, probs = prior
            key = (T, "stop bits", prior.key, self.confidence)
            bits = _URN_TABLES.get(key)
            if bits is None:
                if l == 2:
                    bits = _urn_stop_bits(T, support, probs, self.confidence)
                else:
                    bits = self._stop_bits3(support, probs)
                bits.setflags(write=False)
                _URN_TABLES[key] = bits
            self._bits = bits
        return bits

    def _stop_bits3(self, support, probs):
        """Three classes: :func:`ensvote._urn.stop_bits3`, the vote vectors it leaves decided by :meth:`_on_demand`."""
        T = self.n_members
        bits, ask = stop_bits3(T, support, probs, self.confidence, near_tol=_NEAR_THRESHOLD)
        if len(ask):  # the vectors near the threshold or of tiny (not zero) probability: Eq. 3 itself
            i = level_index(ask[self._on_demand(ask) > self.confidence])  # the bits left unset: set the stops
            np.bitwise_or.at(bits, i >> 3, (128 >> (i & 7)).astype(np.uint8))
        return bits

    def on_demand_warning(self, n_classes: int) -> SlowVoteWarning | None:
        """A :class:`SlowVoteWarning` when ``l``-class decisions evaluate Eq. 3 per new vote vector, else None.

        Without a table (confidences or stop bits) every new vote vector costs
        a sum over the prior's support, and a first ``predict`` can take far
        longer than the forest's own.  The warning names the limits and what
        answers at table speed instead.

        Parameters
        ----------
        n_classes : int
            Number of classes ``l``.

        Returns
        -------
        SlowVoteWarning or None

        Examples
        --------
        >>> from ensvote import UrnRule
        >>> UrnRule(T=101).on_demand_warning(2) is None
        True
        >>> print(UrnRule(T=20_001).on_demand_warning(2))  # doctest: +ELLIPSIS
        UrnRule has no table for T=20001 members and 2 classes ... rule='infinite' ...
        """
        T, l = self.n_members, check_positive_int(n_classes, name="n_classes", minimum=2)
        if self._uses_bound(l) or not self._beyond_dense(l) or self._has_stop_bits(l):
            return None
        if l == 2:
            limit, largest = f"T above MAX_STOP_BITS_T = {MAX_STOP_BITS_T:,}", MAX_STOP_BITS_T
        elif l == 3:
            limit, largest = f"T above MAX_STOP_BITS_T3 = {MAX_STOP_BITS_T3:,}", MAX_STOP_BITS_T3
        else:
            largest = largest_T(MAX_DENSE_TABLE, l)
            limit = f"(T+1)**l above MAX_DENSE_TABLE = {MAX_DENSE_TABLE:,}"
        size = "the uniform prior" if self._support is None else f"a prior of {len(self._support):,} points"
        return SlowVoteWarning(
            f"UrnRule has no table for T={T} members and {l} classes ({limit}): every new vote vector "
            f"evaluates Eq. 3 on demand over {size}, and a first predict can take far longer than the "
            f"forest's own. At table speed: rule='infinite' (needs no table), or at most {largest:,} members "
            f"for {l} classes")


@register
class ExactRule(HaltingRule):
    """Stop when the remaining votes cannot change the outcome (RF* of Soto et al. 2016).

    With ``R`` votes still unseen, the current majority ``c`` is final iff for
    every other class ``j``: ``t_c - t_j > R``, or ``t_c - t_j == R`` and
    ``c < j`` (ties go to the lower index).  It never disagrees with the full
    ensemble.

    Parameters
    ----------
    T : int
        Size of the full ensemble.

    Examples
    --------
    With ``T = 11``: six votes of eleven decide, five to four do not, and
    five to none do not either (the six still unseen could all go to class 1):

    >>> from ensvote import ExactRule
    >>> ExactRule(11).stop([[6, 0], [5, 4], [5, 0]])
    array([ True, False, False])
    """

    name = "exact"

    def __init__(self, T: int):
        self.n_members = check_positive_int(T, name="T", maximum=MAX_COUNT - 1,
                                            why="votes must be counted exactly")

    @classmethod
    def from_params(cls, strength: float | None = None, *, n_members: int, n_classes: int | None = None,
                    prior: Any = None, oob_votes: Callable[[], NDArray[np.int64]] | None = None) -> HaltingRule:
        """Part of the registry: see :meth:`HaltingRule.from_params` (no strength, no prior)."""
        return cls(n_members)

    def _params(self):
        return {"T": self.n_members}

    def min_votes(self, n_members: int, n_classes: int) -> int:
        """Part of the rule protocol: a leader ``s`` votes ahead is final once ``s >= T - s`` (``s = ceil(T / 2)``)."""
        return (self.n_members + 1) // 2

    def table_key(self, n_classes: int) -> Hashable | None:
        """Part of the rule protocol: see :class:`HaltingRule`."""
        return (type(self), self.n_members)

    def confidence_of(self, counts: ArrayLike) -> NDArray[np.float64]:
        """1.0 where the outcome is already decided, else 0.0.

        Parameters
        ----------
        counts : array_like of int, shape (..., l)
            Votes per class; each total at most ``T``.

        Returns
        -------
        ndarray of float, shape (...)

        Examples
        --------
        >>> from ensvote import ExactRule
        >>> ExactRule(11).confidence_of([[6, 0], [5, 4]])
        array([1., 0.])
        """
        t = check_counts(counts, max_sum=self.n_members,
                         max_sum_desc=f"the rule's ensemble size T={self.n_members}")
        return self.decide(t).astype(float)

    def decide(self, t: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Part of the rule protocol: see :class:`HaltingRule`."""
        R = self.n_members - t.sum(axis=-1)
        c = np.argmax(t, axis=-1)
        tc = np.take_along_axis(t, c[..., None], axis=-1)
        diff = tc - t
        j = np.arange(t.shape[-1])
        ok = (diff > R[..., None]) | ((diff == R[..., None]) & (c[..., None] < j))
        ok |= j == c[..., None]
        return np.all(ok, axis=-1)


@register
class FixedRule(HaltingRule):
    """Query the first ``n`` members for every row (the fixed-size FS of Hernández-Lobato et al. 2011).

    Parameters
    ----------
    n : int
        Number of members to query; must be between 1 and the ensemble size.

    Examples
    --------
    >>> import numpy as np
    >>> from ensvote import FixedRule, halt
    >>> FixedRule(5).stop([[3, 1], [4, 1]])
    array([False,  True])
    >>> votes = np.array([[0, 1, 1, 1, 1, 1, 1], [1, 1, 0, 0, 0, 0, 0]])
    >>> res = halt(votes, FixedRule(3))
    >>> res.n_queried, res.labels
    (array([3, 3]), array([1, 1]))
    """

    name, strength = "fixed", "n"

    def __init__(self, n: int):
        self.n = check_positive_int(n, name="n")

    @classmethod
    def from_params(cls, strength: float | None = None, *, n_members: int, n_classes: int | None = None,
                    prior: Any = None, oob_votes: Callable[[], NDArray[np.int64]] | None = None) -> HaltingRule:
        """Part of the registry: see :meth:`HaltingRule.from_params` (``strength`` is ``n``, default all members)."""
        return cls(n_members if strength is None else strength)

    def _params(self):
        return {"n": self.n}

    def prepare(self, n_members: int | None, n_classes: int | None) -> None:
        """Part of the rule protocol: see :class:`HaltingRule`."""
        if n_members is not None and self.n > n_members:
            raise ValueError(f"FixedRule n={self.n} must lie in 1..T, but the ensemble has T={n_members} members")

    def table_key(self, n_classes: int) -> Hashable | None:
        """Part of the rule protocol: see :class:`HaltingRule`."""
        return (type(self), self.n)

    def min_votes(self, n_members: int, n_classes: int) -> int:
        """Part of the rule protocol: see :class:`HaltingRule` (``n``: it stops nowhere else)."""
        return self.n

    def decide(self, t: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Part of the rule protocol: see :class:`HaltingRule`."""
        return t.sum(axis=-1) >= self.n


@register
class MarginRule(HaltingRule):
    """Stop when the current majority leads the runner-up by ``k`` votes.

    The rule of LightGBM's ``pred_early_stop`` (there on the margin of the
    raw scores): no model, no prior, one integer.  Every vote stops once the
    members run out.

    Parameters
    ----------
    k : int >= 1
        The lead that stops the vote.

    Examples
    --------
    >>> from ensvote.rules import MarginRule
    >>> MarginRule(3).stop([[4, 1], [3, 1]])
    array([ True, False])
    >>> MarginRule(3).stop([[3, 0, 0], [3, 1, 0]])
    array([ True, False])
    """

    name, strength = "margin", "k"

    def __init__(self, k: int):
        self.k = check_positive_int(k, name="k")

    @classmethod
    def from_params(cls, strength: float | None = None, *, n_members: int, n_classes: int | None = None,
                    prior: Any = None, oob_votes: Callable[[], NDArray[np.int64]] | None = None) -> HaltingRule:
        """Part of the registry: see :meth:`HaltingRule.from_params` (``strength`` is the lead ``k``)."""
        if strength is None:
            raise ValueError("the margin rule needs its lead k (strength), e.g. MarginRule(k=5)")
        return cls(strength)

    def _params(self):
        return {"k": self.k}

    def table_key(self, n_classes: int) -> Hashable | None:
        """Part of the rule protocol: see :class:`HaltingRule`."""
        return (type(self), self.k)

    def min_votes(self, n_members: int, n_classes: int) -> int:
        """Part of the rule protocol: see :class:`HaltingRule` (a lead of ``k`` takes ``k`` votes)."""
        return min(self.k, n_members)

    def decide(self, t: NDArray[np.int64]) -> NDArray[np.bool_]:
        """Part of the rule protocol: see :class:`HaltingRule`."""
        top2 = -np.partition(-t, 1, axis=-1)[..., :2]
        return top2[..., 0] - top2[..., 1] >= self.k


def make_rule(rule: str | HaltingRule, *, n_members: int, strength: float | None = None, n_classes: int | None = None,
              prior: Any = None, oob_votes: Callable[[], NDArray[np.int64]] | None = None,
              **options: Any) -> HaltingRule:
    """Build a rule from its name in :data:`REGISTRY`, or check a rule object.

    Parameters
    ----------
    rule : str or HaltingRule
        A name of :data:`REGISTRY` (``"urn"``, ``"infinite"``, ``"exact"``,
        ``"fixed"``, ``"margin"``, ``"optimal"``), or a rule object (returned
        as is once checked against ``n_members``).
    n_members : int
        Ensemble size ``T``.
    strength : number, optional
        The rule's one parameter (its :attr:`~HaltingRule.strength`: the
        threshold α or π, the budget δ, ``n``, ``k``); None: its default.
    n_classes : int, optional
        Number of classes.
    prior, oob_votes : optional
        See :meth:`HaltingRule.from_params`.
    **options
        Options of one rule's ``from_params`` (e.g. ``max_members`` of
        :meth:`ensvote.OptimalRule.from_params`).

    Returns
    -------
    HaltingRule

    Raises
    ------
    TypeError
        ``rule`` is neither a str nor a :class:`HaltingRule`.
    ValueError
        An unknown name, or a rule object built for another ensemble size.

    Examples
    --------
    >>> from ensvote import UrnRule
    >>> from ensvote.rules import make_rule
    >>> make_rule("urn", n_members=101)
    UrnRule(T=101, confidence=0.99, prior=None)
    >>> make_rule("infinite", n_members=101, strength=0.95)
    InfiniteRule(confidence=0.95)
    >>> make_rule(UrnRule(T=11), n_members=101)
    Traceback (most recent call last):
        ...
    ValueError: UrnRule was built for T=11 members, but the ensemble has 101
    """
    if isinstance(rule, HaltingRule):
        rule.prepare(n_members, None)
        return rule
    names = ", ".join(map(repr, REGISTRY))
    if not isinstance(rule, str):
        raise TypeError(f"rule must be one of {names} or a HaltingRule, got {rule!r}")
    if rule not in REGISTRY:
        raise ValueError(f"unknown rule {rule!r}; valid names: {names} (or pass a HaltingRule)")
    return REGISTRY[rule].from_params(strength, n_members=n_members, n_classes=n_classes, prior=prior,
                                      oob_votes=oob_votes, **options)
