"""A per-row disagreement guarantee: the stopping policy as a linear program over the urn's vote vectors.

The budget mode of :mod:`ensvote.optimal` bounds the disagreement with the
full ensemble *on average* over the rows, under a prior over the urn's
content.  A per-row guarantee bounds it for **every** content ``n`` of the
urn (every full-ensemble vote vector), with no prior:

    P(label at the stop != argmax n | n) <= δ    for every composition n of T,

the members arriving in random order.  Kalman & Moscovich (2026) write this
for two classes as a linear program over randomised stopping policies; it is
written here for ``l`` classes.  A policy that depends on the vote vector
``t`` only is as good as any history-dependent one (given ``n`` every order
of the votes seen is equally likely), so its variables are, per vote vector,
the fraction of the ``multinomial(t)`` vote sequences that reach ``t`` and
stop there, ``x(t)``, or go on, ``y(t)``.  They obey the flow

    x(t) + y(t) = Σ_i y(t − e_i) t_i / s,    x(0) + y(0) = 1,    y(t) = 0 at s = T,

(``s = sum(t)``; ``x(0) = 0``: a row stops after one member at the
earliest), and the probability that a row whose urn is ``n`` stops at ``t``
is ``x(t) h_n(t)``, with ``h_n(t) = Π_i C(n_i, t_i) / C(T, s)`` the
multivariate hypergeometric law of the first ``s`` votes.  Per composition,
the disagreement ``Σ_t x(t) h_n(t) [argmax t != argmax n]`` is at most δ and
the expected members are ``Σ_t s x(t) h_n(t)``.  Two objectives:

* ``"per-row"`` (Kalman & Moscovich's *minimixed*): the expected members
  averaged over a prior over the compositions (uniform: their "flat");
* ``"minimax"``: the largest expected members of any composition (the near
  ties), with the prior's average as a tie-break of weight
  :data:`TIE_BREAK` (the LP has many optima: it says nothing about the
  easy rows otherwise).

scipy's HiGHS solves the LP.  Its optimum randomises at a few vote vectors;
the table the engine looks up is deterministic: the optimum with those vote
vectors set to go on, evaluated exactly, and re-solved with a smaller δ in
the rare case the rounding breaks the constraint.  Rounding costs the near
ties most, which is all the minimax objective sees: for ``"minimax"`` the
table is the rounded minimax optimum or the rounded per-row one, whichever
has the smaller worst case.

Beyond the linear program's sizes (:data:`LP_T`) the same policies come from
its Lagrangian dual, without any states × urns matrix.  For multipliers
``λ_n >= 0`` on the compositions' disagreement constraints and member
weights ``a_n`` (the prior; for ``"minimax"`` weights ``μ`` on the
compositions, summing to 1, plus the tie-break), the inner problem

    min over policies  Σ_n a_n E[members | n] + Σ_n λ_n P(disagree | n)

is a deterministic stopping problem solved by backward induction over the
vote vectors (:func:`_lagrangian_kernel`): the probability of reaching ``t``
unstopped given ``n`` is the policy's path fraction ``w(t)`` (the same for
every ``n``) times ``h_n(t)``, so stopping at ``t`` costs ``w(t)`` times
``s Σ_n a_n h_n(t) + Σ_n λ_n h_n(t) [argmax t != argmax n]``.  Those sums
come level by level from level ``T`` (where ``h_n(t) = [t = n]``) by
removing a uniformly drawn vote, ``h_n(t) = Σ_i h_n(t + e_i) (t_i + 1) /
(s + 1)``, every term non-negative (no cancellation; the smallest positive
``h_n(t)`` at ``T = 1,001``, ``1 / C(1001, 500) ≈ 4e-300``, is still a
normal double, and a sum that leaves the normal range times a small weight
is negligible beside the costs compared).  Its value minus ``δ Σ_n λ_n``
is a lower bound on the linear program's optimum (a policy mixing
deterministic ones is what the LP optimises over, and the inner minimum over
them is attained at a deterministic one).  The exact members and
disagreement of a policy for every composition are the adjoint recursion run
forward (:func:`_propagate_kernel`), ``O(#states × l)``.

The multipliers come from column generation (Dantzig–Wolfe, which is
Kelley's cutting planes on the dual): a small master LP (HiGHS) mixes the
deterministic policies found so far under the constraints of the
compositions that bind (added lazily, near ties first), its duals price the
next policy, smoothed towards the best dual point so far (Wentges), until
the mixture and the dual bound are within :data:`DUAL_TOL`.  The table is
deterministic: the inner problem's policy at the best multipliers (and at
smaller multiples of them, :data:`_REPAIR_SCALES`), with the multipliers of
the compositions over δ raised until none is (:func:`_repair`), evaluated
exactly; the cheapest wins.  Its objective against the dual bound is the
certified gap (:class:`DualSolution`).  For ``"minimax"``, as with the
linear program, the per-row table is taken instead when its worst case is
smaller.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
from numba import njit
from scipy import sparse, special

from ._cache import BoundedCache
from ._urn import _cell_states, _level_base
from .confidence import compositions
from .engine import code_stride

#: Largest ensemble per number of classes for which the linear program itself is solved: it has two
#: variables per vote vector and one constraint per composition of T (HiGHS takes ~0.7 s at T = 101
#: and ~7 s at T = 201 with two classes, ~0.6 s at T = 21 and ~6 s at T = 41 with three; time grows
#: about as T**3 with two classes).  Above, its Lagrangian dual (:func:`dual_policy`: well under a
#: second at T = 201 with two classes and at T = 41 with three, within 1 % of the program's optimum
#: there, tested against :func:`lp_policy`).
LP_T = {2: 101, 3: 21}
#: Largest ensemble per number of classes for a per-row guarantee (the dual beyond :data:`LP_T`).
MAX_PER_ROW_T = {2: 1001, 3: 201}
#: Relative gap between the master LP's mixture and the dual bound at which column generation stops.
DUAL_TOL = 2e-3
#: The best multipliers are scaled by each of these before the repair to a deterministic table; the
#: cheapest table wins (the repair only raises multipliers, so a lower start explores other tables).
_REPAIR_SCALES = (1.0, 0.7, 0.4)
#: Weight of the prior's average members in the minimax objective (relative to the worst case).
TIE_BREAK = 1e-3

_MODELS = BoundedCache("per-row guarantee linear programs", 8)
#: HiGHS's solvers in the order they are tried (scipy.optimize.linprog's method and options).
_SOLVERS = (("highs", {}), ("highs", {"presolve": False}), ("highs-ipm", {}))


def _log_binom(n, k):
    with np.errstate(invalid="ignore", divide="ignore"):
        out = special.gammaln(n + 1.0) - special.gammaln(k + 1.0) - special.gammaln(n - k + 1.0)
    return np.where((k >= 0) & (k <= n), out, -np.inf)


class PerRowModel:
    """The linear program's data for ``T`` members and ``l`` classes (see the module docstring).

    Attributes: ``states`` (every vote vector with ``sum <= T``, level by
    level), ``sums``, ``urns`` (the compositions of ``T``, rows of
    :func:`ensvote.compositions`), ``H`` (sparse ``h_n(t)``, states × urns),
    ``wrong`` (sparse: ``h_n(t)`` where the current majority of ``t`` is not
    the urn's), ``flow`` and ``flow_rhs`` (the equality constraints on
    ``(x, y)``) and ``parent`` (for each state and class, the state one vote
    before, -1 if none).
    """

    def __init__(self, T, l):
        self.T, self.l = T, l
        self.states = np.concatenate([compositions(s, l) for s in range(T + 1)])
        self.sums = self.states.sum(axis=1)
        self.urns = np.asarray(compositions(T, l))
        S = len(self.states)
        self._radix = radix = code_stride(T, l)  # the engine's mixed-radix code of a vote vector
        lookup = np.full((T + 1) ** l, -1, dtype=np.int64)
        lookup[self.states @ radix] = np.arange(S)
        self.parent = np.full((S, l), -1, dtype=np.int64)
        for i in range(l):
            has = self.states[:, i] > 0
            prev = self.states[has].copy()
            prev[:, i] -= 1
            self.parent[has, i] = lookup[prev @ radix]
        log_h = sum(_log_binom(self.urns[None, :, i], self.states[:, None, i]) for i in range(l))
        log_h = log_h - _log_binom(T, self.sums)[:, None]
        h = np.exp(log_h)
        self.H = sparse.csr_matrix(h)
        lead, full = np.argmax(self.states, axis=1), np.argmax(self.urns, axis=1)  # lowest index on ties
        self.wrong = sparse.csr_matrix(np.where(lead[:, None] != full[None, :], h, 0.0))
        rows = [np.arange(S), np.arange(S)]
        cols = [np.arange(S), S + np.arange(S)]
        vals = [np.ones(S), np.ones(S)]
        for i in range(l):
            has = self.parent[:, i] >= 0
            rows.append(np.nonzero(has)[0])
            cols.append(S + self.parent[has, i])
            vals.append(-self.states[has, i] / self.sums[has])
        self.flow = sparse.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                                      shape=(S, 2 * S))
        self.flow_rhs = (self.sums == 0).astype(float)

    def urn_weights(self, support, probs):
        """A prior ``(support, probs)`` over the urn's content as weights over :attr:`urns`, summing to 1."""
        where = np.full((self.T + 1) ** self.l, -1, dtype=np.int64)
        where[self.urns @ self._radix] = np.arange(len(self.urns))
        weights = np.zeros(len(self.urns))
        np.add.at(weights, where[np.asarray(support, dtype=np.int64) @ self._radix], probs)
        return weights / weights.sum()

    def evaluate(self, stop):
        """Per composition: expected members and disagreement of the policy stopping with probability ``stop[t]``.

        The reach fractions ``w(t)`` follow the flow level by level (they do
        not depend on the urn); every vote stops at ``T``.
        """
        stop = np.where(self.sums == self.T, 1.0, np.where(self.sums == 0, 0.0, stop))
        w = np.zeros(len(self.states))
        go = np.zeros(len(self.states))
        for s in range(self.T + 1):
            lev = np.nonzero(self.sums == s)[0]
            if s == 0:
                w[lev] = 1.0
            else:
                acc = np.zeros(len(lev))
                for i in range(self.l):
                    p = self.parent[lev, i]
                    has = p >= 0
                    acc[has] += go[p[has]] * self.states[lev[has], i] / s
                w[lev] = acc
            go[lev] = w[lev] * (1.0 - stop[lev])
        x = w * stop
        return self.H.T @ (x * self.sums), self.wrong.T @ x


