"""The Bayes-optimal stopping policy under the urn model, for a disagreement budget.

Both papers stop a row as soon as *that row's* confidence passes a threshold.
A user usually wants something else: "disagree with the full ensemble on at
most a fraction δ of my rows, and query as few members as possible".  Under
the urn model of Soto, Suárez & Martínez-Muñoz (2016) with a prior over the
urn's content (uniform, or the out-of-bag prior of :func:`ensvote.oob_prior`),
that is a sequential decision problem on the finite set of vote vectors, and
its optimum can be computed exactly.

For a *price* λ of a disagreement the policy minimising

    E[members queried] + λ · P(final T-member majority ≠ current majority at the stop)

is found by backward induction (the Bellman equation) from ``t = T``:

    V(t) = min( λ · d(t),  1 + Σ_i p_i(t) V(t + e_i) ),     V(t) = 0 at sum(t) = T,

where ``d(t) = 1 − P*(t, T)`` is the probability that the current majority is
not the full ensemble's (:func:`ensvote.finite_confidence`) and ``p_i(t)`` the
posterior predictive probability that the next member votes for class ``i``.
A budget δ is met by bisection on λ: the expected disagreement of the
λ-optimal policy falls as λ grows, and at the λ where it crosses δ two
policies are optimal, which differ in a few vote vectors.  Stopping at one of
those vectors with a probability between 0 and 1 meets δ exactly; that
randomised policy is the exact optimum (:attr:`OptimalRule.optimum_members`).
The table that :func:`ensvote.halt` uses is deterministic: the policy
between the two that meets the budget without randomising, whose expected
disagreement is at most δ (:attr:`OptimalRule.expected_disagreement`).

Kalman & Moscovich (2026) solve the binary problem as a linear program; the
backward induction here covers two and three classes.

Out of sample, a budget met under a prior *estimated* from the training rows
is met only as well as the prior is right, and the policy tuned to the
estimate finds exactly the vote vectors where the estimate is too optimistic.
:meth:`OptimalRule.from_oob_votes` therefore builds the policy under the
deconvolved out-of-bag prior (:func:`ensvote.priors.deconvolved_oob_prior`)
and sets the budget it is built for by cross-validation on the out-of-bag
rows (:func:`cross_validated_budget`), so that the disagreement on rows the
prior was not estimated from meets δ.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Literal, NamedTuple

import numpy as np
from numba import njit
from numpy.typing import ArrayLike, NDArray

from ._cache import BoundedCache
from ._urn import log_levels
from ._utils import check_random_state
from ._validation import check_nonnegative_float, check_positive_int
from .confidence import PriorLike, check_prior
from .priors import VoteMixture, oob_prior
from .rules import HaltingRule, decided, register

__all__ = ["OptimalRule", "PolicyValue", "policy_value", "cross_validated_budget", "CrossValidatedBudget",
           "MAX_OPTIMAL_T", "SUPPORTED_CLASSES", "UNIFORM_ROWS"]

#: Largest ensemble size the optimal policy is computed for.
MAX_OPTIMAL_T = 101
#: Numbers of classes the optimal policy is computed for.
SUPPORTED_CLASSES = (2, 3)
#: The budget mode's default weight, in rows, of the uniform prior mixed into a deconvolved one
#: (``uniform_rows`` of :func:`cross_validated_budget`).
UNIFORM_ROWS = 1.0

_MODELS = BoundedCache("optimal-policy urn models", 16)
_MIXTURE_PRIORS = BoundedCache("deconvolved out-of-bag priors of the budget mode", 64)


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
# validation
# --------------------------------------------------------------------------
def _check_T(T):
    T = check_positive_int(T, name="T")
    if T > MAX_OPTIMAL_T:
        raise ValueError(f"T={T} is above the largest ensemble the optimal policy is computed for (T <= {MAX_OPTIMAL_T})")
    return T


def check_classes(l):
    """The number of classes, if the optimal policy is computed for it (2 or 3)."""
    if l not in SUPPORTED_CLASSES:
        raise ValueError(f"the optimal policy is computed for 2 or 3 classes, got n_classes={l}")
    return l


def check_budget(value, *, name="disagreement"):
    """A disagreement budget δ: a real number with 0 < δ < 0.5."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in (0, 0.5), got {value!r}")
    value = float(value)
    if math.isnan(value):
        raise ValueError(f"{name} must be a number in (0, 0.5), got NaN")
    if not 0.0 < value < 0.5:
        raise ValueError(f"{name} must lie strictly between 0 and 0.5, got {value}")
    return value


