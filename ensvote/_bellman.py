"""The Bellman recursion of the optimal stopping policy under the urn model (the machinery of :mod:`ensvote.optimal`).

A *model* (:class:`_UrnModel`) holds, for every vote vector of an urn of
``T`` members under a prior, what the recursion needs: the probability
``d(t)`` that the current majority is not the full ensemble's and the
probabilities ``p_i(t)`` of the next vote, from the urn's recursion
(:func:`ensvote._urn.log_cells`).  On it: the λ-optimal policy
(:meth:`_UrnModel.solve`, backward induction), the expected members and
disagreement of any policy (:meth:`_UrnModel.evaluate`, forward), the best
single change of a policy within a slack (:meth:`_UrnModel.best_flip`), and
the budget search that meets a disagreement δ (:func:`_meet_budget`: bisection
on λ to two adjacent policies and the exact price between them, then the
randomised optimum between the two).
Compiled loops (numba) over a compact layout (one cell per vote vector) do the work; the rule and the
validation of its arguments are in :mod:`ensvote.optimal`.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from typing import NamedTuple

import numpy as np
from numba import njit

from ._cache import BoundedCache
from ._urn import _cell_states, _level_base, grid, log_cells
from .rules import decided

_MODELS = BoundedCache("optimal-policy urn models", 16)
_STATES = BoundedCache("vote vectors of the optimal-policy models", 2)


class PolicyValue(NamedTuple):
    """Expected cost of a stopping policy when urns are drawn from the prior (see :func:`policy_value`).

    Examples
    --------
    >>> from ensvote import ExactRule, policy_value
    >>> v = policy_value(ExactRule(101), None)
    >>> round(v.members, 2), v.disagreement
    (70.2, 0.0)
    """

    members: float  #: expected number of members queried
    disagreement: float  #: probability that the label at the stop is not the full ensemble's


# --------------------------------------------------------------------------
# compiled recursions over the compact levels
# --------------------------------------------------------------------------
# The vote vectors of all levels are numbered one after the other, level by
# level (``base[s]`` is the first of level ``s``), and within a level row-major
# in the first ``l - 1`` counts: ``t_0 = 0 .. s`` with two classes; ``(t_0,
# t_1)`` with ``t_0 + t_1 <= s`` with three (row ``t_0`` holds ``s + 1 - t_0``
# vote vectors).  No cell is kept for the grid points that are not vote
# vectors: ``(T + 1)(T + 2)(T + 3) / 6`` cells in all with three classes
# instead of the ``(T + 1) ** 3`` of a padded layout.  The loops do the very
# floating-point operations, in the same order, of the level-by-level NumPy
# recursion they replace (``tests/test_optimal_kernels.py`` checks bit
# equality against it), including NumPy's pairwise summation of the level
# totals over the level's square grid of ``(s + 1) ** (l - 1)`` points (the
# points that are not vote vectors add zeros).
@njit(cache=True, nogil=True)
def _leaf_sum(a, lo, n):
    """NumPy's pairwise summation of ``a[lo:lo + n]`` for ``n <= 128``: eight running sums."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += a[i]
        return res
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    m = n - n % 8
    while i < m:
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(cache=True, nogil=True)
def _pairwise_sum(a, lo, n, nz_lo, nz_hi):
    """``np.sum(a[lo:lo + n])``, bit for bit: NumPy's pairwise summation, for ``a`` zero outside ``[nz_lo, nz_hi)``.

    Above 128 terms NumPy splits the range in two (the first part a multiple
    of 8) and adds the two sums; the same tree is walked here with an explicit
    stack (numba cannot cache a recursive function).  A part of the tree that
    lies outside ``[nz_lo, nz_hi)`` sums zeros: its sum is 0.0 without reading
    it (``x + 0.0 == x``), so the result is the same as summing every term
    (pass ``lo, lo + n`` when nothing is known).
    """
    if nz_hi <= nz_lo or nz_hi <= lo or lo + n <= nz_lo:
        return 0.0
    if n <= 128:
        return _leaf_sum(a, lo, n)
    node_lo = np.empty(128, dtype=np.int64)
    node_n = np.empty(128, dtype=np.int64)
    split = np.zeros(128, dtype=np.bool_)
    vals = np.empty(128)
    node_lo[0], node_n[0] = lo, n
    top, nv = 1, 0
    while top > 0:
        i = top - 1
        if node_lo[i] >= nz_hi or node_lo[i] + node_n[i] <= nz_lo:  # zeros only
            vals[nv] = 0.0
            nv += 1
            top -= 1
        elif node_n[i] <= 128:
            vals[nv] = _leaf_sum(a, node_lo[i], node_n[i])
            nv += 1
            top -= 1
        elif split[i]:  # both halves summed: add them (IEEE addition is commutative)
            vals[nv - 2] = vals[nv - 2] + vals[nv - 1]
            nv -= 1
            top -= 1
        else:
            split[i] = True
            n2 = node_n[i] // 2
            n2 -= n2 % 8
            node_lo[top], node_n[top], split[top] = node_lo[i], n2, False
            node_lo[top + 1], node_n[top + 1], split[top + 1] = node_lo[i] + n2, node_n[i] - n2, False
            top += 2
    return vals[0]


