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

import hashlib
import math
import numbers
from typing import NamedTuple

import numpy as np

from ._cache import BoundedCache
from ._utils import check_random_state
from ._validation import check_positive_int
from .confidence import check_prior, uniform_prior
from .priors import _check_deconvolution_arguments, _VoteMixture, oob_prior
from .rules import HaltingRule, _prior_key

__all__ = ["OptimalRule", "PolicyValue", "policy_value", "cross_validated_budget", "CrossValidatedBudget",
           "MAX_T", "SUPPORTED_CLASSES"]

#: Largest ensemble size the optimal policy is computed for.
MAX_T = 101
#: Numbers of classes the optimal policy is computed for.
SUPPORTED_CLASSES = (2, 3)

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
# validation
# --------------------------------------------------------------------------
def _check_T(T):
    T = check_positive_int(T, name="T")
    if T > MAX_T:
        raise ValueError(f"T={T} is above the largest ensemble the optimal policy is computed for (T <= {MAX_T})")
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


def _check_price(value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"price must be a non-negative real number, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"price must be a finite number >= 0, got {value}")
    return value


def _resolve_prior(prior, T, n_classes):
    """``(support, probs, l)`` of a prior (None: uniform over ``n_classes``)."""
    if prior is None:
        l = 2 if n_classes is None else check_positive_int(n_classes, name="n_classes", minimum=2)
        check_classes(l)
        support, probs = check_prior(uniform_prior(T, l), T)
        return support, probs, l
    hint = getattr(prior, "n_classes", None)  # e.g. a many-class prior object from oob_prior
    if isinstance(hint, numbers.Integral):
        check_classes(int(hint))
    support, probs = check_prior(prior, T)
    l = support.shape[1]
    if n_classes is not None and check_positive_int(n_classes, name="n_classes", minimum=2) != l:
        raise ValueError(f"n_classes={n_classes} but the prior is over {l} classes")
    check_classes(l)
    return support, probs, l


# --------------------------------------------------------------------------
# the urn model, level by level
# --------------------------------------------------------------------------
class _UrnModel:
    """Everything the Bellman recursion needs, for every vote vector, level by level.

    Level ``s`` (``s`` votes seen) holds arrays of shape ``(s + 1,) * (l - 1)``
    indexed by the first ``l - 1`` counts; the last count is ``s`` minus their
    sum, and entries where that is negative are invalid.  Per level:

    * ``valid``: the vote vector exists and has positive probability under the prior;
    * ``loss``: ``d(t) = P(full majority != current majority | t)``;
    * ``trans[i]``: ``p_i(t)``, the probability that the next vote is for class ``i``.

    The marginal probability ``q(t)`` of seeing the vote vector ``t`` after
    ``s`` draws obeys ``q(t) = Σ_i q(t + e_i) (t_i + 1) / (s + 1)`` (drop one
    of ``s + 1`` draws at random), and so does the part ``r_c(t)`` of it whose
    urn has majority ``c``; both are run from ``q = P(T)`` at ``s = T`` down in
    log space.  Then ``d(t) = Σ_{c ≠ c(t)} r_c(t) / q(t)`` and
    ``p_i(t) = q(t + e_i) (t_i + 1) / ((s + 1) q(t))``.
    """

    def __init__(self, T, support, probs):
        self.T = T
        self.l = l = support.shape[1]
        d = l - 1
        with np.errstate(divide="ignore"):
            logp = np.log(probs)
        final = np.argmax(support, axis=1)
        # terminal level: log q and log r_c over the grid of the first l - 1 counts
        logq = np.full((T + 1,) * d, -np.inf)
        logr = np.full((l,) + (T + 1,) * d, -np.inf)
        idx = tuple(support[:, :-1].T)
        logq[idx] = logp
        logr[(final,) + idx] = logp
        self.valid, self.loss, self.trans, self.counts = ([None] * (T + 1) for _ in range(4))
        self._store(T, logq, logr)
        for s in range(T - 1, -1, -1):
            t = self._grid(s)
            shp = (s + 1,) * d
            nr_terms, lw = [], []
            for i in range(l):
                sl = self._shift(s, i)
                with np.errstate(divide="ignore", invalid="ignore"):
                    w = np.log(np.maximum(t[i] + 1.0, 0.0))
                w = np.broadcast_to(w, shp)
                lw.append(logq[sl] + w)
                nr_terms.append(logr[(slice(None),) + sl] + w)
            stack = np.stack(lw)
            with np.errstate(invalid="ignore"):
                new_q = np.logaddexp.reduce(stack, axis=0) - np.log(s + 1.0)
                new_r = np.logaddexp.reduce(np.stack(nr_terms), axis=0) - np.log(s + 1.0)
                # p_i(t) = q(t + e_i) (t_i + 1) / ((s + 1) q(t))
                trans = np.exp(stack - np.log(s + 1.0) - new_q)
            ok = np.isfinite(new_q) & (t[-1] >= 0)
            trans = np.where(ok, trans, 0.0)
            self.trans[s] = trans
            logq, logr = np.where(ok, new_q, -np.inf), np.where(ok, new_r, -np.inf)
            self._store(s, logq, logr)
        self.trans[T] = None

    def _grid(self, s):
        """The counts ``t_0 .. t_{l-1}`` at level ``s`` as broadcastable arrays (last may be negative)."""
        g = list(np.indices((s + 1,) * (self.l - 1), sparse=True))
        return g + [s - sum(g)]

    def _shift(self, s, i):
        """Index of level ``s + 1`` at ``t + e_i`` for every ``t`` of level ``s``."""
        d = self.l - 1
        return tuple(slice(1, s + 2) if a == i else slice(0, s + 1) for a in range(d))

    def _store(self, s, logq, logr):
        t = self._grid(s)
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
    def solve(self, price):
        """Bellman recursion at price λ: ``(value at the start, stop masks per level)``."""
        T, l = self.T, self.l
        V = np.zeros((T + 1,) * (l - 1))
        stops = [None] * (T + 1)
        stops[T] = self.valid[T].copy()
        for s in range(T - 1, -1, -1):
            cont = 1.0 + sum(self.trans[s][i] * V[self._shift(s, i)] for i in range(l))
            if s == 0:
                stop = np.zeros(cont.shape, dtype=bool)
            else:
                stop = self.valid[s] & (price * self.loss[s] <= cont)
            stops[s] = stop
            V = np.where(stop, price * self.loss[s], cont)
        return float(V.reshape(-1)[0]), stops

    def evaluate(self, stops, random_state=None, stop_prob=0.0):
        """Expected members and disagreement of a policy (stop masks per level).

        ``random_state=(s, index)`` makes the policy stop at that one vote
        vector with probability ``stop_prob`` instead of following ``stops``.
        """
        T, l = self.T, self.l
        reach = np.ones((1,) * (l - 1))
        members = disagreement = 0.0
        for s in range(T):
            p = stops[s].astype(float)
            if random_state is not None and random_state[0] == s:
                p[random_state[1]] = stop_prob
            members += float(np.sum(reach * (1.0 - p)))
            disagreement += float(np.sum(reach * p * self.loss[s]))
            cont = reach * (1.0 - p)
            nxt = np.zeros((s + 2,) * (l - 1))
            for i in range(l):
                nxt[self._shift(s, i)] += cont * self.trans[s][i]
            reach = nxt
        return PolicyValue(members, disagreement)

    def flip_effects(self, stops):
        """What stopping at each vote vector, where ``stops`` goes on, would change.

        Returns per level ``(d_members, d_disagreement)``: the exact change of
        the policy's expected members and disagreement if it stopped at that
        vote vector (and nowhere else differently).  One forward pass gives the
        probability of reaching each vote vector, one backward pass the members
        still to come and the disagreement still to arise after going on there.
        """
        T, l = self.T, self.l
        reach = [np.ones((1,) * (l - 1))]
        for s in range(T):
            cont = reach[s] * (1.0 - stops[s])
            nxt = np.zeros((s + 2,) * (l - 1))
            for i in range(l):
                nxt[self._shift(s, i)] += cont * self.trans[s][i]
            reach.append(nxt)
        nval = np.zeros((T + 1,) * (l - 1))
        dval = np.zeros((T + 1,) * (l - 1))
        out = [None] * (T + 1)
        out[T] = (np.zeros_like(nval), np.zeros_like(dval))
        for s in range(T - 1, -1, -1):
            n_go = 1.0 + sum(self.trans[s][i] * nval[self._shift(s, i)] for i in range(l))
            d_go = sum(self.trans[s][i] * dval[self._shift(s, i)] for i in range(l))
            out[s] = (-reach[s] * n_go, reach[s] * (self.loss[s] - d_go))
            nval = np.where(stops[s], 0.0, n_go)
            dval = np.where(stops[s], self.loss[s], d_go)
        return out

    def dense(self, stops):
        """A boolean table ``(T + 1,) * l`` of the stop decisions (True at ``sum == T``)."""
        T, l = self.T, self.l
        table = np.zeros((T + 1,) * l, dtype=bool)
        for s in range(1, T + 1):
            full = self.counts[s]
            ok = full[-1] >= 0
            decide = stops[s] | (s == T)
            table[tuple(f[ok] for f in full)] = decide[ok]
        return table


def _model(T, support, probs):
    key = (T, support.shape[1], _prior_key(support, probs))
    m = _MODELS.get(key)
    if m is None:
        m = _UrnModel(T, support, probs)
        _MODELS[key] = m
    return m


def _diff_states(a, b, valid):
    """Vote vectors ``(s, index)`` where two policies' stop masks differ (valid states only), in order."""
    out = []
    for s in range(len(a)):
        d = (a[s] != b[s]) & valid[s]
        out.extend((s, idx) for idx in zip(*np.nonzero(d)))
    return out


def _with(stops, states, source):
    """``stops`` with the decisions at ``states`` taken from ``source``."""
    new = [x.copy() for x in stops]
    for s, idx in states:
        new[s][idx] = source[s][idx]
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
        slack = delta - value.disagreement
        best = None
        for s, (dn, dd) in enumerate(model.flip_effects(stops)):
            if s == 0 or s == model.T:
                continue
            ok = model.valid[s] & ~stops[s] & (dd <= slack) & (dn < -1e-12)
            if ok.any():
                gain = np.where(ok, dn, 0.0)
                idx = np.unravel_index(np.argmin(gain), gain.shape)
                if best is None or gain[idx] < best[0]:
                    best = (gain[idx], s, idx)
        if best is None:
            break
        new = [x.copy() for x in stops]
        new[best[1]][best[2]] = True
        v_new = model.evaluate(new)
        if v_new.disagreement > delta or v_new.members >= value.members:  # pragma: no cover - rounding
            break
        stops, value = new, v_new
    return stops, value


def _meet_budget(model, delta, max_iter=200):
    """λ by bisection, the deterministic policy with disagreement <= δ, and the exact randomised optimum."""
    _, stops0 = model.solve(0.0)
    v0 = model.evaluate(stops0)
    if v0.disagreement <= delta:  # stopping after one vote already meets the budget
        return {"price": 0.0, "stops": stops0, "value": v0, "optimum": v0.members,
                "state": None, "prob": None}
    lo, hi = 0.0, 1.0
    stops_hi = model.solve(hi)[1]
    v_hi = model.evaluate(stops_hi)
    while v_hi.disagreement > delta:
        lo, hi = hi, 2.0 * hi
        if hi > 1e300:
            raise RuntimeError("no price meets the disagreement budget")  # pragma: no cover
        stops_hi = model.solve(hi)[1]
        v_hi = model.evaluate(stops_hi)
    stops_lo = stops0 if lo == 0.0 else model.solve(lo)[1]
    for _ in range(max_iter):
        if len(_diff_states(stops_lo, stops_hi, model.valid)) <= 1 or hi - lo <= 1e-13 * hi:
            break
        mid = 0.5 * (lo + hi) if lo == 0.0 or hi / lo > 4 else math.sqrt(lo * hi)
        stops_mid = model.solve(mid)[1]
        v_mid = model.evaluate(stops_mid)
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
            q_cur = float(cur[state[0]][state[1]])
            q_nxt = float(nxt[state[0]][state[1]])
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
        Size of the full ensemble, at most :data:`MAX_T`.
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

    #: Set by :meth:`from_oob_votes`: the user's budget δ (``disagreement`` is then the cross-validated one).
    target_disagreement = None
    #: Set by :meth:`from_oob_votes`: the cross-validated disagreement of the budget used (a :class:`CrossValidatedBudget`).
    cross_validation = None

    @classmethod
    def from_oob_votes(cls, oob_votes, T, disagreement=0.01, *, n_folds=5, random_state=None, resolution=None,
                       rtol=0.05):
        """The budget mode from out-of-bag votes: δ met on rows the prior was not estimated from.

        The policy is built under :func:`ensvote.priors.deconvolved_oob_prior`
        of all the rows, for the budget :func:`cross_validated_budget` finds
        (at most δ), so its disagreement, estimated on held-out rows, is δ
        rather than only its disagreement under the estimated prior.

        Parameters
        ----------
        oob_votes : array_like of int, shape (n_rows, l), l in {2, 3}
            Out-of-bag vote counts of the training rows (``HaltingClassifier.oob_votes_``).
        T : int
            Size of the full ensemble, at most :data:`MAX_T`.
        disagreement : float in (0, 0.5)
            The budget δ.
        n_folds, random_state, resolution, rtol
            As in :func:`cross_validated_budget`.

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
        (0.01, 0.0071, 10.49)
        """
        T = _check_T(T)
        delta = check_budget(disagreement)
        v, T, resolution = _check_deconvolution_arguments(oob_votes, T, resolution)
        cv = cross_validated_budget(v, T, delta, n_folds=n_folds, random_state=random_state, resolution=resolution,
                                    rtol=rtol)
        rule = cls(T, cv.budget, prior=_VoteMixture(v, resolution).prior(T))
        rule.target_disagreement = delta
        rule.cross_validation = cv
        return rule

    def __init__(self, T, disagreement=None, *, price=None, prior=None, n_classes=None):
        self.n_members = _check_T(T)
        if disagreement is not None and price is not None:
            raise ValueError("give either disagreement (a budget) or price (λ), not both")
        if price is None:
            self.disagreement = check_budget(0.01 if disagreement is None else disagreement)
        else:
            self.disagreement = None
            price = _check_price(price)
        self.prior = prior
        support, probs, l = _resolve_prior(prior, self.n_members, n_classes)
        self.n_classes = l
        self._prior_hash = _prior_key(support, probs)
        model = _model(self.n_members, support, probs)
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
            s, idx = sol["state"]
            self.boundary_state = np.array([int(c[idx]) for c in model.counts[s]], dtype=np.int64)
            self.boundary_stop_probability = float(sol["prob"])
        self._key = hashlib.sha256(np.packbits(self._table).tobytes()).hexdigest()

    @property
    def T(self):
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

    def prepare(self, n_members, n_classes):
        super().prepare(n_members, n_classes)
        if n_classes is not None and n_classes != self.n_classes:
            raise ValueError(f"the rule was built for {self.n_classes} classes, the votes have {n_classes}")

    def table_key(self, n_classes):
        return (type(self), self.n_members, self.n_classes, self._key)

    def table(self):
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

    def decide(self, t):
        return self._table[tuple(np.moveaxis(t, -1, 0))]

    def stop_probability(self, counts):
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


def cross_validated_budget(oob_votes, T, disagreement, *, n_folds=5, random_state=None, resolution=None,
                           rtol=0.05, max_rounds=8):
    """The budget δ' at which the optimal policy's disagreement on held-out rows is δ.

    The rows are split into ``n_folds`` folds.  For fold ``k`` the deconvolved
    out-of-bag prior (:func:`ensvote.priors.deconvolved_oob_prior`) is fitted
    on the other folds, the optimal policy for a budget δ' is built under it,
    and its disagreement is evaluated on fold ``k``'s rows: under the
    histogram of their out-of-bag votes rescaled to ``T``
    (:func:`ensvote.oob_prior` with ``window=1``: no smoothing, and nothing
    taken from the other folds, so the evaluation is independent of the
    policy).  The cross-validated disagreement is the
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
        Size of the full ensemble, at most :data:`MAX_T`.
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
    (0.0071, 0.01, 0.01)
    """
    T = _check_T(T)
    delta = check_budget(disagreement)
    v, T, resolution = _check_deconvolution_arguments(oob_votes, T, resolution)
    n_folds = check_positive_int(n_folds, name="n_folds", minimum=2)
    max_rounds = check_positive_int(max_rounds, name="max_rounds")
    if isinstance(rtol, bool) or not isinstance(rtol, numbers.Real) or not 0.0 < float(rtol) < 1.0:
        raise ValueError(f"rtol must be a number strictly between 0 and 1, got {rtol!r}")
    rtol = float(rtol)
    if len(v) < 2 * n_folds:
        raise ValueError(f"cross-validating the budget with n_folds={n_folds} needs at least {2 * n_folds} rows "
                         f"with an out-of-bag vote, got {len(v)}")
    rng = check_random_state(random_state)
    fold = rng.permutation(len(v)) % n_folds
    fits = []
    for k in range(n_folds):
        mix = _VoteMixture(v[fold != k], resolution)
        # held out: the rows' own rescaled votes, unsmoothed (nothing from the other folds)
        fits.append((mix.prior(T), oob_prior(v[fold == k], T, window=1), int(np.sum(fold == k))))
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
def policy_value(rule, prior, *, n_classes=None):
    """Expected members queried and expected disagreement of a rule under the urn model.

    Urn contents are drawn from ``prior``, their ``T`` votes come in random
    order, and the rule is consulted after each vote; the label at the stop is
    the current majority (lowest index on ties), as in :func:`ensvote.halt`.
    Computed exactly by a forward pass over all vote vectors (two or three
    classes, ``T`` up to :data:`MAX_T`); the members agree with
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
    if prior is None:
        if rule.n_members is None:
            raise ValueError("with prior=None the rule must have a size T (e.g. UrnRule); pass a prior instead")
        T = rule.n_members
    elif isinstance(prior, tuple):
        sup = np.asarray(prior[0]) if len(prior) == 2 else None
        if sup is None or sup.ndim != 2 or len(sup) == 0:
            raise ValueError("a prior given as a tuple must be (support, probs) with support of shape (m, n_classes)")
        T = int(sup[0].sum())
    else:
        T = len(np.asarray(prior)) - 1
    T = _check_T(T)
    support, probs, l = _resolve_prior(prior, T, n_classes)
    rule.prepare(T, l)
    model = _model(T, support, probs)
    stops = [np.zeros((1,) * (l - 1), dtype=bool)]
    for s in range(1, T + 1):
        full = model.counts[s]
        ok = full[-1] >= 0
        mask = np.zeros(ok.shape, dtype=bool)
        states = np.stack([f[ok] for f in full], axis=-1)
        mask[ok] = rule.stop(states) | (s == T)
        stops.append(mask)
    return model.evaluate(stops)
