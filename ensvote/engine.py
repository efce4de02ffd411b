"""The voting engine: query members in order until a rule says stop."""

from __future__ import annotations

import math
import threading
import time
import warnings
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numpy.typing import ArrayLike
from scipy import sparse

from ._cache import BoundedCache
from ._urn import level_index
from ._validation import MAX_COUNT, MAX_ENTRIES, _fmt, as_numeric_array, check_positive_int, largest_T, power_exceeds
from .rules import HaltingRule, decided

__all__ = ["HaltResult", "StopMemo", "StopTable", "TreeEnsemble", "code_layout", "halt", "label_table",
           "level_index", "max_flat_table_T", "run_halting", "stop_memo", "stop_table"]

# upper bound on the entries of one block's cumulative count array (rows x members x classes)
_BLOCK_ENTRIES = 4_000_000
# largest flat stop table ((T + 1) ** l booleans) the fast paths build
MAX_STOP_TABLE = 2_200_000
_STOP_TABLES = BoundedCache("stop tables", 32)
_LABEL_TABLES = BoundedCache("label tables", 32)
#: Bytes one memo of stop decisions (:class:`StopMemo`, the engine beyond the dense table) takes at
#: most: 2**21 decisions of one-word codes.  A memo that would need more is emptied and refilled.
MAX_STOP_MEMO_BYTES = 40_000_000
_STOP_MEMOS = BoundedCache("stop decision memos", 16, max_bytes=2 * MAX_STOP_MEMO_BYTES)
# a count code word stays below this bound (int64, with room for the parking mark below)
_WORD_LIMIT = 2**62
# word 0 of a parked row's code in the memo's numpy loops: negative, and stays so while votes are added
_PARKED = -(2**62)


@dataclass(frozen=True, repr=False)
class HaltResult:
    """Outcome of a halted vote.

    Attributes
    ----------
    labels : ndarray of shape (n_rows,)
        Majority of the members queried (lowest index on ties).  From
        :meth:`HaltingClassifier.halt` these are in the estimator's class space.
    n_queried : ndarray of int, shape (n_rows,)
        Members queried per row (``n_members`` for rows that never stopped).
    counts : ndarray of int, shape (n_rows, n_classes)
        Votes per class at the stop.
    n_members : int
        Ensemble size ``T``.
    stopped : ndarray of bool, shape (n_rows,)
        True where the rule itself stopped the vote; False where the members
        ran out first (for finite rules, which always stop at ``T``, False only
        for rows whose outcome at ``T`` the rule would not have called, e.g.
        :class:`~ensvote.InfiniteRule` rows still below π after all members).
    proba_sum : ndarray of float, shape (n_rows, n_classes), or None
        Soft voting (``HaltingClassifier(voting="soft")``): the members'
        class probabilities summed over the members queried; ``counts`` is
        then None.

    Examples
    --------
    >>> import numpy as np
    >>> from ensvote import ExactRule, halt
    >>> votes = np.array([[0, 0, 0, 0, 0, 1, 0], [0, 1, 1, 0, 1, 0, 1]])
    >>> res = halt(votes, ExactRule(7))
    >>> res
    HaltResult(n_rows=2, n_members=7, mean_queried=5.500)
    >>> res.labels, res.n_queried
    (array([0, 1]), array([4, 7]))
    >>> res.counts
    array([[4, 0],
           [3, 4]])
    """

    labels: np.ndarray
    n_queried: np.ndarray
    counts: np.ndarray
    n_members: int
    stopped: np.ndarray = None
    proba_sum: np.ndarray = None

    @property
    def mean_queried(self) -> float:
        """Average number of members queried per row (NaN for no rows).

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote import ExactRule, halt
        >>> halt(np.array([[0, 0, 0, 0, 0, 1, 0], [0, 1, 1, 0, 1, 0, 1]]), ExactRule(7)).mean_queried
        5.5
        """
        return float(np.mean(self.n_queried)) if len(self.n_queried) else float("nan")

    @property
    def speedup(self) -> float:
        """``n_members / mean_queried``: the tree-count speed-up.

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote import ExactRule, halt
        >>> res = halt(np.array([[0, 0, 0, 0, 0, 1, 0], [0, 1, 1, 0, 1, 0, 1]]), ExactRule(7))
        >>> round(res.speedup, 4)
        1.2727
        """
        return self.n_members / self.mean_queried

    def __repr__(self):
        return (f"HaltResult(n_rows={len(self.labels)}, n_members={self.n_members}, "
                f"mean_queried={self.mean_queried:.3f})")


def _check_votes(votes, n_classes):
    v = as_numeric_array(votes, name="votes", what="integer class indices")
    if v.ndim != 2:
        raise ValueError(f"votes must have shape (n_rows, n_members), got {v.ndim} dimension(s) {v.shape}")
    if v.shape[1] < 1:
        raise ValueError("votes must contain at least one member")
    if v.dtype.kind == "f":
        if not np.all(np.isfinite(v)) or np.any(v != np.round(v)):
            raise ValueError("votes must be integer class indices")
        if v.size and np.abs(v).max() >= MAX_COUNT:
            raise ValueError(f"votes must be class indices below 2**53, found {_fmt(np.abs(v).max())}")
    if v.dtype == np.uint64 and v.size and v.max() >= 2**63:
        raise ValueError(f"votes contain label {_fmt(v.max())}, beyond any number of classes")
    if v.dtype.kind == "f" or v.dtype == np.uint64:
        v = v.astype(np.int64)
    # other integer dtypes are used as given (no copy): the engine only indexes with them
    if n_classes is not None and (isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer))
                                  or n_classes < 2):
        raise ValueError(f"n_classes must be an int >= 2, got {n_classes!r}")
    top = 1
    if v.size:
        # one pass: seen as unsigned, a negative vote is larger than any valid one
        top = int(v.view(np.dtype(f"u{v.dtype.itemsize}")).max())
        if v.dtype.kind == "i" and top >= 2 ** (8 * v.dtype.itemsize - 1):
            raise ValueError(f"votes must be class indices >= 0, found {int(v.min())}")
    if n_classes is None:
        l = max(2, top + 1)
        if v.shape[0] * l > MAX_ENTRIES:
            raise ValueError(f"votes contain label {_fmt(top)}, so n_classes would be {_fmt(l)}: the vote "
                             f"counts would need {_fmt(v.shape[0])} x {_fmt(l)} entries, more than the limit of "
                             f"{_fmt(MAX_ENTRIES)}; votes must be class indices 0..n_classes-1")
        return v, l
    if top >= n_classes:
        raise ValueError(f"votes contain label {top}, outside 0..{n_classes - 1}")
    if v.shape[0] * int(n_classes) > MAX_ENTRIES:
        raise ValueError(f"n_classes={_fmt(n_classes)}: the vote counts would need {_fmt(v.shape[0])} x "
                         f"{_fmt(n_classes)} entries, more than the limit of {_fmt(MAX_ENTRIES)}")
    return v, int(n_classes)


def halt(votes: ArrayLike, rule: HaltingRule, *, n_classes: int | None = None) -> HaltResult:
    """Query each row's members in order and stop as soon as ``rule`` allows.

    Parameters
    ----------
    votes : array_like of int, shape (n_rows, n_members)
        ``votes[r, j]`` is the class index member ``j`` predicts for row ``r``;
        members are queried in column order.
    rule : HaltingRule
        :class:`~ensvote.InfiniteRule`, :class:`~ensvote.UrnRule`,
        :class:`~ensvote.ExactRule`, :class:`~ensvote.FixedRule`, ...
    n_classes : int, optional
        Number of classes ``l``; default ``max(votes) + 1`` (at least 2).

    Returns
    -------
    HaltResult
        ``labels`` (majority of the members queried, lowest index on ties),
        ``n_queried`` and ``counts`` per row.  Rows that never stop use all
        members.

    Raises
    ------
    TypeError
        ``rule`` is not a :class:`~ensvote.HaltingRule`.
    ValueError
        ``votes`` not a 2-D matrix of class indices ``0..n_classes-1``, a bad
        ``n_classes``, or a rule built for another number of members.

    Examples
    --------
    Members that are right 80 % of the time, 1,000 rows of ``T = 101``, halted
    by the urn rule of Soto et al. (2016):

    >>> import numpy as np
    >>> import ensvote
    >>> from ensvote import UrnRule, halt
    >>> rng = np.random.default_rng(ensvote.SEED)
    >>> votes = (rng.random((1000, 101)) < 0.8).astype(int)
    >>> res = halt(votes, UrnRule(T=101, confidence=0.99))
    >>> res
    HaltResult(n_rows=1000, n_members=101, mean_queried=13.511)
    >>> round(res.speedup, 2), bool(np.all(res.labels == 1))
    (7.48, True)
    """
    if not isinstance(rule, HaltingRule):
        raise TypeError(f"rule must be a HaltingRule (e.g. UrnRule, InfiniteRule), got {type(rule).__name__}")
    v, l = _check_votes(votes, n_classes)
    tab = stop_table(rule, v.shape[1], l)
    slow = rule.on_demand_warning(l) if tab is None else None
    if slow is not None:
        warnings.warn(slow, stacklevel=2)
    if tab is None:  # the decisions of the vote vectors reached, memoised
        memo = stop_memo(rule, v.shape[1], l)
        with memo.lock:
            res = _halt_votes(v, v.shape[1], _MemoCodes(memo, rule))
        _memo_used(memo)
        return res
    return _halt_votes(v, v.shape[1], _TableCodes(tab))


