"""The voting engine: query members in order until a rule says stop."""

from dataclasses import dataclass

import numpy as np

from ._validation import as_numeric_array
from .rules import HaltingRule

__all__ = ["HaltResult", "halt"]

# upper bound on the entries of one block's cumulative count array (rows x members x classes)
_BLOCK_ENTRIES = 4_000_000
# largest flat stop table ((T + 1) ** l booleans) the fast paths build
MAX_STOP_TABLE = 2_200_000
_STOP_TABLES = {}
_STOP_TABLES_MAX = 32


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
    if v.dtype.kind == "f" or v.dtype == np.uint64:
        v = v.astype(np.int64)
    # other integer dtypes are used as given (no copy): the engine only indexes with them
    if v.size and v.dtype.kind == "i" and v.min() < 0:
        raise ValueError(f"votes must be class indices >= 0, found {int(v.min())}")
    if n_classes is None:
        n_classes = max(2, int(v.max()) + 1 if v.size else 2)
    else:
        if isinstance(n_classes, bool) or not isinstance(n_classes, (int, np.integer)) or n_classes < 2:
            raise ValueError(f"n_classes must be an int >= 2, got {n_classes!r}")
        n_classes = int(n_classes)
        if v.size and v.max() >= n_classes:
            raise ValueError(f"votes contain label {int(v.max())}, outside 0..{n_classes - 1}")
    return v, n_classes


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


def stop_table(rule, n_members, n_classes):
    """The rule's stop decision for every count vector, as a flat boolean table.

    Count vectors ``t`` (``sum(t) <= T``) are coded in mixed radix ``T + 1``:
    ``code = sum_c t_c * stride[c]`` with ``stride[c] = (T + 1) ** (l - 1 - c)``,
    so adding a vote for class ``c`` adds ``stride[c]`` and a stop check is
    ``table[code]``.  Entries with ``sum(t) == 0`` or ``sum(t) > T`` are False
    (never looked up).  Built once per ``rule._table_key()`` (its type, threshold,
    prior), ``T`` and ``l``, and cached.

    Returns
    -------
    (table, stride) or None
        None when the rule has no table key (e.g. a user-defined rule; the
        engine then calls ``rule._stop`` block by block) or ``(T + 1) ** l``
        exceeds ``MAX_STOP_TABLE``.
    """
    rule._prepare(n_members, n_classes)
    T, l = int(n_members), int(n_classes)
    key_rule = rule._table_key(l)
    if key_rule is None or (T + 1) ** l > MAX_STOP_TABLE:
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
    table = np.zeros((T + 1) ** l, dtype=bool)
    table[states @ stride.astype(np.int64)] = np.asarray(rule._stop(states), dtype=bool)
    table.setflags(write=False)
    stride.setflags(write=False)
    if len(_STOP_TABLES) >= _STOP_TABLES_MAX:
        _STOP_TABLES.pop(next(iter(_STOP_TABLES)))
    _STOP_TABLES[key] = (table, stride)
    return table, stride


def _decode(code, n_members, stride):
    """Counts ``(n, l)`` from mixed-radix codes."""
    return (code[:, None] // stride.astype(np.int64)) % (n_members + 1)


def table_result(code, n_queried, n_members, table, stride):
    """The :class:`HaltResult` of rows that ended at ``code`` after ``n_queried`` members."""
    counts = _decode(code, n_members, stride)
    return HaltResult(labels=np.argmax(counts, axis=1), n_queried=n_queried, counts=counts,
                      n_members=n_members, stopped=table[code])


def _halt_votes_table(v, n_members, n_classes, table, stride, first_block=16, max_block=128):
    """:func:`halt` on a vote matrix with a stop table: blocks of members over the active rows."""
    n = v.shape[0]
    code_end = np.zeros(n, dtype=np.int32)
    n_queried = np.full(n, n_members, dtype=np.int64)
    active = None  # None: all rows, in order
    code = np.zeros(n, dtype=np.int32)
    binary = n_classes == 2
    if binary:  # re-index the table by (votes so far, votes for class 1)
        T1 = n_members + 1
        s_, t1 = np.divmod(np.arange(T1 * T1), T1)
        ok = t1 <= s_
        table_orig = table
        table2 = np.zeros(T1 * T1, dtype=bool)
        table2[ok] = table[(s_[ok] - t1[ok]) * T1 + t1[ok]]
        table = table2
    start, block = 0, first_block
    while start < n_members:
        na = n if active is None else active.size
        if na == 0:
            break
        width = max(1, min(block, n_members - start, _BLOCK_ENTRIES // max(1, na)))
        stop = start + width
        blk = v[:, start:stop] if active is None else v[active, start:stop]
        if binary:
            # votes are 0/1: code = (T + 1) * s + t_1 with s = start + 1 + column
            cum = np.cumsum(blk, axis=1, dtype=np.int32)
            cum += code[:, None] + ((np.arange(start + 1, stop + 1, dtype=np.int32)) * T1)
        else:
            cum = stride.take(blk)
            np.cumsum(cum, axis=1, out=cum)
            cum += code[:, None]
        if stop == n_members:
            halted = table.take(cum[:, :-1]) if width > 1 else np.zeros((na, 0), dtype=bool)
            halted = np.concatenate([halted, np.ones((na, 1), dtype=bool)], axis=1)
        else:
            halted = table.take(cum)
        first = np.argmax(halted, axis=1)
        any_ = halted[np.arange(na), first]
        rows = np.flatnonzero(any_)
        orig = rows if active is None else active[rows]
        code_end[orig] = cum[rows, first[rows]]
        n_queried[orig] = start + first[rows] + 1
        rest = np.flatnonzero(~any_)
        code = cum[rest, -1] - (stop * T1 if binary else 0)
        active = rest if active is None else active[rest]
        start = stop
        block = min(2 * block, max_block)
    if binary:  # back to the (t_0, t_1) code
        s_, t1 = np.divmod(code_end, T1)
        code_end = (s_ - t1) * T1 + t1
        table = table_orig
    return table_result(code_end, n_queried, n_members, table, stride)


def run_halting(fetch, n_rows, n_members, n_classes, rule, *, first_block=4, max_block=64):
    """The engine behind :func:`halt` and :meth:`HaltingClassifier.halt`.

    ``fetch(rows, a, b)`` returns the votes of members ``a..b-1`` for the given
    rows (int array ``(len(rows), b - a)``).  Members are requested in blocks
    (sizes 4, 8, ..., 64) and only for rows still voting, so members after a
    row's stop are, apart from the rest of its block, never evaluated.
    """
    rule._prepare(n_members, n_classes)
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
        halted = rule._stop(cum)
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