def model(T, l):
    """The (cached) model of ``T`` members and ``l`` classes.

    A :class:`PerRowModel` (the linear program's matrices) up to
    :data:`LP_T`, a :class:`LevelModel` (no matrices) above.
    """
    key = (T, l)
    m = _MODELS.get(key)
    if m is None:
        m = _MODELS[key] = PerRowModel(T, l) if T <= LP_T[l] else LevelModel(T, l)
    return m


def _near_ties(urns):
    """Compositions whose two largest counts differ by at most one (where the worst case lies)."""
    top = np.sort(urns, axis=1)
    return np.nonzero(top[:, -1] - top[:, -2] <= 1)[0]


def _solve_lp(m, delta, weights, objective, worst_set, tie_break=TIE_BREAK):
    from scipy.optimize import linprog  # HiGHS; imported when a per-row policy is first built

    S, C = len(m.states), len(m.urns)
    x_bounds = np.where(m.sums == 0, 0.0, np.inf)
    y_bounds = np.where(m.sums == m.T, 0.0, np.inf)
    mean_cost = m.H @ weights * m.sums  # prior-weighted members per unit of x(t)
    A_ub = [sparse.hstack([m.wrong.T, sparse.csr_matrix((C, S))])]
    b_ub = [np.full(C, delta)]
    if objective == "per-row":
        c = np.concatenate([mean_cost, np.zeros(S)])
        A_eq, bounds = m.flow, np.column_stack([np.zeros(2 * S), np.concatenate([x_bounds, y_bounds])])
    else:  # z >= members(n) for the compositions in worst_set; minimise z + TIE_BREAK * prior mean
        k = len(worst_set)
        members_rows = (m.H[:, worst_set].multiply(m.sums[:, None])).T
        A_ub = [sparse.hstack([A_ub[0], sparse.csr_matrix((C, 1))]),
                sparse.hstack([members_rows, sparse.csr_matrix((k, S)), -sparse.csr_matrix(np.ones((k, 1)))])]
        b_ub.append(np.zeros(k))
        c = np.concatenate([tie_break * mean_cost, np.zeros(S), [1.0]])
        A_eq = sparse.hstack([m.flow, sparse.csr_matrix((S, 1))])
        bounds = np.column_stack([np.concatenate([np.zeros(2 * S), [0.0]]),
                                  np.concatenate([x_bounds, y_bounds, [np.inf]])])
    A_ub, b_ub, A_eq = sparse.vstack(A_ub).tocsr(), np.concatenate(b_ub), A_eq.tocsr()
    # the LP is feasible for every δ > 0 (stop at T); HiGHS's presolve can stall on a prior with a few
    # support points (status 4, "model status unknown"), so it is tried without presolve, then by interior point
    for method, options in _SOLVERS:
        res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=m.flow_rhs, bounds=bounds, method=method,
                      options=options)
        if res.status == 0:
            break
    else:  # pragma: no cover - not seen
        raise RuntimeError(f"the per-row linear program failed: {res.message}")
    x, y = res.x[:S], res.x[S:2 * S]
    reach = x + y
    theta = np.divide(x, reach, out=np.zeros(S), where=reach > 1e-15)
    return np.clip(theta, 0.0, 1.0), res


