"""The table-driven fast paths give exactly the reference engine's results."""

import numpy as np
import pytest
from scipy import sparse
from sklearn.ensemble import BaggingClassifier, ExtraTreesClassifier, RandomForestClassifier

import ensvote as ev
from ensvote import engine
from ensvote.datasets import load
from ensvote.rules import HaltingRule

from engine_reference import reference as _reference, random_votes as _votes

FIELDS = ("n_queried", "counts", "stopped")


def _rules(T):
    prior = ev.oob_prior(np.array([[T, 0], [max(T - 3, 0), min(3, T)], [T // 2, T - T // 2]] * 5), T)
    return [ev.InfiniteRule(0.9), ev.InfiniteRule(0.99), ev.UrnRule(T, 0.95), ev.UrnRule(T, 0.99),
            ev.ExactRule(T), ev.FixedRule(1), ev.FixedRule(min(T, 7)), ev.FixedRule(T),
            ("prior", ev.UrnRule(T, 0.99, prior=prior))]


@pytest.mark.parametrize("l", [2, 3])
@pytest.mark.parametrize("T", [1, 2, 5, 41, 101])
def test_halt_fast_path_equals_reference(T, l):
    votes = _votes(400, T, l, seed=T * 10 + l)
    for rule in _rules(T):
        if isinstance(rule, tuple):
            if l != 2:
                continue
            rule = rule[1]
        assert engine.stop_table(rule, T, l) is not None
        fast = ev.halt(votes, rule, n_classes=l)
        ref = _reference(votes, rule, l)
        assert np.array_equal(fast.labels, ref.labels), rule
        for f in FIELDS:
            assert np.array_equal(getattr(fast, f), getattr(ref, f)), (rule, f)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint64, np.float64])
def test_halt_accepts_any_integer_dtype(dtype):
    votes = _votes(50, 21, 3, seed=3)
    want = ev.halt(votes, ev.UrnRule(21, 0.95))
    got = ev.halt(votes.astype(dtype), ev.UrnRule(21, 0.95))
    for f in ("labels",) + FIELDS:
        assert np.array_equal(getattr(got, f), getattr(want, f))


def test_stop_table_matches_rule_stop():
    T = 31
    for l in (2, 3):
        grid = np.indices((T + 1,) * l).reshape(l, -1).T
        grid = grid[(grid.sum(axis=1) >= 1) & (grid.sum(axis=1) <= T)]
        for rule in (ev.InfiniteRule(0.95), ev.UrnRule(T, 0.9), ev.ExactRule(T), ev.FixedRule(4)):
            table, stride, stops_at, _ = engine.stop_table(rule, T, l)
            stops = rule.stop(grid)
            assert np.array_equal(table[grid @ stride], stops)
            # stops_at[s]: some count vector with s votes stops
            sums = grid.sum(axis=1)
            assert np.array_equal(stops_at, np.isin(np.arange(T + 1), sums[stops]))
            min_votes = engine.stop_table(rule, T, l).min_votes
            assert min_votes == (sums[stops].min() if stops.any() else T)
            assert not table[grid[sums < min_votes] @ stride].any()
            assert not table[len(table) // 2:].any()  # parking codes never stop
            assert engine.stop_table(rule, T, l)[0] is table  # cached


def test_min_votes_skip_matches_reference_when_no_row_can_stop_early():
    # SIBA at alpha = 0.999 needs many unanimous votes: the fast paths skip those look-ups
    T = 51
    rule = ev.UrnRule(T, 0.999)
    assert engine.stop_table(rule, T, 2).min_votes > 5
    votes = _votes(300, T, 2, seed=11)
    votes[:100] = 1  # unanimous rows stop exactly at min_votes
    fast = ev.halt(votes, rule, n_classes=2)
    ref = _reference(votes, rule, 2)
    assert np.all(fast.n_queried[:100] == engine.stop_table(rule, T, 2).min_votes)
    for f in ("labels",) + FIELDS:
        assert np.array_equal(getattr(fast, f), getattr(ref, f)), f


def test_stop_table_cache_key_includes_threshold_and_prior():
    T = 21
    a = engine.stop_table(ev.UrnRule(T, 0.9), T, 2)[0]
    b = engine.stop_table(ev.UrnRule(T, 0.99), T, 2)[0]
    assert not np.array_equal(a, b)
    prior = ev.oob_prior(np.array([[T, 0], [0, T]] * 3), T)
    c = engine.stop_table(ev.UrnRule(T, 0.9, prior=prior), T, 2)[0]
    assert not np.array_equal(a, c)
    assert engine.stop_table(ev.UrnRule(T, 0.9), T, 2)[0] is a


class _EveryThird(HaltingRule):
    def decide(self, t):
        return t.sum(axis=-1) % 3 == 0


def test_user_rule_uses_reference_engine():
    votes = _votes(60, 20, 2, seed=5)
    rule = _EveryThird()
    assert engine.stop_table(rule, 20, 2) is None
    res = ev.halt(votes, rule)
    assert np.all(res.n_queried == 3)


def test_large_table_falls_back_to_reference():
    T, l = 101, 4  # (T + 1) ** 4 entries: too large to tabulate
    assert engine.stop_table(ev.ExactRule(T), T, l) is None
    votes = _votes(30, T, l, seed=9)
    fast = ev.halt(votes, ev.ExactRule(T), n_classes=l)
    ref = _reference(votes, ev.ExactRule(T), l)
    for f in FIELDS:
        assert np.array_equal(getattr(fast, f), getattr(ref, f))


@pytest.mark.parametrize("name", ["twonorm", "waveform"])
@pytest.mark.parametrize("kind", ["rf", "et", "bag"])
def test_classifier_tree_fast_path_equals_reference(name, kind, monkeypatch):
    X, y = load(name, n_samples=1500, random_state=ev.SEED)
    est = {"rf": RandomForestClassifier(31, random_state=ev.SEED),
           "et": ExtraTreesClassifier(15, bootstrap=True, random_state=ev.SEED),
           "bag": BaggingClassifier(n_estimators=9, max_features=0.5, random_state=ev.SEED)}[kind]
    Xtr, ytr, Xte = X[:400], y[:400], X[400:]
    for rule in ("urn", "infinite", "exact", ev.FixedRule(5)):
        clf = ev.HaltingClassifier(est, rule=rule).fit(Xtr, ytr)
        monkeypatch.setattr(engine.TreeEnsemble, "COMPACT_AT", 0.05)  # the numpy loop compacts often
        ref = _reference(clf.member_votes(Xte), clf.rule_, len(clf.classes_))
        for X_ in (Xte, sparse.csr_matrix(Xte)):  # the compiled loop, the numpy loop
            fast = clf.halt(X_)
            assert np.array_equal(fast.labels, clf.classes_[ref.labels])
            assert np.array_equal(clf.predict(X_), fast.labels)  # predict's labels-only path
            for f in FIELDS:
                assert np.array_equal(getattr(fast, f), getattr(ref, f)), (rule, f)
        monkeypatch.undo()


def test_classifier_reference_path_for_untabulated_rule():
    X, y = load("twonorm", n_samples=600, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(12, random_state=ev.SEED),
                               rule=_EveryThird()).fit(X[:300], y[:300])
    res = clf.halt(X[300:])
    assert np.all(res.n_queried == 3)
    ref = _reference(clf.member_votes(X[300:]), clf.rule_, 2)
    assert np.array_equal(res.counts, ref.counts)


def test_classifier_refit_refreshes_leaf_codes():
    X, y = load("twonorm", n_samples=800, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(11, random_state=ev.SEED), rule="exact")
    clf.fit(X[:300], y[:300])
    clf.halt(X[300:])
    clf.fit(X[300:600], y[300:600])
    res = clf.halt(X[600:])
    ref = ev.halt(clf.member_votes(X[600:]), ev.ExactRule(11))
    assert np.array_equal(res.counts, ref.counts)


def test_single_row_and_empty():
    X, y = load("twonorm", n_samples=400, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(21, random_state=ev.SEED)).fit(X[:300], y[:300])
    one = clf.halt(X[300:301])
    assert one.labels.shape == (1,) and one.counts.sum() == one.n_queried[0]
    assert clf.predict(X[300:400])[0] == one.labels[0]
    empty = ev.halt(np.zeros((0, 7), dtype=int), ev.UrnRule(7))
    assert empty.labels.shape == (0,) and empty.counts.shape == (0, 2)


@pytest.mark.parametrize("l", [2, 3, 4])
def test_label_table_is_majority_lowest_index_on_ties(l):
    T = 6
    grid = np.indices((T + 1,) * l).reshape(l, -1).T
    grid = grid[grid.sum(axis=1) <= T]
    stride = (T + 1) ** np.arange(l - 1, -1, -1)
    got = engine.label_table(T, l)[grid @ stride]
    assert np.array_equal(got, np.argmax(grid, axis=1))  # argmax: first maximum
    ties = grid[(grid[:, 0] == grid[:, -1]) & (grid[:, 0] == grid.max(axis=1))]
    assert len(ties) and np.all(engine.label_table(T, l)[ties @ stride] == 0)
    assert engine.label_table(T, l) is engine.label_table(T, l)  # cached


def test_predict_string_classes_matches_halt():
    X, y = load("waveform", n_samples=700, random_state=ev.SEED)
    names = np.array(["left", "middle", "right"])[y]
    clf = ev.HaltingClassifier(RandomForestClassifier(21, random_state=ev.SEED)).fit(X[:400], names[:400])
    assert np.array_equal(clf.predict(X[400:]), clf.halt(X[400:]).labels)
    assert clf.predict(X[400:]).dtype == names.dtype


@pytest.mark.parametrize("sort_min_rows", [1, 10**9])
def test_row_order_does_not_change_results(sort_min_rows, monkeypatch):
    # the numpy loop (sparse X) reorders rows by leaf (or not, below SORT_MIN_ROWS); results are per caller row
    X, y = load("waveform", n_samples=2000, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(41, random_state=ev.SEED)).fit(X[:500], y[:500])
    ref = _reference(clf.member_votes(X[500:]), clf.rule_, 3)
    monkeypatch.setattr(engine.TreeEnsemble, "SORT_MIN_ROWS", sort_min_rows)
    monkeypatch.setattr(engine.TreeEnsemble, "COMPACT_AT", 0.02)
    Xs = sparse.csr_matrix(X[500:])
    res = clf.halt(Xs)
    assert np.array_equal(res.labels, ref.labels)
    for f in FIELDS:
        assert np.array_equal(getattr(res, f), getattr(ref, f)), f
    assert np.array_equal(clf.predict(Xs), res.labels)


@pytest.mark.parametrize("node_count", [100, 2 ** 15, 70_000])
def test_by_leaf_is_a_stable_sort_for_small_and_large_trees(node_count):
    from types import SimpleNamespace

    from ensvote.engine import _by_leaf
    leaves = np.random.default_rng(1).integers(0, node_count, 5000)
    order = _by_leaf(leaves, SimpleNamespace(node_count=node_count))
    assert np.array_equal(order, np.argsort(leaves, kind="stable"))


def test_one_row_requests_answer_as_the_batch_does():
    # one row goes to kernel.label_rows (forest and tables packed in two buffers); any layout, dtype or rule change
    X, y = load("waveform", n_samples=900, random_state=ev.SEED)
    names = np.array(["left", "middle", "right"])[y]
    clf = ev.HaltingClassifier(RandomForestClassifier(31, random_state=ev.SEED)).fit(X[:500], names[:500])
    batch = clf.predict(X[500:])
    for i in range(500, 900, 7):
        row = X[i:i + 1]
        for x in (row, row.astype(np.float32), np.asfortranarray(row), np.repeat(row, 2, axis=1)[:, ::2]):
            got = clf.predict(x)
            assert got.shape == (1,) and got[0] == batch[i - 500], (i, x.dtype, x.flags)
    got = clf.predict(X[500:501])
    got[0] = "changed"  # the answer is the caller's array, not a view of classes_
    assert list(clf.classes_) == ["left", "middle", "right"] and clf.predict(X[500:501])[0] == batch[0]
    # a new rule after a refit: the packed tables follow it
    clf.set_params(rule="exact").fit(X[:500], names[:500])
    exact = clf.predict(X[500:])
    assert [clf.predict(X[i:i + 1])[0] for i in range(500, 900, 13)] == list(exact[::13])
    with pytest.raises(ValueError, match="infinity|too large"):
        clf.predict(np.full((1, X.shape[1]), np.inf))


def test_label_rows_refuses_arrays_it_cannot_read():
    # TreeEnsemble.label_rows is public: arrays the compiled loop would misread are refused, naming the problem
    X, y = load("twonorm", n_samples=400, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(31, random_state=ev.SEED)).fit(X[:300], y[:300])
    ens, rule = clf._ensemble, clf.rule_
    assert ens.arrays.width == X.shape[1]
    out = np.empty(5, dtype=np.int64)
    for bad in (np.asfortranarray(X[:5]), X[:5].astype(np.int64), X[0], X[:5].tolist(), X[:5, ::2]):
        with pytest.raises(TypeError, match="2-D C-contiguous ndarray of float32 or float64"):
            ens.label_rows(bad, rule, out)
    with pytest.raises(ValueError, match="X has 10 features; the trees read feature 19"):
        ens.label_rows(np.ascontiguousarray(X[:5, :10]), rule, out)
    ro = np.empty(5, dtype=np.int64)
    ro.setflags(write=False)
    for bad_out in (out[:2], out.astype(np.int32), ro, list(out)):
        with pytest.raises(ValueError, match="out must be a writeable int64 array of shape \\(5,\\)"):
            ens.label_rows(X[:5], rule, bad_out)
    assert ens.label_rows(X[:5], rule, out) and np.array_equal(out, clf.predict(X[:5]))


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # scikit-learn's cast, then its error
@pytest.mark.parametrize("rule", ["urn", "exact"])
def test_small_batches_go_row_by_row_and_answer_as_the_blocks_do(rule):
    # up to kernel.ROW_BY_ROW rows take kernel.label_rows (two rows at a time); more take the block loop
    from ensvote import kernel
    X, y = load("twonorm", n_samples=300 + 2 * kernel.ROW_BY_ROW + 100, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(31, random_state=ev.SEED), rule=rule).fit(X[:300], y[:300])
    assert clf._labels_are_indices
    Xte = X[300:].copy()
    Xte[5, 3] = np.nan  # a missing value goes where the tree sends it, in both loops
    ref = clf.halt(Xte).labels
    R = kernel.ROW_BY_ROW
    for n in (1, 2, R - 1, R, R + 1, 2 * R):
        for Xb in (Xte[:n], Xte[:n].astype(np.float32)):
            got = clf.predict(Xb)
            assert got.dtype == clf.classes_.dtype and np.array_equal(got, ref[:n]), (n, Xb.dtype)
    got = clf.predict(Xte[:4])
    got[:] = 7  # a new array each time, never one the classifier keeps
    assert np.array_equal(clf.predict(Xte[:4]), ref[:4])
    # float64 values are compared as float32, as the trees compare them: a value just above a float32
    # threshold that rounds down onto it goes left, in every loop
    t = clf._ensemble.arrays
    thr = t.threshold[np.isfinite(t.threshold)][0]
    edge = np.nextafter(np.float64(thr), np.inf)
    assert np.float32(edge) == thr and edge > thr
    Xe = np.repeat(Xte[:3], 20, axis=0)
    Xe[:, t.feature[np.isfinite(t.threshold)][0]] = edge
    assert np.array_equal(clf.predict(Xe[:3]), clf.predict(Xe)[:3])
    assert np.array_equal(clf.predict(Xe[:3]), clf.predict(Xe[:3].astype(np.float32)))
    # a row of a small batch with a value infinite as float32 gets the full validation's error
    for bad in (np.inf, -np.inf, 1e300):
        Xb = Xte[:5].copy()
        Xb[4, 0] = bad
        with pytest.raises(ValueError, match="infinity|too large"):
            clf.predict(Xb)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # scikit-learn's cast, then its error
def test_large_batches_are_read_as_float32_without_a_copy_and_answer_as_validated(monkeypatch):
    # predict on a dense float batch hands X itself to the block loop (TreeEnsemble._labels_unchecked), which reads
    # float64 as float32 value by value and answers None on a value infinite as float32: then the full validation
    from ensvote import kernel
    monkeypatch.setattr(kernel, "BLOCK", 64)  # several blocks, an infinity in any one of them
    X, y = load("twonorm", n_samples=800, random_state=ev.SEED)
    Xte = X[300:].copy()
    Xte[7, 2] = np.nan
    for rule in ("urn", "exact"):
        clf = ev.HaltingClassifier(RandomForestClassifier(31, random_state=ev.SEED), rule=rule).fit(X[:300], y[:300])
        ens, ref = clf._ensemble, clf.halt(Xte).labels
        for n_jobs in (None, 2):
            for Xb in (Xte, Xte.astype(np.float32)):
                assert np.array_equal(ens._labels_unchecked(Xb, clf.rule_, n_jobs), ref), (rule, n_jobs, Xb.dtype)
                assert np.array_equal(clf.set_params(n_jobs=n_jobs).predict(Xb), ref)
            for bad in (np.inf, -np.inf, 1e300):
                for row in (0, 200, len(Xte) - 1):
                    Xb = Xte.copy()
                    Xb[row, 5] = bad
                    assert ens._labels_unchecked(Xb, clf.rule_, n_jobs) is None, (bad, row)
                    with pytest.raises(ValueError, match="infinity|too large"):
                        clf.predict(Xb)
    # no stop table (five classes at T = 101): None, and predict takes the validated path
    rng = np.random.default_rng(ev.SEED)
    X5 = rng.normal(size=(600, 6))
    y5 = np.argmax(X5[:, :5], axis=1)
    clf5 = ev.HaltingClassifier(RandomForestClassifier(101, random_state=ev.SEED)).fit(X5[:400], y5[:400])
    assert clf5._ensemble._labels_unchecked(X5[400:], clf5.rule_) is None
    assert np.array_equal(clf5.predict(X5[400:]), clf5.classes_[clf5.halt(X5[400:]).labels])