def _states(T, l):
    """:func:`_cell_states` of ``T`` and ``l``, kept (every prior's model of the same size shares them)."""
    states = _STATES.get((T, l))
    if states is None:
        states = _cell_states(T, l - 1, _level_base(T, l - 1))
        states.setflags(write=False)
        _STATES[(T, l)] = states
    return states


# In the loops, level ``s`` is walked row by row (one row with two classes,
# row ``a = t_0`` of ``n = s + 1 - a`` cells with three), ``f`` the cell and
# ``g`` the first cell of the same row one level up, so that the vote vector
# one vote for class ``i`` further is cell ``g + b + o_i`` with ``o = (1, 0)``
# for two classes and ``o = (n + 1, 1, 0)`` for three (the next row of level
# ``s + 1`` starts ``n + 1`` cells after ``g``).  Each cell passes its mass to
# the three (two) cells above it in class order; a cell above receives class
# 0's part before class 1's before class 2's, as when the classes are pushed
# one after the other.
@njit(cache=True, nogil=True, inline="always")
def _push(up, h, o0, c, trans, f, d):
    """Pass mass ``c`` of cell ``f`` to the cells one vote further, in class order (``h = g + b``: the cell of
    the last class's vote; see above)."""
    up[h + o0] += c * trans[f, 0]
    if d == 2:
        up[h + 1] += c * trans[f, 1]
        up[h] += c * trans[f, 2]
    else:
        up[h] += c * trans[f, 1]


@njit(cache=True, nogil=True, inline="always")
def _expect(V, h, o0, trans, f, d):
    """``Σ_i p_i(t) V[t + e_i]`` for cell ``f``, summed from 0.0 in class order (``h``: as for :func:`_push`)."""
    acc = 0.0
    acc += trans[f, 0] * V[h + o0]
    if d == 2:
        acc += trans[f, 1] * V[h + 1]
        acc += trans[f, 2] * V[h]
    else:
        acc += trans[f, 1] * V[h]
    return acc


@njit(cache=True, nogil=True)
def _solve_kernel(trans, loss, valid, base, T, d, price, stops):
    V = np.zeros(base[T + 1] - base[T])  # the level above, by its cells: level T, nothing more to pay
    V2 = np.zeros(base[T + 1] - base[T])
    stops[:] = False
    for f in range(base[T], base[T + 1]):
        stops[f] = valid[f]
    # Going on costs c = 1 + Σ_i p_i(t) V(t + e_i) >= 1 (every p_i and V is >= 0 when the price is), so
    # wherever stopping costs price * d(t) <= 1 the policy stops whatever the level above holds: the sum
    # is not needed there (most vote vectors; their next-vote probabilities are not read), and the
    # result is the same bits as when it is computed.
    sure = price >= 0.0
    for s in range(T - 1, -1, -1):
        m = s + 1
        f, k, g = base[s], 0, 0
        for a in range(m if d == 2 else 1):
            n = m - a if d == 2 else m
            o0 = n + 1 if d == 2 else 1
            for b in range(n):
                cost = price * loss[f]
                if sure and s > 0 and valid[f] and cost <= 1.0:
                    stops[f] = True
                    V2[k] = cost
                else:
                    acc = _expect(V, g + b, o0, trans, f, d)
                    c = 1.0 + acc
                    stop = s > 0 and valid[f] and cost <= c
                    stops[f] = stop
                    V2[k] = cost if stop else c
                f += 1
                k += 1
            g += n + 1
        V, V2 = V2, V
    return V[0]


