"""A streaming majority vote over answers not known in advance.

The stopping rules of the package stop the vote of a classifier ensemble whose
classes are fixed.  The same statistics stop a vote of *sampled answers*:
repeated draws from any randomised predictor (the answers of a language model
sampled for self-consistency decoding, crowdsourced labels, repeated
measurements), where new answers keep appearing as sampling goes on.
:class:`VoteStream` takes the answers one at a time and says when the majority
so far is (almost) certainly the final one.

The answers not seen yet
------------------------
The rules need a vote vector over a fixed set of classes.  A stream's vector
is the counts of the answers seen so far, in order of first appearance, plus
**one class with count zero standing for every answer not seen yet**.  The
leader beats that lumped class only if it beats each answer inside it, so the
event that the leader wins in this model is contained in the event that it
wins however the lumped class splits into distinct answers: the confidence is
conservative with respect to answers that have not appeared.  For the
infinite-ensemble rule the extra class multiplies the bound of Eq. 8 of
Hernández-Lobato et al. (2011) by :math:`I_{1/2}(1, t_c + 1) = 1 - 2^{-(t_c + 1)} < 1`;
with one answer seen the vector is ``[n, 0]`` and the confidence is Eq. 7
exactly.  The uniform prior over the lumped vector (Dirichlet for the infinite
rule, uniform urn for the finite one) remains a modelling choice, and the
answers are assumed to be exchangeable draws.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from ._validation import check_positive_int, check_probability
from .confidence import finite_confidence, infinite_confidence
from .manyclass import max_pair_table_T, pair_table

__all__ = ["VoteStream", "MAX_URN_SAMPLES", "RULES"]

#: The rules a :class:`VoteStream` takes by name.
RULES = ("infinite", "urn")
#: Largest ``max_samples`` of ``rule="urn"``: the largest ``T`` whose many-class pair table
#: (:func:`ensvote.manyclass.urn_confidence_bound`, uniform prior) fits in its memory limit,
#: whatever the number of distinct answers.
MAX_URN_SAMPLES = max_pair_table_T(3)


class VoteStream:
    r"""Stop drawing answers once their majority is (almost) certainly the final one.

    Feed the answers one at a time to :meth:`add`; it returns True when the
    vote should stop, and :attr:`answer` is then the answer to report.
    Answers are any hashable values, compared as dictionary keys (so ``1``,
    ``1.0`` and ``True`` are one answer); the set of answers grows in order of
    first appearance, and a tie between leading answers goes to the one seen
    first (the package's lowest-index convention, the index being the order
    of first appearance).

    The confidence is that of the leader over the counts of the answers seen
    plus one zero-count class for all answers not seen yet (module
    docstring), computed by the package's functions:

    * ``rule="infinite"`` (Hernández-Lobato et al. 2011): the target is the
      most probable answer of the predictor, the majority of infinitely many
      draws; :func:`ensvote.infinite_confidence` (Eq. 7 for one answer seen,
      the lower bound Eq. 8 otherwise).  No cap is needed; ``max_samples``,
      if given, also stops the vote there.
    * ``rule="urn"`` (Soto et al. 2016): the target is the majority of
      ``max_samples = T`` draws, the budget the vote would otherwise spend;
      Eq. 3 under the uniform prior over an urn of ``T``:
      :func:`ensvote.finite_confidence` (exact) while one answer has been
      seen, :func:`ensvote.manyclass.urn_confidence_bound` (a certified lower
      bound) once there are more.  The vote also stops at ``T``, where its
      majority is the target by definition.

    Parameters
    ----------
    rule : {"infinite", "urn"}, default="infinite"
        Which target the confidence is about.
    confidence : float in (0, 1), default=0.99
        Stop when the confidence is strictly above it (as the package's rules do).
    max_samples : int >= 1 or None, default=None
        The cap ``T``: required for ``rule="urn"`` (at most
        :data:`MAX_URN_SAMPLES`), optional for ``rule="infinite"``.

    Attributes
    ----------
    rule : str
        The rule's name.
    threshold : float
        The ``confidence`` asked for.
    max_samples : int or None
        The cap.

    Raises
    ------
    TypeError
        ``rule`` not a string, ``confidence`` not a real number, ``max_samples``
        not an int.
    ValueError
        An unknown rule, a confidence outside (0, 1), ``max_samples < 1``, or
        ``rule="urn"`` without ``max_samples`` or with more than
        :data:`MAX_URN_SAMPLES`.

    Notes
    -----
    With ``rule="urn"`` each new number of distinct answers needs the pair
    table of :func:`ensvote.manyclass.urn_confidence_bound` for ``T`` and that
    many classes: a few milliseconds to build for ``T = 40``, about two
    seconds at ``T = 462``.  Tables up to ``T = 110`` are kept for later
    streams (:func:`ensvote.cache_info` lists them, :func:`ensvote.clear_caches`
    empties them); larger ones stay in the six that :mod:`ensvote.manyclass`
    keeps, so a long tail of distinct answers at a large ``T`` is slow.

    Examples
    --------
    The answers of a sampled predictor; the infinite-ensemble rule at 0.95
    stops at the seventh, when the leader's confidence passes 0.95:

    >>> from ensvote import VoteStream
    >>> vote = VoteStream(rule="infinite", confidence=0.95)
    >>> [vote.add(a) for a in ["42", "41", "42", "42", "42", "42", "42"]]
    [False, False, False, False, False, False, True]
    >>> vote.answer, vote.counts, vote.n_samples, round(vote.confidence, 4)
    ('42', {'42': 6, '41': 1}, 7, 0.9573)

    The urn rule, whose target is the majority of a budget of 40 answers:

    >>> vote = VoteStream(rule="urn", confidence=0.99, max_samples=40)
    >>> for a in ["B", "A", "A", "A", "A", "A", "A", "A", "A", "A"]:
    ...     if vote.add(a):
    ...         break
    >>> vote.n_samples, vote.answer, round(vote.confidence, 4)
    (9, 'A', 0.9949)
    """

    def __init__(self, rule: str = "infinite", confidence: float = 0.99, max_samples: int | None = None) -> None:
        if not isinstance(rule, str):
            raise TypeError(f"rule must be a string, one of {RULES}, got {rule!r}")
        if rule not in RULES:
            raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
        self.rule = rule
        self.threshold = check_probability(confidence, name="confidence")
        if max_samples is not None:
            max_samples = check_positive_int(max_samples, name="max_samples")
        if rule == "urn":
            if max_samples is None:
                raise ValueError("rule='urn' needs max_samples=T, the number of answers whose majority is the "
                                 "target (the budget); use rule='infinite' for no cap")
            if max_samples > MAX_URN_SAMPLES:
                raise ValueError(f"rule='urn' takes max_samples <= {MAX_URN_SAMPLES} (MAX_URN_SAMPLES: the largest "
                                 "urn whose many-class confidence table fits in memory), got "
                                 f"{max_samples:,}; use rule='infinite', with max_samples as a cap if needed")
        self.max_samples = max_samples
        self._counts: dict[Hashable, int] = {}
        self._n = 0
        self._confidence = float("nan")
        self._stopped = False

    def add(self, answer: Hashable) -> bool:
        """Count one more answer; True when the vote should stop.

        Parameters
        ----------
        answer : hashable
            The answer drawn (a string, a number, a tuple, ...).

        Returns
        -------
        bool
            True when the confidence is above the threshold or ``max_samples``
            answers have been added.  The stream is then stopped.

        Raises
        ------
        TypeError
            An unhashable answer (a list, a dict, a numpy array, ...).
        ValueError
            ``max_samples`` answers were already added.
        RuntimeError
            The vote has stopped on its confidence: its answer is final; start
            a new stream to vote again.

        Examples
        --------
        >>> from ensvote import VoteStream
        >>> vote = VoteStream(confidence=0.9)
        >>> vote.add("yes"), vote.add("yes"), vote.add("yes")
        (False, False, True)
        >>> vote.add("yes")
        Traceback (most recent call last):
            ...
        RuntimeError: the vote has stopped (confidence 0.9375 > 0.9 after 3 answers); start a new VoteStream
        >>> VoteStream().add(["a", "list"])
        Traceback (most recent call last):
            ...
        TypeError: answers must be hashable (a str, a number, a tuple, ...), got an unhashable list
        """
        try:
            hash(answer)
        except TypeError:
            raise TypeError("answers must be hashable (a str, a number, a tuple, ...), got an unhashable "
                            f"{type(answer).__name__}") from None
        if self.max_samples is not None and self._n >= self.max_samples:
            raise ValueError(f"max_samples={self.max_samples} answers have been added; the vote is over")
        if self._stopped:
            raise RuntimeError(f"the vote has stopped (confidence {self._confidence:.4g} > {self.threshold:g} after "
                               f"{self._n} answers); start a new VoteStream")
        self._counts[answer] = self._counts.get(answer, 0) + 1
        self._n += 1
        self._confidence = self._compute()
        at_cap = self.max_samples is not None and self._n >= self.max_samples
        self._stopped = bool(self._confidence > self.threshold or at_cap)
        return self._stopped

    def _compute(self) -> float:
        votes = np.array([*self._counts.values(), 0], dtype=np.int64)  # the answers not seen yet: one class at 0
        if self.rule == "infinite":
            return float(infinite_confidence(votes))
        if len(votes) == 2:
            return float(finite_confidence(votes, self.max_samples))
        # what urn_confidence_bound(votes, T) evaluates, without its checks; the table is cached by manyclass
        return float(pair_table(self.max_samples, len(votes)).confidence(votes))

    @property
    def answer(self) -> Hashable | None:
        """The current majority answer (ties: the one seen first); None before the first answer.

        Examples
        --------
        >>> from ensvote import VoteStream
        >>> vote = VoteStream()
        >>> vote.answer is None
        True
        >>> _ = vote.add("b"), vote.add("a")
        >>> vote.answer  # a tie goes to the answer seen first
        'b'
        """
        if not self._counts:
            return None
        return max(self._counts, key=self._counts.__getitem__)  # max keeps the first of equal counts

    @property
    def confidence(self) -> float:
        """The confidence that :attr:`answer` is the target (``nan`` before the first answer).

        Examples
        --------
        >>> from ensvote import VoteStream
        >>> vote = VoteStream()
        >>> _ = vote.add(7)
        >>> vote.confidence  # Eq. 7 for the counts [1, 0]: 1 - 2 ** -2
        0.75
        """
        return self._confidence

    @property
    def counts(self) -> dict[Hashable, int]:
        """A copy of the count of each answer, in order of first appearance.

        Examples
        --------
        >>> from ensvote import VoteStream
        >>> vote = VoteStream()
        >>> _ = [vote.add(a) for a in ("x", "y", "x", (1, 2))]
        >>> vote.counts
        {'x': 2, 'y': 1, (1, 2): 1}
        """
        return dict(self._counts)

    @property
    def n_samples(self) -> int:
        """The number of answers added.

        Examples
        --------
        >>> from ensvote import VoteStream
        >>> vote = VoteStream()
        >>> _ = vote.add("x"), vote.add("y")
        >>> vote.n_samples
        2
        """
        return self._n

    @property
    def stopped(self) -> bool:
        """Whether the vote has stopped (confidence above the threshold, or ``max_samples`` reached).

        Examples
        --------
        >>> from ensvote import VoteStream
        >>> vote = VoteStream(rule="urn", max_samples=3)
        >>> vote.add("x"), vote.add("y"), vote.stopped
        (False, False, False)
        >>> vote.add("y"), vote.stopped  # the cap
        (True, True)
        """
        return self._stopped

    def __repr__(self) -> str:
        cap = "" if self.max_samples is None else f", max_samples={self.max_samples}"
        return (f"VoteStream(rule={self.rule!r}, confidence={self.threshold:g}{cap}): {self._n} answers, "
                f"answer {self.answer!r}, confidence {self._confidence:.4g}{', stopped' if self._stopped else ''}")