def per_row_policy(T, l, delta, weights, objective="per-row", max_rounds=20):
    """The deterministic per-row policy: ``(stops, members, disagreement, optimum)``.

    ``stops`` is a boolean per vote vector of :attr:`PerRowModel.states`;
    ``members`` and ``disagreement`` are per composition of ``T``
    (:attr:`PerRowModel.urns`), exactly evaluated, every disagreement at
    most δ; ``optimum`` is the LP's objective value at δ (randomised
    policies allowed): the prior-weighted members (``"per-row"``) or the
    worst composition's members (``"minimax"``); above :data:`LP_T`, the
    dual bound on it (:func:`dual_policy`), at most the LP's optimum.
    ``weights`` is the prior over the compositions (sums to 1).
    """
    m = model(T, l)
    weights = np.asarray(weights, dtype=float)
    if isinstance(m, LevelModel):  # above the linear program's sizes: its dual
        return _dual_table(m, delta, weights, objective)
    return lp_policy(m, delta, weights, objective, max_rounds)


def _lp_solution(m, delta, weights, objective, worst_set, tie_break=TIE_BREAK):
    """The linear program's (randomised) solution: ``(theta, objective value, worst_set)``.

    For minimax the worst case is constrained at the compositions of
    ``worst_set`` (the near ties to begin with); any other composition whose
    members exceed the solution's worst case joins the set and the program
    is solved again.
    """
    while True:
        theta, res = _solve_lp(m, delta, weights, objective, worst_set, tie_break)
        if objective != "minimax":
            return theta, float(res.fun), worst_set
        members, _ = m.evaluate(theta)
        z = res.x[-1]
        over = np.nonzero(members > z * (1 + 1e-9) + 1e-9)[0]
        if not len(over):  # the worst case lies among the constrained compositions
            return theta, float(z), worst_set
        worst_set = np.union1d(worst_set, over)  # pragma: no cover - not seen for l <= 3