@njit(cache=True, nogil=True)
def _evaluate_kernel(trans, loss, stops, base, T, d, rs_cell, rs_prob):
    reach = np.zeros(base[T + 1] - base[T])  # the level's cells
    nxt = np.zeros(base[T + 1] - base[T])  # the level above
    side = T + 1 if d == 2 else 1
    # a level on its square grid, zero between levels but where the level wrote ([lo, hi))
    go, lost = np.zeros(side * (T + 1)), np.zeros(side * (T + 1))
    reach[0] = 1.0
    members = disagreement = 0.0
    for s in range(T):
        m = s + 1
        nxt[:base[s + 2] - base[s + 1]] = 0.0
        f, k, g = base[s], 0, 0
        lo, hi = go.size, 0
        for a in range(m if d == 2 else 1):
            n = m - a if d == 2 else m
            o0 = n + 1 if d == 2 else 1
            q = a * m
            for b in range(n):
                r = reach[k]
                # a policy stops most urns early: most vote vectors are never reached, and adding their
                # zeros (to the cells above, to the level's totals) would change no sum
                if r != 0.0:
                    p = 1.0 if stops[f] else 0.0
                    if f == rs_cell:
                        p = rs_prob
                    c = r * (1.0 - p)
                    go[q + b] = c
                    lost[q + b] = r * p * loss[f]
                    lo, hi = min(lo, q + b), max(hi, q + b + 1)
                    _push(nxt, g + b, o0, c, trans, f, d)
                f += 1
                k += 1
            g += n + 1
        reach, nxt = nxt, reach
        k = m * m if d == 2 else m
        members += _pairwise_sum(go, 0, k, lo, hi)
        disagreement += _pairwise_sum(lost, 0, k, lo, hi)
        go[lo:hi] = 0.0
        lost[lo:hi] = 0.0
    return members, disagreement


@njit(cache=True, nogil=True)
def _flip_kernel(trans, loss, valid, stops, base, T, d, slack):
    """The vote vector whose stop saves the most members within ``slack`` more disagreement.

    A forward pass gives the probability of reaching each vote vector, a
    backward pass the members still to come and the disagreement still to
    arise after going on there; stopping at ``t`` instead changes the
    policy's expected members by ``dn = -reach (1 + members to come)`` and its
    disagreement by ``dd = reach (d(t) - disagreement to come)``.  Among the
    vote vectors where the policy goes on (not at the first or the last
    level) with ``dd <= slack`` and ``dn < -1e-12``, the one with the least
    ``dn`` (the first, level by level and row-major, on ties) is returned as
    its cell, or ``-1`` if there is none.
    """
    N = loss.shape[0]
    reach = np.zeros(N)
    reach[0] = 1.0
    for s in range(T):
        m = s + 1
        f, g = base[s], base[s + 1]
        for a in range(m if d == 2 else 1):
            n = m - a if d == 2 else m
            o0 = n + 1 if d == 2 else 1
            for b in range(n):
                c = reach[f] * (1.0 - (1.0 if stops[f] else 0.0))
                if c != 0.0:  # adding zeros changes no sum (see _evaluate_kernel)
                    _push(reach, g + b, o0, c, trans, f, d)
                f += 1
            g += n + 1
    L = base[T + 1] - base[T]
    nval, dval = np.zeros(L), np.zeros(L)  # the level above, by its cells: level T, nothing more to come
    nval2, dval2 = np.zeros(L), np.zeros(L)
    best, best_f = np.inf, -1
    for s in range(T - 1, -1, -1):
        m = s + 1
        level_best, level_f = np.inf, -1
        f, k, g = base[s], 0, 0
        for a in range(m if d == 2 else 1):
            n = m - a if d == 2 else m
            o0 = n + 1 if d == 2 else 1
            for b in range(n):
                if stops[f]:  # nothing to come after a stop (and no candidate)
                    nval2[k] = 0.0
                    dval2[k] = loss[f]
                else:
                    n_go = 1.0 + _expect(nval, g + b, o0, trans, f, d)
                    d_go = _expect(dval, g + b, o0, trans, f, d)
                    if s > 0 and valid[f]:
                        dn = -reach[f] * n_go
                        dd = reach[f] * (loss[f] - d_go)
                        if dd <= slack and dn < -1e-12 and dn < level_best:
                            level_best, level_f = dn, f
                    nval2[k] = n_go
                    dval2[k] = d_go
                f += 1
                k += 1
            g += n + 1
        if level_f >= 0 and level_best <= best:  # an earlier level wins a tie
            best, best_f = level_best, level_f
        nval, nval2 = nval2, nval
        dval, dval2 = dval2, dval
    return best_f


