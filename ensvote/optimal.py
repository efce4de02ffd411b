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

import contextlib
import hashlib
import math
import numbers
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, NamedTuple

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._cache import BoundedCache
from ._bellman import PolicyValue, _meet_budget, _meet_members, _model, evaluate_rule
from ._perrow import LP_T, MAX_PER_ROW_T, per_row_policy
from ._perrow import model as _perrow_model
from ._utils import check_random_state
from ._validation import check_nonnegative_float, check_positive_int
from .confidence import PriorLike, check_prior
from .kernel import resolve_n_jobs
from .priors import VoteMixture, oob_prior
from .rules import HaltingRule, decided, register

__all__ = ["OptimalRule", "PolicyValue", "policy_value", "RowValues", "row_values", "cross_validated_budget",
           "CrossValidatedBudget",
           "MAX_OPTIMAL_T", "MAX_PER_ROW_T", "GUARANTEES", "SUPPORTED_CLASSES", "UNIFORM_ROWS"]

#: Largest ensemble size the optimal policy is computed for, per number of classes: its model holds
#: every vote vector, about ``T ** l / l!`` of them (1.4 million with three classes at ``T = 201``).
MAX_OPTIMAL_T = {2: 1001, 3: 201}
#: What the disagreement budget δ bounds: ``"average"`` over the rows under the prior (the budget
#: mode), ``"per-row"`` every row's, the prior-weighted members minimised (Kalman & Moscovich's
#: minimixed), or ``"minimax"`` every row's, the worst row's members minimised.
GUARANTEES = ("average", "per-row", "minimax")
#: Numbers of classes the optimal policy is computed for.
SUPPORTED_CLASSES = tuple(MAX_OPTIMAL_T)
#: The budget mode's default weight, in rows, of the uniform prior mixed into a deconvolved one
#: (``uniform_rows`` of :func:`cross_validated_budget`).
UNIFORM_ROWS = 1.0

_MIXTURE_PRIORS = BoundedCache("deconvolved out-of-bag priors of the budget mode", 64)


# --------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------
def _check_T(T, n_classes=None):
    """``T`` if the optimal policy is computed for it (with ``n_classes`` classes, or for some number of classes)."""
    T = check_positive_int(T, name="T")
    largest = MAX_OPTIMAL_T.get(n_classes, max(MAX_OPTIMAL_T.values()))  # classes not known yet: any
    if T > largest:
        limits = " and ".join(f"T <= {t:,} with {l} classes" for l, t in MAX_OPTIMAL_T.items())
        raise ValueError(f"T={T} is above the largest ensemble the optimal policy is computed for ({limits}); "
                         "use rule='urn' (a table for any T with two classes), or rule='infinite'")
    return T


def check_guarantee(value):
    """One of :data:`GUARANTEES`."""
    if not (isinstance(value, str) and value in GUARANTEES):
        raise ValueError(f"guarantee must be one of {', '.join(map(repr, GUARANTEES))}, got {value!r}")
    return value


def _check_per_row_T(T, n_classes, guarantee):
    largest = MAX_PER_ROW_T[n_classes]
    if T > largest:
        limits = " and ".join(f"T <= {t:,} with {l} classes" for l, t in MAX_PER_ROW_T.items())
        raise ValueError(f"T={T} is above the largest ensemble a guarantee={guarantee!r} policy is computed for: its "
                         f"linear program over every vote vector (or that program's Lagrangian dual, above "
                         f"T = {LP_T[n_classes]:,}) is solved for {limits} (MAX_PER_ROW_T); use an ensemble of "
                         f"at most {largest:,} members, or rule='urn' / rule='infinite' (a confidence level "
                         "instead of a disagreement budget, for any T)")


def check_ensemble_size(T, n_classes, guarantee="average", *, name="T"):
    """``T`` if the optimal policy with ``guarantee`` is computed for ``T`` members and ``n_classes`` classes.

    The limits and messages of :class:`OptimalRule` and
    :meth:`OptimalRule.from_params` (``name`` names ``T`` in the error of a
    non-integer); the classifier calls it before it grows the forest.
    """
    T = check_positive_int(T, name=name)
    check_classes(n_classes)
    if check_guarantee(guarantee) == "average":
        _check_T(T, n_classes)
    else:
        _check_per_row_T(T, n_classes, guarantee)
    return T


def check_classes(l):
    """The number of classes, if the optimal policy is computed for it (2 or 3)."""
    if l not in SUPPORTED_CLASSES:
        raise ValueError(f"the optimal policy is computed for 2 or 3 classes, got n_classes={l}; rule='urn' and "
                         "rule='infinite' take any number of classes")
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


