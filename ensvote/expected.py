"""The expected number of members a halting rule queries when urns are drawn from a prior.

Monte Carlo (Soto et al. 2016) or, for two classes, exact by dynamic programming.
It runs the engine (:mod:`ensvote.engine`) with a rule (:mod:`ensvote.rules`);
the priors themselves come from :mod:`ensvote.priors` or
:func:`ensvote.uniform_prior`.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

from ._bellman import evaluate_rule
from ._utils import check_random_state
from ._validation import _fmt, check_positive_int, check_size, power_exceeds
from .confidence import Prior, check_prior
from .engine import run_halting
from .rules import HaltingRule

__all__ = ["expected_queries", "MAX_EXACT_VOTE_VECTORS"]

#: Most vote vectors, ``(T + 1) ** l``, ``expected_queries(method="exact")`` evaluates the rule at
#: (some seconds; ``T`` up to 1,999 for two classes, 157 for three).
MAX_EXACT_VOTE_VECTORS = 4_000_000


def expected_queries(rule: HaltingRule, prior: ArrayLike | tuple[ArrayLike, ArrayLike], *,
                     method: Literal["mc", "exact"] = "mc", n_samples: int = 10_000,
                     random_state: int | np.random.Generator | None = None,
                     return_sem: bool = False) -> float | tuple[float, float]:
    """Expected number of members a rule queries when urns are drawn from ``prior``.

    ``method="mc"`` is the Monte Carlo estimate of Soto et al. (2016): draw an urn content
    ``T`` from the prior, shuffle its ``T`` votes, query them until the rule
    stops, average over ``n_samples`` draws.  ``method="exact"`` (two or three
    classes) computes the same expectation without sampling: the rule decides
    at every vote vector and the urn model runs that policy forward (the
    evaluator of :func:`ensvote.policy_value`).

    Parameters
    ----------
    rule : HaltingRule
        The rule's ensemble size ``T`` (``rule.n_members``) is the urns' size; a
        rule for any size (e.g. :class:`~ensvote.FixedRule`,
        :class:`~ensvote.InfiniteRule`) takes ``T`` from the prior.
    prior : array of shape (T + 1,) or (support, probs)
        Distribution of the full vote vector (see :func:`ensvote.confidence.check_prior`),
        e.g. :func:`ensvote.uniform_prior` ``(T, n_classes)``.
    method : {"mc", "exact"}
        ``"exact"`` evaluates the rule at all ``(T + 1) ** l`` vote vectors and
        is refused beyond ``MAX_EXACT_VOTE_VECTORS`` (4e6, some seconds).
    n_samples : int
        Monte Carlo draws; ``n_samples * T`` must not exceed ``MAX_ENTRIES`` (5e7).
    random_state : None, int or numpy Generator
        Seed for the draws (None: :data:`ensvote.SEED`).
    return_sem : bool
        Also return the Monte Carlo standard error (0.0 for ``"exact"``).

    Returns
    -------
    float, or (float, float) with ``return_sem``
        The expected number of members queried (and its standard error).

    Raises
    ------
    TypeError
        ``rule`` is not a :class:`~ensvote.HaltingRule`, or ``prior`` is missing,
        a string or a :class:`~ensvote.manyclass.PairPrior`.
    ValueError
        A prior over another ensemble size, a bad ``method`` or ``n_samples``,
        ``method="exact"`` with more than three classes or beyond
        ``MAX_EXACT_VOTE_VECTORS``.

    Examples
    --------
    Urns of ``T = 11`` members drawn from the uniform prior: the rule RF*
    (:class:`~ensvote.ExactRule`) and SIBA (:class:`~ensvote.UrnRule`, α = 0.99),
    exactly and by Monte Carlo:

    >>> from ensvote import ExactRule, UrnRule, expected_queries, uniform_prior
    >>> prior = uniform_prior(11)
    >>> round(expected_queries(ExactRule(11), prior, method="exact"), 4)
    7.8385
    >>> round(expected_queries(UrnRule(T=11), prior, method="exact"), 4)
    6.5853
    >>> mean, sem = expected_queries(UrnRule(T=11), prior, n_samples=2000, random_state=0,
    ...                              return_sem=True)
    >>> bool(abs(mean - 6.5853) < 4 * sem)
    True
    """
    if not isinstance(rule, HaltingRule):
        raise TypeError(f"rule must be a HaltingRule, got {type(rule).__name__}")
    if prior is None or isinstance(prior, str):
        raise TypeError("prior must be the distribution the urns are drawn from: an array of shape "
                        "(T + 1,) or a pair (support, probs), e.g. ensvote.uniform_prior(T, n_classes); "
                        f"got {prior!r}")
    from .manyclass import PairPrior

    if isinstance(prior, PairPrior):
        raise TypeError("expected_queries draws full urns from the prior; a PairPrior (the many-class "
                        "out-of-bag prior) describes leader-rival pairs only and cannot be sampled; "
                        "pass a prior over the full vote vector, e.g. ensvote.uniform_prior(T, n_classes)")
    T = rule.n_members  # the ensemble size the rule is built for
    if T is None:  # a rule for any ensemble size (FixedRule, InfiniteRule, ...): the prior's
        support, probs = check_prior(prior)
        T = int(support[0].sum())
    else:
        try:
            support, probs = check_prior(prior, T)
        except ValueError as exc:
            raise ValueError(f"prior must be over the rule's ensemble size T={T}: {exc}") from None
    l = support.shape[1]
    rule.prepare(T, l)
    if method == "mc":
        n_samples = check_positive_int(n_samples, name="n_samples")
        check_size(n_samples * T, what=f"n_samples={n_samples:,} draws of T={T} votes")
        rng = check_random_state(random_state)
        draws = support[rng.choice(len(support), size=n_samples, p=probs)]
        votes = np.repeat(np.tile(np.arange(l), (n_samples, 1)).ravel(), draws.ravel()).reshape(n_samples, T)
        votes = rng.permuted(votes, axis=1)
        res = run_halting(lambda rows, a, b: votes[rows, a:b], n_samples, T, l, rule)
        n = res.n_queried.astype(float)
        mean = float(n.mean())
        sem = float(n.std(ddof=1) / np.sqrt(n_samples)) if n_samples > 1 else float("nan")
        return (mean, sem) if return_sem else mean
    if method == "exact":
        if l not in (2, 3):
            raise ValueError("method='exact' is implemented for two and three classes; use method='mc'")
        if power_exceeds(T + 1, l, MAX_EXACT_VOTE_VECTORS):
            raise ValueError(f"method='exact' evaluates the rule at (T + 1) ** l = {_fmt((T + 1) ** l)} vote "
                             f"vectors (T={T}, {l} classes), more than the limit of {_fmt(MAX_EXACT_VOTE_VECTORS)}; "
                             "use method='mc'")
        mean = evaluate_rule(rule, Prior(support, probs)).members
        return (mean, 0.0) if return_sem else mean
    raise ValueError(f"method must be 'mc' or 'exact', got {method!r}")
