"""The Bellman recursion of the optimal stopping policy under the urn model (the machinery of :mod:`ensvote.optimal`).

A *model* (:class:`_UrnModel`) holds, for every vote vector of an urn of
``T`` members under a prior, what the recursion needs: the probability
``d(t)`` that the current majority is not the full ensemble's and the
probabilities ``p_i(t)`` of the next vote, from the urn's recursion
(:func:`ensvote._urn.log_levels`).  On it: the λ-optimal policy
(:meth:`_UrnModel.solve`, backward induction), the expected members and
disagreement of any policy (:meth:`_UrnModel.evaluate`, forward), the best
single change of a policy within a slack (:meth:`_UrnModel.best_flip`), and
the budget search that meets a disagreement δ (:func:`_meet_budget`: bisection
on λ, then the randomised optimum between the two bracketing policies).
Compiled loops (numba) over a padded layout do the work; the rule and the
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
from ._urn import log_levels
from .rules import decided

_MODELS = BoundedCache("optimal-policy urn models", 16)


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
# compiled recursions over the padded levels
# --------------------------------------------------------------------------
# Level ``s`` of a model is row ``s`` of a ``(T + 1, (T + 1) ** (l - 1))``
# array: the first ``l - 1`` counts of a vote vector, row-major with stride
# ``T + 1``; the level's own block is the counts up to ``s``.  The loops do
# the very floating-point operations, in the same order, of the level-by-level
# NumPy recursion they replace (``tests/test_optimal.py`` checks bit equality
# against it), including NumPy's pairwise summation for the level totals.
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
def _pairwise_sum(a, lo, n):
    """``np.sum(a[lo:lo + n])``, bit for bit: NumPy's pairwise summation.

    Above 128 terms NumPy splits the range in two (the first part a multiple
    of 8) and adds the two sums; the same tree is walked here with an explicit
    stack (numba cannot cache a recursive function).
    """
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
        if node_n[i] <= 128:
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


@njit(cache=True, nogil=True)
def _offsets(W, d):
    """Padded offset of ``t + e_i`` from ``t`` (one level up), per class ``i``."""
    off = np.zeros(d + 1, dtype=np.int64)
    if d == 1:
        off[0] = 1
    else:
        off[0], off[1] = W, 1
    return off


# In the loops, level ``s`` is walked row-major as ``rows(m) x m`` cells with
# ``m = s + 1``: ``rows = m`` for three classes (cell ``a W + b``), one row for two.
@njit(cache=True, nogil=True)
def _solve_kernel(trans, loss, valid, T, d, price, stops):
    W = T + 1
    off = _offsets(W, d)
    V = np.zeros(trans.shape[2])
    V2 = np.zeros(trans.shape[2])
    stops[:] = False
    stops[T] = valid[T]
    for s in range(T - 1, -1, -1):
        m = s + 1
        for a in range(m if d == 2 else 1):
            for b in range(m):
                f = a * W + b
                acc = 0.0
                for i in range(d + 1):
                    acc += trans[s, i, f] * V[f + off[i]]
                c = 1.0 + acc
                stop = s > 0 and valid[s, f] and price * loss[s, f] <= c
                stops[s, f] = stop
                V2[f] = price * loss[s, f] if stop else c
        V, V2 = V2, V
    return V[0]


@njit(cache=True, nogil=True)
def _evaluate_kernel(trans, loss, stops, T, d, rs_level, rs_cell, rs_prob):
    W = T + 1
    N = trans.shape[2]
    off = _offsets(W, d)
    reach, nxt, cont = np.zeros(N), np.zeros(N), np.zeros(N)
    go, lost = np.empty(N), np.empty(N)
    reach[0] = 1.0
    members = disagreement = 0.0
    for s in range(T):
        m = s + 1
        rows = m if d == 2 else 1
        k = 0
        for a in range(rows):
            for b in range(m):
                f = a * W + b
                p = 1.0 if stops[s, f] else 0.0
                if s == rs_level and f == rs_cell:
                    p = rs_prob
                go[k] = reach[f] * (1.0 - p)
                lost[k] = reach[f] * p * loss[s, f]
                cont[f] = go[k]
                k += 1
        members += _pairwise_sum(go, 0, k)
        disagreement += _pairwise_sum(lost, 0, k)
        for a in range(m + 1 if d == 2 else 1):
            for b in range(m + 1):
                nxt[a * W + b] = 0.0
        for i in range(d + 1):
            for a in range(rows):
                for b in range(m):
                    f = a * W + b
                    nxt[f + off[i]] += cont[f] * trans[s, i, f]
        reach, nxt = nxt, reach
    return members, disagreement


@njit(cache=True, nogil=True)
def _flip_kernel(trans, loss, valid, stops, T, d, slack):
    """The vote vector whose stop saves the most members within ``slack`` more disagreement.

    A forward pass gives the probability of reaching each vote vector, a
    backward pass the members still to come and the disagreement still to
    arise after going on there; stopping at ``t`` instead changes the
    policy's expected members by ``dn = -reach (1 + members to come)`` and its
    disagreement by ``dd = reach (d(t) - disagreement to come)``.  Among the
    vote vectors where the policy goes on (not at the first or the last
    level) with ``dd <= slack`` and ``dn < -1e-12``, the one with the least
    ``dn`` (the first, level by level and row-major, on ties) is returned as
    ``(level, cell)``, or ``(-1, -1)`` if there is none.
    """
    W = T + 1
    N = trans.shape[2]
    off = _offsets(W, d)
    reach = np.zeros((T + 1, N))
    reach[0, 0] = 1.0
    cont = np.zeros(N)
    for s in range(T):
        m = s + 1
        rows = m if d == 2 else 1
        for a in range(rows):
            for b in range(m):
                f = a * W + b
                cont[f] = reach[s, f] * (1.0 - (1.0 if stops[s, f] else 0.0))
        for i in range(d + 1):
            for a in range(rows):
                for b in range(m):
                    f = a * W + b
                    reach[s + 1, f + off[i]] += cont[f] * trans[s, i, f]
    nval, dval = np.zeros(N), np.zeros(N)
    nval2, dval2 = np.zeros(N), np.zeros(N)
    best, best_s, best_f = np.inf, -1, -1
    for s in range(T - 1, -1, -1):
        m = s + 1
        level_best, level_f = np.inf, -1
        for a in range(m if d == 2 else 1):
            for b in range(m):
                f = a * W + b
                n_acc = 0.0
                d_go = 0.0
                for i in range(d + 1):
                    n_acc += trans[s, i, f] * nval[f + off[i]]
                for i in range(d + 1):
                    d_go += trans[s, i, f] * dval[f + off[i]]
                n_go = 1.0 + n_acc
                if s > 0 and valid[s, f] and not stops[s, f]:
                    dn = -reach[s, f] * n_go
                    dd = reach[s, f] * (loss[s, f] - d_go)
                    if dd <= slack and dn < -1e-12 and dn < level_best:
                        level_best, level_f = dn, f
                nval2[f] = 0.0 if stops[s, f] else n_go
                dval2[f] = loss[s, f] if stops[s, f] else d_go
        if level_f >= 0 and level_best <= best:  # an earlier level wins a tie
            best, best_s, best_f = level_best, s, level_f
        nval, nval2 = nval2, nval
        dval, dval2 = dval2, dval
    return best_s, best_f


# --------------------------------------------------------------------------
# the urn model, level by level
# --------------------------------------------------------------------------
class _UrnModel:
    """Everything the Bellman recursion needs, for every vote vector, level by level.

    Level ``s`` (``s`` votes seen) is built as arrays of shape ``(s + 1,) * (l - 1)``
    indexed by the first ``l - 1`` counts; the last count is ``s`` minus their
    sum, and entries where that is negative are invalid.  Once built, the
    levels are kept padded, level ``s`` as row ``s`` of one array (the layout
    of the compiled loops above; :meth:`level` recovers a level's block).  Per level:

    * ``valid``: the vote vector exists and has positive probability under the prior;
    * ``loss``: ``d(t) = P(full majority != current majority | t)``;
    * ``trans[i]``: ``p_i(t)``, the probability that the next vote is for class ``i``.

    From the urn's recursion (:func:`ensvote._urn.log_levels`): the
    marginal probability ``q(t)`` of the vote vector ``t`` and its parts
    ``r_c(t)`` whose urn has majority ``c`` give
    ``d(t) = Σ_{c ≠ c(t)} r_c(t) / q(t)`` and
    ``p_i(t) = q(t + e_i) (t_i + 1) / ((s + 1) q(t))``.
    """

    def __init__(self, T, support, probs):
        self.T = T
        self.l = l = support.shape[1]
        self.valid, self.loss, self.trans, self.counts = ([None] * (T + 1) for _ in range(4))
        for s, t, logq, logr, terms in log_levels(T, support, probs):
            if terms is not None:
                # p_i(t) = q(t + e_i) (t_i + 1) / ((s + 1) q(t))
                with np.errstate(invalid="ignore"):
                    trans = np.exp(terms[:, 0] - np.log(s + 1.0) - logq)
                self.trans[s] = np.where(np.isfinite(logq) & (t[-1] >= 0), trans, 0.0)
            self._store(s, t, logq, logr)
        # the padded layout the compiled loops use (see above); level s is row s
        W, d = T + 1, l - 1
        block = [(slice(0, s + 1),) * d for s in range(T + 1)]
        trans = np.zeros((T, l, W ** d))
        loss = np.zeros((T + 1, W ** d))
        valid = np.zeros((T + 1, W ** d), dtype=bool)
        for s in range(T + 1):
            loss[s].reshape((W,) * d)[block[s]] = self.loss[s]
            valid[s].reshape((W,) * d)[block[s]] = self.valid[s]
            if s < T:
                trans[s].reshape((l,) + (W,) * d)[(slice(None),) + block[s]] = self.trans[s]
        self.trans, self.loss, self.valid = trans, loss, valid
        self._policies, self._policies_lock = OrderedDict(), threading.Lock()

    def _store(self, s, t, logq, logr):
        shp = (s + 1,) * (self.l - 1)
        full = np.stack([np.broadcast_to(g, shp) for g in t])
        ok = np.isfinite(logq) & (full[-1] >= 0)
        cur = np.argmax(full, axis=0)
        others = np.where(np.arange(self.l)[(slice(None),) + (None,) * len(shp)] == cur[None], -np.inf, logr)
        with np.errstate(invalid="ignore"):
            loss = np.exp(np.logaddexp.reduce(others, axis=0) - logq)
        self.valid[s] = ok
        self.loss[s] = np.where(ok, np.clip(loss, 0.0, 1.0), 0.0)
        self.counts[s] = full

    # ------------------------------------------------------------------
    # A policy is a boolean array ``stops`` of shape ``(T + 1, (T + 1) ** (l - 1))``:
    # row ``s`` says where level ``s`` stops (False outside the level's block).
    def level(self, x, s):
        """The block of level ``s`` of a padded row ``x``, shaped ``(s + 1,) * (l - 1)``."""
        d = self.l - 1
        return x.reshape((self.T + 1,) * d)[(slice(0, s + 1),) * d]

    def pad(self, levels):
        """Stop masks given level by level (shapes ``(s + 1,) * (l - 1)``) as a padded policy."""
        out = np.zeros(self.valid.shape, dtype=bool)
        for s, x in enumerate(levels):
            self.level(out[s], s)[...] = x
        return out

    def state_counts(self, s, cell):
        """The vote vector at padded index ``cell`` of level ``s``."""
        W = self.T + 1
        first = [cell] if self.l == 2 else [cell // W, cell % W]
        return np.array(first + [s - sum(first)], dtype=np.int64)

    def solve(self, price):
        """Bellman recursion at price λ: ``(value at the start, stop policy)``."""
        stops = np.zeros(self.valid.shape, dtype=bool)
        value = _solve_kernel(self.trans, self.loss, self.valid, self.T, self.l - 1, float(price), stops)
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
            return np.unpackbits(packed, count=self.valid.size).reshape(self.valid.shape).astype(bool), value
        stops = self.solve(price)[1]
        value = self.evaluate(stops)
        with self._policies_lock:
            self._policies[price] = (np.packbits(stops), value)
            while len(self._policies) > self.POLICY_MEMO:
                self._policies.popitem(last=False)
        return stops, value

    def evaluate(self, stops, random_state=None, stop_prob=0.0):
        """Expected members and disagreement of a policy.

        ``random_state=(s, cell)`` makes the policy stop at that one vote
        vector with probability ``stop_prob`` instead of following ``stops``.
        """
        level, cell = (-1, -1) if random_state is None else random_state
        members, disagreement = _evaluate_kernel(self.trans, self.loss, stops, self.T, self.l - 1,
                                                 int(level), int(cell), float(stop_prob))
        return PolicyValue(float(members), float(disagreement))

    def best_flip(self, stops, slack):
        """The vote vector ``(s, cell)`` whose stop saves the most members within ``slack``, or None.

        See ``_flip_kernel``: the exact change of expected members and
        disagreement of stopping at one more vote vector, for all of them in
        one forward and one backward pass.
        """
        s, cell = _flip_kernel(self.trans, self.loss, self.valid, stops, self.T, self.l - 1, float(slack))
        return None if s < 0 else (int(s), int(cell))

    def dense(self, stops):
        """A boolean table ``(T + 1,) * l`` of the stop decisions (True at ``sum == T``)."""
        T, l = self.T, self.l
        table = np.zeros((T + 1,) * l, dtype=bool)
        for s in range(1, T + 1):
            full = self.counts[s]
            ok = full[-1] >= 0
            decide = self.level(stops[s], s) | (s == T)
            table[tuple(f[ok] for f in full)] = decide[ok]
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
    """Vote vectors ``(s, cell)`` where two policies differ (valid states only), level by level, row-major."""
    return [(int(s), int(c)) for s, c in zip(*np.nonzero((a != b) & valid))]


def _n_diff(a, b, valid):
    return int(np.count_nonzero((a != b) & valid))


def _with(stops, states, source):
    """``stops`` with the decisions at ``states`` taken from ``source``."""
    new = stops.copy()
    for s, c in states:
        new[s, c] = source[s, c]
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
    stops_lo = stops0 if lo == 0.0 else model.policy_at(lo)[0]
    for _ in range(max_iter):
        if _n_diff(stops_lo, stops_hi, model.valid) <= 1 or hi - lo <= 1e-13 * hi:
            break
        mid = 0.5 * (lo + hi) if lo == 0.0 or hi / lo > 4 else math.sqrt(lo * hi)
        stops_mid, v_mid = model.policy_at(mid)
        if v_mid.disagreement > delta:
            lo, stops_lo = mid, stops_mid
        else:
            hi, stops_hi, v_hi = mid, stops_mid, v_mid
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
            return {"price": math.sqrt(lo * hi) if lo > 0 else hi, "stops": cur, "value": v_cur,
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
    does not rise.
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
            hi, stops_hi = mid, stops_mid
    cur, v_cur = stops_lo, v_lo
    for state in _diff_states(stops_lo, stops_hi, model.valid):
        nxt = _with(cur, [state], stops_hi)
        v_nxt = model.evaluate(nxt)
        if v_nxt.members <= max_members and v_nxt.disagreement <= v_cur.disagreement:
            cur, v_cur = nxt, v_nxt
    return {"price": lo, "stops": cur, "value": v_cur}


def evaluate_rule(rule, prior):
    """Expected members and disagreement of ``rule`` when urns are drawn from ``prior`` (a checked Prior), exactly.

    The rule decides at every vote vector (as :meth:`~ensvote.HaltingRule.stop`
    would; every vote stops at ``T``), and the model runs that policy forward:
    the one exact evaluator of :func:`ensvote.policy_value` and
    :func:`ensvote.expected_queries` (``method="exact"``).  The caller has
    prepared the rule and checked the size.
    """
    T, l = prior.T, prior.n_classes
    model = _model(T, prior)
    levels = [np.zeros((1,) * (l - 1), dtype=bool)]
    for s in range(1, T + 1):
        full = model.counts[s]
        ok = full[-1] >= 0
        mask = np.zeros(ok.shape, dtype=bool)
        # the level's vote vectors: valid counts summing to s >= 1, so rule.stop() would only check them
        states = np.ascontiguousarray(np.stack([f[ok] for f in full], axis=-1), dtype=np.int64)
        mask[ok] = decided(rule, states) | (s == T)
        levels.append(mask)
    return model.evaluate(model.pad(levels))