def check_members(value, T):
    """A compute budget: expected members per row, a real number from 1 (every row stops after one member)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"max_members must be a real number >= 1, got {value!r}")
    value = float(value)
    if math.isnan(value) or value < 1.0:
        raise ValueError(f"max_members must be at least 1 (every row queries one member), got {value}")
    return min(value, float(T))


def _resolve_prior(prior, T, n_classes):
    """The prior as a :class:`~ensvote.confidence.Prior` of 2 or 3 classes (None: uniform over ``n_classes``)."""
    if prior is None:
        l = 2 if n_classes is None else check_positive_int(n_classes, name="n_classes", minimum=2)
        check_classes(l)
        _check_T(T, l)
        return check_prior(None, T, l)
    hint = getattr(prior, "n_classes", None)  # e.g. a many-class prior object from oob_prior
    if isinstance(hint, numbers.Integral):
        check_classes(int(hint))
    parsed = check_prior(prior, T)
    if n_classes is not None and check_positive_int(n_classes, name="n_classes", minimum=2) != parsed.n_classes:
        raise ValueError(f"n_classes={n_classes} but the prior is over {parsed.n_classes} classes")
    check_classes(parsed.n_classes)
    _check_T(T, parsed.n_classes)
    return parsed


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
        Size of the full ensemble, at most :data:`MAX_OPTIMAL_T` for its number
        of classes (1,001 with two, 201 with three).
    disagreement : float in (0, 0.5), optional
        The budget δ: expected disagreement with the full ensemble, under the
        prior.  Default 0.01 when ``price`` is not given either.
    price : float >= 0, keyword-only, optional
        Build the policy for this λ instead of a budget (no bisection).
    max_members : float >= 1, keyword-only, optional
        A compute budget instead of a disagreement budget: the policy with
        at most this many expected members per row, under the prior, and the
        least expected disagreement with the full ensemble (among the
        λ-optimal policies and the disagreement budget's tables between the
        two around the budget; see ``expected_disagreement``).  A budget
        above ``T`` is taken as ``T``.
    prior : None, array of shape (T + 1,) or (support, probs)
        Prior over the full vote vector (see
        :func:`ensvote.confidence.check_prior`); None is uniform.
    n_classes : {2, 3}, optional
        Number of classes for the uniform prior (default 2); must match a given prior.
    guarantee : {"average", "per-row", "minimax"}, keyword-only, default="average"
        What δ bounds.  ``"average"``: the disagreement averaged under the
        prior (the Bellman recursion above).  ``"per-row"``: the disagreement
        of **every** composition of the urn (every full vote), under a random
        member order, whatever the prior; the prior's expected members are
        minimised (Kalman & Moscovich's *minimixed*; uniform prior: their
        "flat").  ``"minimax"``: the same per-row bound, the largest expected
        members of any composition minimised (the table is the better, in
        that sense, of the rounded minimax and per-row optima: rounding costs
        the near ties most, and the randomised minimax optimum is
        ``optimum_members``).  Both solve a linear program
        over every vote vector (:mod:`ensvote._perrow`) up to ``T`` = 101 with
        two classes and 21 with three (``LP_T``), and above, to :data:`MAX_PER_ROW_T`
        (1,001 and 201), its Lagrangian dual by backward induction (column
        generation; the table within about 1 % of the dual bound, a certified
        lower bound on the program's optimum); the table is deterministic and
        its per-row disagreement, evaluated exactly, is at most δ.

    Attributes
    ----------
    price : float or None
        λ, the price of a disagreement in members (None with a per-row
        guarantee).  With a budget, λ*: the price at which the two λ-optimal
        policies adjacent to the budget cost the same (the Lagrange multiplier
        of the budget; the slope of the members-disagreement frontier there).
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
    compositions, row_members, row_disagreement : ndarray or None
        Per-row guarantee: every composition of the urn (rows of
        :func:`ensvote.compositions`), and per composition the expected
        members and the disagreement of the table, evaluated exactly (see
        :attr:`worst_members`, :attr:`worst_disagreement`).  With a per-row
        guarantee ``optimum_members`` is the linear program's optimum of its
        objective (randomised policies allowed); above ``T`` = 101 with two
        classes and 21 with three (``LP_T``), the dual bound, at most that optimum.

    Examples
    --------
    Two classes, 101 members, uniform prior, a budget of 1 % disagreement:

    >>> from ensvote import OptimalRule, UrnRule, policy_value
    >>> rule = OptimalRule(T=101, disagreement=0.01)
    >>> round(rule.expected_members, 2), rule.expected_disagreement <= 0.01
    (24.16, True)
    >>> rule.stop([[12, 0], [14, 6]])
    array([ True, False])

    Every row within 1 % of the full ensemble's vote, whatever its votes
    (Kalman & Moscovich's minimixed, flat prior), costs more members:

    >>> per_row = OptimalRule(T=101, disagreement=0.01, guarantee="per-row")
    >>> round(per_row.expected_members, 2), per_row.worst_disagreement <= 0.01
    (36.41, True)

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
                    prior: Any = None, oob_votes: Callable[[], NDArray[np.int64]] | None = None,
                    max_members: float | None = None,
                    guarantee: Literal["average", "per-row", "minimax"] = "average",
                    n_jobs: int | None = None) -> HaltingRule:
        """Part of the registry: see :meth:`HaltingRule.from_params`.

        ``strength`` is the budget δ, or ``max_members`` a compute budget (one
        of the two); ``prior="oob"`` is the budget mode on out-of-bag votes
        (:meth:`from_oob_votes`, its folds on ``n_jobs`` threads; for a compute
        budget or a per-row ``guarantee`` the deconvolved out-of-bag prior,
        which then only weighs the members: every row's disagreement is at
        most δ whatever the prior), any other prior is passed to the
        constructor.
        """
        resolve_n_jobs(n_jobs)  # a bad n_jobs fails here
        check_guarantee(guarantee)
        if guarantee != "average" and max_members is not None:
            raise ValueError(f"guarantee={guarantee!r} bounds every row's disagreement by δ: give disagreement=δ, "
                             "not max_members (a compute budget applies to guarantee='average')")
        if strength is None and max_members is None:
            raise ValueError("rule='optimal' needs a budget: pass disagreement=δ, e.g. disagreement=0.01 "
                             "(or max_members=K, a compute budget)")
        if strength is not None and max_members is not None:
            raise ValueError("give rule='optimal' one budget: disagreement=δ or max_members=K, not both")
        if strength is not None:
            check_budget(strength, name="disagreement")
        else:
            check_members(max_members, n_members)
        if n_classes is not None:  # before any prior is estimated
            check_ensemble_size(n_members, n_classes, guarantee, name="n_members")
        if isinstance(prior, str) and prior == "oob":
            if guarantee != "average":
                v, T, resolution = VoteMixture.checked_votes(oob_votes(), n_members)
                return cls(T, strength, prior=_mixture_prior(v, T, resolution, UNIFORM_ROWS), guarantee=guarantee)
            if max_members is not None:
                v, T, resolution = VoteMixture.checked_votes(oob_votes(), n_members)
                return cls(T, max_members=max_members, prior=_mixture_prior(v, T, resolution, UNIFORM_ROWS))
            return cls.from_oob_votes(oob_votes(), n_members, strength, n_jobs=n_jobs)
        if max_members is not None:
            return cls(n_members, max_members=max_members,
                       prior=None if isinstance(prior, str) and prior == "uniform" else prior, n_classes=n_classes)
        return cls(n_members, strength, prior=None if isinstance(prior, str) and prior == "uniform" else prior,
                   n_classes=n_classes, guarantee=guarantee)

    @classmethod
    def from_oob_votes(cls, oob_votes: ArrayLike, T: int, disagreement: float = 0.01, *, n_folds: int = 5,
                       random_state: int | np.random.Generator | None = None, resolution: int | None = None,
                       rtol: float = 0.05, heldout: Literal["deconvolved", "rescaled"] = "deconvolved",
                       uniform_rows: float = UNIFORM_ROWS, n_jobs: int | None = None) -> OptimalRule:
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
            Size of the full ensemble, at most :data:`MAX_OPTIMAL_T` for its number
        of classes (1,001 with two, 201 with three).
        disagreement : float in (0, 0.5)
            The budget δ.
        n_folds, random_state, resolution, rtol, heldout, uniform_rows, n_jobs
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
        _check_T(T, v.shape[1])
        cv = cross_validated_budget(v, T, delta, n_folds=n_folds, random_state=random_state, resolution=resolution,
                                    rtol=rtol, heldout=heldout, uniform_rows=uniform_rows, n_jobs=n_jobs)
        rule = cls(T, cv.budget, prior=_mixture_prior(v, T, resolution, _check_uniform_rows(uniform_rows)))
        rule.target_disagreement = delta
        rule.cross_validation = cv
        return rule

    def __init__(self, T: int, disagreement: float | None = None, *, price: float | None = None,
                 max_members: float | None = None, prior: PriorLike = None, n_classes: int | None = None,
                 guarantee: Literal["average", "per-row", "minimax"] = "average"):
        self.n_members = _check_T(T)
        if sum(x is not None for x in (disagreement, price, max_members)) > 1:
            raise ValueError("give one of disagreement (a budget δ), max_members (a compute budget) or price (λ)")
        self.guarantee = check_guarantee(guarantee)
        if guarantee != "average" and (price is not None or max_members is not None):
            raise ValueError(f"guarantee={guarantee!r} bounds every row's disagreement by δ: give disagreement=δ, "
                             "not price or max_members (they apply to guarantee='average')")
        self.max_members = None if max_members is None else check_members(max_members, self.n_members)
        if price is None and max_members is None:
            self.disagreement = check_budget(0.01 if disagreement is None else disagreement)
        else:
            self.disagreement = None
            if price is not None:
                price = check_nonnegative_float(price, name="price")
        self.prior = prior
        parsed = _resolve_prior(prior, self.n_members, n_classes)
        self.n_classes = parsed.n_classes
        self.compositions = self.row_members = self.row_disagreement = None
        if guarantee != "average":
            self._build_per_row(parsed)
            return
        model = _model(self.n_members, parsed)
        if self.max_members is not None:
            sol = {**_meet_members(model, self.max_members), "state": None, "prob": None}
            sol["optimum"] = sol["value"].members
        elif price is None:
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
            self.boundary_state = model.state_counts(sol["state"])
            self.boundary_stop_probability = float(sol["prob"])
        self._key = hashlib.sha256(np.packbits(self._table).tobytes()).hexdigest()

    def _build_per_row(self, parsed):
        """The per-row policy (:mod:`ensvote._perrow`): every composition's disagreement at most δ."""
        T, l = self.n_members, self.n_classes
        _check_per_row_T(T, l, self.guarantee)
        m = _perrow_model(T, l)
        weights = m.urn_weights(parsed.support, parsed.probs)
        stops, members, disagreement, optimum = per_row_policy(T, l, self.disagreement, weights, self.guarantee)
        self.price = None
        self.compositions, self.row_members, self.row_disagreement = m.urns, members, disagreement
        for a in (self.row_members, self.row_disagreement):
            a.setflags(write=False)
        self.expected_members = float(weights @ members)
        self.expected_disagreement = float(weights @ disagreement)
        self.optimum_members = optimum
        self.boundary_state = self.boundary_stop_probability = None
        self._table = np.zeros((T + 1,) * l, dtype=bool)
        self._table[tuple(m.states[stops].T)] = True
        self._table.setflags(write=False)
        self._key = hashlib.sha256(np.packbits(self._table).tobytes()).hexdigest()

    @property
    def worst_members(self) -> float | None:
        """Per-row guarantee: the largest expected members of any composition of the urn (None otherwise).

        Examples
        --------
        >>> from ensvote import OptimalRule
        >>> rule = OptimalRule(101, 0.001, guarantee="minimax")
        >>> round(rule.worst_members, 2), round(rule.optimum_members, 2)
        (99.86, 99.84)
        """
        return None if self.row_members is None else float(self.row_members.max())

    @property
    def worst_disagreement(self) -> float | None:
        """Per-row guarantee: the largest disagreement of any composition of the urn, at most δ (None otherwise).

        Examples
        --------
        >>> from ensvote import OptimalRule
        >>> OptimalRule(51, 0.01, guarantee="per-row").worst_disagreement <= 0.01
        True
        """
        return None if self.row_disagreement is None else float(self.row_disagreement.max())

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
        if self.guarantee != "average":
            out["guarantee"] = self.guarantee
        if self.disagreement is not None:
            out["disagreement"] = self.disagreement
        elif self.max_members is not None:
            out["max_members"] = self.max_members
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
                           rtol=0.05, max_rounds=8, heldout="deconvolved", uniform_rows=UNIFORM_ROWS, n_jobs=None):
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
        Size of the full ensemble, at most :data:`MAX_OPTIMAL_T` for its number
        of classes (1,001 with two, 201 with three).
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
    n_jobs : int or None, default=None
        Threads the folds' policies are built and scored on (scikit-learn's
        convention: None or 1 one thread, -1 every core).  The folds are
        independent and their disagreements are added in fold order, so the
        result is the same for any ``n_jobs``.

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
    _check_T(T, v.shape[1])
    n_folds = check_positive_int(n_folds, name="n_folds", minimum=2)
    max_rounds = check_positive_int(max_rounds, name="max_rounds")
    if isinstance(rtol, bool) or not isinstance(rtol, numbers.Real) or not 0.0 < float(rtol) < 1.0:
        raise ValueError(f"rtol must be a number strictly between 0 and 1, got {rtol!r}")
    rtol = float(rtol)
    if heldout not in ("rescaled", "deconvolved"):
        raise ValueError(f"heldout must be 'rescaled' or 'deconvolved', got {heldout!r}")
    uniform_rows = _check_uniform_rows(uniform_rows)
    threads = min(resolve_n_jobs(n_jobs), n_folds)
    if len(v) < 2 * n_folds:
        raise ValueError(f"cross-validating the budget with n_folds={n_folds} needs at least {2 * n_folds} rows "
                         f"with an out-of-bag vote, got {len(v)}")
    fits = _fold_fits(v, T, resolution, n_folds, random_state, heldout, uniform_rows)
    n_rows = sum(f[2] for f in fits)

    def fold_disagreement(fit, held, n, budget):  # the compiled loops let go of the GIL: folds run in threads
        return n * policy_value(OptimalRule(T, budget, prior=fit), held).disagreement

    def cv_disagreement(budget):
        if pool is None:
            return sum(fold_disagreement(*f, budget) for f in fits) / n_rows
        return sum(pool.map(fold_disagreement, *zip(*fits), [budget] * len(fits))) / n_rows

    with ThreadPoolExecutor(threads) if threads > 1 else contextlib.nullcontext() as pool:
        tried = _budget_search(cv_disagreement, delta, rtol, max_rounds)
    ok = [(b, d) for b, d in tried if d <= delta]
    b, d = max(ok) if ok else min(tried)
    return CrossValidatedBudget(float(b), float(d), delta, len(tried))