def lp_optimum(m, delta, weights, objective="per-row", tie_break=TIE_BREAK):
    """The linear program's randomised optimum on a :class:`PerRowModel` ``m``: ``(members, disagreement,
    value)``, members and disagreement per composition (:attr:`PerRowModel.urns`), ``value`` the objective.

    ``tie_break=0.0`` gives the minimax program as Kalman & Moscovich state
    it (the worst composition's members only): it has many optima, and the
    solver returns one.
    """
    theta, value, _ = _lp_solution(m, delta, np.asarray(weights, dtype=float), objective, _near_ties(m.urns),
                                   tie_break)
    members, disagreement = m.evaluate(theta)
    return members, disagreement, value


def lp_policy(m, delta, weights, objective="per-row", max_rounds=20):
    """:func:`per_row_policy` by the linear program itself, on a :class:`PerRowModel` ``m`` of any size."""
    weights = np.asarray(weights, dtype=float)
    worst_set = _near_ties(m.urns)
    target, optimum = delta, None
    for _ in range(max_rounds):
        theta, value, worst_set = _lp_solution(m, target, weights, objective, worst_set)
        if optimum is None:
            optimum = value
        stops = theta >= 1.0 - 1e-9
        stops[m.sums == m.T] = True
        stops[m.sums == 0] = False
        members, disagreement = m.evaluate(stops.astype(float))
        worst = float(disagreement.max())
        if worst <= delta:
            found = _round_up(m, stops, theta, members, disagreement, delta, weights, objective)
            if objective == "minimax":  # rounding hurts the near ties most: the per-row table may do better there
                other = lp_policy(m, delta, weights, "per-row", max_rounds)[:3]
                if _cost(other[1], weights, "minimax") < _cost(found[1], weights, "minimax"):
                    found = other
            return found + (optimum,)
        target = target * (1.0 - 1e-6) - (worst - delta)  # rounding (or the LP's tolerance) went over δ
    raise RuntimeError("no deterministic policy within the per-row budget was found")  # pragma: no cover


def _cost(members, weights, objective):
    """The objective of a policy with these members per composition."""
    mean = float(weights @ members)
    return mean if objective == "per-row" else float(members.max()) + TIE_BREAK * mean


def _round_up(m, stops, theta, members, disagreement, delta, weights, objective):
    """Where the optimum randomises, stop outright instead, one vote vector at a time, while it pays and δ holds."""
    def cost(mem):
        return _cost(mem, weights, objective)

    best = cost(members)
    for k in np.argsort(-theta, kind="stable"):
        if not 1e-9 < theta[k] < 1.0 - 1e-9 or stops[k]:
            continue
        trial = stops.copy()
        trial[k] = True
        mem, dis = m.evaluate(trial.astype(float))
        if dis.max() <= delta and cost(mem) < best:
            stops, members, disagreement, best = trial, mem, dis, cost(mem)
    return stops, members, disagreement


