"""The compiled stop loop: each row stopping as soon as its rule allows.

The engine's table-driven fast path (see :func:`ensvote.engine.stop_table`)
carries each row's vote counts as one mixed-radix code; a member adds the code
increment of the class it votes for, and the stop check is one look-up in the
rule's flat stop table or, beyond its size, in the rule's stop bits (the
code read as its vote vector's place: :func:`_stops`).  This module runs
that loop compiled with numba over the flattened node arrays of a fitted forest
(:class:`ForestArrays`, :func:`run_forest`, :func:`label_rows`), each row
leaving the loop as soon as its rule stops it.

Each member's tree is walked from its root to a leaf exactly as
scikit-learn's ``Tree.apply`` walks dense input (``X`` as float32,
``x[feature] <= threshold`` goes left, NaN follows ``missing_go_to_left``),
but the walk is written for the processor rather than for one row.  The
nodes are stored level by level with a node's two children side by side
(:class:`ForestArrays`), so a level down is ``left[node] + go_right``: no
branch, and the child's index is loaded while the row's value is compared.
A leaf is its own child, so a row can walk on past its leaf: eight rows
walk side by side, with no test of whether one has arrived, and the
processor overlaps the eight independent walks instead of stalling on one
mispredicted branch after another.  Only once they have walked as far as
eight rows' longest path usually reaches (the median over groups of eight
training rows, :attr:`ForestArrays.steps`) does the walk look, after each
level, whether all eight are at their leaves: a deep tree's rows mostly end
far above its deepest leaf.  The walk compares integer keys in the
order of the float32 values (:func:`row_keys`, made once per block of rows;
the thresholds' keys once at fit) rather than the floats themselves: the
same branches, a shorter wait for each comparison.  A node is one 16-byte
record (threshold key, feature, left child, NaN direction) addressed by
four times its index, so a step reads its node through one base address
and keeps more of the eight walks in registers.  A block without NaN
takes a walk that does not test for NaN.  Rows go through the trees in blocks of :data:`BLOCK`
(tree by tree over the block's rows still voting, so a tree's nodes stay in
cache).  Once fewer than :data:`HAND_ON` rows of a block are still voting, the block hands them on
(:func:`_hand_on`): after all blocks, the rows handed on are walked together, tree by tree, each joining
at the tree it had reached (:func:`_leftover_rows`).  Far into a large forest each block has only a few rows
left, and each deep tree walked block by block would be read from memory once per block for a handful of
rows; walked together it is read once for them all.  Once fewer than eight rows are still voting and no
other is left to join, each goes on alone, four trees side by side until all four reach their leaves
(:func:`_finish_row`).  The rows of a small request
(:func:`label_rows`, up to :data:`ROW_BY_ROW` rows) have no block around them: two groups of four trees
walk side by side, two rows' next four or one row's next eight (:func:`_rows_in_pairs`), and since such a
walk reads nodes that are seldom in cache, each step asks for the records three levels further down
before it needs them (:func:`_step_ahead`; a node's great-grandchildren follow one another).

A forest of small trees (none with more than :data:`MASK_LEAVES` leaves) is not walked but *masked*
(:func:`_forest_block_masks`) with the leaf bit vectors of QuickScorer (Lucchese, Nardini, Orlando, Perego,
Tonellotto and Venturini, SIGIR 2015): each of a tree's leaves is one bit of a 32- or 64-bit word (left to
right), every row of the block starts with all bits set, and each inner node, in any order, clears the bits
of its left subtree's leaves in the rows that go right there; the row's leaf is the lowest bit left.  Where
QuickScorer visits only the nodes whose test fails, feature by feature, this loop tests every inner node,
for all the rows of the block at once: one comparison of a column of the block's keys (kept column by
column) with the node's threshold, which the compiler turns into vector instructions, many rows per
instruction and no waiting on a load.  The same leaves, so the same codes and members; a block with NaN is
walked.

:class:`ensvote.HaltingClassifier` uses it for every dense ``X`` (sparse
``X`` takes the engine's numpy path).  Rows are independent, so with
``n_jobs > 1`` the blocks are spread over threads (``numba.prange``); the
results do not depend on ``n_jobs``.  The loops give exactly the codes and
member counts of the reference engine (``tests/test_kernel.py``).

The functions are compiled on first use and cached on disk (``cache=True``,
in ``__pycache__`` next to this file or, when that is not writable, numba's
user-wide cache directory), so later processes load them instead of compiling.
"""

import math
import os
import threading
import time

import numba
import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.core.imputils import impl_ret_borrowed
from numba.cpython.unsafe.numbers import trailing_zeros
from numba.extending import intrinsic, overload

__all__ = ["ForestArrays", "compile_kernels", "label_rows", "label_rows_bits", "pack", "pack_bits_plan", "pack_plan",
           "resolve_n_jobs", "run_forest", "run_forest_lazy", "run_soft", "soft_margin"]

#: Fewest rows per thread worth starting threads for (below, one thread runs them all).
MIN_ROWS_PER_THREAD = 64
#: Most rows of a request that :class:`ensvote.HaltingClassifier` labels row by row (:func:`label_rows`: one
#: compiled call, two rows at a time) rather than in blocks tree by tree (:func:`run_forest`).  Measured on the
#: benchmark's problems (T = 101, the engines run in between): row by row 1.3-2.6x as fast as the blocks at 64
#: and 100 rows, as fast or faster at 200, mixed at 500, slower at 1,000.
ROW_BY_ROW = 256
#: Rows the forest loop takes through each tree together (so the tree's nodes stay in cache).
BLOCK = 4096
#: Rows of a block still voting below which the forest loop hands them on, to be walked with the other blocks'
#: (:func:`_leftover_rows`).  Measured (HYPER, 10^5 rows, one thread, against never handing on): two classes,
#: T = 5,001: 99.9 -> 39.5 ms (8: 77.6, 128: 38.7); the benchmark's problems at T = 501 (2 x 10^4 rows) 0-6 %
#: faster, at T = 101 within -4 % .. +2 % (twonorm +2 %: its rows handed on are walked, not masked).
HAND_ON = 32
#: Most leaves of every tree for the forest loop to walk them by leaf masks (:func:`_forest_block_masks`).
MASK_LEAVES = 64

_LOCK = threading.Lock()


# ---------------------------------------------------------------------------
# compiled loops
# ---------------------------------------------------------------------------
#: The key of a missing value (NaN): below every threshold's key, so that the comparison sends it left.
_NAN_KEY = np.int32(-2**31)


@intrinsic
def _bits32(typingctx, v):
    """The bits of the float32 ``v`` as an int32 (a bit cast: no conversion)."""
    if v != types.float32:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(v), codegen


@intrinsic
def _prefetch(typingctx, arr, i):
    """Ask the processor to bring ``arr[i]``'s cache line closer (LLVM's ``prefetch``: a hint, for reading,
    kept in every cache level); no value, no fault whatever ``i`` is."""
    if not (isinstance(arr, types.Array) and isinstance(i, types.Integer)):
        return None

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0]).data
        ptr = builder.gep(data, [args[1]])
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(builder.module, ir.FunctionType(ir.VoidType(), [ptr.type, i32, i32, i32]),
                                            "llvm.prefetch.p0")
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return types.void(arr, i), codegen


@njit(cache=True, nogil=True)
def _flat_keys(xf, start, count, out):
    """The keys of ``xf[start:start + count]`` (1-D float32 or float64) into ``out[:count]``; the flags of
    :func:`row_keys`."""
    flags = 0
    for i in range(count):
        bits = _bits32(np.float32(xf[np.uint64(start) + np.uint64(i)]))
        mag = bits & np.int32(0x7FFFFFFF)
        key = bits ^ ((bits >> np.int32(31)) & np.int32(0x7FFFFFFF))
        key = np.int32(0) if mag == 0 else key
        key = _NAN_KEY if mag > np.int32(0x7F800000) else key
        flags |= (1 if mag > np.int32(0x7F800000) else 0) | (2 if mag == np.int32(0x7F800000) else 0)
        out[i] = key
    return flags


@njit(cache=True, nogil=True)
def row_keys(X, a, b, out):
    """The keys of rows ``a..b-1`` of ``X`` (2-D float32 or float64, C-contiguous) into ``out`` (1-D int32,
    row after row); returns 1 if one of them is NaN, plus 2 if one is infinite (as float32).

    A value's key is an int32 in the order of its float32 value: for finite or infinite ``u`` and ``v``,
    ``u > v`` exactly when ``key(u) > key(v)``.  It is the value's bits with the other bits of a negative
    value flipped (so that larger magnitudes come lower), -0.0 taken as +0.0; NaN's key is
    :data:`_NAN_KEY`, below every other key.  The walk compares keys (an integer comparison with an
    operand in memory) instead of floats: the same branches, and a comparison the processor answers sooner.
    """
    w = X.shape[1]
    return _flat_keys(X.reshape(X.size), a * w, (b - a) * w, out)


@njit(cache=True, nogil=True, inline="always")
def _step(K, p, o, rec):
    """One level down from the node whose record starts at ``rec[o]`` (:class:`ForestArrays`) for the row whose
    keys (:func:`row_keys`) start at ``K[p]``, which has no NaN: the child's record (a leaf stays put)."""
    return np.uint64(rec[o + np.uint64(2)]) + (
        np.uint64(K[p + np.uint64(rec[o + np.uint64(1)])] > rec[o]) << np.uint64(2))


@njit(cache=True, nogil=True, inline="always")
def _step_nan(K, p, o, rec):
    """:func:`_step` for a row that may have NaN: a missing value goes right where the node says so."""
    v = K[p + np.uint64(rec[o + np.uint64(1)])]
    right = np.uint64(v > rec[o]) | (np.uint64(v == _NAN_KEY) & np.uint64(rec[o + np.uint64(3)]))
    return np.uint64(rec[o + np.uint64(2)]) + (right << np.uint64(2))


@njit(cache=True, nogil=True, inline="always")
def _walk(K, p, root, rec):
    """The leaf the row whose keys start at ``K[p]`` reaches from node ``root`` (a leaf is its own left child)."""
    o = np.uint64(root) << np.uint64(2)
    while np.uint64(rec[o + np.uint64(2)]) != o:
        o = _step_nan(K, p, o, rec)
    return o >> np.uint64(2)


@njit(cache=True, nogil=True, inline="always")
def _has_nan(K, nc, rows, n):
    """Whether any of the rows ``rows[:n]`` (their keys from ``K[rows[i] nc]``) has a NaN."""
    for i in range(n):
        p = np.uint64(rows[i]) * nc
        acc = False
        for c in range(nc):
            acc |= K[p + c] == _NAN_KEY
        if acc:
            return True
    return False


@njit(cache=True, nogil=True, inline="always")
def _keys_of(Xb, wide, start, count, out):
    """:func:`_flat_keys` of the values ``start .. start + count - 1`` of ``Xb`` (the bytes of a C-contiguous
    array, float64 if ``wide`` else float32: one compiled loop reads both) into ``out``; their flags."""
    if wide:
        return _flat_keys(_bytes_as(Xb, 0, Xb.shape[0], np.float64), start, count, out)
    return _flat_keys(_bytes_as(Xb, 0, Xb.shape[0], np.float32), start, count, out)


@njit(cache=True, nogil=True)
def _block_keys(Xb, wide, nc, a, b):
    """The keys of rows ``a..b-1`` (:func:`row_keys`), flat, and :func:`row_keys`'s flags (1: NaN, 2: infinity),
    of the rows ``Xb`` of ``nc`` columns (:func:`_keys_of`)."""
    K = np.empty((b - a) * nc, dtype=np.int32)
    return K, _keys_of(Xb, wide, a * nc, (b - a) * nc, K)


def _step_or_nan(K, p, o, rec, nan):
    """:func:`_step` if ``nan`` is None, else :func:`_step_nan`: chosen when the loop is compiled (one compiled walk
    for each, from one source)."""


@overload(_step_or_nan)
def _step_or_nan_impl(K, p, o, rec, nan):
    if isinstance(nan, types.NoneType):
        return lambda K, p, o, rec, nan: _step(K, p, o, rec)
    return lambda K, p, o, rec, nan: _step_nan(K, p, o, rec)


