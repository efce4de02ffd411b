"""The voting engine: query members in order until a rule says stop."""

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from ._validation import MAX_COUNT, MAX_ENTRIES, _fmt, as_numeric_array, power_exceeds
from .rules import HaltingRule

__all__ = ["HaltResult", "halt"]

# upper bound on the entries of one block's cumulative count array (rows x members x classes)
_BLOCK_ENTRIES = 4_000_000
# largest flat stop table ((T + 1) ** l booleans) the fast paths build
MAX_STOP_TABLE = 2_200_000
_STOP_TABLES = {}
_STOP_TABLES_MAX = 32
_LABEL_TABLES = {}


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
    """

    labels: np.ndarray
    n_queried: np.ndarray
    counts: np.ndarray
    n_members: int
    stopped: np.ndarray = None

    @property
    def mean_queried(self):
        """Average number of members queried per row."""
        return float(np.mean(self.n_queried)) if len(self.n_queried) else float("nan")

    @property
    def speedup(self):
        """``n_members / mean_queried``: the tree-count speed-up."""
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


def halt(votes, rule, *, n_classes=None):
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
    """
    if not isinstance(rule, HaltingRule):
        raise TypeError(f"rule must be a HaltingRule (e.g. UrnRule, InfiniteRule), got {type(rule).__name__}")
    v, l = _check_votes(votes, n_classes)
    tab = stop_table(rule, v.shape[1], l)
    if tab is None:
        return run_halting(lambda rows, a, b: v[rows, a:b], v.shape[0], v.shape[1], l, rule)
    return _halt_votes_table(v, v.shape[1], l, *tab)


class StopTable(NamedTuple):
    """A rule's stop decisions for every count vector (see :func:`stop_table`)."""

    table: np.ndarray  #: flat boolean table indexed by mixed-radix code
    stride: np.ndarray  #: code increment of a vote for each class
    stops_at: np.ndarray  #: ``stops_at[s]``: some count vector with ``s`` votes stops

    @property
    def min_votes(self):
        """Fewest votes at which any count vector stops (``T`` if none does before ``T``)."""
        hit = np.flatnonzero(self.stops_at)
        return int(hit[0]) if hit.size else len(self.stops_at) - 1


def stop_table(rule, n_members, n_classes):
    """The rule's stop decision for every count vector, as a flat boolean table.

    Count vectors ``t`` (``sum(t) <= T``) are coded in mixed radix ``T + 1``:
    ``code = sum_c t_c * stride[c]`` with ``stride[c] = (T + 1) ** (l - 1 - c)``,
    so adding a vote for class ``c`` adds ``stride[c]`` and a stop check is
    ``table[code]``.  Entries with ``sum(t) == 0`` or ``sum(t) > T`` are False
    (never looked up).  The table has ``2 * (T + 1) ** l`` entries: codes from
    ``(T + 1) ** l`` up are False, so a fast path can park a stopped row there
    and keep adding votes without it stopping again (at most ``T`` votes add
    less than ``(T + 1) ** l``).  Built once per ``rule.table_key()`` (its
    type, threshold, prior), ``T`` and ``l``, and cached.

    Returns
    -------
    StopTable or None
        ``(table, stride, stops_at)``; ``stops_at`` (boolean, length
        ``T + 1``) lets the fast paths skip the look-ups after members where no
        row can stop (e.g. the first few).  None when
        the rule has no table key (e.g. a user-defined rule; the engine then
        calls ``rule.decide`` block by block) or ``(T + 1) ** l`` exceeds
        ``MAX_STOP_TABLE``.
    """
    rule.prepare(n_members, n_classes)
    T, l = int(n_members), int(n_classes)
    key_rule = rule.table_key(l)
    if key_rule is None or power_exceeds(T + 1, l, MAX_STOP_TABLE):
        return None
    key = (key_rule, T, l)
    hit = _STOP_TABLES.get(key)
    if hit is not None:
        return hit
    stride = ((T + 1) ** np.arange(l - 1, -1, -1)).astype(np.int32)
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
    stops = np.asarray(rule.decide(states), dtype=bool)
    table[states @ stride.astype(np.int64)] = stops
    stops_at = np.zeros(T + 1, dtype=bool)
    stops_at[states[stops].sum(axis=1)] = True
    for a in (table, stride, stops_at):
        a.setflags(write=False)
    if len(_STOP_TABLES) >= _STOP_TABLES_MAX:
        _STOP_TABLES.pop(next(iter(_STOP_TABLES)))
    hit = _STOP_TABLES[key] = StopTable(table, stride, stops_at)
    return hit


def _decode(code, n_members, n_classes):
    """Counts ``(n, l)`` from mixed-radix codes (base ``T + 1``, class 0 most significant)."""
    counts = np.empty((len(code), n_classes), dtype=np.int64)
    rest = np.asarray(code, dtype=np.int32)
    for c in range(n_classes - 1, 0, -1):
        rest, counts[:, c] = np.divmod(rest, n_members + 1)
    counts[:, 0] = rest
    return counts