# --------------------------------------------------------------------------
# beyond the linear program's sizes: its Lagrangian dual, level by level
# --------------------------------------------------------------------------
# The vote vectors of all levels are numbered one after the other, level by
# level (``base[s]`` is the first of level ``s``), and within a level in the
# order of :func:`ensvote.compositions` (lexicographic): ``t_0 = 0 .. s`` with
# two classes, rows ``t_0 = a`` of ``s + 1 - a`` vote vectors ``t_1 = 0 .. s -
# a`` with three, the layout of :attr:`PerRowModel.states` (and of the optimal
# policy's model, :mod:`ensvote._bellman`, whose helpers number them).  Within a row the
# cell ``g + b`` of level ``s + 1`` (``g`` the row's first cell there, ``b =
# t_1``; ``b = t_0`` and ``g = 0`` with two classes) is ``t + e_last``, the next
# one ``t + e_1`` and, with three classes, ``g + b + n + 1`` (``n = s + 1 - a``
# the row's length at level ``s``) is ``t + e_0``; with two, ``g + b + 1`` is
# ``t + e_0``.
@njit(cache=True, nogil=True, inline="always")
def _lead(d, t0, t1, t2):
    """The current majority of ``(t0, t1[, t2])``, the lowest class on ties (as :func:`numpy.argmax`)."""
    if d == 1:
        return 0 if t0 >= t1 else 1
    if t0 >= t1 and t0 >= t2:
        return 0
    return 1 if t1 >= t2 else 2


@njit(cache=True, nogil=True, inline="always")
def _stop_cost(s, lead, d, x0, x1, x2, x3):
    """``s x0`` plus the multiplier sums of the labels other than ``lead`` (``x1, x2[, x3]``), in class order."""
    cost = s * x0
    if lead != 0:
        cost += x1
    if lead != 1:
        cost += x2
    if d == 2 and lead != 2:
        cost += x3
    return cost


@njit(cache=True, nogil=True)
def _lagrangian_kernel(T, d, base, weights, stops):
    """Backward induction for ``min Σ_n a_n E[members | n] + Σ_n λ_n P(disagree | n)``; returns its value.

    ``weights`` has ``l + 1`` rows over the compositions of ``T`` (level
    ``T``'s cells): the member weights ``a`` and, row ``1 + c``, the
    multipliers of the compositions whose majority is ``c``.  Level by level
    down, ``mass_q(t) = Σ_i mass_q(t + e_i) (t_i + 1) / (s + 1)`` gives every row's
    ``Σ_n weights_q(n) h_n(t)``; stopping at ``t`` costs ``s mass_0(t) + Σ_{c !=
    lead(t)} mass_{1+c}(t)`` per unit of path fraction, going on the same
    average of the cost to go above.  ``stops`` (one per cell) receives the
    decisions: go on at ``s = 0``, stop at ``T``, elsewhere stop when strictly
    cheaper.  The ``l + 1`` sums are held in one array each (``m0 .. m3``,
    ``m3`` unused with two classes), written out rather than looped over
    (1.4 to 1.7 times faster with three classes).
    """
    W = base[T + 1] - base[T]
    # level s + 1 (filled first at level T) and level s: the weighted hypergeometric sums and the cost to go
    m0, m1, m2, m3 = np.zeros(W), np.zeros(W), np.zeros(W), np.zeros(W)
    h0, h1, h2, h3 = np.zeros(W), np.zeros(W), np.zeros(W), np.zeros(W)
    cost_up, cost_here = np.zeros(W), np.zeros(W)
    k = 0
    for a in range(T + 1 if d == 2 else 1):  # level T: stop, the composition is t
        for b in range(T + 1 - a if d == 2 else T + 1):
            t0, t1, t2 = (b, T - b, 0) if d == 1 else (a, b, T - a - b)
            m0[k], m1[k], m2[k] = weights[0, k], weights[1, k], weights[2, k]
            if d == 2:
                m3[k] = weights[3, k]
            cost_up[k] = _stop_cost(T, _lead(d, t0, t1, t2), d, m0[k], m1[k], m2[k], m3[k])
            stops[base[T] + k] = True
            k += 1
    for s in range(T - 1, -1, -1):
        inv = 1.0 / (s + 1)
        k, g = 0, 0
        for a in range(s + 1 if d == 2 else 1):
            n = s + 1 - a if d == 2 else s + 1
            for b in range(n):
                if d == 1:
                    t0, t1, t2 = b, s - b, 0
                    i0, i1 = g + b + 1, g + b
                    c0, c1 = (t0 + 1) * inv, (t1 + 1) * inv
                    x0 = c0 * m0[i0] + c1 * m0[i1]
                    x1 = c0 * m1[i0] + c1 * m1[i1]
                    x2 = c0 * m2[i0] + c1 * m2[i1]
                    x3 = 0.0
                    go = c0 * cost_up[i0] + c1 * cost_up[i1]
                else:
                    t0, t1, t2 = a, b, s - a - b
                    i0, i1, i2 = g + n + 1 + b, g + b + 1, g + b
                    c0, c1, c2 = (t0 + 1) * inv, (t1 + 1) * inv, (t2 + 1) * inv
                    x0 = c0 * m0[i0] + c1 * m0[i1] + c2 * m0[i2]
                    x1 = c0 * m1[i0] + c1 * m1[i1] + c2 * m1[i2]
                    x2 = c0 * m2[i0] + c1 * m2[i1] + c2 * m2[i2]
                    x3 = c0 * m3[i0] + c1 * m3[i1] + c2 * m3[i2]
                    go = c0 * cost_up[i0] + c1 * cost_up[i1] + c2 * cost_up[i2]
                h0[k], h1[k], h2[k], h3[k] = x0, x1, x2, x3
                stop, cost = False, 0.0
                if s > 0:
                    cost = _stop_cost(s, _lead(d, t0, t1, t2), d, x0, x1, x2, x3)
                    stop = cost < go
                stops[base[s] + k] = stop
                cost_here[k] = cost if stop else go
                k += 1
            g += n + 1
        m0, h0 = h0, m0
        m1, h1 = h1, m1
        m2, h2 = h2, m2
        m3, h3 = h3, m3
        cost_up, cost_here = cost_here, cost_up
    return cost_up[0]