def _resolve_prior(prior, T, n_classes):
    """The prior as a :class:`~ensvote.confidence.Prior` of 2 or 3 classes (None: uniform over ``n_classes``)."""
    if prior is None:
        l = 2 if n_classes is None else check_positive_int(n_classes, name="n_classes", minimum=2)
        check_classes(l)
        return check_prior(None, T, l)
    hint = getattr(prior, "n_classes", None)  # e.g. a many-class prior object from oob_prior
    if isinstance(hint, numbers.Integral):
        check_classes(int(hint))
    parsed = check_prior(prior, T)
    if n_classes is not None and check_positive_int(n_classes, name="n_classes", minimum=2) != parsed.n_classes:
        raise ValueError(f"n_classes={n_classes} but the prior is over {parsed.n_classes} classes")
    check_classes(parsed.n_classes)
    return parsed


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


# --------------------------------------------------------------------------
# the rule
# --------------------------------------------------------------------------
@register
class OptimalRule(HaltingRule):
    """The Bayes-optimal stopping policy for a disagreement budget δ (or a price λ).

    Under the urn model with a prior over the urn's content, the rule stops
    where the Bellman recursion (module docstring) says stopping is cheaper
    than going on, with λ chosen so that the expected disagreement with the
    full ``T``-member majority, under the prior, meets the budget δ.  The
    decision for every vote vector is tabulated when the rule is built, so a
    stop check in :func:`ensvote.halt` is a look-up.

    Vote vectors that are impossible under the prior never stop before ``T``
    (as with :class:`~ensvote.UrnRule`, whose confidence is undefined there).

    Parameters
    ----------
    T : int
        Size of the full ensemble, at most :data:`MAX_OPTIMAL_T`.
    disagreement : float in (0, 0.5), optional
        The budget δ: expected disagreement with the full ensemble, under the
        prior.  Default 0.01 when ``price`` is not given either.
    price : float >= 0, keyword-only, optional
        Build the policy for this λ instead of a budget (no bisection).
    prior : None, array of shape (T + 1,) or (support, probs)
        Prior over the full vote vector (see
        :func:`ensvote.confidence.check_prior`); None is uniform.
    n_classes : {2, 3}, optional
        Number of classes for the uniform prior (default 2); must match a given prior.

    Attributes
    ----------
    price : float
        λ, the price of a disagreement in members.
    expected_members, expected_disagreement : float
        Of the tabulated (deterministic) policy, under the prior; the
        disagreement is at most δ.
    optimum_members : float
        Fewest expected members of any policy, randomised ones included,
        whose expected disagreement is exactly δ (equal to ``expected_members``
        when no randomisation is needed, or in ``price`` mode).
    boundary_state : ndarray of int or None
        The vote vector at which that optimum stops only with probability
        ``boundary_stop_probability`` (see :meth:`stop_probability`).

    Examples
    --------
    Two classes, 101 members, uniform prior, a budget of 1 % disagreement:

    >>> from ensvote import OptimalRule, UrnRule, policy_value
    >>> rule = OptimalRule(T=101, disagreement=0.01)
    >>> round(rule.expected_members, 2), rule.expected_disagreement <= 0.01
    (24.16, True)
    >>> rule.stop([[12, 0], [14, 6]])
    array([ True, False])

    At the urn rule's own expected disagreement the optimum needs no more
    members:

    >>> urn = policy_value(UrnRule(101, 0.99), None)
    >>> round(urn.members, 2), round(OptimalRule(101, urn.disagreement).expected_members, 2)
    (26.52, 26.37)
    """

    name, strength = "optimal", "disagreement"

    #: Set by :meth:`from_oob_votes`: the user's budget δ (``disagreement`` is then the cross-validated one).
    target_disagreement = None
    #: Set by :meth:`from_oob_votes`: the cross-validated disagreement of the budget used (a :class:`CrossValidatedBudget`).
    cross_validation = None

    @classmethod
    def from_params(cls, strength: float | None = None, *, n_members: int, n_classes: int | None = None,
                    prior: Any = None, oob_votes: Callable[[], NDArray[np.int64]] | None = None) -> HaltingRule:
        """Part of the registry: see :meth:`HaltingRule.from_params`.

        ``strength`` is the budget δ (required); ``prior="oob"`` is the budget
        mode on out-of-bag votes (:meth:`from_oob_votes`), any other prior is
        passed to the constructor.
        """
        if strength is None:
            raise ValueError("rule='optimal' needs a budget: pass disagreement=δ, e.g. disagreement=0.01")
        check_budget(strength, name="disagreement")
        if n_classes is not None:
            check_classes(n_classes)  # before any prior is estimated
        if isinstance(prior, str) and prior == "oob":
            return cls.from_oob_votes(oob_votes(), n_members, strength)
        return cls(n_members, strength, prior=None if isinstance(prior, str) and prior == "uniform" else prior,
                   n_classes=n_classes)

    @classmethod
    def from_oob_votes(cls, oob_votes: ArrayLike, T: int, disagreement: float = 0.01, *, n_folds: int = 5,
                       random_state: int | np.random.Generator | None = None, resolution: int | None = None,
                       rtol: float = 0.05, heldout: Literal["deconvolved", "rescaled"] = "deconvolved",
                       uniform_rows: float = UNIFORM_ROWS) -> OptimalRule:
        """The budget mode from out-of-bag votes: δ met on rows the prior was not estimated from.

        The policy is built under :func:`ensvote.priors.deconvolved_oob_prior`
        of all the rows (with ``uniform_rows`` rows' worth of the uniform prior
        mixed in), for the budget :func:`cross_validated_budget` finds
        (at most δ), so its disagreement, estimated on held-out rows, is δ
        rather than only its disagreement under the estimated prior.

        Parameters
        ----------
        oob_votes : array_like of int, shape (n_rows, l), l in {2, 3}
            Out-of-bag vote counts of the training rows (``HaltingClassifier.oob_votes_``).
        T : int
            Size of the full ensemble, at most :data:`MAX_OPTIMAL_T`.
        disagreement : float in (0, 0.5)
            The budget δ.
        n_folds, random_state, resolution, rtol, heldout, uniform_rows
            As in :func:`cross_validated_budget`; ``uniform_rows`` also
            applies to the prior of all the rows the final table is built
            under.

        Returns
        -------
        OptimalRule
            With ``prior`` the deconvolved prior, ``disagreement`` the budget
            it was built for, :attr:`target_disagreement` = δ and
            :attr:`cross_validation` the :class:`CrossValidatedBudget`.

        Examples
        --------
        Out-of-bag votes of 400 rows (about 37 of 101 members each), from
        members whose vote probabilities vary over the rows:

        >>> import numpy as np
        >>> from ensvote import OptimalRule
        >>> rng = np.random.default_rng(0)
        >>> p, n = rng.beta(0.3, 0.3, 400), rng.binomial(101, 0.368, 400)
        >>> k = rng.binomial(n, p)
        >>> rule = OptimalRule.from_oob_votes(np.column_stack([n - k, k]), T=101, disagreement=0.01)
        >>> rule.target_disagreement, round(rule.disagreement, 4), round(rule.expected_members, 2)
        (0.01, 0.0079, 10.19)
        """
        T = _check_T(T)
        delta = check_budget(disagreement)
        v, T, resolution = VoteMixture.checked_votes(oob_votes, T, resolution)
        cv = cross_validated_budget(v, T, delta, n_folds=n_folds, random_state=random_state, resolution=resolution,
                                    rtol=rtol, heldout=heldout, uniform_rows=uniform_rows)
        rule = cls(T, cv.budget, prior=_mixture_prior(v, T, resolution, _check_uniform_rows(uniform_rows)))
        rule.target_disagreement = delta
        rule.cross_validation = cv
        return rule

    def __init__(self, T: int, disagreement: float | None = None, *, price: float | None = None,
                 prior: PriorLike = None, n_classes: int | None = None):
        self.n_members = _check_T(T)
        if disagreement is not None and price is not None:
            raise ValueError("give either disagreement (a budget) or price (λ), not both")
        if price is None:
            self.disagreement = check_budget(0.01 if disagreement is None else disagreement)
        else:
            self.disagreement = None
            price = check_nonnegative_float(price, name="price")
        self.prior = prior
        parsed = _resolve_prior(prior, self.n_members, n_classes)
        self.n_classes = parsed.n_classes
        model = _model(self.n_members, parsed)
        if price is None:
            sol = _meet_budget(model, self.disagreement)
        else:
            _, stops = model.solve(price)
            v = model.evaluate(stops)
            sol = {"price": price, "stops": stops, "value": v, "optimum": v.members, "state": None, "prob": None}
        self.price = float(sol["price"])
        self.expected_members = float(sol["value"].members)
        self.expected_disagreement = float(sol["value"].disagreement)
        self.optimum_members = float(sol["optimum"])
        self._table = model.dense(sol["stops"])
        self._table.setflags(write=False)
        if sol["state"] is None:
            self.boundary_state = None
            self.boundary_stop_probability = None
        else:
            self.boundary_state = model.state_counts(*sol["state"])
            self.boundary_stop_probability = float(sol["prob"])
        self._key = hashlib.sha256(np.packbits(self._table).tobytes()).hexdigest()

    @property
    def T(self) -> int:
        """Size of the full ensemble the policy is built for.

        Examples
        --------
        >>> from ensvote import OptimalRule
        >>> OptimalRule(51, 0.01).T
        51
        """
        return self.n_members

    def _params(self):
        out = {"T": self.n_members}
        if self.disagreement is not None:
            out["disagreement"] = self.disagreement
        else:
            out["price"] = self.price
        out["prior"] = None if self.prior is None else "<given>"
        if self.target_disagreement is not None:
            out["target_disagreement"] = self.target_disagreement
        return out

    def prepare(self, n_members: int | None, n_classes: int | None) -> None:
        super().prepare(n_members, n_classes)
        if n_classes is not None and n_classes != self.n_classes:
            raise ValueError(f"the rule was built for {self.n_classes} classes, the votes have {n_classes}")

    def table_key(self, n_classes: int) -> Hashable | None:
        return (type(self), self.n_members, self.n_classes, self._key)

    def table(self) -> NDArray[np.bool_]:
        """The stop decision for every vote vector, a boolean array of shape ``(T + 1,) * l``.

        Entries with more than ``T`` votes are False (never looked up).

        Examples
        --------
        >>> from ensvote import OptimalRule
        >>> tab = OptimalRule(101, 0.01).table()
        >>> tab.shape, bool(tab[12, 0]), bool(tab[14, 6])
        ((102, 102), True, False)
        """
        return self._table.copy()

    def decide(self, t: NDArray[np.int64]) -> NDArray[np.bool_]:
        return self._table[tuple(np.moveaxis(t, -1, 0))]

    def stop_probability(self, counts: ArrayLike) -> NDArray[np.float64]:
        """Stop probability of the exact (randomised) optimum at these counts.

        1.0 where the tabulated rule stops, 0.0 where it goes on, except at
        :attr:`boundary_state`, where it is :attr:`boundary_stop_probability`.

        Parameters
        ----------
        counts : array_like of int, shape (..., l)

        Returns
        -------
        ndarray of float, shape (...)

        Examples
        --------
        >>> from ensvote import OptimalRule
        >>> rule = OptimalRule(101, 0.01)
        >>> rule.boundary_state
        array([2, 9])
        >>> rule.stop_probability([[2, 9], [12, 0], [14, 6]]).round(3)
        array([0.474, 1.   , 0.   ])
        """
        stop = self.stop(counts).astype(float)
        if self.boundary_state is not None:
            t = np.asarray(counts)
            stop = np.where(np.all(t == self.boundary_state, axis=-1), self.boundary_stop_probability, stop)
        return stop