# --------------------------------------------------------------------------
# the urn model, level by level
# --------------------------------------------------------------------------
class _UrnModel:
    """Everything the Bellman recursion needs, for every vote vector, level by level.

    Level ``s`` (``s`` votes seen) comes from the urn's recursion as arrays of
    shape ``(s + 1,) * (l - 1)`` indexed by the first ``l - 1`` counts; the
    last count is ``s`` minus their sum, and grid points where it is negative
    are not vote vectors.  Only the vote vectors are kept, one cell each, in
    the compact layout of the compiled loops above (``base[s]`` is level
    ``s``'s first cell; :meth:`level` puts a level back on its grid).  Per cell:

    * ``valid``: the vote vector has positive probability under the prior;
    * ``loss``: ``d(t) = P(full majority != current majority | t)``;
    * ``trans[:, i]``: ``p_i(t)``, the probability that the next vote is for class ``i``
      (levels ``0 .. T - 1``).

    From the urn's recursion (:func:`ensvote._urn.log_cells`): the
    marginal probability ``q(t)`` of the vote vector ``t`` and its parts
    ``r_c(t)`` whose urn has majority ``c`` give
    ``d(t) = Σ_{c ≠ c(t)} r_c(t) / q(t)`` and
    ``p_i(t) = q(t + e_i) (t_i + 1) / ((s + 1) q(t))``.
    """

    def __init__(self, T, support, probs):
        self.T = T
        self.l = l = support.shape[1]
        self.base = base = _level_base(T, l - 1)
        # the urn's recursion over every vote vector (cell) at once, compiled; cells are in level order
        logq, logr, terms = log_cells(T, support, probs)
        self.valid = ok = np.isfinite(logq)
        level = np.repeat(np.arange(T), np.diff(base[:T + 1]))  # the level of each cell below level T
        with np.errstate(divide="ignore"):
            log_s1 = np.log(np.arange(1, T + 1, dtype=float))  # log(s + 1) per level s < T
        # p_i(t) = q(t + e_i) (t_i + 1) / ((s + 1) q(t)), computed in place in ``terms`` (the same
        # operations as with new arrays: each large new array costs its page faults)
        trans = terms
        with np.errstate(invalid="ignore"):
            trans -= log_s1[level][:, None]
            trans -= logq[:base[T], None]
            np.exp(trans, out=trans)
        np.copyto(trans, 0.0, where=~ok[:base[T], None])
        self.trans = trans
        # d(t): the parts r_c(t) of the classes c other than the current majority (lowest index on ties)
        cur = np.argmax(_states(T, l), axis=1)
        others = logr.T  # a view of logr, which is not needed after this
        others[np.arange(l)[:, None] == cur[None]] = -np.inf
        with np.errstate(invalid="ignore"):
            loss = np.logaddexp.reduce(others, axis=0)
            loss -= logq
            np.exp(loss, out=loss)
        np.clip(loss, 0.0, 1.0, out=loss)
        np.copyto(loss, 0.0, where=~ok)
        self.loss = loss
        self._policies, self._policies_lock = OrderedDict(), threading.Lock()

    def _on(self, s):
        """The grid points of level ``s`` that are vote vectors (a boolean array of the grid's shape)."""
        shp = (s + 1,) * (self.l - 1)
        return np.broadcast_to(grid(s, self.l)[-1] >= 0, shp)

    # ------------------------------------------------------------------
    # A policy is a boolean array ``stops`` over the cells: where it stops; a vote vector is its cell.
    def level(self, x, s):
        """Level ``s`` of a per-cell array ``x`` on its grid ``(s + 1,) * (l - 1)`` (zero off the vote vectors)."""
        part = x[self.base[s]:self.base[s + 1]]
        out = np.zeros((s + 1,) * (self.l - 1) + part.shape[1:], dtype=part.dtype)
        out[self._on(s)] = part
        return out

    def from_levels(self, levels):
        """A policy from its stop masks level by level (shapes ``(s + 1,) * (l - 1)``)."""
        out = np.zeros(self.valid.shape, dtype=bool)
        for s, x in enumerate(levels):
            out[self.base[s]:self.base[s + 1]] = np.asarray(x)[self._on(s)]
        return out

    def level_states(self, s):
        """The vote vectors of level ``s``, cell by cell: int64 array of shape ``(n_cells, l)``."""
        return _states(self.T, self.l)[self.base[s]:self.base[s + 1]].astype(np.int64)

    def cell(self, t):
        """The cell of the vote vector ``t`` (counts of all ``l`` classes)."""
        s, a = int(sum(t)), int(t[0])
        if self.l == 2:
            return int(self.base[s]) + a
        return int(self.base[s]) + a * (s + 1) - a * (a - 1) // 2 + int(t[1])

    def state_counts(self, cell):
        """The vote vector at ``cell``."""
        s = int(np.searchsorted(self.base, cell, side="right")) - 1
        return self.level_states(s)[cell - self.base[s]]

    def solve(self, price):
        """Bellman recursion at price λ: ``(value at the start, stop policy)``."""
        stops = np.zeros(self.valid.shape, dtype=bool)
        value = _solve_kernel(self.trans, self.loss, self.valid, self.base, self.T, self.l - 1, float(price), stops)
        return float(value), stops

    #: Bellman policies remembered per model, by price (see :meth:`policy_at`).
    POLICY_MEMO = 64

    def policy_at(self, price):
        """``(stops, value)``: :meth:`solve` at price λ, then :meth:`evaluate` of its policy, remembered.

        The budget searches of one prior start from the same prices and
        bisect the same brackets, so a cross-validated budget (several budgets
        on each fold's model) asks for most prices more than once.  The last
        ``POLICY_MEMO`` policies are kept, bit-packed; a remembered one is
        the same array and value a new solve would give.
        """
        price = float(price)
        with self._policies_lock:
            hit = self._policies.get(price)
            if hit is not None:
                self._policies.move_to_end(price)
        if hit is not None:
            packed, value = hit
            return np.unpackbits(packed, count=self.valid.size).astype(bool), value
        stops = self.solve(price)[1]
        value = self.evaluate(stops)
        with self._policies_lock:
            self._policies[price] = (np.packbits(stops), value)
            while len(self._policies) > self.POLICY_MEMO:
                self._policies.popitem(last=False)
        return stops, value

    def evaluate(self, stops, random_state=None, stop_prob=0.0):
        """Expected members and disagreement of a policy.

        ``random_state=cell`` makes the policy stop at that one vote vector
        with probability ``stop_prob`` instead of following ``stops``.
        """
        cell = -1 if random_state is None else random_state
        members, disagreement = _evaluate_kernel(self.trans, self.loss, stops, self.base, self.T, self.l - 1,
                                                 int(cell), float(stop_prob))
        return PolicyValue(float(members), float(disagreement))

    def best_flip(self, stops, slack):
        """The vote vector (cell) whose stop saves the most members within ``slack``, or None.

        See ``_flip_kernel``: the exact change of expected members and
        disagreement of stopping at one more vote vector, for all of them in
        one forward and one backward pass.
        """
        cell = _flip_kernel(self.trans, self.loss, self.valid, stops, self.base, self.T, self.l - 1, float(slack))
        return None if cell < 0 else int(cell)

    def dense(self, stops):
        """A boolean table ``(T + 1,) * l`` of the stop decisions (True at ``sum == T``)."""
        T, l, first = self.T, self.l, self.base[1]  # level 0 (no vote) is not in the table
        table = np.zeros((T + 1,) * l, dtype=bool)
        decide = stops[first:].copy()
        decide[self.base[T] - first:] = True
        table.reshape(-1)[np.ravel_multi_index(tuple(_states(T, l)[first:].T), table.shape)] = decide
        return table