@njit(cache=True, nogil=True)
def _propagate_kernel(T, d, base, stop):
    """Per composition of ``T``: expected members (row 0) and the probability of stopping labelled ``c`` (row ``1 + c``).

    The adjoint of :func:`_lagrangian_kernel`'s recursion, level by level up:
    each cell holds the path fraction ``w(t)`` still going and, per
    quantity, the part of the multinomial(``t``) vote sequences already
    stopped (weighted by the members, or labelled ``c``); a cell passes
    ``(t_i + 1) / (s + 1)`` of each to ``t + e_i``.  At level ``T`` the cell
    of ``n`` holds ``Σ_t x(t) h_n(t) q(t)``.  ``stop`` is the stop
    probability per cell (0 at ``s = 0`` and 1 at ``T`` whatever it says).
    """
    l = d + 1
    K = l + 2  # path fraction still going, members, stop mass per label
    W = base[T + 1] - base[T]
    flow, flow_up = np.zeros((K, W)), np.zeros((K, W))
    flow[0, 0] = 1.0
    for s in range(T + 1):
        inv = 1.0 / (s + 1)
        if s < T:
            for q in range(K):
                for k in range(base[s + 2] - base[s + 1]):
                    flow_up[q, k] = 0.0
        k, g = 0, 0
        for a in range(s + 1 if d == 2 else 1):
            n = s + 1 - a if d == 2 else s + 1
            for b in range(n):
                if d == 1:
                    t0, t1, t2 = b, s - b, 0
                else:
                    t0, t1, t2 = a, b, s - a - b
                w = flow[0, k]
                p = 0.0 if s == 0 else (1.0 if s == T else stop[base[s] + k])
                x = w * p
                flow[1, k] += x * s
                flow[2 + _lead(d, t0, t1, t2), k] += x
                flow[0, k] = w - x
                if s < T:
                    if d == 1:
                        i0, i1 = g + b + 1, g + b
                        c0, c1 = (t0 + 1) * inv, (t1 + 1) * inv
                        for q in range(K):
                            flow_up[q, i0] += c0 * flow[q, k]
                            flow_up[q, i1] += c1 * flow[q, k]
                    else:
                        i0, i1, i2 = g + n + 1 + b, g + b + 1, g + b
                        c0, c1, c2 = (t0 + 1) * inv, (t1 + 1) * inv, (t2 + 1) * inv
                        for q in range(K):
                            v = flow[q, k]
                            flow_up[q, i0] += c0 * v
                            flow_up[q, i1] += c1 * v
                            flow_up[q, i2] += c2 * v
                k += 1
            g += n + 1
        if s < T:
            flow, flow_up = flow_up, flow
    return flow[1:].copy()


class LevelModel:
    """The per-row problem of ``T`` members and ``l`` classes without its linear program's matrices.

    The attributes :class:`PerRowModel` shares with it: ``states`` (every
    vote vector with ``sum <= T``, level by level, in the same order),
    ``sums`` and ``urns`` (the compositions of ``T``); also ``majority``
    (each composition's majority, lowest class on ties).  :meth:`evaluate`
    gives exactly what :meth:`PerRowModel.evaluate` gives, by
    :func:`_propagate_kernel`; :meth:`lagrangian` solves the inner problem
    of the dual (:func:`_lagrangian_kernel`).
    """

    def __init__(self, T, l):
        if l not in (2, 3):
            raise ValueError(f"the per-row model is built for 2 or 3 classes, got l={l}")
        self.T, self.l = T, l
        self._base = _level_base(T, l - 1)
        self.states = _cell_states(T, l - 1, self._base).astype(np.int64)
        self.sums = self.states.sum(axis=1)
        self.urns = np.asarray(compositions(T, l))
        self.majority = np.argmax(self.urns, axis=1)
        self._other = np.arange(l)[:, None] != self.majority[None, :]  # label c is not composition n's majority

    def urn_index(self, urns):
        """The position in :attr:`urns` of each composition of ``T`` (rows of ``urns``)."""
        urns = np.asarray(urns, dtype=np.int64)
        if self.l == 2:
            return urns[:, 0]
        a = urns[:, 0]
        return a * (self.T + 1) - a * (a - 1) // 2 + urns[:, 1]

    def urn_weights(self, support, probs):
        """A prior ``(support, probs)`` over the urn's content as weights over :attr:`urns`, summing to 1."""
        weights = np.zeros(len(self.urns))
        np.add.at(weights, self.urn_index(support), probs)
        return weights / weights.sum()

    def evaluate(self, stop):
        """Per composition: expected members and disagreement of the policy stopping with probability ``stop[t]``."""
        stop = np.ascontiguousarray(stop, dtype=np.float64)
        out = _propagate_kernel(self.T, self.l - 1, self._base, stop)
        return out[0], (out[1:] * self._other).sum(axis=0)

    def lagrangian(self, members_weight, multipliers):
        """``(value, stops)``: the deterministic policy minimising ``Σ_n a_n E[members | n] + Σ_n λ_n P(disagree | n)``."""
        weights = np.zeros((self.l + 1, len(self.urns)))
        weights[0] = members_weight
        weights[1:] = np.where(self._other, 0.0, multipliers[None, :])
        stops = np.empty(len(self.states), dtype=bool)
        value = _lagrangian_kernel(self.T, self.l - 1, self._base, weights, stops)
        return value, stops