# --------------------------------------------------------------------------
# the budget, cross-validated on the out-of-bag rows
# --------------------------------------------------------------------------
class CrossValidatedBudget(NamedTuple):
    """The budget to build the policy for, so that held-out disagreement meets the target.

    Returned by :func:`cross_validated_budget` (see there for an example)
    and kept by :meth:`OptimalRule.from_oob_votes` as ``cross_validation``.

    Examples
    --------
    >>> from ensvote.optimal import CrossValidatedBudget
    >>> CrossValidatedBudget(budget=0.007, cv_disagreement=0.0098, target=0.01, n_rounds=3).budget
    0.007
    """

    budget: float  #: the budget the policy is built for (at most the target)
    cv_disagreement: float  #: cross-validated disagreement of the policy at ``budget``
    target: float  #: the target δ
    n_rounds: int  #: budgets tried


def _votes_key(v):
    return hashlib.sha256(np.ascontiguousarray(v, dtype=np.int64).tobytes()).hexdigest() + str(v.shape)


def _check_uniform_rows(uniform_rows):
    try:
        return check_nonnegative_float(uniform_rows, name="uniform_rows")
    except TypeError:  # a ValueError here, as this option has always raised
        raise ValueError(f"uniform_rows must be a finite number >= 0, got {uniform_rows!r}") from None


