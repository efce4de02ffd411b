"""The compiled stop loop: each row stopping as soon as its rule allows.

The engine's table-driven fast path (see :func:`ensvote.engine.stop_table`)
carries each row's vote counts as one mixed-radix code; a member adds the code
increment of the class it votes for, and the stop check is one look-up in the
rule's flat boolean stop table.  This module runs that loop compiled with
numba over the flattened node arrays of a fitted forest
(:class:`ForestArrays`, :func:`run_forest`, :func:`run_one`), each row
leaving the loop as soon as its rule stops it.

Each member's tree is walked from its root to a leaf exactly as
scikit-learn's ``Tree.apply`` walks dense input (``X`` as float32,
``x[feature] <= threshold`` goes left, NaN follows ``missing_go_to_left``),
but the walk is written for the processor rather than for one row: a level
down is computed without a branch (the child is picked by index,
``child[2 * node + go_right]``), and eight rows are walked side by side
until all eight have reached a leaf (a leaf is its own child, so a row that
arrives early stays put).  The eight walks are independent, so the processor
overlaps them instead of stalling on one mispredicted branch after another;
on the benchmark forests this walks a tree two to three times faster per row
than ``Tree.apply``.  Rows go through the trees in blocks of :data:`BLOCK`
(tree by tree over the block's rows still voting, so a tree's nodes stay in
cache); one row (:func:`run_one`) goes straight through.

:class:`ensvote.HaltingClassifier` uses it for every dense ``X`` (sparse
``X`` takes the engine's numpy path).  Rows are independent, so with
``n_jobs > 1`` the blocks are spread over threads (``numba.prange``); the
results do not depend on ``n_jobs``.  The loops give exactly the codes and
member counts of the reference engine (``tests/test_kernel.py``).

The functions are compiled on first use and cached on disk (``cache=True``,
in ``__pycache__`` next to this file or, when that is not writable, numba's
user-wide cache directory), so later processes load them instead of compiling.
"""

import os
import threading
import time

import numba
import numpy as np
from numba import njit, prange

__all__ = ["ForestArrays", "compile_kernels", "resolve_n_jobs", "run_forest", "run_one", "run_soft", "soft_margin"]

#: Fewest rows per thread worth starting threads for (below, one thread runs them all).
MIN_ROWS_PER_THREAD = 64
#: Rows the forest loop takes through each tree together (so the tree's nodes stay in cache).
BLOCK = 4096

_LOCK = threading.Lock()


# ---------------------------------------------------------------------------
# compiled loops
# ---------------------------------------------------------------------------
@njit(cache=True, nogil=True, inline="always")
def _step(X, r, node, child, feature, threshold, nan_right):
    """One level down from ``node`` for row ``r`` (a leaf is its own child: it stays put)."""
    v = X[r, feature[node]]
    go_right = np.uint32(v > threshold[node]) | (np.uint32(np.isnan(v)) & nan_right[node])
    return child[np.uint32(2) * node + go_right]


@njit(cache=True, nogil=True, inline="always")
def _walk(X, r, root, child, feature, threshold, nan_right, is_leaf):
    """The leaf row ``r`` reaches from ``root``."""
    node = root
    while is_leaf[node] == 0:
        node = _step(X, r, node, child, feature, threshold, nan_right)
    return node


@njit(cache=True, nogil=True, inline="always")
def _walk8(X, active, i, root, child, feature, threshold, nan_right, is_leaf, leaf_of):
    """The leaves of rows ``active[i:i + 8]``, walked side by side (see the module docstring)."""
    r0, r1, r2, r3 = active[i], active[i + 1], active[i + 2], active[i + 3]
    r4, r5, r6, r7 = active[i + 4], active[i + 5], active[i + 6], active[i + 7]
    n0 = n1 = n2 = n3 = n4 = n5 = n6 = n7 = root
    while (is_leaf[n0] & is_leaf[n1] & is_leaf[n2] & is_leaf[n3]
           & is_leaf[n4] & is_leaf[n5] & is_leaf[n6] & is_leaf[n7]) == 0:
        n0 = _step(X, r0, n0, child, feature, threshold, nan_right)
        n1 = _step(X, r1, n1, child, feature, threshold, nan_right)
        n2 = _step(X, r2, n2, child, feature, threshold, nan_right)
        n3 = _step(X, r3, n3, child, feature, threshold, nan_right)
        n4 = _step(X, r4, n4, child, feature, threshold, nan_right)
        n5 = _step(X, r5, n5, child, feature, threshold, nan_right)
        n6 = _step(X, r6, n6, child, feature, threshold, nan_right)
        n7 = _step(X, r7, n7, child, feature, threshold, nan_right)
    leaf_of[i], leaf_of[i + 1], leaf_of[i + 2], leaf_of[i + 3] = n0, n1, n2, n3
    leaf_of[i + 4], leaf_of[i + 5], leaf_of[i + 6], leaf_of[i + 7] = n4, n5, n6, n7