@njit(cache=True, nogil=True, inline="always")
def _at_leaves(rec, n0, n1, n2, n3, n4, n5, n6, n7):
    """Whether the eight nodes whose records start at ``rec[n0]``, ... are all leaves (a leaf is its own left
    child); no branch."""
    two = np.uint64(2)
    return ((np.uint64(rec[n0 + two]) == n0) & (np.uint64(rec[n1 + two]) == n1)
            & (np.uint64(rec[n2 + two]) == n2) & (np.uint64(rec[n3 + two]) == n3)
            & (np.uint64(rec[n4 + two]) == n4) & (np.uint64(rec[n5 + two]) == n5)
            & (np.uint64(rec[n6 + two]) == n6) & (np.uint64(rec[n7 + two]) == n7))


@njit(cache=True, nogil=True, inline="always")
def _walk8(K, nc, a, rows, i, root, steps, rec, leaf_of, nan):
    """The leaves of rows ``rows[i:i + 8]`` (row ``r``'s keys from ``K[(r - a) nc]``), walked side by side
    from ``root``: ``steps`` levels down without looking (:attr:`ForestArrays.steps`), then on, a level at a
    time, until all eight are at their leaves (see the module docstring); ``nan``: None for rows without NaN
    (the walk that does not test for it), True for rows that may have NaN."""
    p0, p1, p2, p3 = np.uint64(rows[i] - a) * nc, np.uint64(rows[i + 1] - a) * nc, \
        np.uint64(rows[i + 2] - a) * nc, np.uint64(rows[i + 3] - a) * nc
    p4, p5, p6, p7 = np.uint64(rows[i + 4] - a) * nc, np.uint64(rows[i + 5] - a) * nc, \
        np.uint64(rows[i + 6] - a) * nc, np.uint64(rows[i + 7] - a) * nc
    n0 = n1 = n2 = n3 = n4 = n5 = n6 = n7 = np.uint64(root) << np.uint64(2)
    d = 0
    while d < steps or not _at_leaves(rec, n0, n1, n2, n3, n4, n5, n6, n7):
        n0 = _step_or_nan(K, p0, n0, rec, nan)
        n1 = _step_or_nan(K, p1, n1, rec, nan)
        n2 = _step_or_nan(K, p2, n2, rec, nan)
        n3 = _step_or_nan(K, p3, n3, rec, nan)
        n4 = _step_or_nan(K, p4, n4, rec, nan)
        n5 = _step_or_nan(K, p5, n5, rec, nan)
        n6 = _step_or_nan(K, p6, n6, rec, nan)
        n7 = _step_or_nan(K, p7, n7, rec, nan)
        d += 1
    two = np.uint64(2)
    leaf_of[i], leaf_of[i + 1], leaf_of[i + 2], leaf_of[i + 3] = n0 >> two, n1 >> two, n2 >> two, n3 >> two
    leaf_of[i + 4], leaf_of[i + 5], leaf_of[i + 6], leaf_of[i + 7] = n4 >> two, n5 >> two, n6 >> two, n7 >> two


@njit(cache=True, nogil=True, inline="always")
def _walk_rows(K, nc, a, rows, n, root, steps, rec, nan, leaf_of):
    """``leaf_of[i]`` = the leaf of the tree at ``root`` that row ``rows[i]`` reaches (``steps``: see :func:`_walk8`),
    ``i < n``, its keys from ``K[(rows[i] - a) nc]``: eight rows side by side (:func:`_walk8`; ``nan``: the
    rows may have NaN).  ``rows`` and ``leaf_of`` have room for 7 more: a last group of 2 to 7 rows is
    filled up with copies of the last row and walked side by side too (one walk alone waits on every load),
    a last row alone walks alone."""
    r = n % 8
    if r >= 2:
        for k in range(n, n + 8 - r):
            rows[k] = rows[n - 1]
        n += 8 - r
    i = 0
    if nan:
        while i + 8 <= n:
            _walk8(K, nc, a, rows, i, root, steps, rec, leaf_of, True)
            i += 8
    else:
        while i + 8 <= n:
            _walk8(K, nc, a, rows, i, root, steps, rec, leaf_of, None)
            i += 8
    while i < n:
        leaf_of[i] = _walk(K, np.uint64(rows[i] - a) * nc, root, rec)
        i += 1


@njit(cache=True, nogil=True, inline="always")
def _stops_bits(table, code, lay):
    """Whether the count code ``code`` stops, from the level-ordered stop bits ``table`` of ``lay[0]`` = 2 or 3
    classes.  Such codes are in radix ``2 ** b`` (``lay = (l, b, 2 ** (l b))``, see
    :class:`ensvote.engine.StopTable`): the vote vector is the code's ``b``-bit fields, and its
    :func:`ensvote.engine.level_index` the bit; codes from ``2 ** (l b)`` up never stop.  No branch
    but the choice of ``l``."""
    c = np.int64(code)
    b = lay[1]
    mask = (np.int64(1) << b) - 1
    if lay[0] == 2:
        t0 = c >> b
        s = t0 + (c & mask)
        i = s * (s + 1) // 2 + t0
    else:
        t0 = c >> (2 * b)
        t1 = (c >> b) & mask
        s = t0 + t1 + (c & mask)
        i = s * (s + 1) * (s + 2) // 6 + t0 * (s + 1) - t0 * (t0 - 1) // 2 + t1
    ok = c < lay[2]
    i = i if ok else 0
    u = np.uint64(i)
    return ok & (((table[u >> np.uint64(3)] >> (np.uint64(7) - (u & np.uint64(7)))) & np.uint64(1)) != 0)


def _stops(table, code, lay):
    """Whether the count code ``code`` stops: ``table[code]`` when ``lay`` is None (the flat table), else
    :func:`_stops_bits`.  Chosen when the loop is compiled (one compiled loop for each), so the flat table's
    loop is the same as if the stop bits did not exist."""


@overload(_stops)
def _stops_impl(table, code, lay):
    if isinstance(lay, types.NoneType):
        return lambda table, code, lay: table[np.uint64(code)]
    return lambda table, code, lay: _stops_bits(table, code, lay)


def _row_of(rows, i):
    """The row of list entry ``i``: ``i`` itself if ``rows`` is None, else ``rows[i]`` (chosen when the loop is
    compiled)."""


@overload(_row_of)
def _row_of_impl(rows, i):
    if isinstance(rows, types.NoneType):
        return lambda rows, i: i
    return lambda rows, i: rows[i]


@njit(cache=True, nogil=True, inline="always")
def _keep_voting(n, j, ids, rows, code, table, lay, code_end, n_queried):
    """The stop check after ``j + 1`` votes over the ``n`` rows still voting (their votes added): entry ``q``
    is the row :func:`_row_of` ``(rows, ids[q])`` with count code ``code[q]``.  A row that stops is recorded
    (its code, ``j + 1`` members); the others keep their order at the front of ``ids`` and ``code``.  How
    many are kept."""
    keep = np.uint64(0)  # (unsigned indices: no test for negative ones)
    for q in range(n):
        i = ids[q]
        c = code[q]
        if _stops(table, c, lay):
            r = np.uint64(_row_of(rows, i))
            code_end[r] = c
            n_queried[r] = j + 1
        else:
            ids[keep] = i
            code[keep] = c
            keep += np.uint64(1)
    return np.int64(keep)


@njit(cache=True, nogil=True, inline="always")
def _finish_row(K, p, j, code, rec, node_code, roots, table, lay, check):
    """One row (its keys from ``K[p]``) that has walked ``j`` trees to count code ``code``, on to its stop:
    ``(code, n_queried)``.  Four trees side by side (one row's walk waits on each load: four overlap), each
    step asking for the node's great-grandchildren first (:func:`_step_ahead`: a row this far into the
    forest reads trees no other row has brought into cache), until all four have reached their leaves (a
    row's path is often far shorter than its tree's depth), then their votes in order, the stop checked
    after each tree as one tree at a time would."""
    T = roots.shape[0]
    while j + 4 <= T:
        two = np.uint64(2)
        n0, n1 = np.uint64(roots[j]) << two, np.uint64(roots[j + 1]) << two
        n2, n3 = np.uint64(roots[j + 2]) << two, np.uint64(roots[j + 3]) << two
        while ((np.uint64(rec[n0 + two]) != n0) | (np.uint64(rec[n1 + two]) != n1)
               | (np.uint64(rec[n2 + two]) != n2) | (np.uint64(rec[n3 + two]) != n3)):
            n0 = _step_ahead(K, p, n0, rec, True)
            n1 = _step_ahead(K, p, n1, rec, True)
            n2 = _step_ahead(K, p, n2, rec, True)
            n3 = _step_ahead(K, p, n3, rec, True)
        for leaf in (n0 >> two, n1 >> two, n2 >> two, n3 >> two):
            code += node_code[leaf]
            j += 1
            if j < T and check[j] and _stops(table, code, lay):
                return code, j
    while j < T:
        code += node_code[_walk(K, p, roots[j], rec)]
        j += 1
        if j < T and check[j] and _stops(table, code, lay):
            return code, j
    return code, T


@njit(cache=True, nogil=True, inline="always")
def _votes_of_four(leaves, j, code, node_code, T, table, lay, check):
    """A row's votes at trees ``j .. j + 3`` (their leaves) in order, the stop checked after each as one tree at a
    time would: ``(code, trees queried, stopped)``."""
    for leaf in leaves:
        code += node_code[leaf]
        j += 1
        if j < T and check[j] and _stops(table, code, lay):
            return code, j, True
    return code, j, False


@njit(cache=True, nogil=True, inline="always")
def _step_ahead(K, p, o, rec, nan):
    """:func:`_step_or_nan`, having first asked for the first two cache lines of the node's great-grandchildren:
    their (up to eight) records follow one another, breadth first, from the one :class:`ForestArrays` keeps in
    the node's fourth field (the low bit, ``nan_right``, moves the address by four bytes).  A small request's
    walk reads nodes that are seldom in cache (a deep tree's lower levels, other trees read in between); this
    way the load three levels down is on its way two levels early."""
    g = np.uint64(rec[o + np.uint64(3)])
    _prefetch(rec, g)
    _prefetch(rec, g + np.uint64(16))
    return _step_or_nan(K, p, o, rec, nan)