def _with_uniform(mix, n_rows, T, uniform_rows):
    """``mix``'s urn prior for ``n_rows`` rows, mixed with the uniform one as ``n_rows : uniform_rows``."""
    return mix.prior(T, uniform=uniform_rows / (n_rows + uniform_rows))


def _mixture_prior(v, T, resolution, uniform_rows=0.0):
    """The deconvolved prior of all the rows (kept: every budget of the same votes uses it)."""
    key = ("all", _votes_key(v), T, resolution, uniform_rows)
    prior = _MIXTURE_PRIORS.get(key)
    if prior is None:
        prior = _with_uniform(VoteMixture(v, resolution), len(v), T, uniform_rows)
        _MIXTURE_PRIORS[key] = prior
    return prior


def _fold_fits(v, T, resolution, n_folds, random_state, heldout="deconvolved", uniform_rows=0.0):
    """Per fold: the prior fitted on the other folds, the fold's own votes as a prior, its rows.

    The fits depend on the votes, the folds and nothing else, so for a seed
    (None or an int) they are kept for the next budget of the same votes; a
    Generator draws new folds every call.
    """
    seeded = random_state is None or (isinstance(random_state, (int, np.integer))
                                      and not isinstance(random_state, bool))
    key = ("folds", _votes_key(v), T, resolution, n_folds, random_state if random_state is None
           else int(random_state), heldout, uniform_rows) if seeded else None
    fits = _MIXTURE_PRIORS.get(key) if seeded else None
    if fits is None:
        rng = check_random_state(random_state)
        fold = rng.permutation(len(v)) % n_folds
        fits = []
        for k in range(n_folds):
            mix = VoteMixture(v[fold != k], resolution)
            held = v[fold == k]
            # held out: the rows' own votes, nothing from the other folds; rescaled and unsmoothed, or
            # deconvolved on the fold alone
            own = oob_prior(held, T, window=1) if heldout == "rescaled" else VoteMixture(held, resolution).prior(T)
            fits.append((_with_uniform(mix, len(v) - len(held), T, uniform_rows), own, len(held)))
        if seeded:
            _MIXTURE_PRIORS[key] = fits
    return fits