def _model(T, prior):
    support, probs = prior
    key = (T, prior.n_classes, prior.key)
    m = _MODELS.get(key)
    if m is None:
        m = _UrnModel(T, support, probs)
        _MODELS[key] = m
    return m


def _diff_states(a, b, valid):
    """Vote vectors (cells) where two policies differ (valid states only), level by level, row-major."""
    return [int(c) for c in np.flatnonzero((a != b) & valid)]


def _n_diff(a, b, valid):
    return int(np.count_nonzero((a != b) & valid))


def _with(stops, states, source):
    """``stops`` with the decisions at ``states`` taken from ``source``."""
    new = stops.copy()
    for c in states:
        new[c] = source[c]
    return new


def _fill_budget(model, stops, value, delta, max_flips=200):
    """Spend the budget left by a deterministic policy: stop at more vote vectors while it lasts.

    The deterministic policy on the optimal frontier generally leaves part of
    δ unused.  Greedily, the vote vector whose stop saves the most members
    while the expected disagreement stays within δ is switched to stop, until
    none fits.  Every switch lowers the expected members, so the result is
    never worse than the policy it starts from.
    """
    for _ in range(max_flips):
        best = model.best_flip(stops, delta - value.disagreement)
        if best is None:
            break
        new = stops.copy()
        new[best] = True
        v_new = model.evaluate(new)
        if v_new.disagreement > delta or v_new.members >= value.members:  # pragma: no cover - rounding
            break
        stops, value = new, v_new
    return stops, value