@njit(cache=True, nogil=True, inline="always")
def _forest_block(X, a, b, child, feature, threshold, nan_right, is_leaf, node_code, roots, table, check,
                  code_end, n_queried):
    """Rows ``a..b-1``, tree by tree over the rows of the block still voting (a tree's nodes
    stay in cache for the whole block); each row stops exactly where a row-by-row loop would."""
    T = roots.shape[0]
    m = b - a
    active = np.arange(a, b)  # rows still voting, in order
    leaf_of = np.empty(m, dtype=np.uint32)
    code = np.zeros(m, dtype=np.int32)  # code[i]: the count code of row active[i]
    n_active = m
    for j in range(T):
        if n_active == 0:
            break
        root = np.uint32(roots[j])
        i = 0
        while i + 8 <= n_active:
            _walk8(X, active, i, root, child, feature, threshold, nan_right, is_leaf, leaf_of)
            i += 8
        while i < n_active:
            leaf_of[i] = _walk(X, active[i], root, child, feature, threshold, nan_right, is_leaf)
            i += 1
        if j + 1 < T and check[j + 1]:
            keep = 0
            for i in range(n_active):
                c = code[i] + node_code[leaf_of[i]]
                if table[c]:
                    code_end[active[i]] = c
                    n_queried[active[i]] = j + 1
                else:
                    active[keep] = active[i]
                    code[keep] = c
                    keep += 1
            n_active = keep
        else:  # no count vector with j + 1 votes stops
            for i in range(n_active):
                code[i] += node_code[leaf_of[i]]
    for i in range(n_active):
        code_end[active[i]] = code[i]
        n_queried[active[i]] = T


@njit(cache=True, nogil=True)
def _forest_serial(X, block, child, feature, threshold, nan_right, is_leaf, node_code, roots, table, check,
                   code_end, n_queried):
    n = X.shape[0]
    for a in range(0, n, block):
        _forest_block(X, a, min(a + block, n), child, feature, threshold, nan_right, is_leaf, node_code, roots,
                      table, check, code_end, n_queried)