@njit(cache=True, nogil=True)
def _rows_in_pairs(K, width, n, rec, node_code, roots, table, lay, check, codes, nan):
    """``codes[r]``: the count code at which row ``r < n`` stops (its keys from ``K[r width]``; ``nan``: None
    if no row has NaN, else True).  Two groups of four trees are walked side by side, eight walks that
    overlap (:func:`_step_ahead`): the next four trees of two rows or, when no other row is left to start,
    the next eight of one row.  A row's votes are added in tree order, the stop checked after each tree as one
    tree at a time would (so each row stops where :func:`_finish_row` would stop it; the trees of the second
    group of a row that stopped in the first are walked for nothing).  When a row stops the next row of the
    request takes its place; a row with fewer than four trees left finishes alone (:func:`_finish_row`)."""
    T = roots.shape[0]
    two = np.uint64(2)
    idle = np.uint64(rec.shape[0] - 4)  # the last node's record, a leaf (the last of its tree's deepest level)
    r0 = r1 = -1  # the rows being walked (-1: none), their count codes and next trees
    c0 = c1 = j0 = j1 = 0
    nxt = 0
    while True:
        if r0 >= 0 and j0 + 4 > T:
            codes[r0] = _finish_row(K, np.uint64(r0) * width, j0, c0, rec, node_code, roots, table, lay, check)[0]
            r0 = -1
        if r1 >= 0 and j1 + 4 > T:
            codes[r1] = _finish_row(K, np.uint64(r1) * width, j1, c1, rec, node_code, roots, table, lay, check)[0]
            r1 = -1
        if r0 < 0 and nxt < n:
            r0, c0, j0, nxt = nxt, 0, 0, nxt + 1
            continue
        if r1 < 0 and nxt < n:
            r1, c1, j1, nxt = nxt, 0, 0, nxt + 1
            continue
        if r0 < 0:
            if r1 < 0:
                return
            r0, c0, j0, r1 = r1, c1, j1, -1
        # group a: row r0's trees j0 .. j0 + 3; group b: row r1's next four, else row r0's four after those
        pa = np.uint64(r0) * width
        a0, a1 = np.uint64(roots[j0]) << two, np.uint64(roots[j0 + 1]) << two
        a2, a3 = np.uint64(roots[j0 + 2]) << two, np.uint64(roots[j0 + 3]) << two
        alone = r1 < 0
        jb = j0 + 4 if alone else j1
        pb = pa if alone else np.uint64(r1) * width
        if jb + 4 <= T:
            b0, b1 = np.uint64(roots[jb]) << two, np.uint64(roots[jb + 1]) << two
            b2, b3 = np.uint64(roots[jb + 2]) << two, np.uint64(roots[jb + 3]) << two
        else:  # (row r0 alone, fewer than eight trees left) group b stays on a leaf
            b0 = b1 = b2 = b3 = idle
        while not _at_leaves(rec, a0, b0, a1, b1, a2, b2, a3, b3):
            a0 = _step_ahead(K, pa, a0, rec, nan)
            b0 = _step_ahead(K, pb, b0, rec, nan)
            a1 = _step_ahead(K, pa, a1, rec, nan)
            b1 = _step_ahead(K, pb, b1, rec, nan)
            a2 = _step_ahead(K, pa, a2, rec, nan)
            b2 = _step_ahead(K, pb, b2, rec, nan)
            a3 = _step_ahead(K, pa, a3, rec, nan)
            b3 = _step_ahead(K, pb, b3, rec, nan)
        c0, j0, stop = _votes_of_four((a0 >> two, a1 >> two, a2 >> two, a3 >> two), j0, c0, node_code, T,
                                      table, lay, check)
        if stop or j0 == T:
            codes[r0] = c0
            r0 = -1
        if not alone:
            c1, j1, stop = _votes_of_four((b0 >> two, b1 >> two, b2 >> two, b3 >> two), j1, c1, node_code, T,
                                          table, lay, check)
            if stop or j1 == T:
                codes[r1] = c1
                r1 = -1
        elif r0 >= 0 and jb + 4 <= T:  # row r0's second group, unless the row stopped in the first
            c0, j0, stop = _votes_of_four((b0 >> two, b1 >> two, b2 >> two, b3 >> two), j0, c0, node_code, T,
                                          table, lay, check)
            if stop or j0 == T:
                codes[r0] = c0
                r0 = -1


@njit(cache=True, nogil=True, inline="always")
def _hand_on(ids, n, rows, code, j, code_end, n_queried):
    """The ``n`` rows still voting after ``j`` trees (entry ``q``: row :func:`_row_of` ``(rows, ids[q])`` with
    count code ``code[q]``) handed on to :func:`_leftover_rows`: ``code_end[r]`` their code,
    ``n_queried[r]`` = ``-1 - j`` (negative: not stopped yet)."""
    for q in range(n):
        r = _row_of(rows, ids[q])
        code_end[r] = code[q]
        n_queried[r] = -1 - j


@njit(cache=True, nogil=True)
def _handed_on(n_queried):
    """The rows handed on (:func:`_hand_on`), in the order of the tree they go on from (then of rows)."""
    left = np.flatnonzero(n_queried < 0)
    return left[np.argsort(-n_queried[left], kind="mergesort")]