def _tie_price(lo, v_lo, hi, v_hi):
    """The price λ* at which the λ-optimal policies found at prices ``lo < hi`` cost the same.

    A policy's expected cost, ``members + λ disagreement``, is a line in λ.
    The bisections below end at two λ-optimal policies one vote vector apart
    (adjacent on the frontier: no λ-optimal policy lies between them); the
    crossing of their lines is the exact price of the budget they bracket
    (between ``lo`` and ``hi`` in exact arithmetic; kept there).  Two
    policies of the same disagreement do not cross: then the bracket's
    geometric mean.
    """
    if not v_lo.disagreement > v_hi.disagreement:
        return math.sqrt(lo * hi) if lo > 0 else hi
    price = (v_hi.members - v_lo.members) / (v_lo.disagreement - v_hi.disagreement)
    return min(max(price, lo), hi)


def _meet_budget(model, delta, max_iter=200):
    """λ by bisection, the deterministic policy with disagreement <= δ, and the exact randomised optimum."""
    stops0, v0 = model.policy_at(0.0)
    if v0.disagreement <= delta:  # stopping after one vote already meets the budget
        return {"price": 0.0, "stops": stops0, "value": v0, "optimum": v0.members,
                "state": None, "prob": None}
    lo, hi = 0.0, 1.0
    stops_hi, v_hi = model.policy_at(hi)
    while v_hi.disagreement > delta:
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:
            raise RuntimeError("no price meets the disagreement budget")  # pragma: no cover
        stops_hi, v_hi = model.policy_at(hi)
    stops_lo, v_lo = (stops0, v0) if lo == 0.0 else model.policy_at(lo)
    for _ in range(max_iter):
        if _n_diff(stops_lo, stops_hi, model.valid) <= 1 or hi - lo <= 1e-13 * hi:
            break
        mid = 0.5 * (lo + hi) if lo == 0.0 or hi / lo > 4 else math.sqrt(lo * hi)
        stops_mid, v_mid = model.policy_at(mid)
        if v_mid.disagreement > delta:
            lo, stops_lo, v_lo = mid, stops_mid, v_mid
        else:
            hi, stops_hi, v_hi = mid, stops_mid, v_mid
    price = _tie_price(lo, v_lo, hi, v_hi)
    # walk from the policy at hi (within budget) to the one at lo (over it), one vote vector at a time
    diff = _diff_states(stops_hi, stops_lo, model.valid)
    cur, v_cur = stops_hi, v_hi
    for k, state in enumerate(diff):
        nxt = _with(cur, [state], stops_lo)
        v_nxt = model.evaluate(nxt)
        if v_nxt.disagreement > delta:
            # stopping with probability q at `state` interpolates linearly between cur and nxt
            q_cur = float(cur[state])
            q_nxt = float(nxt[state])
            w = (delta - v_cur.disagreement) / (v_nxt.disagreement - v_cur.disagreement)
            prob = q_cur + w * (q_nxt - q_cur)
            v_mix = model.evaluate(cur, random_state=state, stop_prob=prob)
            cur, v_cur = _fill_budget(model, cur, v_cur, delta)
            return {"price": price, "stops": cur, "value": v_cur,
                    "optimum": v_mix.members, "state": state, "prob": prob}
        cur, v_cur = nxt, v_nxt
    raise RuntimeError("bisection did not bracket the budget")  # pragma: no cover