class DualSolution(NamedTuple):
    """A deterministic per-row policy from the dual (:func:`dual_policy`), with its certificate."""

    stops: np.ndarray  #: bool per vote vector (:attr:`LevelModel.states`)
    members: np.ndarray  #: expected members per composition, exact
    disagreement: np.ndarray  #: disagreement per composition, exact, every one at most δ
    bound: float  #: the dual's lower bound on the linear program's optimum of the objective
    mixture: float  #: the master LP's mixture of policies: an upper bound on that optimum
    value: float  #: the table's objective (prior mean, or worst composition's members)
    iterations: int  #: column generation rounds

    @property
    def gap(self):
        """The table's objective over the dual bound, minus one (certified: the LP optimum lies between)."""
        return self.value / self.bound - 1.0


def _master(costs, D, M, rows_d, rows_m, delta, minimax):
    """The master LP over the policies so far: ``(theta, z, λ on rows_d, μ on rows_m, objective)``."""
    from scipy.optimize import linprog

    K = len(costs)
    A = np.array([d[rows_d] for d in D]).T
    if not minimax:
        c, A_ub, b_ub, A_eq = np.asarray(costs), A, np.full(len(rows_d), delta), np.ones((1, K))
    else:
        B = np.array([m[rows_m] for m in M]).T
        c = np.append(TIE_BREAK * np.asarray(costs), 1.0)
        A_ub = np.block([[A, np.zeros((len(rows_d), 1))], [B, -np.ones((len(rows_m), 1))]])
        b_ub = np.concatenate([np.full(len(rows_d), delta), np.zeros(len(rows_m))])
        A_eq = np.append(np.ones(K), 0.0)[None, :]
    for method, options in _SOLVERS:
        res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0], bounds=(0, None), method=method,
                      options=options)
        if res.status == 0:
            break
    else:  # pragma: no cover - not seen
        raise RuntimeError(f"the per-row master linear program failed: {res.message}")
    duals = np.maximum(-res.ineqlin.marginals, 0.0)
    z = float(res.x[-1]) if minimax else None
    return res.x[:K], z, duals[:len(rows_d)], duals[len(rows_d):], float(res.fun)