def cross_validated_budget(oob_votes, T, disagreement, *, n_folds=5, random_state=None, resolution=None,
                           rtol=0.05, max_rounds=8, heldout="deconvolved", uniform_rows=UNIFORM_ROWS):
    """The budget δ' at which the optimal policy's disagreement on held-out rows is δ.

    The rows are split into ``n_folds`` folds.  For fold ``k`` the deconvolved
    out-of-bag prior (:func:`ensvote.priors.deconvolved_oob_prior`) is fitted
    on the other folds, the optimal policy for a budget δ' is built under it,
    and its disagreement is evaluated on fold ``k``'s rows: by default under the
    deconvolved prior of fold ``k``'s rows alone (nothing taken from the other
    folds, so the evaluation is independent of the policy), or with
    ``heldout="rescaled"`` under the histogram of their out-of-bag votes
    rescaled to ``T`` (:func:`ensvote.oob_prior` with ``window=1``: no
    smoothing).  The cross-validated disagreement is the
    row-weighted mean over folds.  Starting at δ' = δ, δ' is rescaled by
    δ / (cross-validated disagreement), then by interpolating (in logs)
    between the two budgets closest to δ on either side, or extrapolating
    from the two smallest if all are above it, until the cross-validated
    disagreement lies in [(1 - ``rtol``) δ, δ] or ``max_rounds`` budgets were
    tried; the largest δ' tried whose
    cross-validated disagreement is at most δ is returned (never more than δ:
    the plug-in budget is the loosest), or the smallest tried if none is.

    Parameters
    ----------
    oob_votes : array_like of int, shape (n_rows, l), l in {2, 3}
        Out-of-bag vote counts; rows without one are ignored.  At least
        ``2 * n_folds`` rows must remain.
    T : int
        Size of the full ensemble, at most :data:`MAX_OPTIMAL_T`.
    disagreement : float in (0, 0.5)
        The target δ.
    n_folds : int >= 2
    random_state : None, int or numpy Generator
        The fold assignment (None: :data:`ensvote.SEED`).
    resolution : int, optional
        Grid of the deconvolution (:func:`~ensvote.priors.deconvolved_oob_prior`).
    rtol : float in (0, 1)
        How far below δ the cross-validated disagreement may stop.
    max_rounds : int >= 1
    heldout : {"deconvolved", "rescaled"}, default="deconvolved"
        How the held-out rows are scored.  Rescaled out-of-bag votes are
        noisier than the urn of ``T`` votes they stand for and see too little
        disagreement; on some problems (sonar, in the book's check against a
        known truth) the budget mode then realizes a few per cent more than
        δ.  The deconvolved fold models that noise; in the same check it
        removes the overshoot at almost no cost in members, with two classes
        and with three, hence the default.
    uniform_rows : float >= 0, default=UNIFORM_ROWS
        The prior the policies are built under (each fold's, and all the
        rows' in :meth:`OptimalRule.from_oob_votes`) is the deconvolved prior
        of its ``m`` rows mixed with the uniform urn prior (every vote vector
        equally likely) in the ratio ``m : uniform_rows``: as if
        ``uniform_rows`` more rows had class probabilities spread uniformly
        over the simplex (the posterior mean of a Dirichlet process with that
        concentration).  The deconvolution puts no mass where no training
        row's votes point, and a policy tuned to it stops early exactly there;
        the cross-validation then has to cut the budget, at a price in
        members.  With three classes and a couple of hundred rows that price
        is large, and a little uniform mass removes most of it (see the
        book's check against a known truth).  The held-out folds are scored
        without it.  0 turns it off.

    Returns
    -------
    CrossValidatedBudget

    Examples
    --------
    >>> import numpy as np
    >>> from ensvote.optimal import cross_validated_budget
    >>> rng = np.random.default_rng(0)
    >>> p, n = rng.beta(0.3, 0.3, 400), rng.binomial(101, 0.368, 400)
    >>> k = rng.binomial(n, p)
    >>> cv = cross_validated_budget(np.column_stack([n - k, k]), 101, 0.01)
    >>> round(cv.budget, 4), round(cv.cv_disagreement, 4), cv.target
    (0.0079, 0.01, 0.01)
    """
    T = _check_T(T)
    delta = check_budget(disagreement)
    v, T, resolution = VoteMixture.checked_votes(oob_votes, T, resolution)
    n_folds = check_positive_int(n_folds, name="n_folds", minimum=2)
    max_rounds = check_positive_int(max_rounds, name="max_rounds")
    if isinstance(rtol, bool) or not isinstance(rtol, numbers.Real) or not 0.0 < float(rtol) < 1.0:
        raise ValueError(f"rtol must be a number strictly between 0 and 1, got {rtol!r}")
    rtol = float(rtol)
    if heldout not in ("rescaled", "deconvolved"):
        raise ValueError(f"heldout must be 'rescaled' or 'deconvolved', got {heldout!r}")
    uniform_rows = _check_uniform_rows(uniform_rows)
    if len(v) < 2 * n_folds:
        raise ValueError(f"cross-validating the budget with n_folds={n_folds} needs at least {2 * n_folds} rows "
                         f"with an out-of-bag vote, got {len(v)}")
    fits = _fold_fits(v, T, resolution, n_folds, random_state, heldout, uniform_rows)
    n_rows = sum(f[2] for f in fits)

    def cv_disagreement(budget):
        return sum(n * policy_value(OptimalRule(T, budget, prior=fit), held).disagreement
                   for fit, held, n in fits) / n_rows

    tried = []
    budget = delta
    for _ in range(max_rounds):
        d = cv_disagreement(budget)
        tried.append((budget, d))
        if (1.0 - rtol) * delta <= d <= delta or (d < delta and budget >= delta):
            break
        below = [(b, x) for b, x in tried if 0.0 < x <= delta]
        above = [(b, x) for b, x in tried if x > delta]
        if below and above:  # log-log secant between the closest budgets on either side of δ
            (b0, x0), (b1, x1) = max(below), min(above)
        elif len(above) >= 2 and not below:  # ... or through the two smallest budgets, both above δ
            (b0, x0), (b1, x1) = sorted(above)[:2]
        else:
            b0 = None
        if b0 is not None and (x1 - x0) * (b1 - b0) > 0:  # an increasing secant only
            w = (math.log(delta) - math.log(x0)) / (math.log(x1) - math.log(x0))
            step = math.exp(math.log(b0) + w * (math.log(b1) - math.log(b0)))
            budget = min(delta, max(step, 0.1 * min(b0, b1)))
        elif d <= 0.0:
            budget = min(delta, 4.0 * budget)
        else:
            budget = min(delta, budget * delta / d)
        if any(abs(budget - b) <= 1e-9 * delta for b, _ in tried):
            break
    ok = [(b, d) for b, d in tried if d <= delta]
    b, d = max(ok) if ok else min(tried)
    return CrossValidatedBudget(float(b), float(d), delta, len(tried))