def _budget_search(cv_disagreement, delta, rtol, max_rounds):
    """The budgets tried by :func:`cross_validated_budget` and their cross-validated disagreements."""
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
    return tried


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
    return evaluate_rule(rule, parsed)


class RowValues(NamedTuple):
    """A rule's expected members and disagreement for every composition of the urn (see :func:`row_values`).

    Examples
    --------
    >>> from ensvote import ExactRule
    >>> from ensvote.optimal import row_values
    >>> v = row_values(ExactRule(5))
    >>> v.compositions[:2].tolist(), v.members[:2].round(2).tolist(), float(v.disagreement.max())
    ([[0, 5], [1, 4]], [3.0, 3.6], 0.0)
    """

    compositions: NDArray[np.int64]  #: every composition of ``T`` (rows of :func:`ensvote.compositions`)
    members: NDArray[np.float64]  #: expected members queried, per composition
    disagreement: NDArray[np.float64]  #: probability that the label at the stop is not the composition's majority


def row_values(rule: HaltingRule, *, n_classes: int = 2) -> RowValues:
    """Expected members and disagreement of a rule for every full vote, exactly: the per-row view of :func:`policy_value`.

    For every composition ``n`` of the urn (every full-ensemble vote vector),
    the members arrive in random order and the rule is consulted after each
    vote; the label at the stop is the current majority (lowest index on
    ties), as in :func:`ensvote.halt`.  :func:`policy_value` averages these
    over a prior; a per-row guarantee (``OptimalRule(..., guarantee="per-row")``)
    bounds their maximum.  Computed by the flow of :mod:`ensvote._perrow`, for
    ``T`` up to :data:`MAX_PER_ROW_T`.

    Parameters
    ----------
    rule : HaltingRule
        With a size ``T`` (``rule.n_members``).
    n_classes : {2, 3}, default=2

    Returns
    -------
    RowValues
        ``(compositions, members, disagreement)``.

    Examples
    --------
    The budget mode promises 1 % on average over the uniform prior; a row
    whose full vote is a near tie disagrees far more often:

    >>> import numpy as np
    >>> from ensvote import OptimalRule
    >>> from ensvote.optimal import row_values
    >>> v = row_values(OptimalRule(101, 0.01))
    >>> round(float(np.mean(v.disagreement)), 4), round(float(v.disagreement.max()), 3)
    (0.01, 0.129)
    """
    if not isinstance(rule, HaltingRule):
        raise TypeError(f"rule must be a HaltingRule, got {type(rule).__name__}")
    if rule.n_members is None:
        raise ValueError("row_values needs a rule with a size T (e.g. UrnRule(T=...))")
    l = check_classes(check_positive_int(n_classes, name="n_classes", minimum=2))
    T = check_positive_int(rule.n_members, name="T")
    _check_per_row_T(T, l, "per-row")
    rule.prepare(T, l)
    m = _perrow_model(T, l)
    stops = np.zeros(len(m.states), dtype=bool)
    inner = m.sums > 0
    stops[inner] = decided(rule, np.ascontiguousarray(m.states[inner]))
    members, disagreement = m.evaluate(stops.astype(float))
    return RowValues(m.urns, members, disagreement)
