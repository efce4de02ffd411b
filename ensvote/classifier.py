"""scikit-learn meta-estimator: a voting ensemble that stops voting early."""

from __future__ import annotations

import warnings
from typing import Any, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.ensemble import BaggingClassifier, ExtraTreesClassifier, RandomForestClassifier
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, validate_data

from . import kernel
from ._utils import SEED
from ._validation import check_probability
from .engine import HaltResult, TreeEnsemble
from .confidence import soft_lead_needed
from .optimal import OptimalRule, check_budget, check_ensemble_size, check_guarantee, check_members
from .rules import REGISTRY, HaltingRule, UrnRule, make_rule

__all__ = ["HaltingClassifier"]

#: The dtypes of a row the one-row path takes as they are (native byte order; any other goes through validation).
_F64, _F32 = np.dtype(np.float64), np.dtype(np.float32)

_ENSEMBLES = (RandomForestClassifier, ExtraTreesClassifier, BaggingClassifier)


def _leaf_proba(member, n_classes):
    """A member's class probabilities at each node, in the ensemble's class indices, as its
    ``predict_proba`` returns them at a leaf (a bagging member may have seen fewer classes)."""
    value = member.tree_.value[:, 0, :]
    cols = np.asarray(member.classes_).astype(np.intp)
    out = np.zeros((value.shape[0], n_classes))
    out[:, cols] = value[:, :len(cols)]
    return out


def _tree_input(X):
    """A validated float32 array or CSR matrix, with the int32 sparse indices the trees want.

    NaN in a sparse matrix is refused, as scikit-learn's forests refuse it: the
    trees route missing values only in dense input.
    """
    if sparse.issparse(X) and np.isnan(X.data).any():
        raise ValueError("sparse X contains NaN: scikit-learn's trees take missing values only in dense input "
                         "(the forest's own predict refuses it too); pass a dense array")
    if sparse.issparse(X) and (X.indices.dtype != np.int32 or X.indptr.dtype != np.int32):
        if X.nnz >= 2**31:
            raise ValueError("sparse X has too many non-zero entries for the trees (at most 2**31 - 1)")
        X = X.copy()
        X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
    return X


class HaltingClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """A voting ensemble whose members are queried one at a time until a rule stops.

    ``fit`` fits the wrapped ensemble (and, for an out-of-bag prior, estimates
    the prior of Soto et al. (2016) from out-of-bag votes); ``predict`` queries each row's
    members in their fitted order and returns the **hard majority vote** of
    the members queried when the rule stops.

    .. note:: scikit-learn's own ``RandomForestClassifier.predict`` averages the
       trees' class *probabilities* (soft voting); the papers, and this class,
       count one vote per member.  With fully grown trees the two rarely differ,
       but they can; compare with ``rule="exact"`` (which reproduces the hard
       vote of all members) rather than with the forest's ``predict``.

    Parameters
    ----------
    estimator : RandomForestClassifier, ExtraTreesClassifier or BaggingClassifier, default=None
        The ensemble (cloned on fit).  None means
        ``RandomForestClassifier(n_estimators=101, random_state=ensvote.SEED)``.
        Bagging members must be classifiers with a ``tree_`` (decision trees).
    rule : {"urn", "infinite", "exact", "optimal"} or HaltingRule, default="urn"
        A name of the registry :data:`ensvote.rules.REGISTRY` whose rule is set
        by ``confidence``, ``disagreement`` or nothing: ``"urn"``:
        :class:`~ensvote.UrnRule` (Soto et al. 2016); ``"infinite"``:
        :class:`~ensvote.InfiniteRule` (Hernández-Lobato et al. 2011); ``"exact"``:
        :class:`~ensvote.ExactRule`; ``"optimal"``: :class:`~ensvote.OptimalRule`,
        the fewest expected members for the disagreement budget
        ``disagreement`` (budget mode; two classes with at most 1,001 members or
        three with at most 101).  A rule object is used as given (its ``T`` must equal the
        number of members), e.g. ``MarginRule(k=5)``.
    confidence : float in (0, 1), default=0.99
        Threshold (α or π) for the threshold rules given by name.
    prior : {"auto", "oob", "uniform"} or array, default="auto"
        Prior for ``rule="urn"``: ``"oob"`` estimates it from out-of-bag votes
        (HYPER; needs an ensemble fitted on bootstrap samples; from four
        classes on it is the pair prior of :mod:`ensvote.manyclass`, which goes
        beyond Soto et al. 2016), ``"uniform"``
        (or None) is the uniform prior (SIBA), an array is used as given (see
        :func:`ensvote.confidence.check_prior`).  ``"auto"``, the default, is
        ``"oob"`` when the ensemble bootstraps (``bootstrap=True``: the default
        of ``RandomForestClassifier`` and ``BaggingClassifier``) and
        ``"uniform"`` otherwise (``ExtraTreesClassifier``'s default), so the
        default works with every supported ensemble.  The same for
        ``rule="optimal"``; ignored by the other rules.
    disagreement : float in (0, 0.5), default=None
        Budget mode: the target δ for ``rule="optimal"``, the expected fraction
        of rows on which the label differs from the full ensemble's hard
        majority.  With the out-of-bag prior (the default for a
        bootstrapping ensemble) the rule is
        :meth:`OptimalRule.from_oob_votes <ensvote.OptimalRule.from_oob_votes>`:
        built under the deconvolved out-of-bag prior
        (:func:`ensvote.priors.deconvolved_oob_prior`, with a few rows' worth
        of the uniform prior mixed in: ``uniform_rows`` of
        :func:`~ensvote.optimal.cross_validated_budget`), for the budget at
        which its disagreement, cross-validated on the out-of-bag rows (each
        held-out fold scored under its own deconvolved prior), is δ (so δ is
        met on rows the prior was not estimated from, not only under the
        estimate).  With the uniform prior or a given one, δ is met in
        expectation under that prior.  ``rule="optimal"`` needs this or
        ``max_members``; the other rules refuse it (they take ``confidence``),
        except with ``voting="soft"`` (below), where it makes the soft stop a
        per-row bound.  The tables are
        built at ``fit``: with the out-of-bag prior a budget search on each of
        five folds, which costs several times the forest's own fit with two
        classes and tens of times with three, where the table has
        ``(T + 1) ** 3`` entries (see Notes); predicting is a look-up.
    max_members : float >= 1, default=None
        A compute budget for ``rule="optimal"``, instead of ``disagreement``:
        at most this many members queried per row on average (under the
        prior: the deconvolved out-of-bag prior for a bootstrapping ensemble),
        with the least expected disagreement with the full ensemble, which
        ``expected_disagreement_`` reports (see
        :class:`~ensvote.OptimalRule`).  A budget of ``n_estimators`` or
        more buys every member that can lower the disagreement (the same as
        ``n_estimators``).  Refused with the other rules.  The optimal rule's
        sizes (at most 1,001 members with two classes, 201 with three) are
        checked before the forest is grown, for either budget.
    guarantee : {"average", "per-row", "minimax"}, default="average"
        What ``disagreement`` bounds, for ``rule="optimal"``: ``"average"``
        the disagreement averaged over the rows (the budget mode above);
        ``"per-row"`` every row's probability of disagreeing with the full
        ensemble, whatever its full vote, under a random member order, with
        the members averaged under the prior minimised (Kalman & Moscovich's
        *minimixed*; the out-of-bag prior then weighs the members only, so no
        cross-validation is needed); ``"minimax"`` the same per-row bound with
        the largest expected members of any full vote minimised.  A linear
        program over every vote vector (scipy's HiGHS) at ``fit`` up to 101
        members with two classes and 21 with three (``ensvote.optimal.LP_T``),
        its Lagrangian dual above, for at most 1,001 members with two classes
        and 201 with three (:data:`ensvote.optimal.MAX_PER_ROW_T`).  ``rule_.worst_disagreement``
        is the largest per-row disagreement (at most δ).
    voting : {"hard", "soft"}, default="hard"
        ``"hard"``: the majority of the members' votes, stopped by ``rule``.
        ``"soft"``: the argmax of the members' averaged class probabilities,
        as the forest's own ``predict`` (and ``BaggingClassifier``'s) decides,
        stopped exactly: a row stops once the members not yet queried cannot
        change the argmax (each adds at most 1 to any class's sum), so the
        labels equal ``estimator_.predict(X)`` on every row (with the
        forest's sum in member order, as scikit-learn adds with ``n_jobs``
        None).  With ``disagreement=δ`` a row stops sooner, once its leader
        leads by :func:`ensvote.confidence.soft_lead_needed`: its label is not
        the forest's with probability at most δ under a random member order,
        **for every row** whatever its members' probabilities (Serfling's
        inequality; no prior, so no calibration to a data set either: the
        bound is conservative, and ``guarantee`` may be ``"average"`` or
        ``"per-row"``, both met).  It takes no rule: ``rule`` must stay at its
        default and ``max_members`` unset; ``rule_`` and ``prior_`` are None.
    n_jobs : int or None, default=None
        Threads for ``predict``, ``predict_proba`` and ``halt`` on dense
        ``X``: None or 1 one thread, -1 every core (``-2`` all but one, ...).
        Dense ``X`` goes through the compiled loop (:mod:`ensvote.kernel`),
        its rows spread over the threads; sparse ``X`` and rules without a
        stop table use one thread.  Rows are independent, so the results
        are identical for any ``n_jobs``.  ``fit`` builds the budget mode's
        folds (``rule="optimal"`` with the out-of-bag prior) on as many
        threads, with the same result for any ``n_jobs``.
        (The wrapped ensemble's own ``n_jobs`` applies to its ``fit``.)

    ``X`` may be a dense array or a scipy sparse matrix (used as CSR for
    prediction), as the wrapped ensembles accept; missing values (NaN) are
    routed as scikit-learn's trees route them (in dense ``X`` only: NaN in a
    sparse ``X`` is refused, as the forests refuse it).

    Attributes
    ----------
    estimator_ : the fitted ensemble
    rule_ : HaltingRule used by ``predict``
    prior_ : the prior used by ``rule_`` (None for uniform / not an urn or
        optimal rule; with ``prior="auto"`` it tells which was chosen)
    expected_members_ : float or None
        Budget mode: the expected number of members queried per row, under
        the prior, known before predicting (None for the other rules; see
        :func:`ensvote.expected_queries` for them).
    expected_disagreement_ : float or None
        Budget mode: the expected disagreement with the full ensemble under
        the prior (at most ``disagreement``; with ``max_members``, the least
        the compute budget allows).
    soft_lead_ : ndarray of float, shape (n_members_,) or None
        ``voting="soft"`` with ``disagreement``: the lead over every other
        class's summed probabilities at which a row stops after each member
        (None otherwise; the exact soft stop needs the members left).
    oob_votes_ : ndarray of int, shape (n_train_rows, n_classes) or None
        Out-of-bag vote counts of the training rows, computed in ``fit``
        (columns follow ``classes_``): member ``j`` votes for row ``i`` only if
        row ``i`` was not drawn to fit member ``j``.  None when the ensemble
        does not bootstrap (every member saw every row).  The counterpart of
        scikit-learn's ``oob_decision_function_``, as vote counts.
    classes_ : ndarray of class labels
    n_features_in_ : int
    n_members_ : int

    Notes
    -----
    What ``fit`` costs on top of fitting the forest (``benchmarks/bench_fit.py``,
    101 trees, one thread, half of each problem's rows; ``results/speed/fit.csv``
    holds the run quoted here): the threshold rules (``"urn"`` with either
    prior, ``"infinite"``, ``"exact"``) 1.1 to 1.4 times the forest's own fit;
    the budget mode about 4.7 times with two classes (0.56 s on 384 rows of
    pima, 1.5 s on 2,300 rows of spam) and 45 times with three (26 s on 2,500
    rows of waveform).  The first fit in a new Python process also compiles
    the numba loops: fit and one predict took 2.1 s (the urn rule) and 9.3 s
    (the budget mode) on pima with numba's cache empty, against 0.2 s and
    1.3 s once compiled.  numba keeps the compiled code in its on-disk cache,
    so later processes pay only loading it (0.4 s and 1.7 s in all).

    Large forests and many classes (``benchmarks/bench_first_predict.py``,
    ``results/speed/first_predict.csv``; 2,000 training and 2,000 test rows
    of synthetic problems, one thread): with two classes the default rule's
    first ``predict`` took 0.01 to 0.02 times the forest's own from
    ``T = 101`` to ``5,001`` (its table or stop bits are built at ``fit``),
    with three 0.03 to 0.05 times from ``T = 101`` to ``1,001``
    (``MAX_STOP_BITS_T3``).  Beyond, at ``T = 2,001`` and ``5,001``, the
    three-class out-of-bag prior has no table: ``fit`` warns
    (:class:`~ensvote.SlowVoteWarning`) and the first ``predict`` took about
    200 times the forest's (later ones reuse the confidences computed).
    ``rule="infinite"`` needs no table: 0.01 to 0.4 times the forest's time up
    to three classes, 0.8 to 2.2 times at ten, 4.9 to 8.3 times at a hundred
    (where nothing stops early and no stop table exists).  Configurations
    whose tables would exceed a limit are refused at ``fit`` with the limit
    and the alternatives named (e.g. the out-of-bag pair prior of 100 classes).

    Examples
    --------
    A forest of 31 trees on twonorm, halted by the urn rule with the
    out-of-bag prior (HYPER, the default for a bootstrapping forest):

    >>> import numpy as np
    >>> from sklearn.ensemble import RandomForestClassifier
    >>> from ensvote import HaltingClassifier, datasets
    >>> X, y = datasets.load("twonorm", n_samples=300, random_state=0)
    >>> X_test, y_test = datasets.load("twonorm", n_samples=200, random_state=1)
    >>> clf = HaltingClassifier(RandomForestClassifier(n_estimators=31, random_state=0),
    ...                         rule="urn", confidence=0.99).fit(X, y)
    >>> clf.rule_
    UrnRule(T=31, confidence=0.99, prior='<given>')
    >>> clf.predict(X_test[:5])
    array([0, 1, 1, 1, 0])
    >>> clf.score(X_test, y_test)
    0.965
    >>> round(clf.halt(X_test).mean_queried, 2)
    10.83

    Against the hard vote of all 31 trees (``rule="exact"`` reproduces it),
    on about a third of the trees:

    >>> full = HaltingClassifier(RandomForestClassifier(n_estimators=31, random_state=0),
    ...                          rule="exact").fit(X, y)
    >>> float(np.mean(clf.predict(X_test) == full.predict(X_test)))
    1.0
    """

    def __init__(self, estimator: BaseEstimator | None = None,
                 rule: Literal["urn", "infinite", "exact", "optimal"] | HaltingRule = "urn", confidence: float = 0.99,
                 prior: Literal["auto", "oob", "uniform"] | ArrayLike | None = "auto",
                 disagreement: float | None = None, max_members: float | None = None,
                 guarantee: Literal["average", "per-row", "minimax"] = "average",
                 voting: Literal["hard", "soft"] = "hard", n_jobs: int | None = None):
        self.estimator = estimator
        self.rule = rule
        self.confidence = confidence
        self.prior = prior
        self.disagreement = disagreement
        self.max_members = max_members
        self.guarantee = guarantee
        self.voting = voting
        self.n_jobs = n_jobs

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------------
    def fit(self, X: ArrayLike, y: ArrayLike, **fit_params: Any) -> HaltingClassifier:
        """Fit the ensemble on ``(X, y)`` and build the halting rule.

        ``fit_params`` (e.g. ``sample_weight``) go to the ensemble's ``fit``.

        Parameters
        ----------
        X : array_like or sparse matrix, shape (n_rows, n_features)
            Training data (NaN allowed, as the wrapped ensembles allow it).
        y : array_like, shape (n_rows,)
            Class labels, at least two classes.
        **fit_params
            Passed to the ensemble's ``fit``.

        Returns
        -------
        self : HaltingClassifier

        Raises
        ------
        TypeError
            ``estimator`` is not a supported voting ensemble of trees, or
            ``rule`` is neither a name nor a :class:`~ensvote.HaltingRule`.
        ValueError
            Bad ``confidence``, ``disagreement``, ``prior`` or ``n_jobs``, a
            single class in ``y``, or a rule that does not fit the ensemble.

        Examples
        --------
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote import HaltingClassifier, datasets
        >>> X, y = datasets.load("twonorm", n_samples=300, random_state=0)
        >>> clf = HaltingClassifier(RandomForestClassifier(n_estimators=31, random_state=0),
        ...                         rule="infinite").fit(X, y)
        >>> clf.rule_, clf.n_members_, clf.classes_
        (InfiniteRule(confidence=0.99), 31, array([0, 1]))
        """
        self._forget_fit()
        est = self._checked_params()
        try:
            return self._fit(est, X, y, **fit_params)
        except BaseException:  # never a half-fitted object: a failed fit leaves it unfitted
            self._forget_fit()
            raise

    def _forget_fit(self):
        """Remove every fitted attribute (``predict`` then raises NotFittedError)."""
        for name in [k for k in self.__dict__ if k.endswith("_") and not k.startswith("__")]:
            del self.__dict__[name]
        for name in ("_ensemble", "_n_fit_rows", "_labels_are_indices"):
            self.__dict__.pop(name, None)

    def _checked_params(self):
        """Validate every parameter before the forest is touched; return the ensemble to clone."""
        est = self.estimator
        if est is None:
            est = RandomForestClassifier(n_estimators=101, random_state=SEED)
        if not isinstance(est, _ENSEMBLES):
            raise TypeError(
                "estimator must be a voting ensemble: RandomForestClassifier, ExtraTreesClassifier "
                f"or BaggingClassifier; got {type(est).__name__}"
            )
        if not isinstance(self.rule, (str, HaltingRule)):
            raise TypeError(f"rule must be one of {', '.join(map(repr, REGISTRY))} or a HaltingRule, "
                            f"got {self.rule!r}")
        if isinstance(self.prior, str) and self.prior not in ("auto", "oob", "uniform"):
            raise ValueError(f"prior must be 'auto', 'oob', 'uniform' or an array, got {self.prior!r}")
        check_probability(self.confidence, name="confidence")
        kernel.resolve_n_jobs(self.n_jobs)  # a bad n_jobs fails here
        if not (isinstance(self.voting, str) and self.voting in ("hard", "soft")):
            raise ValueError(f"voting must be 'hard' or 'soft', got {self.voting!r}")
        if self.voting == "soft" and (not isinstance(self.rule, str) or self.rule != "urn"
                                      or self.max_members is not None):
            raise ValueError("voting='soft' stops where the members not yet queried cannot change the argmax of "
                             "the averaged probabilities (or, with disagreement=δ, where they can only with "
                             "probability δ), and takes no rule: leave rule at its default and max_members unset "
                             "(they apply to voting='hard')")
        check_guarantee(self.guarantee)
        if self.voting == "soft":
            if self.guarantee == "minimax":
                raise ValueError("voting='soft' with disagreement=δ is a per-row bound (every row, whatever its "
                                 "members' probabilities); guarantee='minimax' applies to rule='optimal' only")
            if self.disagreement is not None:
                check_budget(self.disagreement, name="disagreement")
            return est
        cls = self._rule_class()
        if self.guarantee != "average" and (cls is None or cls.strength != "disagreement"):
            raise ValueError(f"guarantee={self.guarantee!r} is a mode of rule='optimal'; rule={self.rule!r} "
                             "takes confidence instead (leave guarantee='average')")
        if cls is not None and cls.strength == "disagreement":
            if self.disagreement is None and self.max_members is None:
                raise ValueError(f"rule={self.rule!r} needs a budget: pass disagreement=δ, e.g. disagreement=0.01 "
                                 "(or max_members=K, a compute budget)")
            if self.disagreement is not None and self.max_members is not None:
                raise ValueError(f"give rule={self.rule!r} one budget: disagreement=δ or max_members=K, not both")
            if self.disagreement is not None:
                check_budget(self.disagreement, name="disagreement")
            else:
                check_members(self.max_members, np.inf)
            if self.guarantee != "average" and self.disagreement is None:
                raise ValueError(f"guarantee={self.guarantee!r} bounds every row's disagreement by δ: give "
                                 "disagreement=δ, not max_members (a compute budget applies to "
                                 "guarantee='average')")
        elif self.max_members is not None:
            raise ValueError(f"max_members is the compute budget of rule='optimal'; rule={self.rule!r} takes "
                             "confidence instead")
        elif self.disagreement is not None:
            budgets = ", ".join(repr(n) for n, c in REGISTRY.items() if c.strength == "disagreement")
            raise ValueError(
                f"disagreement is the budget of rule={budgets}; rule={self.rule!r} takes confidence instead")
        return est

    def _rule_class(self):
        """The registered class ``rule`` names (None for a rule object); refuses a name the classifier cannot build."""
        if not isinstance(self.rule, str):
            return None
        cls = REGISTRY.get(self.rule)
        if cls is None:
            raise ValueError(f"unknown rule {self.rule!r}; valid names: {', '.join(map(repr, REGISTRY))} "
                             "(or pass a HaltingRule)")
        if cls.strength not in (None, "confidence", "disagreement"):
            raise ValueError(f"rule={self.rule!r} is set by its {cls.strength}, which HaltingClassifier has no "
                             f"parameter for: pass the rule object, e.g. rule={cls.__name__}({cls.strength}=...)")
        return cls

    def _fit(self, est, X, y, **fit_params):
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", accept_sparse=["csr", "csc"])
        check_classification_targets(y)
        n_classes = len(np.unique(y))
        if n_classes < 2:
            raise ValueError("HaltingClassifier needs at least 2 classes in y; got 1 class")
        if self.voting == "hard" and self._rule_class() is OptimalRule:
            # a forest too large (or too many classes) for the optimal policy is refused before it is grown
            check_ensemble_size(est.get_params()["n_estimators"], n_classes, self.guarantee, name="n_estimators")
        self.estimator_ = clone(est).fit(X, y, **fit_params)
        self.classes_ = self.estimator_.classes_
        members = self.estimator_.estimators_
        for m in members:
            if not hasattr(m, "tree_"):
                raise TypeError(f"ensemble members must be decision trees, got {type(m).__name__}")
        self.n_members_ = len(members)
        self._n_fit_rows = X.shape[0]  # oob_votes(X) takes the training rows only
        c = self.classes_
        # classes 0 .. l - 1 as int64: the class indices are the labels (predict hands them back as they are)
        self._labels_are_indices = c.dtype == np.int64 and np.array_equal(c, np.arange(len(c)))
        feats = getattr(self.estimator_, "estimators_features_", None)
        # the members as the engine votes with them: per node, the class index it votes for (the
        # ensembles fit their members on class indices, so a member's classes_ are indices into classes_)
        self._ensemble = TreeEnsemble(
            [m.tree_ for m in members], list(feats) if feats is not None else [None] * self.n_members_,
            [np.asarray(m.classes_).take(np.argmax(m.tree_.value[:, 0, :], axis=1)) for m in members],
            len(self.classes_), leaf_proba=[_leaf_proba(m, len(self.classes_)) for m in members]
            if self.voting == "soft" else None)
        self.oob_votes_ = self._oob_votes(X, validated=True) if getattr(self.estimator_, "bootstrap", False) else None
        if self.voting == "soft":  # the soft stop: no rule, no prior; exact, or at the per-row bound's lead
            self.rule_ = self.prior_ = self.expected_members_ = self.expected_disagreement_ = None
            self.soft_lead_ = (None if self.disagreement is None else
                               soft_lead_needed(self.n_members_, len(self.classes_), self.disagreement))
            return self
        self.soft_lead_ = None
        named = self._rule_class()
        strength = None if named is None else {"confidence": self.confidence,
                                               "disagreement": self.disagreement}.get(named.strength)
        options = {} if self.max_members is None else {"max_members": self.max_members}
        if self.guarantee != "average":
            options["guarantee"] = self.guarantee
        if named is OptimalRule and self.n_jobs is not None:
            options["n_jobs"] = self.n_jobs  # the budget mode's folds
        self.rule_ = make_rule(self.rule, n_members=self.n_members_, strength=strength,
                               n_classes=len(self.classes_), prior=self._prior_choice(),
                               oob_votes=lambda: self.oob_votes_ if self.oob_votes_ is not None
                               else self._oob_votes(X, validated=True), **options)
        self.prior_ = getattr(self.rule_, "prior", None)
        optimal = isinstance(self.rule_, OptimalRule)
        self.expected_members_ = self.rule_.expected_members if optimal else None
        self.expected_disagreement_ = self.rule_.expected_disagreement if optimal else None
        if isinstance(self.rule_, UrnRule) and self.rule_.n_classes not in (None, len(self.classes_)):
            raise ValueError(
                f"the rule's prior is over {self.rule_.n_classes} classes but y has {len(self.classes_)}"
            )
        # a configuration beyond a limit (e.g. a many-class table too large) fails here, not in predict;
        # the stop table is built now, not on the first request
        self.rule_.prepare(self.n_members_, len(self.classes_))
        self._ensemble.plan(self.rule_)
        slow = self.rule_.on_demand_warning(len(self.classes_))
        if slow is not None:
            warnings.warn(slow, stacklevel=3)
        return self

    def _prior_choice(self):
        """``prior`` with ``"auto"`` resolved: ``"oob"``, ``"uniform"``, None or the array given."""
        prior = self.prior
        if isinstance(prior, str):
            if prior == "auto":
                return "oob" if getattr(self.estimator_, "bootstrap", False) else "uniform"
            if prior in ("oob", "uniform"):
                return prior
            raise ValueError(f"prior must be 'auto', 'oob', 'uniform' or an array, got {prior!r}")
        return prior

    def oob_votes(self, X: ArrayLike) -> NDArray[np.int64]:
        """Out-of-bag vote counts of the training rows, shape ``(n_rows, n_classes)``.

        Member ``j`` votes for row ``i`` only if row ``i`` was not among the rows
        drawn to fit member ``j`` (``estimator_.estimators_samples_``).  ``X``
        must be the training data passed to ``fit``; ``fit`` already keeps
        these counts as :attr:`oob_votes_` for a bootstrapping ensemble.

        Parameters
        ----------
        X : array_like or sparse matrix, shape (n_rows, n_features)
            The training data passed to ``fit``.

        Returns
        -------
        ndarray of int64, shape (n_rows, n_classes)
            Columns follow ``classes_``.

        Examples
        --------
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote import HaltingClassifier, datasets
        >>> X, y = datasets.load("twonorm", n_samples=300, random_state=0)
        >>> X_test, y_test = datasets.load("twonorm", n_samples=200, random_state=1)
        >>> clf = HaltingClassifier(RandomForestClassifier(n_estimators=31, random_state=0)).fit(X, y)
        >>> votes = clf.oob_votes(X)
        >>> votes[:3]
        array([[ 0, 12],
               [ 0,  8],
               [ 1,  8]])
        >>> bool((votes == clf.oob_votes_).all())
        True
        """
        check_is_fitted(self, "estimator_")
        return self._oob_votes(X)

    def _oob_votes(self, X, validated=False):
        # validated: X is fit's own validated copy (no feature names left to check against)
        X32 = _tree_input(check_array(X, ensure_all_finite="allow-nan", dtype=np.float32, order="C",
                                      accept_sparse="csr")) if validated else self._validate_X(X)
        n = X32.shape[0]
        if n != self._n_fit_rows:
            raise ValueError(f"oob_votes needs the training data passed to fit ({self._n_fit_rows} rows): "
                             f"X has {n} rows (out-of-bag votes of other rows are not defined)")
        votes = np.zeros((n, len(self.classes_)), dtype=np.int64)
        for j, drawn in enumerate(self.estimator_.estimators_samples_):
            oob = np.ones(n, dtype=bool)
            oob[drawn] = False
            rows = np.flatnonzero(oob)
            if rows.size:
                np.add.at(votes, (rows, self._ensemble.member_votes(j, X32[rows])), 1)
        return votes

    # ------------------------------------------------------------------
    def member_votes(self, X: ArrayLike) -> NDArray[np.int64]:
        """Votes of every member, shape ``(n_rows, n_members)``, as class indices into ``classes_``.

        Every member is evaluated (no halting): the vote matrix that
        :func:`ensvote.halt` takes.

        Parameters
        ----------
        X : array_like or sparse matrix, shape (n_rows, n_features)

        Returns
        -------
        ndarray of int64, shape (n_rows, n_members)

        Examples
        --------
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote import HaltingClassifier, datasets
        >>> X, y = datasets.load("twonorm", n_samples=300, random_state=0)
        >>> X_test, y_test = datasets.load("twonorm", n_samples=200, random_state=1)
        >>> clf = HaltingClassifier(RandomForestClassifier(n_estimators=31, random_state=0)).fit(X, y)
        >>> from ensvote import halt
        >>> votes = clf.member_votes(X_test)
        >>> votes.shape
        (200, 31)
        >>> bool((halt(votes, clf.rule_).labels == clf.predict(X_test)).all())
        True
        """
        check_is_fitted(self, "estimator_")
        X32 = self._validate_X(X)
        return self._ensemble.vote_matrix(X32)

    def _validate_X(self, X):
        # float32, C order (or CSR), as the trees' own predict wants it (as RandomForestClassifier does)
        return _tree_input(validate_data(self, X, reset=False, ensure_all_finite="allow-nan",
                                         dtype=np.float32, order="C", accept_sparse="csr"))

    def halt(self, X: ArrayLike) -> HaltResult:
        """Query members row by row until ``rule_`` stops.

        Parameters
        ----------
        X : array_like or sparse matrix, shape (n_rows, n_features)

        Returns
        -------
        HaltResult
            ``labels`` in the space of ``classes_``; ``n_queried`` members per
            row; ``counts`` of votes per class (columns follow ``classes_``).

        Examples
        --------
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote import HaltingClassifier, datasets
        >>> X, y = datasets.load("twonorm", n_samples=300, random_state=0)
        >>> X_test, y_test = datasets.load("twonorm", n_samples=200, random_state=1)
        >>> clf = HaltingClassifier(RandomForestClassifier(n_estimators=31, random_state=0)).fit(X, y)
        >>> res = clf.halt(X_test[:3])
        >>> res.labels, res.n_queried
        (array([0, 1, 1]), array([10,  7, 10]))
        >>> res.counts
        array([[8, 2],
               [1, 6],
               [2, 8]])
        """
        check_is_fitted(self, "estimator_")
        if self.voting == "soft":
            res = self._ensemble.soft_halt(self._X(X), self.n_jobs, self.soft_lead_)
        else:
            res = self._ensemble.halt(self._X(X), self.rule_, self.n_jobs)
        return HaltResult(labels=self.classes_[res.labels], n_queried=res.n_queried, counts=res.counts,
                          n_members=res.n_members, stopped=res.stopped, proba_sum=res.proba_sum)

    def predict_proba(self, X: ArrayLike) -> NDArray[np.float64]:
        """Vote fractions of the members queried for each row.

        ``predict_proba(X)[i, c]`` is the fraction of the members queried for
        row ``i`` (``halt(X).n_queried[i]`` of them) that voted for class
        ``classes_[c]``: ``halt(X).counts / halt(X).n_queried[:, None]``.  It is
        *not* the forest's averaged tree probabilities (soft vote), and not a
        calibrated probability: a row that stopped after a few unanimous
        members gets 1.0 for its class.  Its row-wise argmax (lowest index on
        ties) is ``predict(X)``.  With ``voting="soft"``: the members' class
        probabilities averaged over the members queried (the forest's own
        ``predict_proba`` on rows that query every member).

        Parameters
        ----------
        X : array_like or sparse matrix, shape (n_rows, n_features)

        Returns
        -------
        ndarray of float, shape (n_rows, n_classes)
            Columns in the order of ``classes_``; rows sum to 1.

        Examples
        --------
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote import HaltingClassifier, datasets
        >>> X, y = datasets.load("twonorm", n_samples=300, random_state=0)
        >>> X_test, y_test = datasets.load("twonorm", n_samples=200, random_state=1)
        >>> clf = HaltingClassifier(RandomForestClassifier(n_estimators=31, random_state=0)).fit(X, y)
        >>> import numpy as np
        >>> np.round(clf.predict_proba(X_test[:3]), 4)
        array([[0.8   , 0.2   ],
               [0.1429, 0.8571],
               [0.2   , 0.8   ]])
        """
        check_is_fitted(self, "estimator_")
        if self.voting == "soft":
            res = self._ensemble.soft_halt(self._X(X), self.n_jobs, self.soft_lead_)
            return res.proba_sum / res.n_queried[:, None]
        res = self._ensemble.halt(self._X(X), self.rule_, self.n_jobs)
        return res.counts / res.n_queried[:, None]

    def _X(self, X):
        """``X`` as the trees want it; a float ndarray of the right width takes a lean path.

        The lean path (what a small request pays) checks only what the full
        validation would refuse: anything it does not accept as is (wrong
        width, infinity, a float64 beyond float32, other types, feature names)
        goes through :meth:`_validate_X`, so the errors are the same.
        """
        if (type(X) is np.ndarray and X.ndim == 2 and X.dtype.kind == "f" and X.dtype.itemsize in (4, 8)
                and X.shape[0] > 0 and X.shape[1] == self.n_features_in_
                and "feature_names_in_" not in self.__dict__):
            with np.errstate(over="ignore"):
                X32 = np.ascontiguousarray(X, dtype=np.float32)
            if not np.isinf(X32).any():
                return X32
        return self._validate_X(X)

    def predict(self, X: ArrayLike) -> NDArray:
        """Hard majority vote of the members queried until the rule stops (``voting="soft"``: the soft vote).

        The same labels as ``halt(X).labels``, without assembling the counts.

        Parameters
        ----------
        X : array_like or sparse matrix, shape (n_rows, n_features)

        Returns
        -------
        ndarray, shape (n_rows,)
            Labels from ``classes_``.

        Examples
        --------
        >>> from sklearn.ensemble import RandomForestClassifier
        >>> from ensvote import HaltingClassifier, datasets
        >>> X, y = datasets.load("twonorm", n_samples=300, random_state=0)
        >>> X_test, y_test = datasets.load("twonorm", n_samples=200, random_state=1)
        >>> clf = HaltingClassifier(RandomForestClassifier(n_estimators=31, random_state=0)).fit(X, y)
        >>> clf.predict(X_test[:5]), y_test[:5]
        (array([0, 1, 1, 1, 0]), array([0, 1, 1, 1, 0]))
        """
        d = self.__dict__
        ens = d.get("_ensemble")
        if ens is None:
            check_is_fitted(self, "estimator_")
        shape = getattr(X, "shape", None)
        if (type(X) is np.ndarray and len(shape) == 2 and shape[0] > 0
                and shape[1] == d["n_features_in_"] and (X.dtype is _F64 or X.dtype is _F32)
                and X.flags.c_contiguous and self.voting == "hard" and "feature_names_in_" not in d):
            # the rows go straight to a compiled loop, which reads float64 as float32 and checks for infinities
            # as it goes (anything it refuses gets the full validation below, and its errors): one request or
            # a small batch row by row, a larger one in blocks (no float32 copy of X, no separate scan)
            if shape[0] <= kernel.ROW_BY_ROW:
                out = np.empty(shape[0], dtype=np.int64)
                if ens._label_rows(X, d["rule_"], out):  # X checked above, out made here
                    return out if d["_labels_are_indices"] else self.classes_.take(out)
            else:
                out = ens._labels_unchecked(X, d["rule_"], self.n_jobs)
                if out is not None:
                    return out if d["_labels_are_indices"] else self.classes_.take(out)
        if self.voting == "soft":
            return self.classes_.take(ens.soft_halt(self._X(X), self.n_jobs, self.soft_lead_).labels)
        return self.classes_.take(ens.labels(self._X(X), self.rule_, self.n_jobs))