def dual_policy(m, delta, weights, objective="per-row", tol=DUAL_TOL, max_iter=600, smoothing=0.8):
    """A deterministic per-row policy from the Lagrangian dual of the linear program (module docstring).

    Parameters
    ----------
    m : LevelModel
    delta : float
        Every composition's disagreement at most δ.
    weights : ndarray of shape (len(m.urns),)
        The prior over the compositions (sums to 1).
    objective : {"per-row", "minimax"}
    tol : float, default=DUAL_TOL
        Column generation stops once the master's mixture is within this
        relative gap of the best dual bound.
    max_iter : int, default=600
        Column generation rounds at most (the bound stays valid if reached).
    smoothing : float, default=0.8
        Wentges's smoothing: the next policy is priced at this mix of the best
        dual point so far and the master's duals.

    Returns
    -------
    DualSolution
        With ``value <= (1 + gap) * bound`` and ``bound`` at most the linear
        program's optimum.
    """
    minimax = objective == "minimax"
    C = len(m.urns)
    near = _near_ties(m.urns)
    costs, D, M, age = [], [], [], []

    def add(stops):
        members, disagreement = m.evaluate(stops)
        costs.append(float(weights @ members))
        D.append(disagreement)
        M.append(members)
        age.append(0)

    def price(mu, lam):
        value, stops = m.lagrangian(TIE_BREAK * weights + mu if minimax else weights, lam)
        add(stops)
        return value - delta * lam.sum()

    add(m.sums == m.T)  # stop at T only: disagrees never, keeps the master feasible
    mu0 = np.zeros(C)
    if minimax:
        mu0[near] = 1.0 / len(near)
    best, lam_best, mu_best = -np.inf, None, mu0
    for L in np.geomspace(1e-4, 10.0, 12) * m.T / (delta * len(near)):  # one multiplier on the near ties
        lam = np.zeros(C)
        lam[near] = L
        bound = price(mu0, lam)
        if bound > best:
            best, lam_best = bound, lam
    rows_d = near.copy()
    rows_m = near.copy() if minimax else np.zeros(0, dtype=np.int64)
    it = 0
    for it in range(1, max_iter + 1):
        while True:  # the master, with the constraints of the compositions it breaks added
            theta, z, lam_r, mu_r, upper = _master(costs, D, M, rows_d, rows_m, delta, minimax)
            used = np.nonzero(theta > 0)[0]
            mix_d = sum(theta[k] * D[k] for k in used)
            add_d = np.setdiff1d(np.nonzero(mix_d > delta * (1 + 1e-9))[0], rows_d)
            add_m = np.zeros(0, dtype=np.int64)
            if minimax:
                mix_m = sum(theta[k] * M[k] for k in used)
                add_m = np.setdiff1d(np.nonzero(mix_m > z * (1 + 1e-9) + 1e-9)[0], rows_m)
            if not len(add_d) and not len(add_m):
                break
            rows_d, rows_m = np.union1d(rows_d, add_d), np.union1d(rows_m, add_m)
        if upper - best <= tol * abs(best):
            break
        lam, mu = np.zeros(C), np.zeros(C)
        lam[rows_d] = lam_r
        mu[rows_m] = mu_r
        lam = smoothing * lam_best + (1 - smoothing) * lam
        mu = smoothing * mu_best + (1 - smoothing) * mu
        bound = price(mu, lam)
        if bound > best:
            best, lam_best, mu_best = bound, lam, mu
        for k in range(len(age) - 1):  # the policies the master left out for long are dropped
            age[k] = 0 if theta[k] > 0 else age[k] + 1
        keep = [k for k in range(len(age)) if k == 0 or age[k] <= 50]
        if len(keep) < len(age):
            costs, D, M, age = ([x[k] for k in keep] for x in (costs, D, M, age))
    a = TIE_BREAK * weights + mu_best if minimax else weights
    found = None
    for scale in _REPAIR_SCALES:  # a smaller start may end at a cheaper feasible table
        trial = _repair(m, delta, a, scale * lam_best)
        if found is None or _cost(trial[1], weights, objective) < _cost(found[1], weights, objective):
            found = trial
    stops, members, disagreement = found
    if minimax:  # the bound on the worst composition's members alone: the multipliers without the tie-break
        value, _ = m.lagrangian(mu_best, lam_best)
        bound, mixture, table = value - delta * lam_best.sum(), z, float(members.max())
    else:
        bound, mixture, table = best, upper, float(weights @ members)
    return DualSolution(stops, members, disagreement, float(bound), float(mixture), table, it)


def _repair(m, delta, members_weight, lam, max_iter=400, step=0.3):
    """The inner problem's policy at these multipliers, those of the compositions over δ raised until none is.

    A composition over δ has its multiplier multiplied by ``1 + step *
    clip(excess, 0.1, 1)`` (``excess`` its disagreement over δ, minus one),
    or set to a hundredth of the mean positive multiplier if it had none.
    If that does not end within ``max_iter`` rounds, the policy stopping at
    ``T`` only (never disagreeing) is returned.
    """
    lam = lam.copy()
    positive = lam[lam > 0]
    floor = 1e-2 * positive.mean() if len(positive) else m.T / (delta * len(m.urns))
    for _ in range(max_iter):
        _, stops = m.lagrangian(members_weight, lam)
        members, disagreement = m.evaluate(stops)
        over = disagreement > delta
        if not over.any():
            return stops, members, disagreement
        excess = np.clip(disagreement[over] / delta - 1.0, 0.1, 1.0)
        lam[over] = np.maximum(lam[over] * (1.0 + step * excess), floor)
    stops = m.sums == m.T  # pragma: no cover - not seen
    return (stops,) + m.evaluate(stops)  # pragma: no cover


def _dual_table(m, delta, weights, objective):
    """:func:`per_row_policy` above :data:`LP_T`: ``(stops, members, disagreement, bound)`` from the dual.

    As with the linear program, the minimax table is the minimax or the
    per-row one, whichever has the smaller worst case.
    """
    sol = dual_policy(m, delta, weights, objective)
    found = sol[:3]
    if objective == "minimax":
        other = dual_policy(m, delta, weights, "per-row")[:3]
        if _cost(other[1], weights, "minimax") < _cost(found[1], weights, "minimax"):
            found = other
    return tuple(found) + (sol.bound,)
