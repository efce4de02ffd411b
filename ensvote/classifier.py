"""scikit-learn meta-estimator: a voting ensemble that stops voting early."""

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.ensemble import BaggingClassifier, ExtraTreesClassifier, RandomForestClassifier
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._utils import SEED
from ._validation import check_probability
from .engine import HaltResult, _Tally, _label_table, run_halting, stop_table, table_result
from .optimal import OptimalRule, check_budget, check_classes
from .priors import oob_prior
from .rules import HaltingRule, UrnRule, make_rule

__all__ = ["HaltingClassifier"]

_ENSEMBLES = (RandomForestClassifier, ExtraTreesClassifier, BaggingClassifier)


def _columns(X, feats):
    """The columns ``feats`` of ``X`` (None: all), C-contiguous when dense, as the trees want them."""
    if feats is None:
        return X
    return X[:, feats] if sparse.issparse(X) else np.ascontiguousarray(X[:, feats])


def _take_rows(X, idx):
    """Rows ``idx`` of a dense array or a CSR matrix."""
    return X[idx] if sparse.issparse(X) else np.take(X, idx, axis=0)


def _by_leaf(leaves, tree):
    """A stable order of rows that groups equal leaf ids (radix sort on 16-bit keys when they fit)."""
    key = leaves.astype(np.int16 if tree.node_count < 2 ** 15 else np.int32)
    return np.argsort(key, kind="stable")


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
        ``"urn"``: :class:`~ensvote.UrnRule` (Soto et al. 2016); ``"infinite"``:
        :class:`~ensvote.InfiniteRule` (Hernández-Lobato et al. 2011); ``"exact"``:
        :class:`~ensvote.ExactRule`; ``"optimal"``: :class:`~ensvote.OptimalRule`,
        the fewest expected members for the disagreement budget
        ``disagreement`` (budget mode; two or three classes, at most 101
        members).  A rule object is used as given (its ``T`` must equal the
        number of members).
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
        majority, met in expectation under the prior (the out-of-bag prior by
        default).  Required with ``rule="optimal"``, refused with the others
        (they take ``confidence``).

    ``X`` may be a dense array or a scipy sparse matrix (used as CSR for
    prediction), as the wrapped ensembles accept; missing values (NaN) are
    routed as scikit-learn's trees route them.

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
        the prior (at most ``disagreement``).
    classes_ : ndarray of class labels
    n_features_in_ : int
    n_members_ : int
    """

    def __init__(self, estimator=None, rule="urn", confidence=0.99, prior="auto", disagreement=None):
        self.estimator = estimator
        self.rule = rule
        self.confidence = confidence
        self.prior = prior
        self.disagreement = disagreement

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        tags.input_tags.sparse = True
        return tags

    # ------------------------------------------------------------------
    def fit(self, X, y, **fit_params):
        """Fit the ensemble on ``(X, y)`` and build the halting rule.

        ``fit_params`` (e.g. ``sample_weight``) go to the ensemble's ``fit``.
        """
        est = self.estimator
        if est is None:
            est = RandomForestClassifier(n_estimators=101, random_state=SEED)
        if not isinstance(est, _ENSEMBLES):
            raise TypeError(
                "estimator must be a voting ensemble: RandomForestClassifier, ExtraTreesClassifier "
                f"or BaggingClassifier; got {type(est).__name__}"
            )
        if not isinstance(self.rule, (str, HaltingRule)):
            raise TypeError(
                f"rule must be 'urn', 'infinite', 'exact', 'optimal' or a HaltingRule, got {self.rule!r}")
        check_probability(self.confidence, name="confidence")
        budget_mode = isinstance(self.rule, str) and self.rule == "optimal"
        if budget_mode:
            if self.disagreement is None:
                raise ValueError("rule='optimal' needs a budget: pass disagreement=δ, e.g. disagreement=0.01")
            check_budget(self.disagreement, name="disagreement")
        elif self.disagreement is not None:
            raise ValueError(
                f"disagreement is the budget of rule='optimal'; rule={self.rule!r} takes confidence instead")
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan", accept_sparse=["csr", "csc"])
        check_classification_targets(y)
        if len(np.unique(y)) < 2:
            raise ValueError("HaltingClassifier needs at least 2 classes in y; got 1 class")
        self.estimator_ = clone(est).fit(X, y, **fit_params)
        self.classes_ = self.estimator_.classes_
        members = self.estimator_.estimators_
        for m in members:
            if not hasattr(m, "tree_"):
                raise TypeError(f"ensemble members must be decision trees, got {type(m).__name__}")
        self.n_members_ = len(members)
        feats = getattr(self.estimator_, "estimators_features_", None)
        self._features = list(feats) if feats is not None else [None] * self.n_members_
        # leaf -> class index (in self.classes_), per member
        self._leaf_class = [
            np.asarray(m.classes_).take(np.argmax(m.tree_.value[:, 0, :], axis=1)).astype(np.int64)
            for m in members
        ]
        # leaf -> code increment of the leaf's class (mixed radix T + 1, see engine.stop_table)
        stride = (self.n_members_ + 1) ** np.arange(len(self.classes_) - 1, -1, -1)
        self._leaf_code = [stride.astype(np.int32).take(lc) for lc in self._leaf_class]
        if budget_mode:
            check_classes(len(self.classes_))  # before the out-of-bag prior is estimated
        self.prior_ = self._build_prior(X, y)
        if budget_mode:
            self.rule_ = OptimalRule(self.n_members_, self.disagreement, prior=self.prior_,
                                     n_classes=len(self.classes_))
        else:
            self.rule_ = make_rule(self.rule, n_members=self.n_members_, confidence=self.confidence,
                                   prior=self.prior_)
        optimal = isinstance(self.rule_, OptimalRule)
        self.expected_members_ = self.rule_.expected_members if optimal else None
        self.expected_disagreement_ = self.rule_.expected_disagreement if optimal else None
        if isinstance(self.rule_, UrnRule) and self.rule_.n_classes not in (None, len(self.classes_)):
            raise ValueError(
                f"the rule's prior is over {self.rule_.n_classes} classes but y has {len(self.classes_)}"
            )
        # a configuration beyond a limit (e.g. a many-class table too large) fails here, not in predict
        self.rule_._prepare(self.n_members_, len(self.classes_))
        return self

    def _build_prior(self, X, y):
        if isinstance(self.rule, (UrnRule, OptimalRule)):
            return self.rule.prior
        if not (isinstance(self.rule, str) and self.rule in ("urn", "optimal")):
            return None
        prior = self.prior
        if isinstance(prior, str):
            if prior == "auto":
                prior = "oob" if getattr(self.estimator_, "bootstrap", False) else "uniform"
            if prior == "uniform":
                return None
            if prior == "oob":
                return oob_prior(self.oob_votes(X), self.n_members_)
            raise ValueError(f"prior must be 'auto', 'oob', 'uniform' or an array, got {prior!r}")
        if prior is None:
            return None
        return prior

    def oob_votes(self, X):
        """Out-of-bag vote counts of the training rows, shape ``(n_rows, n_classes)``.

        Member ``j`` votes for row ``i`` only if row ``i`` was not among the rows
        drawn to fit member ``j`` (``estimator_.estimators_samples_``).  ``X``
        must be the training data passed to ``fit``.
        """
        check_is_fitted(self, "estimator_")
        X32 = self._validate_X(X)
        n = X32.shape[0]
        votes = np.zeros((n, len(self.classes_)), dtype=np.int64)
        for j, drawn in enumerate(self.estimator_.estimators_samples_):
            oob = np.ones(n, dtype=bool)
            oob[drawn] = False
            rows = np.flatnonzero(oob)
            if rows.size:
                np.add.at(votes, (rows, self._member_predict(j, _take_rows(X32, rows))), 1)
        return votes

    # ------------------------------------------------------------------
    def _member_predict(self, j, X32):
        Xj = _columns(X32, self._features[j])
        return self._leaf_class[j][self.estimator_.estimators_[j].tree_.apply(Xj)]

    def member_votes(self, X):
        """Votes of every member, shape ``(n_rows, n_members)``, as class indices into ``classes_``."""
        check_is_fitted(self, "estimator_")
        X32 = self._validate_X(X)
        return np.column_stack([self._member_predict(j, X32) for j in range(self.n_members_)])

    def _validate_X(self, X):
        # float32, C order (or CSR), as the trees' own predict wants it (as RandomForestClassifier does)
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float32,
                          order="C", accept_sparse="csr")
        if sparse.issparse(X) and (X.indices.dtype != np.int32 or X.indptr.dtype != np.int32):
            if X.nnz >= 2**31:
                raise ValueError("sparse X has too many non-zero entries for the trees (at most 2**31 - 1)")
            X = X.copy()
            X.indices, X.indptr = X.indices.astype(np.int32), X.indptr.astype(np.int32)
        return X

    def halt(self, X):
        """Query members row by row until ``rule_`` stops.

        Returns
        -------
        HaltResult
            ``labels`` in the space of ``classes_``; ``n_queried`` members per
            row; ``counts`` of votes per class (columns follow ``classes_``).
        """
        check_is_fitted(self, "estimator_")
        X32 = self._validate_X(X)
        T, l = self.n_members_, len(self.classes_)
        tab = stop_table(self.rule_, T, l)
        if tab is not None:
            res = table_result(*self._halt_trees(X32, *tab), T, tab.table, tab.stride)
        else:
            def fetch(rows, a, b):
                Xa = _take_rows(X32, rows)
                out = np.empty((len(rows), b - a), dtype=np.int64)
                for j in range(a, b):
                    out[:, j - a] = self._member_predict(j, Xa)
                return out

            res = run_halting(fetch, X32.shape[0], T, l, self.rule_)
        return HaltResult(labels=self.classes_[res.labels], n_queried=res.n_queried,
                          counts=res.counts, n_members=res.n_members, stopped=res.stopped)

    #: Compact the active rows (copy their features) once this fraction of
    #: the rows being evaluated has stopped (see ``benchmarks/bench_speed.py``).
    _COMPACT_AT = 0.1
    #: Row sets at least this large are reordered by leaf (see ``_halt_trees``).
    _SORT_MIN_ROWS = 64

    def _halt_trees(self, X32, table, stride, stops_at):
        """The fast path: one tree at a time over the rows still voting.

        Returns the code each row ended at and the members it queried.

        Each row carries its count vector as one mixed-radix code (see
        :func:`ensvote.engine.stop_table`); a tree adds the code of its leaf's
        class, and the stop check is one table look-up (skipped after trees
        ``j`` with ``stops_at[j + 1]`` False, e.g. the first few, where no row
        can stop).  A stopped row's code is parked at ``(T + 1) ** l``, where
        the table is False, and the row stays in the evaluated set until a
        tenth of it has stopped; then the active rows' features are copied
        into a smaller array.

        Rows are evaluated in an order that groups similar rows: after the
        first tree they are sorted by its leaf, and at each compaction the
        survivors by the current tree's leaf.  Rows that share a leaf tend to
        take the same branches in the next trees, which the processor predicts
        far better than a random sequence of rows; the results do not depend
        on the order (the tally maps rows back to the caller's).
        """
        T = self.n_members_
        n = X32.shape[0]
        trees = [m.tree_ for m in self.estimator_.estimators_]
        leaf_code = self._leaf_code
        feats = self._features
        tally = _Tally(n, T, table, stops_at, self._COMPACT_AT)
        Xc = X32  # features of the evaluated rows, in tally's order
        for j in range(T):
            if tally.n_live == 0:
                break
            leaves = trees[j].apply(_columns(Xc, feats[j]))
            tally.code += leaf_code[j].take(leaves)
            if j == 0 and n >= self._SORT_MIN_ROWS:  # group rows that share tree 0's leaf
                order = _by_leaf(leaves, trees[0])
                tally.select(order)
                Xc, leaves = _take_rows(Xc, order), leaves[order]
            keep = tally.stop_after(j)
            if keep is not None:
                if len(keep) >= self._SORT_MIN_ROWS:  # survivors grouped by this tree's leaf
                    keep = keep[_by_leaf(leaves[keep], trees[j])]
                tally.select(keep)
                Xc = _take_rows(Xc, keep)
        return tally.code_end, tally.n_queried

    def predict(self, X):
        """Hard majority vote of the members queried until the rule stops.

        The same labels as ``halt(X).labels``, without assembling the counts.
        """
        check_is_fitted(self, "estimator_")
        T, l = self.n_members_, len(self.classes_)
        tab = stop_table(self.rule_, T, l)
        if tab is None:
            return self.halt(X).labels
        code_end, _ = self._halt_trees(self._validate_X(X), *tab)
        return self.classes_.take(_label_table(T, l).take(code_end))