# --------------------------------------------------------------------------
def policy_value(rule: HaltingRule, prior: PriorLike, *, n_classes: int | None = None) -> PolicyValue:
    """Expected members queried and expected disagreement of a rule under the urn model.

    Urn contents are drawn from ``prior``, their ``T`` votes come in random
    order, and the rule is consulted after each vote; the label at the stop is
    the current majority (lowest index on ties), as in :func:`ensvote.halt`.
    Computed exactly by a forward pass over all vote vectors (two or three
    classes, ``T`` up to :data:`MAX_OPTIMAL_T`); the members agree with
    :func:`ensvote.expected_queries`.

    Parameters
    ----------
    rule : HaltingRule
    prior : None, array of shape (T + 1,) or (support, probs)
        Distribution of the full vote vector; None is uniform, and then
        ``rule`` must have a size ``T`` (e.g. :class:`~ensvote.UrnRule`).
    n_classes : {2, 3}, optional
        Classes of the uniform prior (default 2).

    Returns
    -------
    PolicyValue
        ``(members, disagreement)``.

    Examples
    --------
    The urn rule of Soto et al. (2016) at α = 0.99, uniform prior, 101 members:

    >>> from ensvote import UrnRule, policy_value
    >>> v = policy_value(UrnRule(101, 0.99), None)
    >>> round(v.members, 2), round(v.disagreement, 5)
    (26.52, 0.00681)
    """
    if not isinstance(rule, HaltingRule):
        raise TypeError(f"rule must be a HaltingRule, got {type(rule).__name__}")
    if prior is None and rule.n_members is None:
        raise ValueError("with prior=None the rule must have a size T (e.g. UrnRule); pass a prior instead")
    T = _check_T(rule.n_members if prior is None else check_prior(prior).T)
    parsed = _resolve_prior(prior, T, n_classes)
    l = parsed.n_classes
    rule.prepare(T, l)
    rule.prepare(rule.n_members, l)  # as rule.stop() prepares the rule before it decides
    model = _model(T, parsed)
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
