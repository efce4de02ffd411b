"""scikit-learn meta-estimator: a voting ensemble that stops voting early."""

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin, MetaEstimatorMixin, clone
from sklearn.ensemble import BaggingClassifier, ExtraTreesClassifier, RandomForestClassifier
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data

from ._utils import SEED
from ._validation import check_probability
from .engine import HaltResult, _Tally, _label_table, run_halting, stop_table, table_result
from .priors import oob_prior
from .rules import HaltingRule, UrnRule, make_rule

__all__ = ["HaltingClassifier"]

_ENSEMBLES = (RandomForestClassifier, ExtraTreesClassifier, BaggingClassifier)


def _by_leaf(leaves, tree):
    """A stable order of rows that groups equal leaf ids (radix sort on 16-bit keys when they fit)."""
    key = leaves.astype(np.int16 if tree.node_count < 2 ** 15 else np.int32)
    return np.argsort(key, kind="stable")


class HaltingClassifier(ClassifierMixin, MetaEstimatorMixin, BaseEstimator):
    """A voting ensemble whose members are queried one at a time until a rule stops.

    ``fit`` fits the wrapped ensemble (and, for ``prior="oob"``, estimates the
    prior of seed 002 from out-of-bag votes); ``predict`` queries each row's
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
    rule : {"urn", "infinite", "exact"} or HaltingRule, default="urn"
        ``"urn"``: :class:`~ensvote.UrnRule` (seed 002); ``"infinite"``:
        :class:`~ensvote.InfiniteRule` (seed 000); ``"exact"``:
        :class:`~ensvote.ExactRule`.  A rule object is used as given (its ``T``
        must equal the number of members).
    confidence : float in (0, 1), default=0.99
        Threshold (α or π) for rules given by name.
    prior : {"oob", "uniform"} or array, default="oob"
        Prior for ``rule="urn"``: estimated from out-of-bag votes (HYPER; needs
        bootstrap), uniform (SIBA), or given explicitly (see
        :func:`ensvote.confidence.check_prior`).  Ignored by the other rules.

    Attributes
    ----------
    estimator_ : the fitted ensemble
    rule_ : HaltingRule used by ``predict``
    prior_ : the prior used by ``rule_`` (None for uniform / not an urn rule)
    classes_ : ndarray of class labels
    n_features_in_ : int
    n_members_ : int
    """

    def __init__(self, estimator=None, rule="urn", confidence=0.99, prior="oob"):
        self.estimator = estimator
        self.rule = rule
        self.confidence = confidence
        self.prior = prior

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
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
            raise TypeError(f"rule must be 'urn', 'infinite', 'exact' or a HaltingRule, got {self.rule!r}")
        check_probability(self.confidence, name="confidence")
        X, y = validate_data(self, X, y, ensure_all_finite="allow-nan")
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
        self.prior_ = self._build_prior(X, y)
        self.rule_ = make_rule(self.rule, n_members=self.n_members_, confidence=self.confidence,
                               prior=self.prior_)
        if isinstance(self.rule_, UrnRule) and self.rule_.n_classes not in (None, len(self.classes_)):
            raise ValueError(
                f"the rule's prior is over {self.rule_.n_classes} classes but y has {len(self.classes_)}"
            )
        return self

    def _build_prior(self, X, y):
        if isinstance(self.rule, UrnRule):
            return self.rule.prior
        if not (isinstance(self.rule, str) and self.rule == "urn"):
            return None
        prior = self.prior
        if isinstance(prior, str):
            if prior == "uniform":
                return None
            if prior == "oob":
                return oob_prior(self.oob_votes(X), self.n_members_)
            raise ValueError(f"prior must be 'oob', 'uniform' or an array, got {prior!r}")
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
        X = validate_data(self, X, reset=False, ensure_all_finite="allow-nan")
        X32 = np.ascontiguousarray(X, dtype=np.float32)
        n = X32.shape[0]
        votes = np.zeros((n, len(self.classes_)), dtype=np.int64)
        for j, drawn in enumerate(self.estimator_.estimators_samples_):
            oob = np.ones(n, dtype=bool)
            oob[drawn] = False
            rows = np.flatnonzero(oob)
            if rows.size:
                np.add.at(votes, (rows, self._member_predict(j, X32[rows])), 1)
        return votes

    # ------------------------------------------------------------------
    def _member_predict(self, j, X32):
        feats = self._features[j]
        Xj = X32 if feats is None else np.ascontiguousarray(X32[:, feats])
        return self._leaf_class[j][self.estimator_.estimators_[j].tree_.apply(Xj)]

    def member_votes(self, X):
        """Votes of every member, shape ``(n_rows, n_members)``, as class indices into ``classes_``."""
        check_is_fitted(self, "estimator_")
        X32 = self._validate_X(X)
        return np.column_stack([self._member_predict(j, X32) for j in range(self.n_members_)])

    def _validate_X(self, X):
        # float32, C order, as the trees' own predict wants it (as RandomForestClassifier does)
        return validate_data(self, X, reset=False, ensure_all_finite="allow-nan", dtype=np.float32,
                             order="C")

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
                Xa = X32[rows]
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
            Xj = Xc if feats[j] is None else np.ascontiguousarray(Xc[:, feats[j]])
            leaves = trees[j].apply(Xj)
            tally.code += leaf_code[j].take(leaves)
            if j == 0 and n >= self._SORT_MIN_ROWS:  # group rows that share tree 0's leaf
                order = _by_leaf(leaves, trees[0])
                tally.select(order)
                Xc, leaves = np.take(Xc, order, axis=0), leaves[order]
            keep = tally.stop_after(j)
            if keep is not None:
                if len(keep) >= self._SORT_MIN_ROWS:  # survivors grouped by this tree's leaf
                    keep = keep[_by_leaf(leaves[keep], trees[j])]
                tally.select(keep)
                Xc = np.take(Xc, keep, axis=0)
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
