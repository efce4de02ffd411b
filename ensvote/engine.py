"""The voting engine: query members in order until a rule says stop."""

from dataclasses import dataclass

import numpy as np

from .rules import HaltingRule

__all__ = ["HaltResult", "halt"]

# upper bound on the entries of one block's cumulative count array (rows x members x classes)
_BLOCK_ENTRIES = 4_000_000


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
    try:
        v = np.asarray(votes)
    except ValueError as exc:
        raise ValueError(f"votes must be a rectangular array: {exc}") from None
    if v.dtype == bool or v.dtype.kind not in "iuf":
        raise TypeError(f"votes must be an integer array of class indices, got dtype {v.dtype}")
    if v.ndim != 2:
        raise ValueError(f"votes must have shape (n_rows, n_members), got {v.ndim} dimension(s) {v.shape}")
    if v.shape[1] < 1:
        raise ValueError("votes must contain at least one member")
    if v.dtype.kind == "f":
        if not np.all(np.isfinite(v)) or np.any(v != np.round(v)):
            raise ValueError("votes must be integer class indices")
    v = v.astype(np.int64)
    if v.size and v.min() < 0:
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
    return run_halting(lambda rows, a, b: v[rows, a:b], v.shape[0], v.shape[1], l, rule)


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
