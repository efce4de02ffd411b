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
"""

from __future__ import annotations

import numpy as np
from scipy import sparse, special

from ._cache import BoundedCache
from .confidence import compositions
from .engine import code_stride

#: Largest ensemble per number of classes for a per-row guarantee: the linear program has two
#: variables per vote vector and one constraint per composition of T (HiGHS takes ~6 s at T = 201
#: with two classes, ~3 s at T = 41 with three; time grows about as T**3 with two classes).
MAX_PER_ROW_T = {2: 201, 3: 41}
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
    """The (cached) :class:`PerRowModel` of ``T`` members and ``l`` classes."""
    key = (T, l)
    m = _MODELS.get(key)
    if m is None:
        m = _MODELS[key] = PerRowModel(T, l)
    return m


def _near_ties(urns):
    """Compositions whose two largest counts differ by at most one (where the worst case lies)."""
    top = np.sort(urns, axis=1)
    return np.nonzero(top[:, -1] - top[:, -2] <= 1)[0]


def _solve_lp(m, delta, weights, objective, worst_set):
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
        c = np.concatenate([TIE_BREAK * mean_cost, np.zeros(S), [1.0]])
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
    worst composition's members (``"minimax"``).  ``weights`` is the prior
    over the compositions (sums to 1).
    """
    m = model(T, l)
    weights = np.asarray(weights, dtype=float)
    worst_set = _near_ties(m.urns)
    target, optimum = delta, None
    for _ in range(max_rounds):
        while True:
            theta, res = _solve_lp(m, target, weights, objective, worst_set)
            if objective != "minimax":
                break
            members, _ = m.evaluate(theta)
            z = res.x[-1]
            over = np.nonzero(members > z * (1 + 1e-9) + 1e-9)[0]
            if not len(over):  # the worst case lies among the constrained compositions
                break
            worst_set = np.union1d(worst_set, over)  # pragma: no cover - not seen for l <= 3
        if optimum is None:
            optimum = float(res.fun) if objective == "per-row" else float(res.x[-1])
        stops = theta >= 1.0 - 1e-9
        stops[m.sums == m.T] = True
        stops[m.sums == 0] = False
        members, disagreement = m.evaluate(stops.astype(float))
        worst = float(disagreement.max())
        if worst <= delta:
            found = _round_up(m, stops, theta, members, disagreement, delta, weights, objective)
            if objective == "minimax":  # rounding hurts the near ties most: the per-row table may do better there
                other = per_row_policy(T, l, delta, weights, "per-row", max_rounds)[:3]
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