@njit(cache=True, nogil=True)
def _parts(m, threads):
    """Shares of ``m`` rows handed on, one per thread, each at least :data:`MIN_ROWS_PER_THREAD` rows
    (:func:`_leftovers_parallel`)."""
    return max(1, min(threads, m // MIN_ROWS_PER_THREAD))


@njit(cache=True, nogil=True)
def _rows_keys(Xb, wide, nc, rows):
    """:func:`_block_keys` of the rows ``rows`` (any rows of ``Xb``, row ``rows[i]``'s keys from ``K[i nc]``)."""
    m = rows.shape[0]
    K = np.empty(m * nc, dtype=np.int32)
    flags = 0
    for i in range(m):
        flags |= _keys_of(Xb, wide, rows[i] * nc, nc, K[i * nc:(i + 1) * nc])
    return K, flags


def _or_zero(arr, i):
    """``arr[i]``, or 0 if ``arr`` is None (chosen when the loop is compiled)."""


@overload(_or_zero)
def _or_zero_impl(arr, i):
    if isinstance(arr, types.NoneType):
        return lambda arr, i: 0
    return lambda arr, i: arr[i]


@njit(cache=True, nogil=True, inline="always")
def _vote_rows(K, nc, a, m, rows, start, init, hand, nan, rec, steps, node_code, roots, table, lay, check,
               code_end, n_queried):
    """The tree loop of :func:`_forest_block` and :func:`_leftover_rows`: ``m`` rows, entry ``e`` the row
    :func:`_row_of` ``(rows, a + e)`` with its keys from ``K[e nc]``, joining the walk after ``start[e]``
    trees (ascending; None: all from the first) with count code ``init[e]`` (None: 0).  Tree by tree over
    the rows still voting (a tree's nodes stay in cache for all of them), each row's stop checked after each
    tree as a row-by-row loop would; ``nan``: a row may have NaN.  Once fewer than ``hand`` rows are still
    voting, they are handed on (:func:`_hand_on`); once fewer than eight and none is left to join, each goes
    on alone (:func:`_finish_row`)."""
    T = roots.shape[0]
    active = np.empty(m + 7, dtype=np.int64)  # a + the entries still voting, in order (and room for _walk_rows)
    leaf_of = np.empty(m + 7, dtype=np.uint32)
    code = np.empty(m, dtype=np.int32)  # code[i]: the count code of entry active[i] - a
    n_active = 0
    nxt = 0  # the next entry to join
    j = _or_zero(start, 0)
    while j < T:
        while nxt < m and _or_zero(start, nxt) == j:
            active[n_active] = a + nxt
            code[n_active] = _or_zero(init, nxt)
            n_active += 1
            nxt += 1
        if n_active == 0:  # no row voting: on to the next one's tree, if any
            if nxt == m:
                return
            j = _or_zero(start, nxt)
            continue
        if n_active < hand:
            _hand_on(active, n_active, rows, code, j, code_end, n_queried)
            return
        if n_active < 8 and nxt == m:  # too few to walk side by side: each row on alone, four trees at a time
            for i in range(n_active):
                r = _row_of(rows, active[i])
                code_end[r], n_queried[r] = _finish_row(K, np.uint64(active[i] - a) * nc, j, code[i], rec,
                                                        node_code, roots, table, lay, check)
            return
        _walk_rows(K, nc, a, active, n_active, np.uint32(roots[j]), steps[j], rec, nan, leaf_of)
        for i in range(n_active):
            code[i] += node_code[leaf_of[i]]
        if j + 1 < T and check[j + 1]:  # (else no count vector with j + 1 votes stops)
            n_active = _keep_voting(n_active, j, active, rows, code, table, lay, code_end, n_queried)
        j += 1
    for i in range(n_active):
        r = _row_of(rows, active[i])
        code_end[r] = code[i]
        n_queried[r] = T


@njit(cache=True, nogil=True)
def _leftover_rows(Xb, wide, width, rows, rec, steps, node_code, roots, table, lay, check, code_end, n_queried):
    """The rows ``rows`` handed on by their blocks (:func:`_hand_on`; in the order of the tree they go on
    from, :func:`_handed_on`) to their stops, tree by tree (:func:`_vote_rows`), each row joining the walk at
    its tree: far into a forest few rows of each block are still voting, and walked block by block each deep
    tree would be read from memory once per block for a handful of rows; walked together it is read once for
    them all."""
    m = rows.shape[0]
    if m == 0:
        return
    K, flags = _rows_keys(Xb, wide, width, rows)
    _vote_rows(K, np.uint64(width), 0, m, rows, -1 - n_queried[rows], code_end[rows], 0, (flags & 1) != 0, rec,
               steps, node_code, roots, table, lay, check, code_end, n_queried)


@njit(cache=True, nogil=True)
def _forest_block(Xb, wide, width, a, b, rec, steps, node_code, roots, table, lay, check, hand,
                  code_end, n_queried):
    """Rows ``a..b-1``, tree by tree over the rows of the block still voting (:func:`_vote_rows`); each row
    stops exactly where a row-by-row loop would.  Once fewer than ``hand`` rows are still voting, they are
    handed on to the walk of all blocks' last rows together (:func:`_leftover_rows`).  Whether the block has
    a value infinite as float32 (the caller validates ``X``, and refuses it)."""
    K, flags = _block_keys(Xb, wide, width, a, b)
    if flags & 2:
        return True
    _vote_rows(K, np.uint64(width), a, b - a, None, None, None, hand, (flags & 1) != 0, rec, steps, node_code,
               roots, table, lay, check, code_end, n_queried)
    return False


@njit(cache=True, nogil=True)
def _forest_serial(Xb, wide, n, width, block, rec, steps, node_code, roots, table, lay, check, hand,
                   code_end, n_queried, infinite):
    for a in range(0, n, block):
        infinite[a // block] = _forest_block(Xb, wide, width, a, min(a + block, n), rec, steps, node_code, roots,
                                             table, lay, check, hand, code_end, n_queried)


@njit(cache=True, nogil=True, parallel=True)
def _forest_parallel(Xb, wide, n, width, block, rec, steps, node_code, roots, table, lay, check, hand,
                     code_end, n_queried, infinite):
    for k in prange((n + block - 1) // block):
        a = k * block
        infinite[k] = _forest_block(Xb, wide, width, a, min(a + block, n), rec, steps, node_code, roots,
                                    table, lay, check, hand, code_end, n_queried)


@njit(cache=True, nogil=True)
def _leftovers_serial(Xb, wide, n, width, rec, steps, node_code, roots, table, lay, check, code_end, n_queried):
    """:func:`_leftover_rows` of all the rows handed on (:func:`_hand_on`)."""
    _leftover_rows(Xb, wide, width, _handed_on(n_queried), rec, steps, node_code, roots, table, lay, check,
                   code_end, n_queried)


@njit(cache=True, nogil=True, parallel=True)
def _leftovers_parallel(Xb, wide, n, width, rec, steps, node_code, roots, table, lay, check, code_end, n_queried,
                        threads):
    """:func:`_leftovers_serial` on ``threads`` threads: the rows handed on, in the order of their trees, dealt to
    the shares in turn (:func:`_parts`), so that each share walks the same trees."""
    rows = _handed_on(n_queried)
    parts = _parts(rows.shape[0], threads)
    for k in prange(parts):
        _leftover_rows(Xb, wide, width, rows[k::parts].copy(), rec, steps, node_code, roots, table, lay, check,
                       code_end, n_queried)


@njit(cache=True, nogil=True)
def _mask_tree(Kt, n, mask_feature, mask_key, mask, k0, k1, m):
    """``m[:n]``: the leaf masks of the rows whose keys are the columns ``Kt[:, :n]`` in the tree of inner nodes
    ``k0..k1-1`` (:func:`_forest_block_masks`): all ones, then for each inner node ``m[r] &= mask[k]`` where row
    ``r`` goes right (so the leaves of the node's left subtree are not its exit).  A function of its own, not
    inlined, whose loop over the rows the compiler turns into vector instructions."""
    full = mask[mask.shape[0] - 1]  # all ones
    for r in range(n):
        m[r] = full
    for k in range(k0, k1):
        f = mask_feature[k]
        t = mask_key[k]
        mk = mask[k]
        for r in range(n):
            m[r] &= mk if Kt[f, r] > t else full


@njit(cache=True, nogil=True)
def _block_keys_columns(Xb, wide, nc, a, b):
    """:func:`_block_keys` with the keys of rows ``a..b-1`` column by column (shape ``(nc, b - a)``): made row
    by row, then turned 64 rows at a time (while they are in the first-level cache)."""
    K, flags = _block_keys(Xb, wide, nc, a, b)
    m = b - a
    Kt = np.empty((nc, (m + 15) & ~15), dtype=np.int32)  # each column of keys a multiple of 64 bytes in
    w = np.uint64(nc)
    for i0 in range(0, m, 64):
        for c in range(nc):
            for i in range(i0, min(i0 + 64, m)):
                Kt[c, i] = K[np.uint64(i) * w + np.uint64(c)]
    return Kt, flags


@njit(cache=True, nogil=True)
def _forest_block_masks(Xb, wide, width, a, b, rec, node_code, roots, mask_feature, mask_key, mask, mask_start,
                        leaf_code, table, lay, check, hand, code_end, n_queried):
    """:func:`_forest_block` for a forest whose trees are walked by leaf masks (:class:`ForestArrays`,
    ``mask_*``): every inner node of the tree is compared for all the rows still voting at once, one column of
    their keys against the node's threshold, clearing the bits of the leaves of its left subtree where a row
    goes right; a row's exit leaf is the lowest bit left (the leaves numbered left to right).  The compiler
    makes each node's comparison vector instructions (:func:`_mask_tree`).  A row that stops leaves the list
    of the columns still voting at once; the keys of the rows still voting are moved together once a quarter
    of the columns are stopped rows.  Fewer than ``hand`` rows still voting are handed on, as by
    :func:`_forest_block`; fewer than eight go on alone (:func:`_finish_row`).
    Returns 1 for a block with an infinite value, 2 for one with NaN (for :func:`_forest_block`), else 0."""
    T = roots.shape[0]
    m = b - a
    Kt, flags = _block_keys_columns(Xb, wide, width, a, b)
    if flags & 2:
        return 1
    if flags & 1:
        return 2
    rows = np.arange(a, b)  # the row of each column of keys
    cols = np.arange(m).astype(np.uint64)  # the columns of the rows still voting, in order
    code = np.zeros(m, dtype=np.int32)  # code[q]: the count code of the row of column cols[q]
    leaves = np.empty(m, dtype=mask.dtype)
    kr = np.empty(width, dtype=np.int32)
    n_cur = m  # columns walked
    n_alive = m  # rows still voting
    for j in range(T):
        if n_alive < hand:
            _hand_on(cols, n_alive, rows, code, j, code_end, n_queried)
            return 0
        if n_alive < 8:  # each row on alone, four trees at a time
            for q in range(n_alive):
                i = cols[q]
                for c in range(width):
                    kr[c] = Kt[c, i]
                r = rows[i]
                code_end[r], n_queried[r] = _finish_row(kr, np.uint64(0), j, code[q], rec, node_code, roots, table,
                                                        lay, check)
            return 0
        _mask_tree(Kt, n_cur, mask_feature, mask_key, mask, mask_start[j], mask_start[j + 1], leaves)
        lj = leaf_code[mask_start[j] + j:]  # tree j's leaves' codes, left to right
        for q in range(n_alive):
            code[q] += lj[trailing_zeros(leaves[cols[q]])]
        if j + 1 < T and check[j + 1]:  # (else no count vector with j + 1 votes stops)
            n_alive = _keep_voting(n_alive, j, cols, rows, code, table, lay, code_end, n_queried)
            if 4 * n_alive <= 3 * n_cur and n_alive >= 8:  # move the keys of the rows still voting together
                for c in range(width):
                    for q in range(n_alive):
                        Kt[c, q] = Kt[c, cols[q]]
                for q in range(n_alive):
                    rows[q] = rows[cols[q]]
                    cols[q] = q
                n_cur = n_alive
    for q in range(n_alive):
        r = rows[cols[q]]
        code_end[r] = code[q]
        n_queried[r] = T
    return 0


@njit(cache=True, nogil=True, inline="always")
def _forest_block_any(Xb, wide, n, width, block, k, rec, steps, node_code, roots, mask_feature, mask_key, mask,
                      mask_start, leaf_code, table, lay, check, hand, code_end, n_queried):
    """Block ``k`` by leaf masks (:func:`_forest_block_masks`), or by the walk (:func:`_forest_block`) if it
    has NaN; whether it has an infinite value."""
    a = k * block
    b = min(a + block, n)
    r = _forest_block_masks(Xb, wide, width, a, b, rec, node_code, roots, mask_feature, mask_key, mask,
                            mask_start, leaf_code, table, lay, check, hand, code_end, n_queried)
    if r == 2:
        return _forest_block(Xb, wide, width, a, b, rec, steps, node_code, roots, table, lay, check, hand,
                             code_end, n_queried)
    return r == 1


@njit(cache=True, nogil=True)
def _masks_serial(Xb, wide, n, width, block, rec, steps, node_code, roots, mask_feature, mask_key, mask,
                  mask_start, leaf_code, table, lay, check, hand, code_end, n_queried, infinite):
    for k in range((n + block - 1) // block):
        infinite[k] = _forest_block_any(Xb, wide, n, width, block, k, rec, steps, node_code, roots, mask_feature,
                                        mask_key, mask, mask_start, leaf_code, table, lay, check, hand, code_end,
                                        n_queried)


@njit(cache=True, nogil=True, parallel=True)
def _masks_parallel(Xb, wide, n, width, block, rec, steps, node_code, roots, mask_feature, mask_key, mask,
                    mask_start, leaf_code, table, lay, check, hand, code_end, n_queried, infinite):
    for k in prange((n + block - 1) // block):
        infinite[k] = _forest_block_any(Xb, wide, n, width, block, k, rec, steps, node_code, roots, mask_feature,
                                        mask_key, mask, mask_start, leaf_code, table, lay, check, hand, code_end,
                                        n_queried)


@njit(cache=True, nogil=True, inline="always")
def _soft_leader(S, i, l, R, eps):
    """The leader of the sums ``S[i]`` if it leads every other class by more than ``R``, else -1.

    A member adds a probability vector: it raises any class's sum by at most
    1 and lowers none, so with ``R`` the members left the leader ``c`` is
    final once ``S_c - S_k > R`` for every other class ``k`` (a smaller ``R``:
    the statistical stop of :func:`ensvote.confidence.soft_lead_needed`);
    ``eps`` covers the rounding of the sums.
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
def _soft_record_or_keep(sums, c, i, keep, S, active, walked, label, n_queried, total):
    """After a member, the row ``active[i]`` with class sums ``sums`` (a tuple): recorded with label ``c`` if
    ``c >= 0``, else kept, its sums at place ``keep`` of the rows still voting; the next free place."""
    if c >= 0:
        r = np.uint64(active[i])
        label[r] = c
        n_queried[r] = walked
        for k in range(len(sums)):
            total[r, k] = sums[k]
        return keep
    active[keep] = active[i]
    for k in range(len(sums)):
        S[keep, k] = sums[k]
    return keep + np.uint64(1)


@njit(cache=True, nogil=True, inline="always")
def _soft_pass2(S, active, leaf_of, n_active, leaf_proba, R, T, lead, walked, label, n_queried, total):
    """:func:`_soft_block`'s pass over its rows after a member, two classes: the same sums, leader and stop as
    :func:`_soft_leader` (``lead`` = ``need[j] + eps``) and :func:`_soft_final` (``R`` = 0) with the two
    classes written out, and unsigned indices (no test for negative ones).  The rows still voting."""
    keep = np.uint64(0)
    for i in range(n_active):
        f = np.uint64(leaf_of[i])
        s0 = S[i, 0] + leaf_proba[f, 0]
        s1 = S[i, 1] + leaf_proba[f, 1]
        if R == 0:
            c = 1 if s1 / T > s0 / T else 0
        else:
            c = 1 if s1 > s0 else 0
            if (s1 - s0 if c else s0 - s1) <= lead:
                c = -1
        keep = _soft_record_or_keep((s0, s1), c, i, keep, S, active, walked, label, n_queried, total)
    return np.int64(keep)


@njit(cache=True, nogil=True, inline="always")
def _soft_pass3(S, active, leaf_of, n_active, leaf_proba, R, T, lead, walked, label, n_queried, total):
    """:func:`_soft_pass2` for three classes."""
    keep = np.uint64(0)
    for i in range(n_active):
        f = np.uint64(leaf_of[i])
        s0 = S[i, 0] + leaf_proba[f, 0]
        s1 = S[i, 1] + leaf_proba[f, 1]
        s2 = S[i, 2] + leaf_proba[f, 2]
        if R == 0:
            c = 0
            best = s0 / T
            if s1 / T > best:
                c = 1
                best = s1 / T
            if s2 / T > best:
                c = 2
        else:
            c = 0
            sc = s0
            if s1 > sc:
                c = 1
                sc = s1
            if s2 > sc:
                c = 2
                sc = s2
            if (c != 0 and sc - s0 <= lead) or (c != 1 and sc - s1 <= lead) or (c != 2 and sc - s2 <= lead):
                c = -1
        keep = _soft_record_or_keep((s0, s1, s2), c, i, keep, S, active, walked, label, n_queried, total)
    return np.int64(keep)


@njit(cache=True, nogil=True, inline="always")
def _soft_block(Xb, wide, width, a, b, rec, steps, leaf_proba, roots, eps, need, label,
                n_queried, total):
    """Soft voting over rows ``a..b-1``: each row's probability sums member by member, in member order
    (the order of scikit-learn's sum), until its leader leads every other class by more than ``need[j]``
    after member ``j`` (the members left: no remaining members can change the argmax)."""
    T = roots.shape[0]
    l = leaf_proba.shape[1]
    m = b - a
    active = np.arange(a, b + 7)  # (room for _walk_rows)
    leaf_of = np.empty(m + 7, dtype=np.uint32)
    S = np.zeros((m, l))
    K, flags = _block_keys(Xb, wide, width, a, b)
    nan = (flags & 1) != 0
    nc = np.uint64(width)
    n_active = m
    for j in range(T):
        if n_active == 0:
            break
        root = np.uint32(roots[j])
        _walk_rows(K, nc, a, active, n_active, root, steps[j], rec, nan, leaf_of)
        R = T - (j + 1)
        if l == 2:
            n_active = _soft_pass2(S, active, leaf_of, n_active, leaf_proba, R, T, need[j] + eps, j + 1, label,
                                   n_queried, total)
            continue
        if l == 3:
            n_active = _soft_pass3(S, active, leaf_of, n_active, leaf_proba, R, T, need[j] + eps, j + 1, label,
                                   n_queried, total)
            continue
        keep = 0
        for i in range(n_active):
            for k in range(l):
                S[i, k] += leaf_proba[leaf_of[i], k]
            c = _soft_final(S, i, l, T) if R == 0 else _soft_leader(S, i, l, need[j], eps)
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
def _soft_serial(Xb, wide, n, width, block, rec, steps, leaf_proba, roots, eps, need, label,
                 n_queried, total):
    for a in range(0, n, block):
        _soft_block(Xb, wide, width, a, min(a + block, n), rec, steps, leaf_proba, roots,
                    eps, need, label, n_queried, total)


@njit(cache=True, nogil=True, parallel=True)
def _soft_parallel(Xb, wide, n, width, block, rec, steps, leaf_proba, roots, eps, need, label,
                   n_queried, total):
    for k in prange((n + block - 1) // block):
        a = k * block
        _soft_block(Xb, wide, width, a, min(a + block, n), rec, steps, leaf_proba, roots,
                    eps, need, label, n_queried, total)


# ---------------------------------------------------------------------------
# the lazy stop loop: decisions memoised for the vote vectors reached
# ---------------------------------------------------------------------------
# A row's state in the lazy loop (see run_forest_lazy)
_RUN, _SPEC, _WAIT, _DONE = 0, 1, 2, 3


@njit(cache=True, nogil=True, inline="always")
def _memo_find(keys, key):
    """Slot of ``key`` (1-D int64, ``w`` words) in the open-addressing table ``keys`` (``-1``: empty slot),
    or ``-1 - slot`` of the empty slot where it would go (linear probing from a multiplicative hash)."""
    w = key.shape[0]
    h = np.uint64(key[0])
    for i in range(1, w):
        h = h * np.uint64(0x9E3779B97F4A7C15) + np.uint64(key[i])
    h *= np.uint64(0x9E3779B97F4A7C15)
    h ^= h >> np.uint64(29)
    mask = np.uint64(keys.shape[0] - 1)
    s = np.int64(h & mask)
    while True:
        if keys[s, 0] == -1:
            return -1 - s
        same = True
        for i in range(w):
            if keys[s, i] != key[i]:
                same = False
                break
        if same:
            return s
        s = np.int64((np.uint64(s) + np.uint64(1)) & mask)


@njit(cache=True, nogil=True, inline="always")
def _memo_get(keys, vals, key):
    """The memoised decision of ``key``: 0 go on, 1 stop, -1 not known (absent, or still pending)."""
    s = _memo_find(keys, key)
    if s < 0:
        return -1
    d = vals[s]
    return d if d <= 1 else -1


@njit(cache=True, nogil=True)
def memo_lookup(keys, vals, codes, out):
    """``out[r]``: the decision of ``codes[r]`` (0, 1, or -1 not known); 0 for parked rows (word 0 negative)."""
    for r in range(codes.shape[0]):
        out[r] = 0 if codes[r, 0] < 0 else _memo_get(keys, vals, codes[r])


@njit(cache=True, nogil=True)
def memo_insert(keys, vals, codes, slots):
    """Add the codes not held yet as pending (2), once each; their slots go to ``slots``; returns how many."""
    n_new = 0
    for r in range(codes.shape[0]):
        s = _memo_find(keys, codes[r])
        if s < 0:
            s = -1 - s
            keys[s, :] = codes[r, :]
            vals[s] = 2
            slots[n_new] = s
            n_new += 1
    return n_new


@njit(cache=True, nogil=True)
def memo_rehash(keys, vals, new_keys, new_vals):
    """Move every entry of ``keys``/``vals`` into the empty, larger table ``new_keys``/``new_vals``."""
    for s in range(keys.shape[0]):
        if keys[s, 0] != -1:
            t = -1 - _memo_find(new_keys, keys[s])
            new_keys[t, :] = keys[s, :]
            new_vals[t] = vals[s]


@njit(cache=True, nogil=True)
def _memo_register_paths(keys, vals, block, active, n_act, status, path_off, path_len, path_start, path, path_slot,
                         T, moved, slots):
    """Add the vote vectors the waiting rows' paths reached (those with fewer than ``T`` votes) as pending.

    Each path entry's slot goes to ``path_slot`` (the walk already recorded
    those it found, unless the table ``moved`` since: grown or emptied);
    the slots of the entries added go to ``slots``.  Returns how many.
    """
    n_new = 0
    for k in range(n_act.shape[0]):
        a = k * block
        for i in range(n_act[k]):
            r = active[a + i]
            if status[r] != _WAIT:
                continue
            o = path_off[r]
            for p in range(path_len[r]):
                if path_start[r] + p + 1 >= T:
                    break
                if path_slot[o + p] >= 0 and not moved:
                    continue
                s = _memo_find(keys, path[o + p])
                if s < 0:
                    s = -1 - s
                    keys[s, :] = path[o + p, :]
                    vals[s] = 2
                    slots[n_new] = s
                    n_new += 1
                path_slot[o + p] = s
    return n_new


@njit(cache=True, nogil=True)
def _lazy_block(K, nc, k, block, rec, steps, node_word, node_inc, roots, keys, vals,
                H, first, status, pos, code, path_off, path_len, path_start, prev_path, prev_slot, path, path_slot, base,
                active, n_act, code_end, n_queried, waiting):
    """One round of block ``k``: resume the rows that waited for decisions, then walk tree by tree.

    A row whose vote vector has a memoised decision goes on or stops as the
    dense loop would; one with fewer than ``first`` votes (the rule's
    ``min_votes``) goes on without a look-up.  At a vector not memoised yet it starts a path: it
    records that vector and walks on (at most ``H`` vectors, stopping early at
    a vector known to stop) and then waits; the caller decides every vector
    the paths reached and calls again, and the row stops at the first vector
    of its path that stops, or walks on from the end of its path.  Rows walk
    the trees together, those that have walked the same number of trees.

    A row's path is ``path_len[r]`` entries from ``path_off[r]`` of the
    round's buffers (``prev_path``: the last round's, read when resuming;
    ``path``: this round's, ``H`` entries for each of the block's rows from
    ``base[k]``): the count codes and their slots in the memo (-1: not found
    when walked; :func:`_memo_register_paths` fills them in); its first entry
    has ``path_start[r] + 1`` votes.
    """
    T = roots.shape[0]
    one_word = code.shape[1] == 1
    a = k * block
    m = n_act[k]
    nan = _has_nan(K, nc, active[a:a + m], m)
    # 1. the rows that waited: their paths, now decided
    for i in range(m):
        r = active[a + i]
        if status[r] == _WAIT:
            o = path_off[r]
            hit, unknown = -1, -1
            for p in range(path_len[r]):
                if path_start[r] + p + 1 >= T:
                    break
                s = prev_slot[o + p]
                d = vals[s] if s >= 0 else -1
                if d < 0 or d > 1:
                    unknown = p
                    break
                if d == 1:
                    hit = p
                    break
            if hit >= 0:
                status[r] = _DONE
                n_queried[r] = path_start[r] + hit + 1
                code_end[r, :] = prev_path[o + hit, :]
            elif unknown >= 0:  # (not after a complete round) wait again at that entry, walk on from it later
                q = base[k] + i * H
                path[q, :] = prev_path[o + unknown, :]
                path_slot[q] = -1
                code[r, :] = path[q, :]
                path_start[r] += unknown
                pos[r] = path_start[r] + 1
                path_len[r] = 1
                path_off[r] = q
            elif pos[r] == T:
                status[r] = _DONE
                n_queried[r] = T
                code_end[r, :] = code[r, :]
            else:
                status[r] = _RUN
        if status[r] == _RUN:
            path_off[r] = base[k] + i * H  # where a path would go in this round
    # 2. walk: the rows that go on, by the number of trees they have walked
    queue = np.empty(m, dtype=np.int64)
    nq = 0
    ordered = True
    for i in range(m):
        r = active[a + i]
        if status[r] == _RUN:
            if nq and pos[r] < pos[queue[nq - 1]]:
                ordered = False
            queue[nq] = r
            nq += 1
    queue = queue[:nq]
    if not ordered:
        queue = queue[np.argsort(pos[queue], kind="mergesort")]
    todo = np.empty(nq + 7, dtype=np.int64)  # (room for _walk_rows)
    leaf_of = np.empty(nq + 7, dtype=np.uint32)
    nt = 0
    nxt = 0
    j = T
    if nq:
        j = pos[queue[0]]
    while True:
        while nxt < nq and pos[queue[nxt]] == j:
            todo[nt] = queue[nxt]
            nt += 1
            nxt += 1
        if nt == 0:
            if nxt >= nq:
                break
            j = pos[queue[nxt]]
            continue
        root = np.uint32(roots[j])
        _walk_rows(K, nc, 0, todo, nt, root, steps[j], rec, nan, leaf_of)
        walked = j + 1
        keep = 0
        for i in range(nt):
            r = todo[i]
            leaf = leaf_of[i]
            if one_word:
                code[r, 0] += node_inc[leaf]
            else:
                code[r, node_word[leaf]] += node_inc[leaf]
            if status[r] == _RUN:
                if walked == T:
                    status[r] = _DONE
                    n_queried[r] = T
                    code_end[r, :] = code[r, :]
                    continue
                d = 0 if walked < first else _memo_get(keys, vals, code[r])  # no vector stops before `first`
                if d == 1:
                    status[r] = _DONE
                    n_queried[r] = walked
                    code_end[r, :] = code[r, :]
                    continue
                if d < 0:  # not memoised: a path starts here
                    q = path_off[r]
                    path[q, :] = code[r, :]
                    path_slot[q] = -1
                    path_start[r] = j
                    path_len[r] = 1
                    if H == 1:
                        status[r] = _WAIT
                        pos[r] = walked
                        continue
                    status[r] = _SPEC
            else:  # on a path
                L = path_len[r]
                q = path_off[r] + L
                path[q, :] = code[r, :]
                path_len[r] = L + 1
                s = -1 if walked == T else _memo_find(keys, code[r])
                path_slot[q] = s if s >= 0 else -1
                if walked == T or L + 1 == H or (s >= 0 and vals[s] == 1):
                    status[r] = _WAIT
                    pos[r] = walked
                    continue
            todo[keep] = r
            keep += 1
        nt = keep
        j += 1  # (the rows walking have walked j trees; pos is written when a row leaves the walk)
    # 3. the rows still voting stay in the block's list
    keep = 0
    n_wait = 0
    n_path = 0
    for i in range(m):
        r = active[a + i]
        if status[r] != _DONE:
            active[a + keep] = r
            keep += 1
            if status[r] == _WAIT:
                n_wait += 1
                n_path += path_len[r]
    n_act[k] = keep
    waiting[k, 0] = n_wait
    waiting[k, 1] = n_path


@njit(cache=True, nogil=True)
def _lazy_serial(K, nc, block, rec, steps, node_word, node_inc, roots, keys, vals,
                 H, first, status, pos, code, path_off, path_len, path_start, prev_path, prev_slot, path, path_slot, base,
                 active, n_act, code_end, n_queried, waiting):
    for k in range(n_act.shape[0]):
        _lazy_block(K, nc, k, block, rec, steps, node_word, node_inc, roots, keys,
                    vals, H, first, status, pos, code, path_off, path_len, path_start, prev_path, prev_slot, path,
                    path_slot, base, active, n_act, code_end, n_queried, waiting)


@njit(cache=True, nogil=True, parallel=True)
def _lazy_parallel(K, nc, block, rec, steps, node_word, node_inc, roots, keys, vals,
                   H, first, status, pos, code, path_off, path_len, path_start, prev_path, prev_slot, path, path_slot, base,
                   active, n_act, code_end, n_queried, waiting):
    for k in prange(n_act.shape[0]):
        _lazy_block(K, nc, k, block, rec, steps, node_word, node_inc, roots, keys,
                    vals, H, first, status, pos, code, path_off, path_len, path_start, prev_path, prev_slot, path,
                    path_slot, base, active, n_act, code_end, n_queried, waiting)

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


def _threads(n_rows, n_jobs):
    """Threads for ``n_rows`` rows: ``n_jobs``'s, as many as leave each :data:`MIN_ROWS_PER_THREAD` rows."""
    return min(resolve_n_jobs(n_jobs), max(1, n_rows // MIN_ROWS_PER_THREAD))


def _block(n_rows, n_jobs):
    """Rows per block: :data:`BLOCK` for one thread (:func:`_rows_per_block`)."""
    return _rows_per_block(n_rows, _threads(n_rows, n_jobs))


def _rows_per_block(n_rows, threads):
    """Rows per block for ``threads`` threads: :data:`BLOCK` for one; for more, at most :data:`BLOCK`, at
    least 4 blocks per thread where blocks of :data:`MIN_ROWS_PER_THREAD` rows allow it, and blocks enough
    to be a multiple of the threads.  Threads take the next block as they come free (:func:`_run`): with
    one block more than a multiple, one thread runs it while the others wait (measured on 10^5 rows, two
    threads: 25 blocks of 4,096 rows, 13 on one thread, 12 on the other, idle for 0.65 of 5.4 ms).

    The count is ``k`` blocks of ``ceil(n_rows / k)`` rows, ``k`` rounded up to a multiple of the threads,
    which is exact when ``k * (k - 1) <= n_rows``: for 2 to 8 threads, every ``n_rows`` below 400,000
    (``tests/test_kernel.py``); for more rows, blocks per thread are so many that the last one is a sliver.

    Examples
    --------
    >>> from ensvote.kernel import _rows_per_block
    >>> _rows_per_block(100_000, 1), _rows_per_block(100_000, 2), -(-100_000 // 3847)
    (4096, 3847, 26)
    """
    if threads == 1:
        return BLOCK
    block = max(MIN_ROWS_PER_THREAD, min(BLOCK, -(-n_rows // (4 * threads))))
    n_blocks = -(-n_rows // block)
    return -(-n_rows // (-(-n_blocks // threads) * threads))  # n_blocks rounded up to a multiple of the threads


def _run(serial, parallel, n_rows, n_jobs, args, pass_threads=False):
    """``serial(*args)`` on one thread, or ``parallel(*args)`` on :func:`_threads`'s threads (their count as
    one more argument if ``pass_threads``)."""
    threads = _threads(n_rows, n_jobs)
    if threads <= 1:
        serial(*args)
        return
    with _LOCK:  # numba's default thread pool runs one parallel region at a time
        before = numba.get_num_threads()
        numba.set_num_threads(threads)
        try:
            # blocks are handed out one at a time as threads come free (not split up front): how long a
            # block takes depends on how soon its rows stop, so a static split leaves a thread idle
            with numba.parallel_chunksize(1):
                parallel(*args, threads) if pass_threads else parallel(*args)
        finally:
            numba.set_num_threads(before)


class ForestArrays:
    """The node arrays of a fitted forest's trees, flattened once (at ``fit``) for the loops.

    Member ``j``'s nodes are ``roots[j]`` onwards, level by level from its
    root (breadth first), the two children of a node side by side: the left
    child of ``node`` is ``left[node]`` and the right one ``left[node] + 1``,
    so a level down is ``left[node] + go_right``, and the walk loads the
    child's index while it compares.  A leaf is its own left child, with
    threshold +inf (every value, NaN included, goes left: it stays put), so
    ``depth[j]`` steps from the root reach a leaf whatever the row.  Eight
    rows walked side by side take ``steps[j]`` steps before they first look
    whether all eight are at their leaves, then look after every step
    (:func:`_walk8`): the median, over groups of eight training rows, of the
    longest of their paths (:func:`_steps_unlooked`).  A deep tree's rows
    mostly end far above its deepest leaf; in a shallow or balanced tree
    ``steps[j]`` is its depth, and the walk looks once.
    ``order[k]`` is node ``k``'s index in the trees' own order (member after
    member, each tree's nodes as scikit-learn numbers them): per-node arrays
    given in that order are put in this one by :meth:`nodes`.  ``feature`` is
    the column of the full ``X`` (a bagging member's feature subset already
    applied).  ``threshold`` is the tree's float64 threshold rounded down to
    float32: for every float32 value ``v``, ``v <= threshold`` exactly when
    scikit-learn's ``float64(v) <= threshold`` holds, so the walk is
    scikit-learn's; the loops compare its key (``threshold_key``, see
    :func:`row_keys`) with the row's keys.  ``nan_right`` is 1 where a
    missing value goes right (``missing_go_to_left`` False).  The loops read
    a node as one 16-byte record of ``records`` (int32: the threshold's key,
    the feature, 4 x the left child, 4 x the first great-grandchild +
    ``nan_right``), addressed by 4 x its index, so that a step reads one
    record through one base address (the arrays ``threshold_key`` and
    ``feature`` are views of it; ``left``, ``great_grandchild`` and
    ``nan_right`` are read from it).  Level by level, a node's (at most
    eight) great-grandchildren follow one another: the small-request walk
    asks for them while it steps to a child (:func:`_step_ahead`).  ``node_code[k]`` is the code
    increment of the class the leaf votes for (0 at inner nodes).

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
        n = int(sizes.sum())
        if n >= 2**29:
            raise ValueError(f"the forest has {n:,} nodes; the compiled loop addresses their records with 32 "
                             f"bits (at most {2**29 - 1:,} nodes)")
        # the arrays are views of one buffer (``packed``), so that one row's call hands the loop one array
        # instead of four (each array a compiled function takes costs about 0.15 µs to pass)
        self.packed, (self.records, self.steps, self.node_code, self.roots) = pack(
            [(4 * n, np.int32), (len(trees), np.int64), (n, np.int32), (len(trees), np.int64)])
        rec = self.records.reshape(n, 4)
        first = np.concatenate([[0], np.cumsum(sizes)[:-1]])  # each tree's root in the trees' own order
        cl = np.concatenate([np.where(t.children_left == -1, -1, t.children_left + a) for t, a in zip(trees, first)])
        cr = np.concatenate([np.where(t.children_right == -1, -1, t.children_right + a)
                             for t, a in zip(trees, first)])
        tree_of = np.repeat(np.arange(len(trees)), sizes)
        # breadth first, all trees at once: a level's inner nodes' children, in the parents' order, in pairs
        levels, frontier, level = [first], first, 0
        node_depth = np.zeros(n, dtype=np.int64)
        while True:
            inner = frontier[cl[frontier] >= 0]
            if not len(inner):
                break
            frontier = np.stack([cl[inner], cr[inner]], axis=1).ravel()
            level += 1
            node_depth[frontier] = level
            levels.append(frontier)
        order = np.concatenate(levels)
        self.order = order = order[np.argsort(tree_of[order], kind="stable")]  # member by member
        new = np.empty(n, dtype=np.int64)
        new[order] = np.arange(n)
        self.roots[:] = new[first]  # (the buffer starts zeroed)
        leaf = cl[order] < 0
        rec[:, 2] = 4 * np.where(leaf, np.arange(n), new[np.maximum(cl[order], 0)])  # the left child's record
        self.depth = np.maximum.reduceat(node_depth[order], self.roots)
        samples = np.concatenate([t.n_node_samples for t in trees])[order]
        self.steps[:] = _steps_unlooked(tree_of[order], node_depth[order], leaf, samples, self.depth)
        feature = np.concatenate([t.feature for t in trees])[order]
        for j, feats in enumerate(features):  # a bagging member's columns of the full X
            a, b = self.roots[j], self.roots[j] + sizes[j]
            f = np.where(leaf[a:b], 0, feature[a:b])
            rec[a:b, 1] = f if feats is None else np.asarray(feats)[f]
        #: columns a row must have: every node's feature (a leaf's too, read and ignored) is one of them
        self.width = int(self.feature.max()) + 1
        threshold = np.concatenate([t.threshold for t in trees])[order]
        threshold = np.where(leaf, np.float32(np.inf), _round_down_float32(threshold)).astype(np.float32)
        key = np.empty(n, dtype=np.int32)
        row_keys(threshold.reshape(-1, 1), 0, n, key)
        rec[:, 0] = key
        go_left = np.concatenate([np.asarray(t.missing_go_to_left, dtype=bool) for t in trees])[order]
        # the first node three levels down (breadth first, a node's descendants of one level follow one
        # another): the first child's, else the second child's, first node two levels down; -1 if none
        child = rec[:, 2] >> 2
        right = np.where(leaf, 0, child + 1)
        down = np.where(leaf, -1, child)  # one level down
        for _ in range(2):
            down = np.where(leaf, -1, np.where(down[child] >= 0, down[child], down[right]))
        rec[:, 3] = 4 * np.where(down >= 0, down, np.arange(n)) | (~leaf & ~go_left)
        self.node_code[:] = np.where(leaf, self.nodes(leaf_code), 0)
        self._leaf_masks(leaf, node_depth[order], sizes)

    def _leaf_masks(self, leaf, node_depth, sizes):
        """The trees as leaf masks (:func:`_forest_block_masks`), if none has more than :data:`MASK_LEAVES`
        leaves, else None: ``mask_feature``, ``mask_key`` and ``mask`` per inner node, tree after tree
        (``mask_start[j]`` onwards), ``mask`` the leaves not cleared when a row goes right (bit ``i``: the
        tree's ``i``-th leaf from the left; uint32 if every tree has at most 32 leaves, else uint64; one more
        entry at the end, all ones);
        ``mask_leaf`` the leaves of tree ``j`` from the left, from ``mask_start[j] + j`` (a tree has one leaf
        more than inner nodes)."""
        self.mask_feature = self.mask_key = self.mask = self.mask_start = self.mask_leaf = None
        most = int(sizes.max() + 1) // 2  # the most leaves of a tree (a tree of s nodes has (s + 1) / 2)
        if most > MASK_LEAVES:
            return
        n = len(leaf)
        left = self.left.astype(np.int64)
        n_leaves = leaf.astype(np.int64)  # leaves under each node
        low = np.zeros(n, dtype=np.int64)  # its leftmost leaf's number in its tree
        by_depth = [np.flatnonzero(~leaf & (node_depth == d)) for d in range(int(node_depth.max()) + 1)]
        for inner in reversed(by_depth):
            n_leaves[inner] = n_leaves[left[inner]] + n_leaves[left[inner] + 1]
        for inner in by_depth:
            low[left[inner]] = low[inner]
            low[left[inner] + 1] = low[inner] + n_leaves[left[inner]]
        inner = np.flatnonzero(~leaf)  # tree after tree (the nodes are)
        self.mask_feature = self.feature[inner].astype(np.int64)
        self.mask_key = self.threshold_key[inner].copy()
        cleared = ((np.uint64(1) << n_leaves[left[inner]].astype(np.uint64)) - np.uint64(1)) \
            << low[inner].astype(np.uint64)
        word = np.uint32 if most <= 32 else np.uint64
        self.mask = np.concatenate([~cleared, [~np.uint64(0)]]).astype(word)  # and all ones, last
        inner_per_tree = sizes // 2  # a tree of s nodes has (s - 1) / 2 inner ones
        self.mask_start = np.concatenate([[0], np.cumsum(inner_per_tree)]).astype(np.int64)
        tree = np.repeat(np.arange(len(sizes)), sizes)
        self.mask_leaf = np.empty(n - len(inner), dtype=np.int32)
        at_leaf = np.flatnonzero(leaf)
        self.mask_leaf[self.mask_start[tree[at_leaf]] + tree[at_leaf] + low[at_leaf]] = at_leaf

    def mask_args(self, node_code):
        """The leaf masks' arrays for :func:`_forest_block_masks`, the leaves' codes taken from ``node_code``
        (None if the trees are too large for leaf masks)."""
        if self.mask is None:
            return None
        return self.mask_feature, self.mask_key, self.mask, self.mask_start, node_code[self.mask_leaf]

    @property
    def threshold_key(self):
        """Each node's threshold as a key (:func:`row_keys`)."""
        return self.records[0::4]

    @property
    def feature(self):
        return self.records[1::4]

    @property
    def left(self):
        """Each node's left child (its right child is the next node; a leaf is its own left child)."""
        return self.records[2::4] >> 2

    @property
    def nan_right(self):
        return self.records[3::4] & 1

    @property
    def great_grandchild(self):
        """Each node's first great-grandchild (breadth first, the others follow it), or the node if it has none."""
        return self.records[3::4] >> 2

    @property
    def threshold(self):
        """Each node's threshold (float32; +inf at leaves), from :attr:`threshold_key`."""
        k = self.threshold_key
        return (k ^ ((k >> 31) & np.int32(0x7FFFFFFF))).view(np.float32)

    def nodes(self, per_tree):
        """Per-node arrays given tree by tree (each in scikit-learn's node order), stacked in this node order."""
        return np.concatenate(per_tree)[self.order]

    @property
    def n_nodes(self):
        return len(self.node_code)

    @property
    def nbytes(self):
        """Bytes of the arrays kept: the packed buffer the loops read, the node order and the leaf masks."""
        masks = (self.mask_feature, self.mask_key, self.mask, self.mask_start, self.mask_leaf)
        return sum(a.nbytes for a in (self.packed, self.order, self.depth, *masks) if a is not None)

    def args(self):
        return self.records, self.steps, self.node_code, self.roots


def _steps_unlooked(tree, node_depth, leaf, samples, depth):
    """:attr:`ForestArrays.steps`: per tree, the median over groups of eight of its training rows (drawn
    independently) of the longest of their eight paths, from the depths of its leaves and the training rows
    each holds (``samples``, ``n_node_samples``), at most the tree's ``depth``: the smallest ``d`` with
    ``F(d) ** 8 >= 1/2``, ``F(d)`` the share of the rows whose leaf is at most ``d`` levels down.  Per node:
    its tree, depth, whether it is a leaf and its rows."""
    n_trees, width = len(depth), int(depth.max()) + 1
    held = np.bincount(tree[leaf] * width + node_depth[leaf], weights=samples[leaf].astype(np.float64),
                       minlength=n_trees * width).reshape(n_trees, width)
    share = np.cumsum(held, axis=1) / held.sum(axis=1, keepdims=True)  # (a tree's root holds a row at least)
    return np.minimum(np.argmax(share ** 8 >= 0.5 - 1e-12, axis=1), depth)


#: Bytes of a packed buffer's header: the start and end (in bytes) of up to 8 arrays, as int64.
_PACK_HEADER = 128


def pack(specs):
    """One zeroed uint8 buffer holding arrays of the given ``(length, dtype)``, and a view of each.

    The header holds each array's start and end in bytes (8-byte aligned
    starts); :func:`label_rows` unpacks the views inside the compiled code.
    """
    if len(specs) > _PACK_HEADER // 16:
        raise ValueError(f"a packed buffer holds at most {_PACK_HEADER // 16} arrays")
    starts, at = [], _PACK_HEADER
    for length, dtype in specs:
        starts.append(at)
        at += -(-int(length) * np.dtype(dtype).itemsize // 8) * 8
    buf = np.zeros(at, dtype=np.uint8)
    head = buf[:_PACK_HEADER].view(np.int64)
    views = []
    for k, ((length, dtype), a) in enumerate(zip(specs, starts)):
        b = a + int(length) * np.dtype(dtype).itemsize
        head[2 * k], head[2 * k + 1] = a, b
        views.append(buf[a:b].view(dtype))
    return buf, views


def pack_plan(table, stops_at, labels):
    """The flat stop table, the members after which a stop is possible, and the label of each code, in one buffer
    (the second array :func:`label_rows` takes)."""
    buf, (t, s, lab) = pack([(len(table), np.bool_), (len(stops_at), np.bool_), (len(labels), np.int64)])
    t[:], s[:], lab[:] = table, stops_at, labels
    return buf


@intrinsic
def _bytes_as(typingctx, buf, start, stop, dtype):
    """The bytes ``start:stop`` of the 1-D C-contiguous uint8 array ``buf`` read as a 1-D array of ``dtype``,
    sharing ``buf``'s memory, unchecked.  ``buf[start:stop].view(dtype)`` does the same with checks of size and
    alignment that cost ~45 ns a call in numba 0.68, most of one row's time when a row unpacks ten arrays;
    :func:`pack` lays its arrays out so that the checks would pass (8-byte aligned starts, whole items)."""
    if not (isinstance(buf, types.Array) and buf.dtype == types.uint8 and buf.ndim == 1 and buf.layout == "C"):
        return None  # anything but a packed buffer fails to compile
    item = dtype.dtype
    out_ty = types.Array(item, 1, "C")

    def codegen(context, builder, sig, args):
        src = context.make_array(sig.args[0])(context, builder, args[0])
        start, stop = args[1], args[2]
        ll_item = context.get_data_type(item)
        size = context.get_constant(types.intp, context.get_abi_sizeof(ll_item))
        out = context.make_array(out_ty)(context, builder)
        data = builder.bitcast(builder.gep(src.data, [start]), ll_item.as_pointer())
        context.populate_array(out, data=data, shape=cgutils.pack_array(builder, [builder.sdiv(builder.sub(stop, start), size)]),
                               strides=cgutils.pack_array(builder, [size]), itemsize=size, meminfo=src.meminfo,
                               parent=src.parent)
        return impl_ret_borrowed(context, builder, out_ty, out._getvalue())

    return out_ty(buf, start, stop, dtype), codegen


@njit(cache=True, nogil=True, inline="always")
def _unpacked(buf, k, dtype):
    """Array ``k`` of a :func:`pack` buffer, as ``dtype``."""
    head = _bytes_as(buf, 0, _PACK_HEADER, np.int64)
    return _bytes_as(buf, head[2 * k], head[2 * k + 1], dtype)


@njit(cache=True, nogil=True, inline="always")
def _unpacked_forest(forest):
    """The arrays of :attr:`ForestArrays.packed`, in the order of :meth:`ForestArrays.args`."""
    return (_unpacked(forest, 0, np.int32), _unpacked(forest, 1, np.int64), _unpacked(forest, 2, np.int32),
            _unpacked(forest, 3, np.int64))


@njit(cache=True, nogil=True, inline="always")
def _small_request(K, shape, flags, rec, node_code, roots, table, lay, check, codes):
    """:func:`_rows_in_pairs` over the ``shape[0]`` rows whose keys are ``K`` (:func:`row_keys`, which returned
    ``flags``), with the walk that tests for NaN only if a row has one."""
    if flags & 1:
        _rows_in_pairs(K, np.uint64(shape[1]), shape[0], rec, node_code, roots, table, lay, check, codes, True)
    else:
        _rows_in_pairs(K, np.uint64(shape[1]), shape[0], rec, node_code, roots, table, lay, check, codes, None)


@njit(cache=True, nogil=True)
def label_rows(X, forest, plan, out):
    """Each row's class index into ``out``, row by row: False (``out`` untouched) if a feature is infinite as
    float32.

    ``X`` is 2-D float32 or float64, C-contiguous, of the forest's width;
    ``forest`` is :attr:`ForestArrays.packed`, ``plan`` a :func:`pack_plan`
    buffer: three arrays to pass instead of ten, which is most of what a
    small request's call costs.  Two groups of four trees are walked side
    by side, two rows' or one row's (:func:`_rows_in_pairs`), with no block
    around them: the loop for one request and small batches.  The arrays
    are not checked here (:meth:`ensvote.engine.TreeEnsemble.label_rows`
    checks them).
    """
    K = np.empty(X.size, dtype=np.int32)  # the rows' keys (float64 rows read as float32, as the trees compare)
    flags = row_keys(X, 0, X.shape[0], K)
    if flags & 2:
        return False
    rec, _, node_code, roots = _unpacked_forest(forest)
    table, check, labels = _unpacked(plan, 0, np.bool_), _unpacked(plan, 1, np.bool_), _unpacked(plan, 2, np.int64)
    codes = np.empty(X.shape[0], dtype=np.int64)
    _small_request(K, X.shape, flags, rec, node_code, roots, table, None, check, codes)
    for r in range(X.shape[0]):
        out[r] = labels[codes[r]]
    return True


@njit(cache=True, nogil=True)
def level_any(bits, starts):
    """``out[s]``: whether any of the bits ``starts[s]`` to ``starts[s + 1] - 1`` of the packed ``bits`` is set."""
    out = np.zeros(starts.shape[0] - 1, dtype=np.bool_)
    for s in range(starts.shape[0] - 1):
        for i in range(starts[s], starts[s + 1]):
            if (bits[i >> 3] >> (7 - (i & 7))) & 1:
                out[s] = True
                break
    return out


def pack_bits_plan(table, layout, stops_at, node_code):
    """Stop bits, their layout ``(l, b, 2 ** (l b))``, the members after which a stop is possible and each node's
    code increment in radix ``2 ** b``, in one buffer (the second array :func:`label_rows_bits` takes)."""
    buf, (t, lay, s, nc) = pack([(len(table), np.uint8), (len(layout), np.int64), (len(stops_at), np.bool_),
                                 (len(node_code), np.int32)])
    t[:], lay[:], s[:], nc[:] = table, layout, stops_at, node_code
    return buf


@njit(cache=True, nogil=True)
def label_rows_bits(X, forest, plan, out):
    """:func:`label_rows` with stop bits (a :func:`pack_bits_plan` buffer): a row's label is the majority of
    its count code's ``b``-bit fields (the lowest class on ties)."""
    K = np.empty(X.size, dtype=np.int32)  # the rows' keys (float64 rows read as float32, as the trees compare)
    flags = row_keys(X, 0, X.shape[0], K)
    if flags & 2:
        return False
    rec, _, _, roots = _unpacked_forest(forest)
    table, lay = _unpacked(plan, 0, np.uint8), _unpacked(plan, 1, np.int64)
    check, node_code = _unpacked(plan, 2, np.bool_), _unpacked(plan, 3, np.int32)
    l, b = lay[0], lay[1]
    mask = (np.int64(1) << b) - 1
    codes = np.empty(X.shape[0], dtype=np.int64)
    _small_request(K, X.shape, flags, rec, node_code, roots, table, lay, check, codes)
    for r in range(X.shape[0]):
        code = codes[r]
        best, label = np.int64(-1), 0
        for c in range(l):
            votes = (np.int64(code) >> (b * (l - 1 - c))) & mask
            if votes > best:
                best, label = votes, c
        out[r] = label
    return True


def _round_down_float32(threshold):
    """The largest float32 at most ``threshold`` (float64), element-wise."""
    t32 = np.asarray(threshold, dtype=np.float64).astype(np.float32)
    return np.where(t32.astype(np.float64) > threshold, np.nextafter(t32, np.float32(-np.inf)), t32)


def _rows_bytes(X):
    """``(bytes, wide, n_rows, width)`` of a C-contiguous float32 or float64 ``X``: the block loops take its
    bytes and read them as the dtype says (one compiled loop for both, not one for each)."""
    return X.reshape(-1).view(np.uint8), X.dtype == np.float64, X.shape[0], X.shape[1]


def run_forest(X, forest, table, layout, stops_at, n_jobs=None, node_code=None):
    """The table-driven stop loop over a forest, tree by tree and row by row.

    Parameters
    ----------
    X : ndarray of float32 or float64, shape (n_rows, n_features), C-contiguous
        Read as float32 value by value, as the trees compare it (no copy).  A value infinite as float32
        (the trees' validation refuses it) makes the result None.
    forest : ForestArrays
    table, layout, stops_at : :meth:`ensvote.engine.StopTable.kernel_args`: the flat table, None and
        ``stops_at``, or the stop bits, their layout (int64) and ``stops_at``
    n_jobs : int or None
    node_code : ndarray of int32, shape (n_nodes,), optional
        Each node's code increment, when the table's codes are not the forest's own
        (:attr:`ForestArrays.node_code`; the stop bits' codes are in radix ``2 ** b``).

    Returns
    -------
    code_end : ndarray of int32, shape (n_rows,)
        Each row's mixed-radix count code when it stopped.
    n_queried : ndarray of int64, shape (n_rows,)
        Members queried per row.

    None instead when ``X`` holds a value infinite as float32.
    """
    n = X.shape[0]
    code_end = np.zeros(n, dtype=np.int32)
    n_queried = np.zeros(n, dtype=np.int64)
    args = forest.args()
    if node_code is not None:
        args = args[:2] + (node_code,) + args[3:]
    if n:
        block = _block(n, n_jobs)
        infinite = np.zeros(-(-n // block), dtype=np.bool_)  # per block of rows
        hand = HAND_ON if n > block else 0  # (one block: its last rows have no other block's to join)
        masks = forest.mask_args(args[2])
        if masks is None:  # the walk
            _run(_forest_serial, _forest_parallel, n, n_jobs,
                 _rows_bytes(X) + (block,) + args + (table, layout, stops_at, hand, code_end, n_queried, infinite))
        else:  # leaf masks
            _run(_masks_serial, _masks_parallel, n, n_jobs, _rows_bytes(X) + (block,) + args + masks
                 + (table, layout, stops_at, hand, code_end, n_queried, infinite))
        if infinite.any():
            return None
        if hand:  # the rows the blocks handed on, walked together
            _run(_leftovers_serial, _leftovers_parallel, n, n_jobs,
                 _rows_bytes(X) + args + (table, layout, stops_at, code_end, n_queried), pass_threads=True)
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


def exact_soft_lead(n_members):
    """The lead the exact soft stop needs after each member: the members left (``T - t`` after ``t``).

    Examples
    --------
    >>> from ensvote.kernel import exact_soft_lead
    >>> exact_soft_lead(4)
    array([3., 2., 1., 0.])
    """
    return np.arange(n_members - 1, -1, -1, dtype=np.float64)


def run_soft(X32, forest, leaf_proba, n_jobs=None, need=None):
    """Soft voting, stopped exactly (labels equal to ``argmax`` of the forest's averaged probabilities) or at ``need``.

    Parameters
    ----------
    X32 : ndarray of float32, shape (n_rows, n_features), C-contiguous
    forest : ForestArrays
    leaf_proba : ndarray of float64, shape (n_nodes, n_classes)
        The class probabilities of each node's leaf, as the member's ``predict_proba`` gives them.
    n_jobs : int or None
    need : ndarray of float64, shape (T,), optional
        The lead over every other class at which a row stops after each
        member (:func:`ensvote.confidence.soft_lead_needed`); None: the
        members left (the exact stop).

    Returns
    -------
    label : ndarray of int64, shape (n_rows,)
        Class indices.
    n_queried : ndarray of int64, shape (n_rows,)
    total : ndarray of float64, shape (n_rows, n_classes)
        The probabilities summed over the members queried.
    """
    n = X32.shape[0]
    need = exact_soft_lead(len(forest.roots)) if need is None else np.ascontiguousarray(need, dtype=np.float64)
    label = np.zeros(n, dtype=np.int64)
    n_queried = np.zeros(n, dtype=np.int64)
    total = np.zeros((n, leaf_proba.shape[1]))
    if n:
        f = forest
        _run(_soft_serial, _soft_parallel, n, n_jobs,
             _rows_bytes(X32) + (_block(n, n_jobs), f.records, f.steps, leaf_proba, f.roots,
              soft_margin(len(f.roots)), need, label, n_queried, total))
    return label, n_queried, total


#: Most vote vectors one row walks through on a path before it waits for their decisions (lazy loop).
MAX_PATH = 1024
#: Entries (rows still voting x path length x code words) of one round's path buffer at most (32 MB of int64).
PATH_ENTRIES = 2**22
#: Path length with cheap decisions: about ``sqrt(PATH_WORK / rows still voting)`` (see run_forest_lazy).
PATH_WORK = 2**17
#: Rows the lazy loop takes in one pass at most (more rows: passes one after another).
LAZY_ROWS = 2**18
# A round's decisions count as cheap below these times (in all, or per vector): the next paths may be longer.
_CHEAP_ROUND = 2e-4
_CHEAP_PER_VECTOR = 2e-6


def run_forest_lazy(X32, forest, node_word, node_inc, memo, rule, n_jobs=None):
    """The stop loop over a forest with decisions memoised for the vote vectors reached (no dense table).

    The rows walk the trees as in :func:`run_forest`; a vote vector's
    decision is looked up in ``memo`` (a :class:`ensvote.engine.StopMemo`,
    an open-addressing table of count codes).  A row that reaches a vector
    not memoised yet records it and walks on along a *path* of at most ``H``
    vectors (stopping early at a vector known to stop), then waits.  Once
    every row stopped or waits, one vectorised call decides all the new
    vectors the paths reached (:meth:`~ensvote.engine.StopMemo.store`), and
    the loop resumes: each waiting row stops at the first vector of its path
    that stops (so a row queries exactly the members it would with every
    decision known), or walks on from the end of its path.  The rounds end
    when no row waits.

    ``H`` trades rounds (each costs a call and a ``decide``) against walks
    and decisions past a row's stop: it is 1 in the first round and whenever
    the last round's decisions were expensive (a rule computing per vote
    vector: only the vectors reached are decided), otherwise about
    ``sqrt(PATH_WORK / rows still voting)`` (long paths once few rows are
    left), at most :data:`MAX_PATH` and :data:`PATH_ENTRIES` entries in all.
    Results do not depend on ``H``, on ``n_jobs`` or on what the memo held
    before.  Vote vectors with fewer votes than ``rule.min_votes(T, l)``
    are neither looked up nor decided (a rule that stops only at a fixed
    number of votes is never asked).

    Parameters
    ----------
    X32 : ndarray of float32, shape (n_rows, n_features), C-contiguous
    forest : ForestArrays
    node_word, node_inc : ndarray of int32 / int64, shape (n_nodes,)
        Per node, the code word and increment of the class the leaf votes
        for (:func:`ensvote.engine.code_layout`).
    memo : ensvote.engine.StopMemo
        Held locked by the caller.
    rule : HaltingRule
        Decides the vectors not memoised yet.
    n_jobs : int or None

    Returns
    -------
    code_end : ndarray of int64, shape (n_rows, n_words)
        Each row's count code when it stopped.
    n_queried : ndarray of int64, shape (n_rows,)
    """
    n, w, T = X32.shape[0], memo.n_words, len(forest.roots)
    first = rule.min_votes(T, memo.n_classes)  # no decision is needed before it
    if isinstance(first, bool) or not isinstance(first, (int, np.integer)) or not 1 <= first <= T:
        raise ValueError(f"{type(rule).__name__}.min_votes({T}, {memo.n_classes}) must be an int in 1..{T}, "
                         f"got {first!r}")
    code_end = np.zeros((n, w), dtype=np.int64)
    n_queried = np.zeros(n, dtype=np.int64)
    rec, steps, _, roots = forest.args()
    step = max(1, min(LAZY_ROWS, memo.max_entries // 2, PATH_ENTRIES // w))
    for c0 in range(0, n, step):
        m = min(step, n - c0)
        K = np.empty(m * X32.shape[1], dtype=np.int32)  # the chunk's keys, once for every round
        row_keys(X32, c0, c0 + m, K)
        block = _block(m, n_jobs)
        n_blocks = -(-m // block)
        status = np.zeros(m, dtype=np.int8)
        pos = np.zeros(m, dtype=np.int64)
        code = np.zeros((m, w), dtype=np.int64)
        path_off = np.zeros(m, dtype=np.int64)
        path_len = np.zeros(m, dtype=np.int64)
        path_start = np.zeros(m, dtype=np.int64)
        active = np.arange(m, dtype=np.int64)
        n_act = np.minimum(block, m - block * np.arange(n_blocks)).astype(np.int64)
        waiting = np.zeros((n_blocks, 2), dtype=np.int64)
        path, path_slot = np.empty((0, w), dtype=np.int64), np.empty(0, dtype=np.int64)
        H = 1
        while True:
            n_live = int(n_act.sum())
            prev_path, prev_slot = path, path_slot
            path, path_slot = np.empty((n_live * H, w), dtype=np.int64), np.empty(n_live * H, dtype=np.int64)
            base = H * (np.cumsum(n_act) - n_act)
            _run(_lazy_serial, _lazy_parallel, n_live, n_jobs,  # threads for the rows still voting
                 (K, np.uint64(X32.shape[1]), block, rec, steps, node_word, node_inc,
                  roots, memo.keys,
                  memo.vals, H, first, status, pos, code, path_off, path_len, path_start, prev_path, prev_slot, path,
                  path_slot, base, active, n_act, code_end[c0:c0 + m], n_queried[c0:c0 + m], waiting))
            if not waiting[:, 0].any():
                break
            n_path = int(waiting[:, 1].sum())
            moved = memo.reserve(n_path)
            slots = np.empty(n_path, dtype=np.int64)
            n_new = _memo_register_paths(memo.keys, memo.vals, block, active, n_act, status, path_off, path_len,
                                         path_start, path, path_slot, T, moved, slots)
            dt = memo.store(slots[:n_new], rule)
            n_live = int(n_act.sum())
            H = 1
            if dt < _CHEAP_ROUND or dt < _CHEAP_PER_VECTOR * n_new:
                H = max(1, min(MAX_PATH, math.isqrt(PATH_WORK // n_live), PATH_ENTRIES // (n_live * w),
                               memo.max_entries // n_live))
    return code_end, n_queried


def compile_kernels():
    """Compile (or load from the on-disk cache) the forest loops; seconds taken.

    Called by the benchmark to report the first-call cost; ordinary use
    compiles on the first call.
    """
    t0 = time.perf_counter()
    X = np.zeros((1, 1), dtype=np.float32)
    i64 = np.zeros(1, dtype=np.int64)
    i32 = np.zeros(1, dtype=np.int32)
    inf_key = np.full(1, np.float32(np.inf)).view(np.int32)  # +inf's key is its bits
    leaf = np.concatenate([inf_key, np.zeros(3, dtype=np.int32)])  # its own left child (record 0)
    forest = (leaf, i64.copy(), i32.copy(), i64.copy())  # one tree, its root a leaf
    flat = (np.zeros(4, dtype=np.bool_), None, np.zeros(2, dtype=np.bool_))
    bits = (np.zeros(1, dtype=np.uint8), np.array([2, 1, 4], dtype=np.int64), flat[2])
    for a in (flat[0], flat[2], bits[0], bits[1]):  # the stop tables are read-only (a numba type of their own)
        a.setflags(write=False)
    for tab in (flat, bits):  # the loop with the flat table and the one with stop bits
        args = forest + tab + (1, np.zeros(1, dtype=np.int32), np.zeros(1, dtype=np.int64), np.zeros(1, np.bool_))
        _forest_serial(*_rows_bytes(X), BLOCK, *args)
        _forest_parallel(*_rows_bytes(X), BLOCK, *args)
        _leftovers_serial(*_rows_bytes(X), *forest, *tab, *args[-3:-1])
        _leftovers_parallel(*_rows_bytes(X), *forest, *tab, *args[-3:-1], 1)
        for word in (np.uint32, np.uint64):  # the leaf-mask loops (one tree, its root a leaf: no inner node)
            masks = (np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32), np.full(1, ~word(0)),
                     np.zeros(2, dtype=np.int64), i32.copy())
            _masks_serial(*_rows_bytes(X), BLOCK, *forest, *masks, *args[4:])
            _masks_parallel(*_rows_bytes(X), BLOCK, *forest, *masks, *args[4:])
    one_forest, views = pack([(4, np.int32), (1, np.int64), (1, np.int32), (1, np.int64)])
    views[0][:] = leaf  # one tree, its root a leaf
    for dtype in (np.float32, np.float64):  # the row-by-row loops (and _rows_in_pairs, with and without NaN)
        Xd, out = np.zeros((1, 1), dtype=dtype), np.zeros(1, dtype=np.int64)
        label_rows(Xd, one_forest, pack_plan(flat[0], flat[2], np.zeros(4, dtype=np.int64)), out)
        label_rows_bits(Xd, one_forest, pack_bits_plan(bits[0], bits[1], bits[2], np.zeros(1, dtype=np.int32)), out)
    # the loop with the memo of decisions (one row, one tree, a memo that knows nothing: the row waits once)
    keys, vals = np.full((4, 1), -1, dtype=np.int64), np.zeros(4, dtype=np.int8)
    codes, i1 = np.zeros((1, 1), dtype=np.int64), np.ones(1, dtype=np.int64)
    memo_lookup(keys, vals, codes, np.zeros(1, dtype=np.int8))
    memo_rehash(keys, vals, keys.copy(), vals.copy())
    for lazy in (_lazy_serial, _lazy_parallel):
        state = (np.zeros(1, dtype=np.int8), i64.copy(), codes.copy(), i64.copy(), i64.copy(), i64.copy())
        lazy(np.zeros(1, dtype=np.int32), np.uint64(1), BLOCK, *forest[:2], i32.copy(), i64.copy(), forest[3],
             keys, vals, 1, 1, *state,
             np.empty((0, 1), dtype=np.int64), np.empty(0, dtype=np.int64), codes.copy(), i64.copy(), i64.copy(),
             i64.copy(), i1.copy(), codes.copy(), i64.copy(), np.zeros((1, 2), dtype=np.int64))
    _memo_register_paths(keys.copy(), vals.copy(), BLOCK, i64.copy(), i1.copy(), np.full(1, _WAIT, dtype=np.int8),
                         i64.copy(), i1.copy(), i64.copy(), codes.copy(), np.full(1, -1, dtype=np.int64), 2, False,
                         i64.copy())
    memo_insert(keys, vals, codes, i64.copy())
    return time.perf_counter() - t0


def cache_dir():
    """Where numba keeps the compiled loops of this module (None if not cached yet)."""
    d = os.path.join(os.path.dirname(__file__), "__pycache__")
    return d if os.path.isdir(d) else None