def _meet_members(model, max_members, max_iter=200):
    """A compute budget: λ by bisection, the λ-optimal policy with expected members at most ``max_members``.

    Expected members grow with λ and expected disagreement falls, so the
    largest λ whose policy queries at most ``max_members`` members on average
    gives the least disagreement among the λ-optimal (deterministic)
    policies within the budget; between it and the next policy, vote vectors
    are switched one at a time while the budget allows and the disagreement
    does not rise, and the disagreement budget's tables between the two
    (:func:`_fill_budget` from the next policy) are searched for one within
    the budget that disagrees less: at the members a disagreement budget's
    table queries, the compute budget finds that table's disagreement or less.
    """
    stops_lo, v_lo = model.policy_at(0.0)  # λ = 0: every row stops after its first vote
    lo, hi = 0.0, 1.0
    stops_hi, v_hi = model.policy_at(hi)
    while v_hi.members <= max_members:
        lo, stops_lo, v_lo = hi, stops_hi, v_hi
        if v_hi.disagreement <= 0.0 or hi > 1e15:  # the budget buys every member that can lower it
            return {"price": lo, "stops": stops_lo, "value": v_lo}
        hi *= 2.0
        stops_hi, v_hi = model.policy_at(hi)
    for _ in range(max_iter):
        if _n_diff(stops_lo, stops_hi, model.valid) <= 1 or hi - lo <= 1e-13 * hi:
            break
        mid = 0.5 * (lo + hi) if lo == 0.0 or hi / lo > 4 else math.sqrt(lo * hi)
        stops_mid, v_mid = model.policy_at(mid)
        if v_mid.members <= max_members:
            lo, stops_lo, v_lo = mid, stops_mid, v_mid
        else:
            hi, stops_hi, v_hi = mid, stops_mid, v_mid
    price = _tie_price(lo, v_lo, hi, v_hi)
    cur, v_cur = stops_lo, v_lo
    for state in _diff_states(stops_lo, stops_hi, model.valid):
        nxt = _with(cur, [state], stops_hi)
        v_nxt = model.evaluate(nxt)
        if v_nxt.members <= max_members and v_nxt.disagreement <= v_cur.disagreement:
            cur, v_cur = nxt, v_nxt
    # The disagreement budget's tables between the two policies: from the one above λ*, stop at more vote
    # vectors while the disagreement stays within δ (_fill_budget, as _meet_budget does); the larger δ, the
    # fewer members.  Bisection on δ for the least disagreement within max_members, if below the one above.
    a, b = v_hi.disagreement, v_lo.disagreement
    for _ in range(max_iter):
        if b - a <= 1e-3 * (v_lo.disagreement - v_hi.disagreement):
            break
        delta = 0.5 * (a + b)
        stops, value = _fill_budget(model, stops_hi, v_hi, delta)
        if value.members <= max_members:
            if value.disagreement < v_cur.disagreement:
                cur, v_cur = stops, value
            b = delta
        else:
            a = delta
    return {"price": price, "stops": cur, "value": v_cur}


def evaluate_rule(rule, prior):
    """Expected members and disagreement of ``rule`` when urns are drawn from ``prior`` (a checked Prior), exactly.

    The rule decides at every vote vector (as :meth:`~ensvote.HaltingRule.stop`
    would; every vote stops at ``T``), and the model runs that policy forward:
    the one exact evaluator of :func:`ensvote.policy_value` and
    :func:`ensvote.expected_queries` (``method="exact"``).  The caller has
    prepared the rule and checked the size.
    """
    T = prior.T
    model = _model(T, prior)
    stops = np.zeros(model.valid.shape, dtype=bool)
    for s in range(1, T + 1):
        # the level's vote vectors: counts summing to s >= 1, so rule.stop() would only check them
        stops[model.base[s]:model.base[s + 1]] = decided(rule, model.level_states(s)) | (s == T)
    return model.evaluate(stops)