@njit(cache=True, nogil=True, parallel=True)
def _forest_parallel(X, block, child, feature, threshold, nan_right, is_leaf, node_code, roots, table, check,
                     code_end, n_queried):
    n = X.shape[0]
    for k in prange((n + block - 1) // block):
        a = k * block
        _forest_block(X, a, min(a + block, n), child, feature, threshold, nan_right, is_leaf, node_code, roots,
                      table, check, code_end, n_queried)


@njit(cache=True, nogil=True)
def _forest_one(x, child, feature, threshold, nan_right, is_leaf, node_code, roots, table, check):
    """One row ``x`` (float32 or float64, 1-D): ``(code, n_queried)``, or ``(-1, 0)`` if a
    feature is infinite once cast to float32 (the caller then runs the full validation)."""
    x32 = np.empty((1, x.shape[0]), dtype=np.float32)
    for k in range(x.shape[0]):
        x32[0, k] = np.float32(x[k])
        if np.isinf(x32[0, k]):
            return -1, 0
    T = roots.shape[0]
    code = 0
    for j in range(T):
        code += node_code[_walk(x32, 0, np.uint32(roots[j]), child, feature, threshold, nan_right, is_leaf)]
        if j + 1 < T and check[j + 1] and table[code]:
            return code, j + 1
    return code, T


@njit(cache=True, nogil=True, inline="always")
def _soft_leader(S, i, l, R, eps):
    """The leader of the sums ``S[i]`` if ``R`` more members cannot overtake it, else -1.

    A member adds a probability vector: it raises any class's sum by at most
    1 and lowers none, so the leader ``c`` is final once ``S_c - S_k > R``
    for every other class ``k``; ``eps`` covers the rounding of the sums.
    """
    c = 0
    for k in range(1, l):
        if S[i, k] > S[i, c]:
            c = k
    for k in range(l):
        if k != c and S[i, c] - S[i, k] <= R + eps:
            return -1
    return c


@njit(cache=True, nogil=True, inline="always")
def _soft_final(S, i, l, T):
    """``argmax(S[i] / T)``, lowest index on ties: scikit-learn's predict on its averaged probabilities."""
    c = 0
    best = S[i, 0] / T
    for k in range(1, l):
        v = S[i, k] / T
        if v > best:
            best = v
            c = k
    return c


@njit(cache=True, nogil=True, inline="always")
def _soft_block(X, a, b, child, feature, threshold, nan_right, is_leaf, leaf_proba, roots, eps, label, n_queried,
                total):
    """Soft voting over rows ``a..b-1``: each row's probability sums member by member, in member order
    (the order of scikit-learn's sum), until no remaining members can change the argmax."""
    T = roots.shape[0]
    l = leaf_proba.shape[1]
    m = b - a
    active = np.arange(a, b)
    leaf_of = np.empty(m, dtype=np.uint32)
    S = np.zeros((m, l))
    n_active = m
    for j in range(T):
        if n_active == 0:
            break
        root = np.uint32(roots[j])
        i = 0
        while i + 8 <= n_active:
            _walk8(X, active, i, root, child, feature, threshold, nan_right, is_leaf, leaf_of)
            i += 8
        while i < n_active:
            leaf_of[i] = _walk(X, active[i], root, child, feature, threshold, nan_right, is_leaf)
            i += 1
        R = T - (j + 1)
        keep = 0
        for i in range(n_active):
            for k in range(l):
                S[i, k] += leaf_proba[leaf_of[i], k]
            c = _soft_final(S, i, l, T) if R == 0 else _soft_leader(S, i, l, R, eps)
            if c >= 0:
                r = active[i]
                label[r] = c
                n_queried[r] = j + 1
                for k in range(l):
                    total[r, k] = S[i, k]
            else:
                active[keep] = active[i]
                for k in range(l):
                    S[keep, k] = S[i, k]
                keep += 1
        n_active = keep


@njit(cache=True, nogil=True)
def _soft_serial(X, block, child, feature, threshold, nan_right, is_leaf, leaf_proba, roots, eps, label,
                 n_queried, total):
    n = X.shape[0]
    for a in range(0, n, block):
        _soft_block(X, a, min(a + block, n), child, feature, threshold, nan_right, is_leaf, leaf_proba, roots,
                    eps, label, n_queried, total)


@njit(cache=True, nogil=True, parallel=True)
def _soft_parallel(X, block, child, feature, threshold, nan_right, is_leaf, leaf_proba, roots, eps, label,
                   n_queried, total):
    n = X.shape[0]
    for k in prange((n + block - 1) // block):
        a = k * block
        _soft_block(X, a, min(a + block, n), child, feature, threshold, nan_right, is_leaf, leaf_proba, roots,
                    eps, label, n_queried, total)


# ---------------------------------------------------------------------------
# Python side
# ---------------------------------------------------------------------------
def resolve_n_jobs(n_jobs):
    """Number of threads for ``n_jobs`` (scikit-learn's convention).

    None and 1 mean one thread; ``-1`` all the cores numba may use
    (``numba.config.NUMBA_NUM_THREADS``, by default every core), ``-2`` all but
    one, and so on; a positive number is capped at that count.
    """
    if n_jobs is None:
        return 1
    if isinstance(n_jobs, bool) or not isinstance(n_jobs, (int, np.integer)) or n_jobs == 0:
        raise ValueError(f"n_jobs must be None, a positive int or a negative int (-1: all cores), got {n_jobs!r}")
    top = int(numba.config.NUMBA_NUM_THREADS)
    n = int(n_jobs)
    return max(1, min(top, n if n > 0 else top + 1 + n))


def _block(n_rows, n_jobs):
    """Rows per block: :data:`BLOCK`, smaller when that leaves fewer than 4 blocks per thread."""
    threads = min(resolve_n_jobs(n_jobs), max(1, n_rows // MIN_ROWS_PER_THREAD))
    return BLOCK if threads == 1 else max(MIN_ROWS_PER_THREAD, min(BLOCK, -(-n_rows // (4 * threads))))


def _run(serial, parallel, n_rows, n_jobs, args):
    threads = min(resolve_n_jobs(n_jobs), max(1, n_rows // MIN_ROWS_PER_THREAD))
    if threads <= 1:
        serial(*args)
        return
    with _LOCK:  # numba's default thread pool runs one parallel region at a time
        before = numba.get_num_threads()
        numba.set_num_threads(threads)
        try:
            parallel(*args)
        finally:
            numba.set_num_threads(before)


class ForestArrays:
    """The node arrays of a fitted forest's trees, flattened once (at ``fit``) for the loops.

    Node ``k`` of member ``j`` is node ``roots[j] + k``.  ``child[2 * node]``
    and ``child[2 * node + 1]`` are its left and right children (global
    indices; a leaf is its own child, and ``is_leaf`` marks it); ``feature``
    is the column of the full ``X`` (a bagging member's feature subset
    already applied).  ``threshold`` is the tree's float64 threshold rounded
    down to float32: for every float32 value ``v``, ``v <= threshold`` exactly
    when scikit-learn's ``float64(v) <= threshold`` holds, so the walk is
    scikit-learn's.  ``nan_right`` is 1 where a missing value goes right
    (``missing_go_to_left`` False).  ``node_code[k]`` is the code increment of
    the class the leaf votes for (0 at inner nodes).

    Parameters
    ----------
    trees : list of sklearn.tree._tree.Tree
        The members' ``tree_``, in query order.
    features : list of (ndarray of int or None)
        Per member, the columns of ``X`` it was fitted on (None: all).
    leaf_code : list of ndarray of int32
        Per member, the code increment of each node's class.
    """

    def __init__(self, trees, features, leaf_code):
        sizes = np.array([t.node_count for t in trees], dtype=np.int64)
        self.roots = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        n = int(sizes.sum())
        if n >= 2**31:
            raise ValueError(f"the forest has {n:,} nodes; the compiled loop indexes them with 32 bits")
        self.child = np.empty(2 * n, dtype=np.uint32)
        self.feature = np.zeros(n, dtype=np.uint32)
        self.threshold = np.empty(n, dtype=np.float32)
        self.nan_right = np.zeros(n, dtype=np.uint32)
        self.is_leaf = np.zeros(n, dtype=np.uint8)
        self.node_code = np.zeros(n, dtype=np.int32)
        for j, (t, feats, codes) in enumerate(zip(trees, features, leaf_code)):
            a, b = self.roots[j], self.roots[j] + t.node_count
            leaf = t.children_left == -1
            own = np.arange(a, b)
            self.child[2 * a:2 * b:2] = np.where(leaf, own, t.children_left + a)
            self.child[2 * a + 1:2 * b:2] = np.where(leaf, own, t.children_right + a)
            f = np.where(leaf, 0, t.feature)
            self.feature[a:b] = f if feats is None else np.asarray(feats)[f]
            self.threshold[a:b] = np.where(leaf, np.float32(np.inf), _round_down_float32(t.threshold))
            self.nan_right[a:b] = ~leaf & ~np.asarray(t.missing_go_to_left, dtype=bool)
            self.is_leaf[a:b] = leaf
            self.node_code[a:b] = np.where(leaf, codes, 0)

    @property
    def n_nodes(self):
        return len(self.feature)

    @property
    def nbytes(self):
        return sum(a.nbytes for a in self.args())

    def args(self):
        return (self.child, self.feature, self.threshold, self.nan_right, self.is_leaf, self.node_code,
                self.roots)


def _round_down_float32(threshold):
    """The largest float32 at most ``threshold`` (float64), element-wise."""
    t32 = np.asarray(threshold, dtype=np.float64).astype(np.float32)
    return np.where(t32.astype(np.float64) > threshold, np.nextafter(t32, np.float32(-np.inf)), t32)


def run_forest(X32, forest, table, stops_at, n_jobs=None):
    """The table-driven stop loop over a forest, tree by tree and row by row.

    Parameters
    ----------
    X32 : ndarray of float32, shape (n_rows, n_features), C-contiguous
    forest : ForestArrays
    table, stops_at : the rule's :class:`ensvote.engine.StopTable` (its table and ``stops_at``)
    n_jobs : int or None

    Returns
    -------
    code_end : ndarray of int32, shape (n_rows,)
        Each row's mixed-radix count code when it stopped.
    n_queried : ndarray of int64, shape (n_rows,)
        Members queried per row.
    """
    n = X32.shape[0]
    code_end = np.zeros(n, dtype=np.int32)
    n_queried = np.zeros(n, dtype=np.int64)
    if n:
        _run(_forest_serial, _forest_parallel, n, n_jobs,
             (X32, _block(n, n_jobs)) + forest.args() + (table, stops_at, code_end, n_queried))
    return code_end, n_queried


def soft_margin(n_members):
    """The rounding allowance of the soft stop: sums of up to ``T`` probabilities, each at most 1, added
    in float64 err by less than ``T**2 * 2**-53``; four times that, plus a floor.

    Examples
    --------
    >>> from ensvote.kernel import soft_margin
    >>> soft_margin(101) < 1e-9
    True
    """
    return 4.0 * float(n_members) ** 2 * 2.0 ** -53 + 1e-12


def run_soft(X32, forest, leaf_proba, n_jobs=None):
    """Soft voting with the exact stop: labels equal to ``argmax`` of the forest's averaged probabilities.

    Parameters
    ----------
    X32 : ndarray of float32, shape (n_rows, n_features), C-contiguous
    forest : ForestArrays
    leaf_proba : ndarray of float64, shape (n_nodes, n_classes)
        The class probabilities of each node's leaf, as the member's ``predict_proba`` gives them.
    n_jobs : int or None

    Returns
    -------
    label : ndarray of int64, shape (n_rows,)
        Class indices.
    n_queried : ndarray of int64, shape (n_rows,)
    total : ndarray of float64, shape (n_rows, n_classes)
        The probabilities summed over the members queried.
    """
    n = X32.shape[0]
    label = np.zeros(n, dtype=np.int64)
    n_queried = np.zeros(n, dtype=np.int64)
    total = np.zeros((n, leaf_proba.shape[1]))
    if n:
        f = forest
        _run(_soft_serial, _soft_parallel, n, n_jobs,
             (X32, _block(n, n_jobs), f.child, f.feature, f.threshold, f.nan_right, f.is_leaf, leaf_proba, f.roots,
              soft_margin(len(f.roots)), label, n_queried, total))
    return label, n_queried, total


def run_one(x, forest, table, stops_at):
    """The stop loop for one row ``x`` (1-D float32 or float64, C-contiguous), with no validation
    beyond infinity: ``(code, n_queried)``, or ``(-1, 0)`` when ``x`` has a feature that is infinite
    as float32 (an infinity, or a float64 too large for float32)."""
    return _forest_one(x, *forest.args(), table, stops_at)


def compile_kernels():
    """Compile (or load from the on-disk cache) the forest loops; seconds taken.

    Called by the benchmark to report the first-call cost; ordinary use
    compiles on the first call.
    """
    t0 = time.perf_counter()
    X = np.zeros((1, 1), dtype=np.float32)
    i64 = np.zeros(1, dtype=np.int64)
    i32 = np.zeros(1, dtype=np.int32)
    forest = (np.zeros(2, dtype=np.uint32), np.zeros(1, dtype=np.uint32), np.full(1, np.inf, dtype=np.float32),
              np.zeros(1, dtype=np.uint32), np.ones(1, dtype=np.uint8), i32.copy(), i64.copy())
    args = (X,) + forest + (np.zeros(4, dtype=np.bool_), np.zeros(2, dtype=np.bool_), np.zeros(1, dtype=np.int32),
                            np.zeros(1, dtype=np.int64))
    for a in args[8:10]:  # the stop tables are read-only (a numba type of their own)
        a.setflags(write=False)
    _forest_serial(args[0], BLOCK, *args[1:])
    _forest_parallel(args[0], BLOCK, *args[1:])
    for dtype in (np.float32, np.float64):
        _forest_one(np.zeros(1, dtype=dtype), *args[1:10])
    return time.perf_counter() - t0


def cache_dir():
    """Where numba keeps the compiled loops of this module (None if not cached yet)."""
    d = os.path.join(os.path.dirname(__file__), "__pycache__")
    return d if os.path.isdir(d) else None