class StopTable(NamedTuple):
    """A rule's stop decisions for every count vector (see :func:`stop_table`).

    Either a flat boolean table indexed by the count code (``layout[0] ==
    0``, codes in radix ``T + 1``) or, beyond its size, the rule's stop bits
    in level order (:meth:`ensvote.HaltingRule.stop_bits`, ``layout[0]`` =
    the number of classes, 2 or 3), with codes in radix ``2 ** b`` (``b``
    bits per class, ``2 ** b > T``): the vote vector is read off the code's
    bit fields, and its :func:`level_index` is the bit.  ``layout`` is
    ``(mode, radix, radix ** l)``; codes from ``radix ** l`` up never stop.

    Examples
    --------
    >>> from ensvote import ExactRule
    >>> from ensvote.engine import stop_table
    >>> tab = stop_table(ExactRule(5), 5, 2)
    >>> tab.stride, tab.stops_at
    (array([6, 1], dtype=int32), array([False, False, False,  True,  True,  True]))
    """

    table: np.ndarray  #: flat boolean table indexed by count code, or packed stop bits (uint8)
    stride: np.ndarray  #: code increment of a vote for each class
    stops_at: np.ndarray  #: ``stops_at[s]``: some count vector with ``s`` votes stops
    layout: np.ndarray  #: ``(0 or l, radix, radix ** l)``, int64

    @property
    def min_votes(self):
        """Fewest votes at which any count vector stops (``T`` if none does before ``T``).

        Examples
        --------
        >>> from ensvote import ExactRule, UrnRule
        >>> from ensvote.engine import stop_table
        >>> stop_table(ExactRule(5), 5, 2).min_votes
        3
        >>> stop_table(UrnRule(T=101), 101, 2).min_votes
        6
        """
        hit = np.flatnonzero(self.stops_at)
        return int(hit[0]) if hit.size else len(self.stops_at) - 1

    @property
    def flat(self):
        """Whether the decisions are a flat table indexed by code (else stop bits in level order).

        Examples
        --------
        >>> from ensvote import UrnRule
        >>> from ensvote.engine import stop_table
        >>> stop_table(UrnRule(T=101), 101, 2).flat, stop_table(UrnRule(T=2001), 2001, 2).flat
        (True, False)
        """
        return bool(self.layout[0] == 0)

    def counts(self, code):
        """The vote vectors of count codes ``code`` (shape ``(n, l)``).

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote import UrnRule
        >>> from ensvote.engine import stop_table
        >>> tab = stop_table(UrnRule(T=2001), 2001, 2)  # stop bits: 11 bits per class
        >>> tab.stride, tab.counts(np.array([3 * 2048 + 5]))
        (array([2048,    1], dtype=int32), array([[3, 5]]))
        """
        return _decode(code, int(self.layout[1]) - 1, len(self.stride))

    def stops(self, code):
        """The decision at each count code (vectorised; codes from ``radix ** l`` up: False).

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote import ExactRule
        >>> from ensvote.engine import stop_table
        >>> stop_table(ExactRule(5), 5, 2).stops(np.array([6 * 3 + 0, 6 * 2 + 1]))
        array([ True, False])
        """
        code = np.asarray(code, dtype=np.int64)
        if self.flat:
            return self.table.take(code)
        ok = code < self.layout[2]
        i = level_index(self.counts(np.where(ok, code, 0)))
        return ok & ((self.table[i >> 3] >> (7 - (i & 7))) & 1).astype(bool)

    def kernel_args(self):
        """``(table, layout, stops_at)`` for :func:`ensvote.kernel.run_forest`: the flat table with None, or the
        stop bits with ``(l, b, 2 ** (l b))`` (the bits per class).

        Examples
        --------
        >>> from ensvote import UrnRule
        >>> from ensvote.engine import stop_table
        >>> table, layout, stops_at = stop_table(UrnRule(T=2001), 2001, 2).kernel_args()
        >>> layout, len(table), int(stops_at.argmax())
        (array([      2,      11, 4194304]), 250626, 6)
        """
        if self.flat:
            return self.table, None, self.stops_at
        lay = np.array([self.layout[0], int(self.layout[1]).bit_length() - 1, self.layout[2]], dtype=np.int64)
        lay.setflags(write=False)
        return self.table, lay, self.stops_at


def stop_table(rule, n_members, n_classes):
    """The rule's stop decision for every count vector, as a flat boolean table (or the rule's stop bits).

    Count vectors ``t`` (``sum(t) <= T``) are coded in mixed radix ``T + 1``:
    ``code = sum_c t_c * stride[c]`` with ``stride[c] = (T + 1) ** (l - 1 - c)``,
    so adding a vote for class ``c`` adds ``stride[c]`` and a stop check is
    ``table[code]``.  Entries with ``sum(t) == 0`` or ``sum(t) > T`` are False
    (never looked up).  The table has ``2 * (T + 1) ** l`` entries: codes from
    ``(T + 1) ** l`` up are False, so a fast path can park a stopped row there
    and keep adding votes without it stopping again (at most ``T`` votes add
    less than ``(T + 1) ** l``).  Built once per ``rule.table_key()`` (its
    type, threshold, prior), ``T`` and ``l``, and cached.  Where the flat
    table would exceed ``MAX_STOP_TABLE`` entries, a rule that keeps stop
    bits (:meth:`ensvote.HaltingRule.stop_bits`, two or three classes) gets
    a :class:`StopTable` over them instead, its codes in radix ``2 ** b``.

    Parameters
    ----------
    rule : HaltingRule
    n_members : int
        Ensemble size ``T``.
    n_classes : int
        Number of classes ``l``.

    Returns
    -------
    StopTable or None
        ``(table, stride, stops_at, layout)``; ``stops_at`` (boolean, length
        ``T + 1``) lets the fast paths skip the look-ups after members where no
        row can stop (e.g. the first few).  None when
        the rule has no table key (e.g. a user-defined rule) or ``(T + 1) ** l``
        exceeds ``MAX_STOP_TABLE`` and the rule keeps no stop bits: the engine
        then decides only the vote vectors the rows reach and memoises them
        (:func:`stop_memo`).

    Raises
    ------
    ValueError
        The rule refuses ``T`` or ``l`` (its ``prepare``), or its stop bits
        are not one bit per vote vector.

    Examples
    --------
    With ``T = 5`` and two classes a count ``(t_0, t_1)`` has code
    ``6 t_0 + t_1``; :class:`~ensvote.ExactRule` stops at 3 votes to 0, not
    at 2 to 1:

    >>> from ensvote import ExactRule
    >>> from ensvote.engine import stop_table
    >>> tab = stop_table(ExactRule(5), 5, 2)
    >>> len(tab.table), bool(tab.table[6 * 3 + 0]), bool(tab.table[6 * 2 + 1])
    (72, True, False)
    """
    rule.prepare(n_members, n_classes)
    T, l = int(n_members), int(n_classes)
    key_rule = rule.table_key(l)
    if key_rule is None:
        return None
    if power_exceeds(T + 1, l, MAX_STOP_TABLE):
        return _bits_table(rule, T, l, key_rule)
    key = (key_rule, T, l)
    hit = _STOP_TABLES.get(key)
    if hit is not None:
        return hit
    stride = code_stride(T, l)
    # every count vector with 1 <= sum <= T, built class by class
    states = np.zeros((1, 0), dtype=np.int64)
    for c in range(l):
        room = T - states.sum(axis=1)
        reps = room + 1
        rows = np.repeat(np.arange(len(states)), reps)
        offs = np.arange(reps.sum()) - np.repeat(np.cumsum(reps) - reps, reps)
        states = np.column_stack([states[rows], offs])
    states = states[states.sum(axis=1) > 0]
    table = np.zeros(2 * (T + 1) ** l, dtype=bool)
    stops = decided(rule, states)
    table[states @ stride.astype(np.int64)] = stops
    stops_at = np.zeros(T + 1, dtype=bool)
    stops_at[states[stops].sum(axis=1)] = True
    layout = np.array([0, T + 1, (T + 1) ** l], dtype=np.int64)
    for a in (table, stride, stops_at, layout):
        a.setflags(write=False)
    hit = _STOP_TABLES[key] = StopTable(table, stride, stops_at, layout)
    return hit