def _label_table(n_members, n_classes):
    """Majority class (lowest index on ties) of every mixed-radix code below ``(T + 1) ** l``.

    ``_label_table(T, l)[code]`` is the label of a row that ended at ``code``
    (see :func:`stop_table`); cached per ``(T, l)``.
    """
    key = (int(n_members), int(n_classes))
    hit = _LABEL_TABLES.get(key)
    if hit is None:
        T, l = key
        hit = np.argmax(_decode(np.arange((T + 1) ** l, dtype=np.int32), T, l), axis=1)
        hit.setflags(write=False)
        if len(_LABEL_TABLES) >= _STOP_TABLES_MAX:
            _LABEL_TABLES.pop(next(iter(_LABEL_TABLES)))
        _LABEL_TABLES[key] = hit
    return hit


def table_result(code, n_queried, n_members, table, stride):
    """The :class:`HaltResult` of rows that ended at ``code`` after ``n_queried`` members."""
    return HaltResult(labels=_label_table(n_members, len(stride)).take(code), n_queried=n_queried,
                      counts=_decode(code, n_members, len(stride)), n_members=n_members,
                      stopped=table[code])


class _Tally:
    """Running vote codes of the rows still voting, for the table-driven fast paths.

    ``code`` holds one mixed-radix code per evaluated row (see
    :func:`stop_table`); ``idx`` maps evaluated rows back to the caller's rows
    (None: all rows, in order).  :meth:`stop_after` records the rows that stop
    after member ``j`` and parks their codes at ``(T + 1) ** l``, where the
    table is False; it returns the rows to keep once a fraction
    ``compact_at`` of the evaluated rows has stopped, and the caller then
    applies that selection with :meth:`select` (to its own arrays as well).
    """

    def __init__(self, n_rows, n_members, table, stops_at, compact_at):
        self.T, self.table, self.compact_at = n_members, table, compact_at
        self.parked = len(table) // 2  # codes >= parked: rows already stopped
        self.check = stops_at.tolist()  # check[s]: a row with s votes may stop
        self.code_end = np.zeros(n_rows, dtype=np.int32)
        self.n_queried = np.full(n_rows, n_members, dtype=np.int64)
        self.code = np.zeros(n_rows, dtype=np.int32)
        self.idx = None
        self.n_live = self.n_cur = n_rows

    def stop_after(self, j):
        """Record the rows that stop after member ``j``; the rows to keep if it is time to compact."""
        code = self.code
        if j == self.T - 1:
            k = np.flatnonzero(code < self.parked)
        elif not self.check[j + 1]:  # no count vector with j + 1 votes stops
            return None
        else:
            k = self.table.take(code).nonzero()[0]
        if not k.size:
            return None
        rows = k if self.idx is None else self.idx[k]
        self.code_end[rows] = code[k]
        self.n_queried[rows] = j + 1
        code[k] = self.parked
        self.n_live -= k.size
        if self.n_live and self.n_cur - self.n_live >= self.compact_at * self.n_cur and j < self.T - 2:
            return np.flatnonzero(code < self.parked)
        return None

    def select(self, sel):
        """Keep (and order) the evaluated rows as ``sel`` says: a compaction or a permutation."""
        self.code = self.code[sel]
        self.idx = sel if self.idx is None else self.idx[sel]
        self.n_cur = len(sel)


def _halt_votes_table(v, n_members, n_classes, table, stride, stops_at, compact_at=0.1):
    """:func:`halt` on a vote matrix with a stop table, one member (column) at a time.

    Member ``j`` adds ``stride[v[r, j]]`` to each active row's code and the
    stop check is ``table[code]`` (see :class:`_Tally`: skipped where no row
    can stop, stopped rows parked, the active set compacted lazily).  Only the
    votes up to each row's stop (plus those read while it was parked) are read.
    """
    tally = _Tally(v.shape[0], n_members, table, stops_at, compact_at)
    for j in range(n_members):
        if tally.n_live == 0:
            break
        tally.code += stride.take(v[:, j] if tally.idx is None else v[tally.idx, j])
        keep = tally.stop_after(j)
        if keep is not None:
            tally.select(keep)
    return table_result(tally.code_end, tally.n_queried, n_members, table, stride)


def run_halting(fetch, n_rows, n_members, n_classes, rule, *, first_block=4, max_block=64):
    """The engine behind :func:`halt` and :meth:`HaltingClassifier.halt`.

    ``fetch(rows, a, b)`` returns the votes of members ``a..b-1`` for the given
    rows (int array ``(len(rows), b - a)``).  Members are requested in blocks
    (sizes 4, 8, ..., 64) and only for rows still voting, so members after a
    row's stop are, apart from the rest of its block, never evaluated.
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
        halted = rule.decide(cum)
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