def max_flat_table_T(n_classes):
    """The largest ``T`` whose flat stop table (``(T + 1) ** l`` entries) fits ``MAX_STOP_TABLE``.

    Beyond it :func:`stop_table` turns to the rule's stop bits, or returns None.

    Examples
    --------
    >>> from ensvote.engine import max_flat_table_T
    >>> max_flat_table_T(2), max_flat_table_T(3)
    (1482, 129)
    """
    return largest_T(MAX_STOP_TABLE, check_positive_int(n_classes, name="n_classes", minimum=2))


def _bits_table(rule, T, l, key_rule):
    """:func:`stop_table` from the rule's stop bits (two or three classes, :meth:`HaltingRule.stop_bits`), or None."""
    b = T.bit_length()  # bits per class: 2 ** b > T
    if l > 3 or l * b > 30:  # int32 codes, with room to park a row at 2 ** (l b) and add T votes
        return None
    bits = rule.stop_bits(T, l)
    if bits is None:
        return None
    key = (key_rule, T, l, "bits")
    hit = _STOP_TABLES.get(key)
    if hit is not None and hit.table is bits:
        return hit
    n_vec = math.comb(T + l, l)
    if not isinstance(bits, np.ndarray) or bits.dtype != np.uint8 or bits.shape != (-(-n_vec // 8),):
        raise ValueError(f"{type(rule).__name__}.stop_bits({T}, {l}) must be a uint8 array of {-(-n_vec // 8):,} "
                         f"bytes (one bit for each of the {n_vec:,} vote vectors), got "
                         f"{getattr(bits, 'dtype', type(bits).__name__)} of shape {getattr(bits, 'shape', None)}")
    from .kernel import level_any

    # stops_at[s]: any bit of level s set (the C(s + l - 1, l - 1) vectors from place C(s + l - 1, l))
    starts = np.array([math.comb(s + l - 1, l) for s in range(T + 2)], dtype=np.int64)
    stops_at = level_any(bits, starts)
    stops_at[0] = False  # no vote: never looked up
    layout = np.array([l, 1 << b, 1 << (l * b)], dtype=np.int64)
    stride = np.array([1 << (b * (l - 1 - c)) for c in range(l)], dtype=np.int32)
    for a in (stride, stops_at, layout):
        a.setflags(write=False)
    hit = _STOP_TABLES[key] = StopTable(bits, stride, stops_at, layout)
    return hit


def code_stride(n_members, n_classes):
    """The code increment of a vote for each class: ``(T + 1) ** (l - 1 - c)`` (see :func:`stop_table`).

    Parameters
    ----------
    n_members : int
        Ensemble size ``T``.
    n_classes : int
        Number of classes ``l``.

    Returns
    -------
    ndarray of int32, shape (l,), read-only

    Examples
    --------
    >>> from ensvote.engine import code_stride
    >>> code_stride(10, 3)
    array([121,  11,   1], dtype=int32)
    """
    stride = ((int(n_members) + 1) ** np.arange(int(n_classes) - 1, -1, -1)).astype(np.int32)
    stride.setflags(write=False)
    return stride


def code_layout(n_members, n_classes):
    """Where a vote for each class goes in a count code of one or more int64 words.

    :func:`code_stride`'s mixed-radix code, split into words when it would
    reach ``2**62``: word ``g`` holds classes ``g k .. g k + k - 1``, ``k`` the
    most classes whose code ``(T + 1) ** k`` stays within ``2**62``, and a vote
    for class ``c`` adds ``stride[c]`` to word ``word[c]`` (the classes of a
    word in mixed radix ``T + 1``, the first most significant).  With one word
    (``(T + 1) ** l <= 2**62``: e.g. three classes up to ``T`` of over a
    million, five up to 5,403) the strides are :func:`code_stride`'s.  The
    memo of stop decisions (:class:`StopMemo`) is keyed by these codes.

    Parameters
    ----------
    n_members : int
        Ensemble size ``T``.
    n_classes : int
        Number of classes ``l``.

    Returns
    -------
    word : ndarray of int32, shape (l,)
        The word each class's votes are counted in (``0 .. n_words - 1``).
    stride : ndarray of int64, shape (l,)
        The increment of a vote for each class within its word.

    Examples
    --------
    >>> from ensvote.engine import code_layout
    >>> code_layout(10, 3)
    (array([0, 0, 0], dtype=int32), array([121,  11,   1]))

    Ten classes of ``T = 1000``: ``1001 ** 10`` exceeds ``2**62``, so six
    classes go to the first word and four to the second:

    >>> word, stride = code_layout(1000, 10)
    >>> word
    array([0, 0, 0, 0, 0, 0, 1, 1, 1, 1], dtype=int32)
    >>> int(stride[5]), int(stride[6])
    (1, 1003003001)
    """
    T, l = int(n_members), int(n_classes)
    k = 1
    while k < l and not power_exceeds(T + 1, k + 1, _WORD_LIMIT):
        k += 1
    word = (np.arange(l) // k).astype(np.int32)
    last = np.minimum((word.astype(np.int64) + 1) * k, l) - 1  # the last class of each class's word
    powers = np.array([(T + 1) ** e for e in range(k)], dtype=np.int64)
    return word, powers[last - np.arange(l)]


def _decode(code, n_members, n_classes):
    """Counts ``(n, l)`` from mixed-radix codes (base ``T + 1``, class 0 most significant)."""
    counts = np.empty((len(code), n_classes), dtype=np.int64)
    rest = np.asarray(code, dtype=np.int32)
    for c in range(n_classes - 1, 0, -1):
        rest, counts[:, c] = np.divmod(rest, n_members + 1)
    counts[:, 0] = rest
    return counts


def label_table(n_members, n_classes):
    """Majority class (lowest index on ties) of every mixed-radix code below ``(T + 1) ** l``.

    ``label_table(T, l)[code]`` is the label of a row that ended at ``code``
    (see :func:`stop_table`); cached per ``(T, l)``.

    Parameters
    ----------
    n_members : int
        Ensemble size ``T``.
    n_classes : int
        Number of classes ``l``.

    Returns
    -------
    ndarray of int, shape ((T + 1) ** l,), read-only

    Examples
    --------
    With ``T = 5``, two votes for class 0 and three for class 1 end at code
    ``6 * 2 + 3``:

    >>> from ensvote.engine import label_table
    >>> lab = label_table(5, 2)
    >>> len(lab), int(lab[6 * 2 + 3]), int(lab[6 * 3 + 2])
    (36, 1, 0)
    """
    key = (int(n_members), int(n_classes))
    hit = _LABEL_TABLES.get(key)
    if hit is None:
        T, l = key
        hit = np.argmax(_decode(np.arange((T + 1) ** l, dtype=np.int32), T, l), axis=1)
        hit.setflags(write=False)
        _LABEL_TABLES[key] = hit
    return hit


def table_result(code, n_queried, n_members, tab):
    """The :class:`HaltResult` of rows that ended at ``code`` after ``n_queried`` members.

    Parameters
    ----------
    code : ndarray of int, shape (n_rows,)
        Mixed-radix count codes (see :func:`stop_table`).
    n_queried : ndarray of int, shape (n_rows,)
        Members queried per row.
    n_members : int
        Ensemble size ``T``.
    tab : StopTable
        The rule's.

    Returns
    -------
    HaltResult

    Examples
    --------
    >>> import numpy as np
    >>> from ensvote import ExactRule
    >>> from ensvote.engine import stop_table, table_result
    >>> tab = stop_table(ExactRule(5), 5, 2)
    >>> res = table_result(np.array([6 * 3 + 0, 6 * 2 + 3]), np.array([3, 5]), 5, tab)
    >>> res.labels, res.counts
    (array([0, 1]), array([[3, 0],
           [2, 3]]))
    """
    counts = tab.counts(code)
    return HaltResult(labels=np.argmax(counts, axis=1), n_queried=n_queried, counts=counts, n_members=n_members,
                      stopped=tab.stops(code))


class StopMemo:
    """A rule's stop decisions for the vote vectors reached so far, keyed by count code.

    Beyond the dense stop table (``(T + 1) ** l`` above ``MAX_STOP_TABLE``,
    or a rule without a table key) the engine decides only the vote vectors
    the rows reach, and keeps each decision here: an open-addressing hash
    table (linear probing) of count codes (:func:`code_layout`; ``keys``,
    int64, ``n_words`` per slot, ``-1`` marking an empty slot) with one int8
    per slot in ``vals``: 0 go on, 1 stop, 2 added and not decided yet.  The
    decisions of new vectors are computed together, in one vectorised
    ``rule.decide`` call (:meth:`store`).

    At most half the slots are used; the table doubles as it fills, up to
    ``MAX_STOP_MEMO_BYTES`` bytes (``max_entries`` decisions, 2**21 with
    one-word codes).  A memo that would need more is emptied and refilled
    (decisions computed again; results do not change).  :func:`stop_memo`
    builds one and caches it per ``rule.table_key()``, ``T`` and ``l``; the
    engine holds ``lock`` while it uses one.  ``n_decided`` and
    ``decide_seconds`` count the vote vectors decided so far and the time
    ``rule.decide`` took for them.

    Parameters
    ----------
    n_members : int
        Ensemble size ``T``.
    n_classes : int
        Number of classes ``l``.
    key : hashable or None
        The cache key (:func:`stop_memo`); None for a memo of one call.

    Raises
    ------
    ValueError
        Codes of so many words (classes) that fewer than 64 decisions would
        fit in ``MAX_STOP_MEMO_BYTES``.

    Examples
    --------
    >>> import numpy as np
    >>> from ensvote import ExactRule
    >>> from ensvote.engine import StopMemo
    >>> memo = StopMemo(5, 2)
    >>> codes = np.array([[6 * 3 + 0], [6 * 2 + 1]])  # (3, 0) and (2, 1), as in stop_table
    >>> memo.decisions(codes, ExactRule(5)), len(memo)
    (array([ True, False]), 2)
    >>> memo.lookup(np.array([[6 * 3 + 0], [6 * 1 + 1]]))  # (1, 1) not decided yet
    array([ 1, -1], dtype=int8)
    """

    #: slots of a new memo
    MIN_SLOTS = 4096

    def __init__(self, n_members, n_classes, key=None):
        self.n_members, self.n_classes, self.key = int(n_members), int(n_classes), key
        self.word, self.stride = code_layout(self.n_members, self.n_classes)
        self.n_words = int(self.word[-1]) + 1
        slot_bytes = 8 * self.n_words + 1
        slots = 1 << max(0, (MAX_STOP_MEMO_BYTES // slot_bytes).bit_length() - 1)  # a power of 2
        self.max_entries, self.max_slots = slots // 2, slots
        if self.max_entries < 64:
            raise ValueError(f"the count codes of {self.n_classes:,} classes of T={self.n_members:,} members take "
                             f"{self.n_words:,} int64 words each: fewer than 64 stop decisions would fit in "
                             f"MAX_STOP_MEMO_BYTES = {MAX_STOP_MEMO_BYTES:,} bytes")
        self.lock = threading.RLock()
        self.n_decided, self.decide_seconds = 0, 0.0
        self.clear(min(self.MIN_SLOTS, slots))

    def __len__(self):
        return self.size

    def clear(self, slots=None):
        """Forget every decision (``slots``: the new table's size, a power of 2; default: keep it).

        Parameters
        ----------
        slots : int, optional

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote import ExactRule
        >>> from ensvote.engine import StopMemo
        >>> memo = StopMemo(5, 2)
        >>> _ = memo.decisions(np.array([[18]]), ExactRule(5))
        >>> memo.clear()
        >>> len(memo), memo.lookup(np.array([[18]]))
        (0, array([-1], dtype=int8))
        """
        slots = len(self.vals) if slots is None else int(slots)
        self.keys = np.full((slots, self.n_words), -1, dtype=np.int64)
        self.vals = np.zeros(slots, dtype=np.int8)
        self.size = 0

    def reserve(self, n_new):
        """Make room for ``n_new`` more decisions: grow the table, or empty it if it would exceed its bound.

        Parameters
        ----------
        n_new : int
            At most ``max_entries``.

        Returns
        -------
        bool
            Whether the entries moved (the table grew or was emptied): slots
            found before are no longer valid.

        Examples
        --------
        >>> from ensvote.engine import StopMemo
        >>> memo = StopMemo(101, 3)
        >>> memo.reserve(5000)
        True
        >>> len(memo.vals), memo.max_entries
        (16384, 2097152)
        >>> memo.reserve(5000)  # room already
        False
        """
        from . import kernel

        if n_new > self.max_entries:
            raise ValueError(f"{n_new:,} new stop decisions at once: more than a memo holds ({self.max_entries:,}, "
                             f"MAX_STOP_MEMO_BYTES = {MAX_STOP_MEMO_BYTES:,})")
        moved = self.size + n_new > self.max_entries
        if moved:
            self.clear()
        need = 2 * (self.size + n_new)  # at most half the slots used
        slots = len(self.vals)
        if need > slots:
            while need > slots:
                slots *= 4
            slots = min(slots, self.max_slots)
            keys = np.full((slots, self.n_words), -1, dtype=np.int64)
            vals = np.zeros(slots, dtype=np.int8)
            kernel.memo_rehash(self.keys, self.vals, keys, vals)
            self.keys, self.vals = keys, vals
            moved = True
        return moved

    def store(self, slots, rule):
        """Decide the vote vectors just added (pending) at ``slots``, in one ``rule.decide`` call, and keep them.

        If ``decide`` fails the memo is emptied (no pending entry is left
        behind) and the error raised.

        Parameters
        ----------
        slots : ndarray of int
            Slots of the entries added (each once).
        rule : HaltingRule

        Returns
        -------
        float
            Seconds the decisions took.

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote import ExactRule
        >>> from ensvote.engine import StopMemo
        >>> from ensvote.kernel import memo_insert
        >>> memo = StopMemo(5, 2)
        >>> slots = np.empty(2, dtype=np.int64)
        >>> n_new = memo_insert(memo.keys, memo.vals, np.array([[18], [13]]), slots)
        >>> seconds = memo.store(slots[:n_new], ExactRule(5))
        >>> memo.lookup(np.array([[18], [13]]))
        array([1, 0], dtype=int8)
        """
        slots = np.asarray(slots, dtype=np.int64)
        self.size += len(slots)
        if not len(slots):
            return 0.0
        t0 = time.perf_counter()
        try:
            self.vals[slots] = decided(rule, self.counts(self.keys[slots]))
        except BaseException:
            self.clear()
            raise
        seconds = time.perf_counter() - t0
        self.n_decided += len(slots)
        self.decide_seconds += seconds
        return seconds

    def lookup(self, codes):
        """The decision held for each code: 1 stop, 0 go on, -1 not known (0 for a parked code, word 0 negative).

        Parameters
        ----------
        codes : ndarray of int64, shape (n, n_words)

        Returns
        -------
        ndarray of int8, shape (n,)

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote.engine import StopMemo
        >>> StopMemo(5, 2).lookup(np.array([[18]]))
        array([-1], dtype=int8)
        """
        from . import kernel

        codes = np.ascontiguousarray(codes, dtype=np.int64)
        out = np.empty(len(codes), dtype=np.int8)
        kernel.memo_lookup(self.keys, self.vals, codes, out)
        return out

    def decisions(self, codes, rule):
        """Whether ``rule`` stops at each code, deciding (in one call) and keeping those not held yet.

        Parameters
        ----------
        codes : ndarray of int64, shape (n, n_words)
            Count codes (:func:`code_layout`); a parked code (word 0
            negative) does not stop.
        rule : HaltingRule
            Decides the codes not held yet (any rule of the memo's key).

        Returns
        -------
        ndarray of bool, shape (n,)

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote import ExactRule
        >>> from ensvote.engine import StopMemo
        >>> StopMemo(5, 2).decisions(np.array([[18], [13], [3]]), ExactRule(5))  # (3, 0), (2, 1), (0, 3)
        array([ True, False,  True])
        """
        from . import kernel

        codes = np.ascontiguousarray(codes, dtype=np.int64)
        d = self.lookup(codes)
        unknown = np.flatnonzero(d < 0)
        for a in range(0, len(unknown), self.max_entries):  # (a memo may be emptied between parts)
            part = unknown[a:a + self.max_entries]
            new = codes[part]
            self.reserve(len(new))
            slots = np.empty(len(new), dtype=np.int64)
            n_new = kernel.memo_insert(self.keys, self.vals, new, slots)
            self.store(slots[:n_new], rule)
            d[part] = self.lookup(new)
        return d == 1

    def counts(self, codes):
        """The vote counts of count codes.

        Parameters
        ----------
        codes : ndarray of int64, shape (n, n_words)

        Returns
        -------
        ndarray of int64, shape (n, l)

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote.engine import StopMemo
        >>> StopMemo(5, 2).counts(np.array([[18], [13]]))
        array([[3, 0],
               [2, 1]])
        """
        codes = np.asarray(codes, dtype=np.int64)
        return (codes[:, self.word] // self.stride) % (self.n_members + 1)

    def result(self, code_end, n_queried, rule):
        """The :class:`HaltResult` of rows that ended at ``code_end`` after ``n_queried`` members.

        ``stopped`` is True for the rows that stopped before ``T`` and the
        rule's own decision for those that used every member.

        Parameters
        ----------
        code_end : ndarray of int64, shape (n_rows, n_words)
        n_queried : ndarray of int, shape (n_rows,)
        rule : HaltingRule

        Returns
        -------
        HaltResult

        Examples
        --------
        >>> import numpy as np
        >>> from ensvote import ExactRule
        >>> from ensvote.engine import StopMemo
        >>> res = StopMemo(5, 2).result(np.array([[18], [15]]), np.array([3, 5]), ExactRule(5))
        >>> res.labels, res.counts.tolist(), res.stopped
        (array([0, 1]), [[3, 0], [2, 3]], array([ True,  True]))
        """
        counts = self.counts(code_end)
        stopped = np.asarray(n_queried) < self.n_members
        end = np.flatnonzero(~stopped)
        if end.size:
            stopped[end] = self.decisions(np.asarray(code_end)[end], rule)
        return HaltResult(labels=np.argmax(counts, axis=1), n_queried=n_queried, counts=counts,
                          n_members=self.n_members, stopped=stopped)


def stop_memo(rule, n_members, n_classes):
    """The memo of ``rule``'s stop decisions for ``T`` members and ``l`` classes (see :class:`StopMemo`).

    The engine's table when the dense one (:func:`stop_table`) does not
    apply: one per ``rule.table_key(l)``, ``T`` and ``l``, cached (at most
    ``2 * MAX_STOP_MEMO_BYTES`` bytes of memos are kept), so that later calls
    find the decisions of the vote vectors reached before.  A rule without
    a table key gets a new, empty memo (its decisions are kept for one call).

    Parameters
    ----------
    rule : HaltingRule
    n_members : int
        Ensemble size ``T``.
    n_classes : int
        Number of classes ``l``.

    Returns
    -------
    StopMemo

    Raises
    ------
    ValueError
        The rule refuses ``T`` or ``l`` (its ``prepare``), or the codes are
        too wide for a memo (:class:`StopMemo`).

    Examples
    --------
    Three classes of ``T = 501`` members: ``502 ** 3`` vote vectors, too many
    for a dense table, so the decisions are memoised as the votes reach them:

    >>> import numpy as np
    >>> from ensvote import ExactRule
    >>> from ensvote.engine import stop_memo, stop_table
    >>> stop_table(ExactRule(501), 501, 3) is None
    True
    >>> memo = stop_memo(ExactRule(501), 501, 3)
    >>> codes = np.array([[251 * 502 ** 2], [250 * 502 ** 2]])  # 251 and 250 votes for class 0 of 501
    >>> memo.decisions(codes, ExactRule(501)), stop_memo(ExactRule(501), 501, 3) is memo
    (array([ True, False]), True)
    """
    rule.prepare(n_members, n_classes)
    T, l = int(n_members), int(n_classes)
    key_rule = rule.table_key(l)
    if key_rule is None:
        return StopMemo(T, l)
    key = (key_rule, T, l)
    memo = _STOP_MEMOS.get(key)
    if memo is None:
        memo = _STOP_MEMOS[key] = StopMemo(T, l, key=key)
    return memo


def _memo_used(memo):
    """Count a cached memo again (it grew in place) against the cache's byte bound."""
    if memo.key is not None and _STOP_MEMOS.get(memo.key) is memo:
        _STOP_MEMOS[memo.key] = memo


class _TableCodes:
    """:class:`_Tally`'s codes with the dense stop table: int32 codes, a stop check is one look-up."""

    def __init__(self, tab):
        self.tab, self.parked, self.check = tab, int(tab.layout[2]), tab.stops_at.tolist()

    def zeros(self, n):
        return np.zeros(n, dtype=np.int32)

    def vote(self, code, cls):
        code += self.tab.stride.take(cls)

    def stops(self, code):
        return self.tab.stops(code)

    def live(self, code):
        return code < self.parked

    def park(self, code, k):
        code[k] = self.parked

    def result(self, code_end, n_queried, n_members):
        return table_result(code_end, n_queried, n_members, self.tab)


class _MemoCodes:
    """:class:`_Tally`'s codes with a memo of decisions: int64 codes of ``n_words`` words (:func:`code_layout`);
    the vectors not memoised yet are decided when first reached, in one call per member."""

    def __init__(self, memo, rule):
        self.memo, self.rule = memo, rule
        self.check = [True] * (memo.n_members + 1)

    def zeros(self, n):
        return np.zeros((n, self.memo.n_words), dtype=np.int64)

    def vote(self, code, cls):
        if self.memo.n_words == 1:
            code[:, 0] += self.memo.stride.take(cls)
        else:
            code[np.arange(len(cls)), self.memo.word.take(cls)] += self.memo.stride.take(cls)

    def stops(self, code):
        return self.memo.decisions(code, self.rule)

    def live(self, code):
        return code[:, 0] >= 0

    def park(self, code, k):
        code[k, 0] = _PARKED

    def result(self, code_end, n_queried, n_members):
        return self.memo.result(code_end, n_queried, self.rule)


class _Tally:
    """Running vote codes of the rows still voting, for the numpy loops (sparse ``X``, a vote matrix).

    ``codes`` says what a code is: :class:`_TableCodes` (the dense stop
    table, see :func:`stop_table`) or :class:`_MemoCodes` (a memo of
    decisions, :class:`StopMemo`).  ``code`` holds one count code per
    evaluated row; ``idx`` maps evaluated rows back to the caller's rows
    (None: all rows, in order).  :meth:`stop_after` records the rows that stop
    after member ``j`` and parks their codes where they never stop again; it
    returns the rows to keep once a fraction ``compact_at`` of the evaluated
    rows has stopped, and the caller then applies that selection with
    :meth:`select` (to its own arrays as well).
    """

    def __init__(self, n_rows, n_members, codes, compact_at):
        self.T, self.codes, self.compact_at = n_members, codes, compact_at
        self.check = codes.check  # check[s]: a row with s votes may stop
        self.code_end = codes.zeros(n_rows)
        self.n_queried = np.full(n_rows, n_members, dtype=np.int64)
        self.code = codes.zeros(n_rows)
        self.idx = None
        self.n_live = self.n_cur = n_rows

    def stop_after(self, j):
        """Record the rows that stop after member ``j``; the rows to keep if it is time to compact."""
        code = self.code
        if j == self.T - 1:
            k = np.flatnonzero(self.codes.live(code))
        elif not self.check[j + 1]:  # no count vector with j + 1 votes stops
            return None
        else:
            k = self.codes.stops(code).nonzero()[0]
        if not k.size:
            return None
        rows = k if self.idx is None else self.idx[k]
        self.code_end[rows] = code[k]
        self.n_queried[rows] = j + 1
        self.codes.park(code, k)
        self.n_live -= k.size
        if self.n_live and self.n_cur - self.n_live >= self.compact_at * self.n_cur and j < self.T - 2:
            return np.flatnonzero(self.codes.live(code))
        return None

    def select(self, sel):
        """Keep (and order) the evaluated rows as ``sel`` says: a compaction or a permutation."""
        self.code = self.code[sel]
        self.idx = sel if self.idx is None else self.idx[sel]
        self.n_cur = len(sel)


def _halt_votes(v, n_members, codes, compact_at=0.1):
    """:func:`halt` on a vote matrix, one member (column) at a time, with ``codes`` (see :class:`_Tally`).

    Member ``j`` adds a vote for ``v[r, j]`` to each active row's code and
    the stop check looks its code up (skipped where no row can stop, stopped
    rows parked, the active set compacted lazily).  Only the votes up to each
    row's stop (plus those read while it was parked) are read.
    """
    tally = _Tally(v.shape[0], n_members, codes, compact_at)
    for j in range(n_members):
        if tally.n_live == 0:
            break
        codes.vote(tally.code, v[:, j] if tally.idx is None else v[tally.idx, j])
        keep = tally.stop_after(j)
        if keep is not None:
            tally.select(keep)
    return codes.result(tally.code_end, tally.n_queried, n_members)


def run_halting(fetch, n_rows, n_members, n_classes, rule, *, first_block=4, max_block=64):
    """The engine behind :func:`halt` and :meth:`HaltingClassifier.halt`.

    ``fetch(rows, a, b)`` returns the votes of members ``a..b-1`` for the given
    rows (int array ``(len(rows), b - a)``).  Members are requested in blocks
    (sizes 4, 8, ..., 64) and only for rows still voting, so members after a
    row's stop are, apart from the rest of its block, never evaluated.

    Parameters
    ----------
    fetch : callable ``(rows, a, b) -> array of int``
        The votes of members ``a..b-1`` for ``rows``.
    n_rows, n_members, n_classes : int
        Rows, ensemble size ``T`` and number of classes ``l``.
    rule : HaltingRule
        Its ``decide`` is called on each block's cumulative counts.
    first_block, max_block : int
        Members requested in the first block, and at most per block.

    Returns
    -------
    HaltResult

    Examples
    --------
    Votes computed on demand, here read from a matrix:

    >>> import numpy as np
    >>> from ensvote import ExactRule
    >>> from ensvote.engine import run_halting
    >>> votes = np.array([[0, 0, 0, 0, 0, 1, 0], [0, 1, 1, 0, 1, 0, 1]])
    >>> res = run_halting(lambda rows, a, b: votes[rows, a:b], 2, 7, 2, ExactRule(7))
    >>> res.labels, res.n_queried
    (array([0, 1]), array([4, 7]))
    """
    rule.prepare(n_members, n_classes)
    counts = np.zeros((n_rows, n_classes), dtype=np.int64)
    n_queried = np.full(n_rows, n_members, dtype=np.int64)
    stopped = np.zeros(n_rows, dtype=bool)
    active = np.arange(n_rows)
    classes = np.arange(n_classes)
    start, block = 0, first_block
    while active.size and start < n_members:
        width = max(1, min(block, n_members - start, _BLOCK_ENTRIES // max(1, active.size * n_classes)))
        stop = start + width
        v = np.asarray(fetch(active, start, stop), dtype=np.int64)
        cum = np.cumsum(v[:, :, None] == classes, axis=1) + counts[active][:, None, :]
        halted = decided(rule, cum)
        if stop == n_members:
            stopped[active[halted[:, -1]]] = True  # the rule's own call at the last member
            halted[:, -1] = True
        any_ = halted.any(axis=1)
        first = np.argmax(halted, axis=1)
        rows = active[any_]
        stopped[rows[first[any_] < width - 1]] = True
        stopped[rows[(first[any_] == width - 1) & (stop < n_members)]] = True
        counts[rows] = cum[any_, first[any_]]
        n_queried[rows] = start + first[any_] + 1
        counts[active[~any_]] = cum[~any_, -1]
        active = active[~any_]
        start = stop
        block = min(2 * block, max_block)
    labels = np.argmax(counts, axis=1)
    return HaltResult(labels=labels, n_queried=n_queried, counts=counts, n_members=n_members,
                      stopped=stopped)


# --------------------------------------------------------------------------
# the tree path: a fitted ensemble of decision trees, voting through the engine
# --------------------------------------------------------------------------
def _columns(X, feats):
    """The columns ``feats`` of ``X`` (None: all), C-contiguous when dense, as the trees want them."""
    if feats is None:
        return X
    return X[:, feats] if sparse.issparse(X) else np.ascontiguousarray(X[:, feats])


def _take_rows(X, idx):
    """Rows ``idx`` of a dense array or a CSR matrix."""
    return X[idx] if sparse.issparse(X) else np.take(X, idx, axis=0)


def _by_leaf(leaves, tree):
    """A stable order of rows that groups equal leaf ids (radix sort on 16-bit keys when they fit)."""
    key = leaves.astype(np.int16 if tree.node_count < 2 ** 15 else np.int32)
    return np.argsort(key, kind="stable")


#: The compiled row-by-row loops (:func:`ensvote.kernel.label_rows` and ``label_rows_bits``), bound on first use
#: (``import ensvote`` does not load the compiled loops).
_label_rows = _label_rows_bits = None


class TreeEnsemble:
    """The members of a fitted tree ensemble, as the engine votes with them.

    Holds each member's tree, the columns it reads and, per node, the class
    it votes for, both as a class index and as the code increment of
    :func:`stop_table`'s mixed-radix count code, plus the same trees
    flattened for the compiled loop (:class:`ensvote.kernel.ForestArrays`).
    :meth:`halt` and :meth:`labels` run the stop loop for a rule: dense rows
    through the compiled loop of :mod:`ensvote.kernel`, sparse rows through
    a numpy loop that applies one tree at a time to the rows still voting.
    Both look the stop decisions up in the rule's dense stop table
    (:func:`stop_table`) or, where there is none (too many vote vectors, or a
    rule without a table key), in a memo of the decisions of the vote vectors
    reached (:func:`stop_memo`, :func:`ensvote.kernel.run_forest_lazy`).
    All give the results of the reference engine :func:`run_halting`.  :class:`ensvote.HaltingClassifier` builds one
    at ``fit``.

    Parameters
    ----------
    trees : list of sklearn.tree._tree.Tree
        The members' ``tree_``, in query order.
    features : list of (array of int or None)
        Per member, the columns of ``X`` it was fitted on (None: all).
    leaf_class : list of ndarray of int
        Per member, the class index (``0..n_classes-1``) each node votes for.
    n_classes : int
        Number of classes ``l``.
    leaf_proba : list of ndarray of float, optional
        Per member, the class probabilities (``n_classes`` columns) of each
        node as the member's ``predict_proba`` gives them at its leaves: the
        soft vote of :meth:`soft_halt`.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from ensvote import UrnRule
    >>> from ensvote.engine import TreeEnsemble
    >>> X = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
    >>> y = (X[:, 0] > 0).astype(int)
    >>> rf = RandomForestClassifier(n_estimators=31, random_state=0).fit(X, y)
    >>> leaf_class = [np.argmax(m.tree_.value[:, 0, :], axis=1) for m in rf.estimators_]
    >>> ens = TreeEnsemble([m.tree_ for m in rf.estimators_], [None] * 31, leaf_class, 2)
    >>> res = ens.halt(X, UrnRule(T=31))
    >>> bool(np.all(res.labels == y)), bool(res.mean_queried < 31)
    (True, True)
    """

    #: numpy path: compact the rows still voting (copy their features) once
    #: this fraction of the rows being evaluated has stopped.
    COMPACT_AT = 0.1
    #: numpy path: row sets at least this large are reordered by leaf.
    SORT_MIN_ROWS = 64

    def __init__(self, trees, features, leaf_class, n_classes, leaf_proba=None):
        from . import kernel

        self.trees, self.features = list(trees), list(features)
        self.leaf_class = [np.asarray(c, dtype=np.int64) for c in leaf_class]
        if not (len(self.trees) == len(self.features) == len(self.leaf_class)) or not self.trees:
            raise ValueError("trees, features and leaf_class must be non-empty lists of equal length")
        self.n_members, self.n_classes = len(self.trees), int(n_classes)
        stride = code_stride(self.n_members, self.n_classes)
        self.leaf_code = [stride.take(c) for c in self.leaf_class]
        self.arrays = kernel.ForestArrays(self.trees, self.features, self.leaf_code)
        self._plan = (None, None, None)  # (rule, stop table, label table), replaced as one tuple
        self._one = (None, None, False)  # (rule, its plan packed for the row-by-row loop or None, stop bits?)
        self._memo_nodes = None  # per node, the code word and increment of its class (code_layout), on first use
        self._bits_nodes = None  # (stride, per node the code increment of its class) for stop bits, on first use
        self.leaf_proba = None if leaf_proba is None else [np.asarray(p, dtype=np.float64) for p in leaf_proba]
        # the same, stacked in the compiled loop's node order
        self._proba_nodes = None if leaf_proba is None else np.ascontiguousarray(self.arrays.nodes(self.leaf_proba))

    # ------------------------------------------------------------------
    def member_votes(self, j, X):
        """Class indices member ``j`` votes for on rows ``X`` (float32 array or CSR matrix).

        Parameters
        ----------
        j : int
            Member index, ``0..n_members-1``.
        X : ndarray of float32 or CSR matrix, shape (n_rows, n_features)

        Returns
        -------
        ndarray of int, shape (n_rows,)

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote import UrnRule
        >>> from ensvote.engine import TreeEnsemble
        >>> X = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
        >>> y = (X[:, 0] > 0).astype(int)
        >>> rf = RandomForestClassifier(n_estimators=31, random_state=0).fit(X, y)
        >>> ens = TreeEnsemble([m.tree_ for m in rf.estimators_], [None] * 31,
        ...                    [np.argmax(m.tree_.value[:, 0, :], axis=1) for m in rf.estimators_], 2)
        >>> ens.member_votes(0, X[:5]), y[:5]
        (array([1, 0, 0, 0, 0]), array([1, 0, 0, 0, 0]))
        """
        return self.leaf_class[j][self.trees[j].apply(_columns(X, self.features[j]))]

    def vote_matrix(self, X):
        """Votes of every member, shape ``(n_rows, n_members)``, as class indices.

        Parameters
        ----------
        X : ndarray of float32 or CSR matrix, shape (n_rows, n_features)

        Returns
        -------
        ndarray of int64, shape (n_rows, n_members)

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote import UrnRule
        >>> from ensvote.engine import TreeEnsemble
        >>> X = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
        >>> y = (X[:, 0] > 0).astype(int)
        >>> rf = RandomForestClassifier(n_estimators=31, random_state=0).fit(X, y)
        >>> ens = TreeEnsemble([m.tree_ for m in rf.estimators_], [None] * 31,
        ...                    [np.argmax(m.tree_.value[:, 0, :], axis=1) for m in rf.estimators_], 2)
        >>> V = ens.vote_matrix(X[:3])
        >>> V.shape, V.sum(axis=1)
        ((3, 31), array([31,  0,  0]))
        """
        out = np.empty((X.shape[0], self.n_members), dtype=np.int64)
        for j in range(self.n_members):
            out[:, j] = self.member_votes(j, X)
        return out

    def plan(self, rule):
        """``(stop_table, label_table)`` for ``rule`` (None: decisions memoised instead); kept for the last rule.

        Parameters
        ----------
        rule : HaltingRule

        Returns
        -------
        (StopTable, ndarray) or None

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote import UrnRule
        >>> from ensvote.engine import TreeEnsemble
        >>> X = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
        >>> y = (X[:, 0] > 0).astype(int)
        >>> rf = RandomForestClassifier(n_estimators=31, random_state=0).fit(X, y)
        >>> ens = TreeEnsemble([m.tree_ for m in rf.estimators_], [None] * 31,
        ...                    [np.argmax(m.tree_.value[:, 0, :], axis=1) for m in rf.estimators_], 2)
        >>> tab, labels = ens.plan(UrnRule(T=31))
        >>> tab.min_votes, labels.shape
        (5, (1024,))
        """
        rule_, tab, labels = self._plan
        if rule_ is not rule:
            tab = stop_table(rule, self.n_members, self.n_classes)
            labels = None if tab is None or not tab.flat else label_table(self.n_members, self.n_classes)
            self._plan = (rule, tab, labels)
        return None if tab is None else (tab, labels)

    # ------------------------------------------------------------------
    def halt(self, X, rule, n_jobs=None):
        """:class:`HaltResult` of rows ``X`` (validated float32 array or CSR matrix); labels are class indices.

        Parameters
        ----------
        X : ndarray of float32 or CSR matrix, shape (n_rows, n_features)
        rule : HaltingRule
        n_jobs : int or None
            Threads for dense ``X`` (see :class:`ensvote.HaltingClassifier`).

        Returns
        -------
        HaltResult

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote import UrnRule
        >>> from ensvote.engine import TreeEnsemble
        >>> X = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
        >>> y = (X[:, 0] > 0).astype(int)
        >>> rf = RandomForestClassifier(n_estimators=31, random_state=0).fit(X, y)
        >>> ens = TreeEnsemble([m.tree_ for m in rf.estimators_], [None] * 31,
        ...                    [np.argmax(m.tree_.value[:, 0, :], axis=1) for m in rf.estimators_], 2)
        >>> res = ens.halt(X[:5], UrnRule(T=31))
        >>> res.labels, res.n_queried
        (array([1, 0, 0, 0, 0]), array([5, 5, 5, 5, 5]))
        """
        plan = self.plan(rule)
        if plan is None:
            return self._halt_memo(X, rule, n_jobs)
        tab = plan[0]
        return table_result(*self._codes(X, tab, n_jobs), self.n_members, tab)

    def labels(self, X, rule, n_jobs=None):
        """The class index each row of ``X`` ends at (``halt(X, rule).labels`` without the counts).

        Parameters
        ----------
        X : ndarray of float32 or CSR matrix, shape (n_rows, n_features)
        rule : HaltingRule
        n_jobs : int or None
            Threads for dense ``X``.

        Returns
        -------
        ndarray of int, shape (n_rows,)

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote import UrnRule
        >>> from ensvote.engine import TreeEnsemble
        >>> X = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
        >>> y = (X[:, 0] > 0).astype(int)
        >>> rf = RandomForestClassifier(n_estimators=31, random_state=0).fit(X, y)
        >>> ens = TreeEnsemble([m.tree_ for m in rf.estimators_], [None] * 31,
        ...                    [np.argmax(m.tree_.value[:, 0, :], axis=1) for m in rf.estimators_], 2)
        >>> ens.labels(X[:5], UrnRule(T=31))
        array([1, 0, 0, 0, 0])
        """
        plan = self.plan(rule)
        if plan is None:
            return self._halt_memo(X, rule, n_jobs).labels
        return self._plan_labels(plan, self._codes(X, plan[0], n_jobs)[0])

    def _labels_unchecked(self, X, rule, n_jobs=None):
        """:meth:`labels` of a dense ``X`` that has not been converted to float32 nor checked for infinity.

        The compiled loop reads float64 values as float32 one by one (no
        copy of ``X``) and notices a value infinite as float32 as it goes:
        then, and when ``rule`` has no stop table, the answer is None, and
        the caller validates ``X`` and calls :meth:`labels` (the classifier's
        ``predict`` on a large batch: the validation's copy and scan of ``X``
        are most of the fixed cost of a fast rule).  ``X`` must be 2-D,
        C-contiguous, float32 or float64, of the forest's width (the
        classifier has checked that).
        """
        plan = self.plan(rule)
        if plan is None:
            return None
        res = self._dense_codes(X, plan[0], n_jobs)
        return None if res is None else self._plan_labels(plan, res[0])

    @staticmethod
    def _plan_labels(plan, code_end):
        """The class index of each count code: the plan's label table, or the counts' majority (stop bits)."""
        if plan[1] is None:  # stop bits: no label per code, the counts' majority
            return np.argmax(plan[0].counts(code_end), axis=1)
        return plan[1].take(code_end)

    def label_rows(self, X, rule, out):
        """Each row's class index into ``out``, row by row: the loop for one request and small batches.

        The arrays are checked (shape, dtype, layout, width: a TypeError or
        ValueError naming the problem); the values are not, beyond infinity.
        False, with ``out`` not written, when a feature of ``X`` is infinite
        as float32 (the caller then validates it in full), or when ``rule``
        has neither a flat stop table nor stop bits (the caller then calls
        :meth:`labels`).

        Parameters
        ----------
        X : ndarray of float32 or float64, shape (n_rows, n_features), C-contiguous
        rule : HaltingRule
        out : ndarray of int64, shape (n_rows,)

        Returns
        -------
        bool

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote import UrnRule
        >>> from ensvote.engine import TreeEnsemble
        >>> X = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
        >>> y = (X[:, 0] > 0).astype(int)
        >>> rf = RandomForestClassifier(n_estimators=31, random_state=0).fit(X, y)
        >>> ens = TreeEnsemble([m.tree_ for m in rf.estimators_], [None] * 31,
        ...                    [np.argmax(m.tree_.value[:, 0, :], axis=1) for m in rf.estimators_], 2)
        >>> out = np.empty(5, dtype=np.int64)
        >>> ens.label_rows(X[:5], UrnRule(T=31), out), out
        (True, array([1, 0, 0, 0, 0]))
        >>> ens.label_rows(np.full((1, 4), np.inf, dtype=np.float32), UrnRule(T=31), out[:1])
        False
        """
        if not (isinstance(X, np.ndarray) and X.ndim == 2 and X.dtype in (np.float32, np.float64)
                and X.flags.c_contiguous):
            raise TypeError("X must be a 2-D C-contiguous ndarray of float32 or float64, got "
                            + (f"{X.ndim}-D {X.dtype} (C-contiguous: {X.flags.c_contiguous})"
                               if isinstance(X, np.ndarray) else type(X).__name__))
        if X.shape[1] < self.arrays.width:
            raise ValueError(f"X has {X.shape[1]} features; the trees read feature {self.arrays.width - 1}")
        if not (isinstance(out, np.ndarray) and out.dtype == np.int64 and out.shape == (X.shape[0],)
                and out.flags.writeable):
            raise ValueError(f"out must be a writeable int64 array of shape ({X.shape[0]},) for X's rows")
        return self._label_rows(X, rule, out)

    def _label_rows(self, X, rule, out):
        """:meth:`label_rows` without the checks of the arrays (the classifier has made them)."""
        one = self._one
        if one[0] is not rule:
            one = self._bind_one(rule)
        if one[1] is None:
            return False
        return (_label_rows_bits if one[2] else _label_rows)(X, self.arrays.packed, one[1], out)

    def _bind_one(self, rule):
        """Pack ``rule``'s stop and label tables (or stop bits) for :meth:`_label_rows` (kept for the last rule)."""
        global _label_rows, _label_rows_bits
        from . import kernel

        _label_rows, _label_rows_bits = kernel.label_rows, kernel.label_rows_bits
        plan = self.plan(rule)
        one, bits = None, False
        if plan is not None and plan[0].flat:
            one = kernel.pack_plan(plan[0].table, plan[0].stops_at, plan[1])
        elif plan is not None:  # stop bits: the codes in radix 2 ** b, labels from the counts
            tab = plan[0]
            table, layout, stops_at = tab.kernel_args()
            one, bits = kernel.pack_bits_plan(table, layout, stops_at, self._bits_node_code(tab)), True
        self._one = (rule, one, bits)
        return self._one

    def _bits_node_code(self, tab):
        """Each node's code increment in the stop bits' radix ``2 ** b`` (kept for the last table)."""
        if self._bits_nodes is None or self._bits_nodes[0] is not tab.stride:
            self._bits_nodes = (tab.stride, tab.stride.take(self.arrays.nodes(self.leaf_class)))
        return self._bits_nodes[1]

    def soft_halt(self, X, n_jobs=None, need=None):
        """Soft voting, stopped exactly: :class:`HaltResult` whose labels are the forest's own soft-vote labels.

        Members are queried in order and their class probabilities summed; a
        row stops once the remaining members cannot change the argmax of the
        sum (each adds at most 1 to any class and takes from none), and a row
        that runs through every member takes ``argmax(sum / T)`` as
        scikit-learn's ``predict`` does (the sum in the same order, lowest
        index on ties), so the labels equal the forest's ``predict`` on every
        row.  Needs ``leaf_proba``.

        Parameters
        ----------
        X : ndarray of float32 or CSR matrix, shape (n_rows, n_features)
        n_jobs : int or None
            Threads for dense ``X``.
        need : ndarray of float, shape (T,), optional
            Stop instead once the leader leads every other class by more than
            ``need[t - 1]`` after ``t`` members: the statistical soft stop of
            :func:`ensvote.confidence.soft_lead_needed` (None: the exact stop).

        Returns
        -------
        HaltResult
            ``labels`` (class indices), ``n_queried``, ``proba_sum``; ``counts`` None.

        Examples
        --------
        >>> import numpy as np
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote.engine import TreeEnsemble
        >>> X = np.random.default_rng(0).normal(size=(200, 4)).astype(np.float32)
        >>> y = (X[:, 0] > 0).astype(int)
        >>> rf = RandomForestClassifier(n_estimators=31, random_state=0).fit(X, y)
        >>> ms = rf.estimators_
        >>> ens = TreeEnsemble([m.tree_ for m in ms], [None] * 31,
        ...                    [np.argmax(m.tree_.value[:, 0, :], axis=1) for m in ms], 2,
        ...                    leaf_proba=[m.tree_.value[:, 0, :] for m in ms])
        >>> res = ens.soft_halt(X)
        >>> bool((res.labels == rf.predict(X)).all()), bool(res.mean_queried < 31)
        (True, True)
        """
        if self._proba_nodes is None:
            raise ValueError("soft voting needs the members' leaf probabilities (TreeEnsemble(..., leaf_proba=...))")
        from . import kernel

        need = kernel.exact_soft_lead(self.n_members) if need is None else np.asarray(need, dtype=np.float64)
        if need.shape != (self.n_members,):
            raise ValueError(f"need must have one lead per member, shape ({self.n_members},), got {need.shape}")
        if sparse.issparse(X):
            label, n_queried, total = self._soft_numpy(X, need)
        else:
            label, n_queried, total = kernel.run_soft(X, self.arrays, self._proba_nodes, n_jobs, need)
        return HaltResult(labels=label, n_queried=n_queried, counts=None, n_members=self.n_members,
                          stopped=n_queried < self.n_members, proba_sum=total)

    def _soft_numpy(self, X, need):
        """The numpy soft loop (any ``X``; the reference the compiled loop is tested against)."""
        from .kernel import soft_margin

        n, T, l = X.shape[0], self.n_members, self.n_classes
        S = np.zeros((n, l))
        label = np.zeros(n, dtype=np.int64)
        n_queried = np.zeros(n, dtype=np.int64)
        total = np.zeros((n, l))
        rows = np.arange(n)
        eps = soft_margin(T)
        for j in range(T):
            if not len(rows):
                break
            leaves = self.trees[j].apply(_columns(_take_rows(X, rows), self.features[j]))
            S[rows] += self.leaf_proba[j][leaves]
            Sr, R = S[rows], T - j - 1
            if R == 0:  # the forest's own predict: argmax of the average
                c, done = np.argmax(Sr / T, axis=1), np.ones(len(rows), dtype=bool)
            else:
                c = np.argmax(Sr, axis=1)
                gap = Sr[np.arange(len(rows)), c][:, None] - Sr
                gap[np.arange(len(rows)), c] = np.inf
                done = (gap > need[j] + eps).all(axis=1)
            label[rows[done]], n_queried[rows[done]], total[rows[done]] = c[done], j + 1, Sr[done]
            rows = rows[~done]
        return label, n_queried, total

    # ------------------------------------------------------------------
    def _codes(self, X, tab, n_jobs):
        """The code each row ended at and the members it queried: compiled loop (dense) or numpy loop (sparse)."""
        if sparse.issparse(X):
            return self._codes_numpy(X, _TableCodes(tab))
        return self._dense_codes(X, tab, n_jobs)

    def _dense_codes(self, X, tab, n_jobs):
        """:meth:`_codes` of a dense ``X`` (float32 or float64) in the compiled loop; None if a value of ``X`` is
        infinite as float32."""
        from . import kernel

        node_code = None if tab.flat else self._bits_node_code(tab)  # stop bits: codes in radix 2 ** b
        return kernel.run_forest(X, self.arrays, *tab.kernel_args(), n_jobs, node_code=node_code)

    def _halt_memo(self, X, rule, n_jobs):
        """:meth:`halt` with the decisions of the vote vectors reached memoised (no dense stop table)."""
        memo = stop_memo(rule, self.n_members, self.n_classes)
        with memo.lock:
            if sparse.issparse(X):
                code_end, n_queried = self._codes_numpy(X, _MemoCodes(memo, rule))
            else:
                from . import kernel

                if self._memo_nodes is None:
                    word, stride = code_layout(self.n_members, self.n_classes)
                    cls = self.arrays.nodes(self.leaf_class)
                    self._memo_nodes = (word.take(cls), stride.take(cls))
                code_end, n_queried = kernel.run_forest_lazy(X, self.arrays, *self._memo_nodes, memo, rule, n_jobs)
            res = memo.result(code_end, n_queried, rule)
        _memo_used(memo)
        return res

    def _codes_numpy(self, X, codes):
        """The numpy loop: one tree at a time (``Tree.apply``) over the rows still voting.

        A tree adds a vote for its leaf's class to each row's code and the
        stop check looks the code up (``codes``: the dense table, skipped
        after trees ``j`` with ``stops_at[j + 1]`` False, or the memo); a
        stopped row is parked (see :class:`_Tally`) and the rows still voting
        are copied into a smaller matrix once a tenth of them has stopped,
        grouped by the current tree's leaf (rows sharing a leaf tend to take
        the same branches in the next trees).  The results do not depend on
        the order.  Returns ``(code_end, n_queried)``.
        """
        T, n = self.n_members, X.shape[0]
        tally = _Tally(n, T, codes, self.COMPACT_AT)
        Xc = X  # features of the evaluated rows, in tally's order
        for j in range(T):
            if tally.n_live == 0:
                break
            leaves = self.trees[j].apply(_columns(Xc, self.features[j]))
            codes.vote(tally.code, self.leaf_class[j].take(leaves))
            if j == 0 and n >= self.SORT_MIN_ROWS:  # group rows that share tree 0's leaf
                order = _by_leaf(leaves, self.trees[0])
                tally.select(order)
                Xc, leaves = _take_rows(Xc, order), leaves[order]
            keep = tally.stop_after(j)
            if keep is not None:
                if len(keep) >= self.SORT_MIN_ROWS:  # survivors grouped by this tree's leaf
                    keep = keep[_by_leaf(leaves[keep], self.trees[j])]
                tally.select(keep)
                Xc = _take_rows(Xc, keep)
        return tally.code_end, tally.n_queried
