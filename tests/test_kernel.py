"""The compiled stop loop (ensvote.kernel) gives exactly the reference engine's results.

The reference is :func:`ensvote.engine.run_halting` on the vote matrix of
``member_votes`` (block by block, ``rule.decide`` on the counts), with no stop
table.  ``HaltingClassifier`` runs the compiled loop on dense ``X`` (one row
and batches, any ``n_jobs``) and the engine's numpy loop on sparse ``X``;
both are checked here, as are the walk at the trees' exact thresholds,
``n_jobs``, the lean path and its errors, ``predict_proba`` and ``oob_votes_``.
"""

import copy

import numpy as np
import pytest
from scipy import sparse
from sklearn.ensemble import BaggingClassifier, ExtraTreesClassifier, RandomForestClassifier

import ensvote as ev
from ensvote import classifier, engine, kernel
from ensvote.datasets import load

from engine_reference import reference as _reference

FIELDS = ("labels", "n_queried", "counts", "stopped")
#: the rules of benchmarks/bench_speed.py, at its T and alpha
BENCH_RULES = {"HYPER": dict(rule="urn", prior="oob"), "SIBA": dict(rule="urn", prior="uniform"),
               "infinite": dict(rule="infinite"), "exact": dict(rule="exact")}
N = kernel.BLOCK


def _problems(n_test):
    """The benchmark's problems (twonorm, waveform, spam, pima, adversarial), small."""
    rng = np.random.default_rng(ev.SEED)
    for name in ("twonorm", "waveform"):
        X, y = load(name, n_samples=300 + n_test, random_state=rng)
        yield name, X[:300], y[:300], X[300:]
    for name in ("spam", "pima"):
        X, y = load(name)
        idx = rng.permutation(len(y))
        tr, te = idx[: 2 * len(y) // 3], idx[2 * len(y) // 3:]
        Xte = X[te][rng.integers(0, len(te), n_test)]
        yield name, X[tr], y[tr], Xte + rng.normal(0.0, 0.1, Xte.shape) * X[te].std(axis=0)
    X = rng.random((600, 5))
    yield "adversarial", X, rng.integers(0, 2, 600), rng.random((n_test, 5))


def _check(clf, X, ref, what):
    res = clf.halt(X)
    assert np.array_equal(res.labels, clf.classes_[ref.labels]), what
    for f in FIELDS[1:]:
        assert np.array_equal(getattr(res, f), getattr(ref, f)), (what, f)
    assert np.array_equal(clf.predict(X), clf.classes_[ref.labels]), what
    assert np.allclose(clf.predict_proba(X), ref.counts / ref.n_queried[:, None]), what


@pytest.mark.parametrize("problem", list(_problems(600)), ids=lambda p: p[0])
def test_kernel_equals_reference_on_every_benchmark_dataset_and_rule(problem, monkeypatch):
    name, Xtr, ytr, Xte = problem
    for label, kw in BENCH_RULES.items():
        clf = ev.HaltingClassifier(RandomForestClassifier(101, random_state=ev.SEED), confidence=0.99,
                                   **kw).fit(Xtr, ytr)
        l = len(clf.classes_)
        assert clf._ensemble.plan(clf.rule_) is not None  # the compiled path is the one tested
        ref = _reference(clf.member_votes(Xte), clf.rule_, l)
        for n_jobs in (None, 1, 2, -1):
            clf.set_params(n_jobs=n_jobs)
            _check(clf, Xte, ref, (name, label, n_jobs))
            _check(clf, Xte[:7], _slice(ref, slice(0, 7)), (name, label, n_jobs, "small"))
        # the numpy loop (sparse X) on the same rows
        clf.set_params(n_jobs=None)
        _check(clf, sparse.csr_matrix(Xte), ref, (name, label, "numpy"))
        # row by row (the one-row path), float64 and float32
        for dtype in (np.float64, np.float32):
            Xd = Xte.astype(dtype)
            one = np.concatenate([clf.predict(Xd[i:i + 1]) for i in range(60)])
            assert np.array_equal(one, clf.classes_[ref.labels[:60]]), (name, label, dtype)
        for i in range(0, 60, 13):
            _check(clf, Xte[i:i + 1], _slice(ref, slice(i, i + 1)), (name, label, i))


def _slice(res, s):
    return engine.HaltResult(labels=res.labels[s], n_queried=res.n_queried[s], counts=res.counts[s],
                             n_members=res.n_members, stopped=res.stopped[s])


@pytest.mark.parametrize("size", [1, 7, 8, 9, 17, N - 1, N, N + 1, 2 * N + 9])
def test_batches_around_the_walk_groups_and_blocks(size):
    # rows are walked eight at a time (a tail of fewer walked one by one) in blocks of BLOCK rows
    X, y = load("twonorm", n_samples=300 + size, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(101, random_state=ev.SEED)).fit(X[:300], y[:300])
    ref = _reference(clf.member_votes(X[300:]), clf.rule_, 2)
    for n_jobs in (None, 2):
        clf.set_params(n_jobs=n_jobs)
        _check(clf, X[300:], ref, (size, n_jobs))


@pytest.mark.parametrize("steps", ["none", "depth", "random", "fitted"])
def test_the_walk_reaches_each_rows_leaf_whatever_steps_it_takes_before_looking(steps):
    # eight rows walk steps[j] levels without looking whether they are at their leaves, then look after each
    # level (kernel._walk8): the leaves, and so every code and member count, must not depend on steps[j]
    X, y = load("twonorm", n_samples=1400, random_state=ev.SEED)
    X[np.random.default_rng(ev.SEED).random(X.shape) < 0.02] = np.nan  # (the walk that tests for NaN too)
    X[350:] = np.where(np.isnan(X[350:]), 0.0, X[350:])  # (and blocks with no NaN: the walk that does not)
    clf = ev.HaltingClassifier(RandomForestClassifier(41, random_state=ev.SEED), rule="exact").fit(X[:300], y[:300])
    fa = clf._ensemble.arrays
    assert (fa.steps < fa.depth).any() and (fa.steps <= fa.depth).all()
    fa.steps[:] = {"none": np.zeros_like(fa.depth), "depth": fa.depth, "fitted": fa.steps,
                   "random": np.random.default_rng(ev.SEED).integers(0, fa.depth + 1)}[steps]
    ref = _reference(clf.member_votes(X[300:]), clf.rule_, 2)
    for n_jobs in (None, 2):
        clf.set_params(n_jobs=n_jobs)
        _check(clf, X[300:], ref, (steps, n_jobs))


@pytest.mark.parametrize("kind", ["et", "bag"])
def test_kernel_extra_trees_and_bagging_feature_subsets(kind):
    X, y = load("waveform", n_samples=1300, random_state=ev.SEED)
    est = {"et": ExtraTreesClassifier(31, bootstrap=True, random_state=ev.SEED),
           "bag": BaggingClassifier(n_estimators=15, max_features=0.5, random_state=ev.SEED)}[kind]
    clf = ev.HaltingClassifier(est).fit(X[:300], y[:300])
    ref = _reference(clf.member_votes(X[300:]), clf.rule_, 3)
    for n_jobs in (None, 2):
        clf.set_params(n_jobs=n_jobs)
        _check(clf, X[300:], ref, (kind, n_jobs))
        _check(clf, X[300:301], _slice(ref, slice(0, 1)), (kind, n_jobs, "one row"))


@pytest.mark.parametrize("kind", ["rf", "bag"])
def test_kernel_walks_rows_on_the_thresholds_as_the_trees_do(kind):
    # the loops compare float32 values with the float64 thresholds rounded down to float32; rows whose
    # feature sits exactly on a threshold, or one float32 step either side of it, must take the branch
    # Tree.apply takes
    X, y = load("waveform", n_samples=400, random_state=ev.SEED)
    est = {"rf": RandomForestClassifier(15, random_state=ev.SEED),
           "bag": BaggingClassifier(n_estimators=9, max_features=0.5, random_state=ev.SEED)}[kind]
    clf = ev.HaltingClassifier(est, rule=ev.FixedRule(est.n_estimators)).fit(X, y)
    rows = []
    for j, m in enumerate(clf.estimator_.estimators_):
        t = m.tree_
        feats = getattr(clf.estimator_, "estimators_features_", [np.arange(X.shape[1])] * 15)[j]
        for node in np.flatnonzero(t.children_left != -1)[:40]:
            thr = np.float32(t.threshold[node])
            for v in (thr, np.nextafter(thr, np.float32(-np.inf)), np.nextafter(thr, np.float32(np.inf))):
                r = X[node % len(X)].astype(np.float32)
                r[feats[t.feature[node]]] = v
                rows.append(r)
    Xe = np.array(rows, dtype=np.float32)
    ref = _reference(clf.member_votes(Xe), clf.rule_, 3)
    for n_jobs in (None, 2):
        clf.set_params(n_jobs=n_jobs)
        _check(clf, Xe, ref, (kind, n_jobs))
    for i in range(0, len(Xe), 11):
        assert clf.predict(Xe[i:i + 1])[0] == clf.classes_[ref.labels[i]]
    assert np.all(kernel._round_down_float32(np.array([0.1, -0.1, 1.5, 3.4e38])) <= [0.1, -0.1, 1.5, 3.4e38])


def test_kernel_routes_missing_values_as_the_trees_do():
    X, y = load("twonorm", n_samples=1300, random_state=ev.SEED)
    rng = np.random.default_rng(0)
    X[rng.random(X.shape) < 0.1] = np.nan  # trees learn missing_go_to_left
    clf = ev.HaltingClassifier(RandomForestClassifier(41, random_state=ev.SEED), rule="exact").fit(X[:300], y[:300])
    ref = _reference(clf.member_votes(X[300:]), clf.rule_, 2)
    _check(clf, X[300:], ref, "nan")
    one = np.concatenate([clf.predict(X[i:i + 1]) for i in range(300, 400)])
    assert np.array_equal(one, clf.classes_[ref.labels[:100]])


def test_blocks_with_and_without_missing_values_each_walk_as_the_trees_do(monkeypatch):
    """A block with no NaN takes the walk that does not test for NaN; one with NaN the other: both are the trees'."""
    X, y = load("twonorm", n_samples=1300, random_state=ev.SEED)
    rng = np.random.default_rng(1)
    X[:300][rng.random((300, X.shape[1])) < 0.1] = np.nan
    clf = ev.HaltingClassifier(RandomForestClassifier(41, random_state=ev.SEED), rule="exact").fit(X[:300], y[:300])
    assert clf._ensemble.arrays.nan_right.any()  # some nodes send a missing value right
    Xe = X[300:].copy()
    Xe[40:45, 3] = np.nan  # one block of 32 rows has NaN (in an 8-row group and in the remainder), the rest none
    Xe[60, 0] = np.nan
    ref = _reference(clf.member_votes(Xe), clf.rule_, 2)
    monkeypatch.setattr(kernel, "BLOCK", 32)
    _check(clf, Xe, ref, "mixed blocks")
    K = np.empty(Xe.size, dtype=np.int32)
    assert kernel.row_keys(Xe, 0, len(Xe), K) == 1  # NaN, no infinity
    seen = {kernel._has_nan(K, np.uint64(Xe.shape[1]), np.arange(a, a + 32), 32) for a in range(0, 96, 32)}
    assert seen == {True, False}


def test_keys_order_as_the_float32_values_compare():
    """The walk compares int32 keys: key(u) > key(v) exactly when u > v (float32), for zeros of both signs,
    subnormals, infinities and random bit patterns; NaN's key is below every other; float64 is read as float32."""
    special = np.array([0.0, -0.0, np.inf, -np.inf, 1.0, -1.0, 1e-45, -1e-45, 1.2e-38, -1.2e-38, 3.4e38, -3.4e38],
                       dtype=np.float32)
    bits = np.random.default_rng(ev.SEED).integers(-2**31, 2**31, 3000).astype(np.int32)
    v = np.concatenate([special, bits.view(np.float32)])
    v = v[~np.isnan(v)]
    K = np.empty(len(v), dtype=np.int32)
    assert kernel.row_keys(v.reshape(-1, 1), 0, len(v), K) == 2  # an infinity, no NaN
    assert np.array_equal(K[:, None] > K[None, :], v[:, None] > v[None, :])
    assert np.array_equal(K[:, None] == K[None, :], v[:, None] == v[None, :])  # -0.0 == 0.0
    nan = np.array([[np.nan, -np.nan, np.float32(np.nan)]], dtype=np.float32)
    nan.view(np.int32)[0, 2] |= 1  # another payload
    Kn = np.empty(3, dtype=np.int32)
    assert kernel.row_keys(nan, 0, 1, Kn) == 1
    assert (Kn == kernel._NAN_KEY).all() and (K > kernel._NAN_KEY).all()
    x64 = np.array([[1e300, 0.1, -1e-60]])  # float64: keys of the float32 values, 1e300 infinite as float32
    K64, K32 = np.empty(3, dtype=np.int32), np.empty(3, dtype=np.int32)
    with np.errstate(over="ignore"):
        x32 = x64.astype(np.float32)
    assert kernel.row_keys(x64, 0, 1, K64) == 2 and kernel.row_keys(x32, 0, 1, K32) == 2
    assert np.array_equal(K64, K32)
    rows = np.arange(12, dtype=np.float32).reshape(4, 3)  # rows a..b-1 only, row after row
    Kr = np.full(6, -7, dtype=np.int32)
    kernel.row_keys(rows, 1, 3, Kr)
    assert np.array_equal(Kr, rows[1:3].ravel().view(np.int32))  # non-negative floats: the key is the bits


def test_forest_arrays_are_the_trees_level_by_level():
    """Children side by side, leaves their own child, depth per tree, per-node arrays in the same order, a
    node's great-grandchildren one after another from the one its record names."""
    X, y = load("twonorm", n_samples=300, random_state=ev.SEED)
    rf = RandomForestClassifier(5, random_state=ev.SEED).fit(X, y)
    trees = [e.tree_ for e in rf.estimators_]
    fa = kernel.ForestArrays(trees, [None] * 5, [np.arange(t.node_count, dtype=np.int32) for t in trees])
    assert fa.depth.tolist() == [t.max_depth for t in trees]
    for j, t in enumerate(trees):  # steps: the median over eight training rows of the longest path, by brute force
        d = np.zeros(t.node_count, dtype=int)
        for v in range(t.node_count):
            for c in (t.children_left[v], t.children_right[v]):
                if c >= 0:
                    d[c] = d[v] + 1
        leaf = t.children_left == -1
        share = [t.n_node_samples[leaf & (d <= k)].sum() / t.n_node_samples[0] for k in range(t.max_depth + 1)]
        assert fa.steps[j] == min(k for k in range(t.max_depth + 1) if share[k] ** 8 >= 0.5), j
    assert (fa.steps < fa.depth).any()  # (these trees' rows mostly end above the deepest leaf)
    own = fa.nodes([np.arange(t.node_count) for t in trees])  # each node's number in its own tree
    tree = fa.nodes([np.full(t.node_count, j) for j, t in enumerate(trees)])
    assert fa.roots.tolist() == [int(np.nonzero((tree == j) & (own == 0))[0][0]) for j in range(5)]
    for k in range(fa.n_nodes):
        t, v = trees[tree[k]], own[k]
        below = [k]
        for _ in range(3):  # the nodes one, two and three levels down, in order
            below = [c for b in below if fa.left[b] != b for c in (fa.left[b], fa.left[b] + 1)]
        assert below == list(range(fa.great_grandchild[k], fa.great_grandchild[k] + len(below))), k
        assert below or fa.great_grandchild[k] == k
        if t.children_left[v] == -1:
            assert fa.left[k] == k and fa.threshold[k] == np.inf and fa.node_code[k] == v and not fa.nan_right[k]
        else:
            assert own[fa.left[k]] == t.children_left[v] and own[fa.left[k] + 1] == t.children_right[v]
            assert tree[fa.left[k]] == tree[k] and fa.feature[k] == t.feature[v] and fa.node_code[k] == 0
            assert fa.nan_right[k] == (not t.missing_go_to_left[v])
            assert fa.threshold[k] == kernel._round_down_float32(t.threshold[v])  # back from its key


@pytest.mark.parametrize("max_leaf_nodes", [16, None])  # leaf masks kept, or none
def test_forest_arrays_count_every_array_they_keep(max_leaf_nodes):
    # nbytes (the memory benchmark's forest_arrays_mb) is every array the loops keep, each buffer once
    X, y = load("twonorm", n_samples=1500, random_state=ev.SEED)
    rf = RandomForestClassifier(7, random_state=ev.SEED, max_leaf_nodes=max_leaf_nodes).fit(X, y)
    trees = [e.tree_ for e in rf.estimators_]
    fa = kernel.ForestArrays(trees, [None] * 7, [np.zeros(t.node_count, dtype=np.int32) for t in trees])
    assert (fa.mask is not None) == (max_leaf_nodes is not None)
    owners = {}
    for a in vars(fa).values():
        if isinstance(a, np.ndarray):
            while a.base is not None:
                a = a.base
            owners[id(a)] = a
    assert fa.nbytes == sum(a.nbytes for a in owners.values()) > fa.packed.nbytes


def test_a_forest_too_large_for_32_bit_records_is_refused_up_front():
    """Nodes are addressed by 4 x their index in 32 bits: a forest of 2**29 nodes is refused before any array."""
    from types import SimpleNamespace

    big = [SimpleNamespace(node_count=2**28)] * 2
    with pytest.raises(ValueError, match="536,870,912 nodes.*at most 536,870,911"):
        kernel.ForestArrays(big, [None, None], [None, None])


def test_many_classes_fall_back_to_the_reference_engine():
    # l = 5 at T = 101: the union-bound urn rule has no flat stop table; the reference engine runs it
    rng = np.random.default_rng(ev.SEED)
    X = rng.normal(size=(900, 6))
    y = np.argmax(X[:, :5] + rng.normal(scale=0.5, size=(900, 5)), axis=1)
    clf = ev.HaltingClassifier(RandomForestClassifier(101, random_state=ev.SEED), n_jobs=2).fit(X[:400], y[:400])
    assert engine.stop_table(clf.rule_, 101, 5) is None and clf._ensemble.plan(clf.rule_) is None
    ref = _reference(clf.member_votes(X[400:]), clf.rule_, 5)
    _check(clf, X[400:], ref, "many classes")
    assert np.array_equal(clf.predict(X[400:401]), clf.classes_[ref.labels[:1]])


def test_a_replaced_rule_is_not_run_with_the_old_table():
    X, y = load("twonorm", n_samples=700, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(51, random_state=ev.SEED)).fit(X[:300], y[:300])
    clf.rule_ = ev.FixedRule(5)
    ref = _reference(clf.member_votes(X[300:]), clf.rule_, 2)
    assert (ref.n_queried == 5).all()
    _check(clf, X[300:], ref, "replaced")
    _check(clf, X[300:301], _slice(ref, slice(0, 1)), "replaced, one row")


def test_n_jobs_values():
    import numba

    assert kernel.resolve_n_jobs(None) == kernel.resolve_n_jobs(1) == 1
    assert kernel.resolve_n_jobs(-1) == numba.config.NUMBA_NUM_THREADS
    assert kernel.resolve_n_jobs(10**6) == numba.config.NUMBA_NUM_THREADS
    X, y = load("twonorm", n_samples=400, random_state=ev.SEED)
    for bad in (0, 1.5, "all", True):
        with pytest.raises(ValueError, match="n_jobs"):
            ev.HaltingClassifier(RandomForestClassifier(5, random_state=0), n_jobs=bad).fit(X, y)


def test_blocks_for_threads_are_as_many_as_a_multiple_of_the_threads():
    # one thread: BLOCK rows; more: at most BLOCK, a multiple of the threads (every row count below 400,000
    # for 2-8 threads, as the docstring says), at least 4 per thread where blocks of MIN_ROWS_PER_THREAD allow
    assert kernel._rows_per_block(10**6, 1) == kernel.BLOCK
    for threads in range(2, 9):
        n = np.arange(kernel.MIN_ROWS_PER_THREAD * threads, 400_000)
        block = np.array([kernel._rows_per_block(int(m), threads) for m in n])
        count = -(-n // block)
        assert (block <= kernel.BLOCK).all() and (block >= 1).all()
        assert (count % threads == 0).all(), (threads, n[count % threads != 0][:5])
        assert (count >= np.minimum(4 * threads, n // kernel.MIN_ROWS_PER_THREAD)).all()
    # the blocks of _block(n, n_jobs) are what the loops get: 10^5 rows on two threads, 26 of them
    if kernel.resolve_n_jobs(2) == 2:
        assert -(-100_000 // kernel._block(100_000, 2)) == 26


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
def test_lean_paths_give_the_same_errors():
    X, y = load("twonorm", n_samples=400, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(21, random_state=ev.SEED)).fit(X[:300], y[:300])
    for rows in (X[300:301].copy(), X[300:310].copy()):  # one row; a small batch
        for method in (clf.predict, clf.predict_proba, clf.halt):
            with pytest.raises(ValueError, match="features"):
                method(rows[:, :-1])
            for bad in (np.inf, -np.inf, 1e300):
                xb = rows.copy()
                xb[0, 3] = bad
                with pytest.raises(ValueError, match="infinity or a value too large"):
                    method(xb)
                with pytest.raises(ValueError, match="infinity or a value too large"):
                    method(xb.astype(np.float32))
    row = X[300:301].copy()
    # NaN is routed by the trees (allow-nan), as in the full path
    xn = row.copy()
    xn[0, 0] = np.nan
    assert np.array_equal(clf.predict(xn), clf.predict(np.repeat(xn, 20, axis=0))[:1])
    with pytest.raises(ValueError, match="sparse X contains NaN"):  # as the forests refuse it
        clf.predict(sparse.csr_matrix(np.repeat(xn, 20, axis=0)))
    # float32, Fortran order, a list: the same labels
    want = clf.predict(row)
    assert np.array_equal(clf.predict(row.astype(np.float32)), want)
    assert np.array_equal(clf.predict(np.asfortranarray(X[300:310]))[:1], want)
    assert np.array_equal(clf.predict(row.tolist()), want)
    # feature names: fitted with names, an ndarray warns as in the full path
    import pandas as pd

    df = pd.DataFrame(X[:300], columns=[f"f{i}" for i in range(X.shape[1])])
    named = ev.HaltingClassifier(RandomForestClassifier(11, random_state=0)).fit(df, y[:300])
    with pytest.warns(UserWarning, match="feature names"):
        named.predict(row)
    with pytest.raises(ValueError, match="feature names"):
        named.predict(df.iloc[:1, ::-1])
    with pytest.warns(UserWarning, match="feature names"):
        plain = named.predict(X[:1])
    assert np.array_equal(named.predict(df.iloc[:1]), plain)


def test_predict_proba_is_the_vote_fractions_of_the_members_queried():
    X, y = load("waveform", n_samples=900, random_state=ev.SEED)
    names = np.array(["c", "a", "b"])[y]  # classes_ sorted: a, b, c
    clf = ev.HaltingClassifier(RandomForestClassifier(51, random_state=ev.SEED)).fit(X[:300], names[:300])
    p = clf.predict_proba(X[300:])
    res = clf.halt(X[300:])
    assert p.shape == (600, 3)
    assert np.allclose(p.sum(axis=1), 1.0)
    assert np.allclose(p * res.n_queried[:, None], res.counts)
    assert np.array_equal(clf.classes_[np.argmax(p, axis=1)], clf.predict(X[300:]))
    votes = clf.member_votes(X[300:])
    for i in range(0, 600, 37):  # column c = fraction of the first n_queried votes for classes_[c]
        nq = res.n_queried[i]
        assert np.allclose(p[i], np.bincount(votes[i, :nq], minlength=3) / nq)
    assert np.array_equal(clf.predict_proba(X[300:301]), p[:1])


def test_oob_votes_are_kept_from_fit():
    X, y = load("twonorm", n_samples=300, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(31, random_state=ev.SEED)).fit(X, y)
    assert clf.oob_votes_.shape == (300, 2)
    assert np.array_equal(clf.oob_votes_, clf.oob_votes(X))  # the old call, same counts
    assert np.array_equal(clf.prior_, ev.oob_prior(clf.oob_votes_, 31))
    n_oob = np.zeros(300, dtype=int)
    for drawn in clf.estimator_.estimators_samples_:
        n_oob += ~np.isin(np.arange(300), drawn)
    assert np.array_equal(clf.oob_votes_.sum(axis=1), n_oob)
    no_boot = ev.HaltingClassifier(ExtraTreesClassifier(11, random_state=0)).fit(X, y)
    assert no_boot.oob_votes_ is None


def test_kernels_compile_and_are_cached():
    assert kernel.compile_kernels() >= 0.0
    assert kernel._forest_serial.signatures and kernel.label_rows.signatures


def test_packed_arrays_unpack_to_the_arrays_packed():
    # the compiled loops read a pack() buffer through an unchecked reinterpretation (kernel._bytes_as): each
    # array must come back with its length, dtype and values, sharing the buffer's memory
    rng = np.random.default_rng(ev.SEED)
    specs = [(5, np.uint32), (1, np.bool_), (3, np.float32), (0, np.int64), (7, np.int32), (2, np.int64),
             (9, np.uint8), (4, np.float32)]
    buf, views = kernel.pack(specs)
    for v in views:
        v[:] = rng.integers(0, 100, len(v)).astype(v.dtype)
    for k, ((n, dtype), v) in enumerate(zip(specs, views)):
        got = kernel._unpacked(buf, k, dtype)
        assert got.dtype == np.dtype(dtype) and len(got) == n and np.array_equal(got, v), k
        if n:
            assert np.shares_memory(got, buf)
    # only a 1-D C-contiguous uint8 buffer is read this way: anything else fails to compile
    import numba

    @numba.njit
    def read(buf):
        return kernel._bytes_as(buf, 0, 8, np.int64)

    assert read(buf).shape == (1,)
    for other in (np.zeros(16, dtype=np.int32), np.zeros((2, 8), dtype=np.uint8), np.zeros(32, dtype=np.uint8)[::2]):
        with pytest.raises(numba.core.errors.TypingError):
            read(other)


def test_kernel_with_single_node_trees():
    # members fitted on a one-class sample are a single leaf: the walk must stop at the root
    rng = np.random.default_rng(ev.SEED)
    X = rng.normal(size=(30, 3))
    y = np.zeros(30, dtype=int)
    y[:2] = 1
    clf = ev.HaltingClassifier(RandomForestClassifier(25, random_state=0, max_samples=5), rule="exact").fit(X, y)
    assert min(m.tree_.node_count for m in clf.estimator_.estimators_) == 1
    Xt = rng.normal(size=(50, 3))
    ref = _reference(clf.member_votes(Xt), clf.rule_, 2)
    _check(clf, Xt, ref, "single-node trees")
    for i in range(0, 50, 7):
        assert clf.predict(Xt[i:i + 1])[0] == clf.classes_[ref.labels[i]]


@pytest.mark.parametrize("T,l,confidence", [(3, 2, 0.95), (5, 2, 0.95), (7, 3, 0.95), (12, 2, 0.95),
                                            (31, 2, 0.95), (64, 2, 0.9999), (101, 3, 0.95), (201, 2, 0.9999)])
def test_rows_in_pairs_stop_where_the_block_loop_stops(T, l, confidence):
    # small requests walk two groups of four trees side by side: two rows' next four, the next row taking a
    # stopped row's place, or one row's next eight when no other row is left (kernel._rows_in_pairs); the count
    # code at each row's stop must be the block loop's, for every request size (odd, even, one row), trees left
    # fewer than four or eight, rows that stop in a group whose next group was walked, rows that never stop, and
    # NaN (the walk that tests for it), each request also walked by the walk that does not test for NaN when no
    # row of it has one
    X, y = load("twonorm" if l == 2 else "waveform", n_samples=500, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(T, random_state=ev.SEED, max_depth=8),
                               confidence=confidence).fit(X[:300], y[:300])
    Xte = np.ascontiguousarray(X[300:], dtype=np.float32)
    Xte[3, 2] = Xte[8, 0] = np.nan
    table, layout, check = engine.stop_table(clf.rule_, T, l).kernel_args()
    fa = clf._ensemble.arrays
    code_end, n_queried = kernel.run_forest(Xte, fa, table, layout, check)
    assert 1 < len(np.unique(n_queried))  # rows stop at many trees
    assert (n_queried == T).any() or T > 100  # and some never (with two classes and T odd, a vote of T - 1 ties)
    width = Xte.shape[1]
    for m in (1, 2, 3, 8, 9, 37, len(Xte)):
        for a in (0, 9):  # (rows 3 and 8 have NaN, rows 9 onwards none)
            n = min(m, len(Xte) - a)
            K = np.empty(n * width, dtype=np.int32)
            nan = kernel.row_keys(Xte[a:a + n], 0, n, K) & 1
            assert nan == (a == 0 and n > 3)
            for walk in (True, None) if not nan else (True,):
                codes = np.full(n, -1, dtype=np.int64)
                kernel._rows_in_pairs(K, np.uint64(width), n, fa.records, fa.node_code, fa.roots, table, layout,
                                      check, codes, walk)
                assert np.array_equal(codes, code_end[a:a + n]), (n, a, walk)


def _mask_exits(fa, X32):
    """Each row's exit leaf in each tree by the leaf masks, in numpy (the lowest bit left after clearing, at
    every inner node the row leaves to the right, the leaves of its left subtree)."""
    K = np.empty(X32.size, dtype=np.int32)
    kernel.row_keys(X32, 0, len(X32), K)
    K = K.reshape(X32.shape)
    full = fa.mask[-1]
    out = np.empty((len(X32), len(fa.roots)), dtype=np.int64)
    for j in range(len(fa.roots)):
        m = np.full(len(X32), full)
        for k in range(fa.mask_start[j], fa.mask_start[j + 1]):
            m[K[:, fa.mask_feature[k]] > fa.mask_key[k]] &= fa.mask[k]
        low = np.array([(int(v) & -int(v)).bit_length() - 1 for v in m])  # the lowest set bit
        out[:, j] = fa.mask_leaf[fa.mask_start[j] + j + low]
    return out


@pytest.mark.parametrize("leaves,word", [(8, np.uint32), (32, np.uint32), (33, np.uint64), (64, np.uint64),
                                         (65, None)])
def test_leaf_masks_give_each_row_the_leaf_the_tree_gives_it(leaves, word):
    """Trees of at most 32 leaves get 32-bit masks, of at most 64 (MASK_LEAVES) 64-bit ones, larger none; the
    lowest leaf left by the masks is the leaf ``Tree.apply`` gives, for every tree and row."""
    X, y = load("waveform", n_samples=1400, random_state=ev.SEED)
    est = RandomForestClassifier(9, max_leaf_nodes=leaves, random_state=ev.SEED).fit(X[:1000], y[:1000])
    trees = [e.tree_ for e in est.estimators_]
    assert max(t.n_leaves for t in trees) == leaves
    fa = kernel.ForestArrays(trees, [None] * 9, [np.arange(t.node_count, dtype=np.int32) for t in trees])
    if word is None:
        assert fa.mask is None and fa.mask_args(fa.node_code) is None
        return
    assert fa.mask.dtype == word and fa.mask[-1] == ~word(0)
    assert len(fa.mask_leaf) == sum(t.n_leaves for t in trees) and len(fa.mask_start) == 10
    X32 = X[1000:].astype(np.float32)
    on = np.repeat(X32[:60], 3, axis=0)  # rows on a threshold and one float32 step either side of it
    inner = np.flatnonzero(fa.left != np.arange(fa.n_nodes))[:60]
    for i, k in enumerate(inner):
        thr = fa.threshold[k]
        on[3 * i:3 * i + 3, fa.feature[k]] = [thr, np.nextafter(thr, -np.inf), np.nextafter(thr, np.inf)]
    X32 = np.concatenate([X32, on])
    own = fa.nodes([np.arange(t.node_count) for t in trees])  # each node's number in its own tree
    exits = _mask_exits(fa, X32)
    for j, t in enumerate(trees):
        assert np.array_equal(own[exits[:, j]], t.apply(X32)), j


def test_leaf_masks_of_single_node_trees():
    X, y = np.zeros((4, 2)), np.zeros(4, dtype=int)
    t = RandomForestClassifier(3, random_state=0).fit(X, y)
    trees = [e.tree_ for e in t.estimators_]
    fa = kernel.ForestArrays(trees, [None] * 3, [np.zeros(1, dtype=np.int32)] * 3)
    assert fa.mask_start.tolist() == [0, 0, 0, 0] and fa.mask_leaf.tolist() == [0, 1, 2]
    assert np.array_equal(_mask_exits(fa, X.astype(np.float32)), np.tile([0, 1, 2], (4, 1)))


@pytest.mark.parametrize("T,l,leaves", [(51, 2, 20), (101, 2, 64), (101, 3, 40), (201, 3, 30)])
def test_the_leaf_mask_loop_stops_where_the_walk_stops(T, l, leaves, monkeypatch):
    """The forest loop by leaf masks gives each row the count code and members of the walk (the same loop with
    the masks taken away): rows on the thresholds, blocks of 64 rows (rows stopping, moved together, the last few going on alone), a
    block with NaN (walked), float64 rows, two threads, a request with an infinite value (None), the flat table
    and the stop bits."""
    X, y = load("twonorm" if l == 2 else "waveform", n_samples=1300, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(T, max_leaf_nodes=leaves, random_state=ev.SEED),
                               confidence=0.99).fit(X[:300], y[:300])
    fa = clf._ensemble.arrays
    assert fa.mask is not None
    walk = copy.copy(fa)
    walk.mask = None
    assert walk.mask_args(walk.node_code) is None
    stops = engine.stop_table(clf.rule_, T, l)
    args = stops.kernel_args()
    assert (args[1] is None) == (T < 201)  # the flat table, or (T = 201, three classes) the stop bits
    node_code = None if stops.flat else clf._ensemble._bits_node_code(stops)  # stop bits: radix 2 ** b
    Xte = np.ascontiguousarray(X[300:])
    inner = np.flatnonzero(fa.left != np.arange(fa.n_nodes))[::7][:100]
    for i, k in enumerate(inner):  # rows on a threshold and one float32 step either side of it
        thr = fa.threshold[k]
        Xte[3 * i:3 * i + 3, fa.feature[k]] = [thr, np.nextafter(thr, -np.inf), np.nextafter(thr, np.inf)]
    Xte[100, 3] = np.nan
    monkeypatch.setattr(kernel, "BLOCK", 64)
    for Xd in (Xte, Xte.astype(np.float32)):
        for n in (1, 7, 8, 9, 63, 64, 65, 1000):
            for n_jobs in (None, 2):
                got = kernel.run_forest(Xd[:n], fa, *args, n_jobs=n_jobs, node_code=node_code)
                ref = kernel.run_forest(Xd[:n], walk, *args, n_jobs=n_jobs, node_code=node_code)
                assert np.array_equal(got[0], ref[0]) and np.array_equal(got[1], ref[1]), (n, n_jobs, Xd.dtype)
    assert 1 < len(np.unique(ref[1])) and (ref[1] < T).any()
    Xi = Xte.copy()
    Xi[500, 2] = np.inf
    assert kernel.run_forest(Xi, fa, *args) is None


@pytest.mark.parametrize("T,l,leaves", [(101, 2, None), (301, 2, None), (101, 3, 40), (201, 3, None)])
def test_rows_handed_on_stop_where_their_block_would_stop_them(T, l, leaves, monkeypatch):
    """Once fewer than HAND_ON rows of a block are still voting, they are handed on and walked with the other
    blocks' last rows, each joining at its next tree (kernel._leftover_rows): each row's code and members must
    be those of the loop that never hands on, and the reference engine's.  Blocks of rows that stop soon and of
    rows that go far (so rows join at many trees), two blocks built so that no row is voting between the rows
    the first hands on and those the second does (the walk jumps ahead to the second's tree), a block with NaN,
    float32 and float64, one and two threads (the rows handed on dealt to two shares or kept in one), the walk
    and leaf masks, the flat table and the stop bits; handing on from 8, 32 and (more than a block) every row
    before the first tree."""
    X, y = load("twonorm" if l == 2 else "waveform", n_samples=1000, random_state=ev.SEED)
    clf = ev.HaltingClassifier(RandomForestClassifier(T, max_leaf_nodes=leaves, random_state=ev.SEED),
                               confidence=0.99).fit(X, y)
    fa = clf._ensemble.arrays
    assert (fa.mask is not None) == (leaves is not None)
    rng = np.random.default_rng(ev.SEED)
    Xte = np.concatenate([X[:300] + rng.normal(0.0, 0.1, (300, X.shape[1])), rng.normal(0.0, 0.3, (700, X.shape[1]))])
    Xte[500, 1] = Xte[510, 4] = np.nan  # in one block of 64 rows
    stops = engine.stop_table(clf.rule_, T, l)
    args = stops.kernel_args()
    assert (args[1] is None) == (T != 201)  # the flat table, or (T = 201, three classes) the stop bits
    node_code = None if stops.flat else clf._ensemble._bits_node_code(stops)
    monkeypatch.setattr(kernel, "BLOCK", 64)
    monkeypatch.setattr(kernel, "HAND_ON", 0)
    never = kernel.run_forest(Xte, fa, *args, node_code=node_code)
    ref = _reference(clf.member_votes(Xte), clf.rule_, l)
    assert np.array_equal(never[1], ref.n_queried)
    # the tree after which fewer than 32 rows of each block are still voting: many trees, far apart
    hand_at = [int(np.sort(never[1][a:a + 64])[::-1][31]) for a in range(0, len(Xte) - 63, 64)]
    assert len(set(hand_at)) > 4 and max(hand_at) - min(hand_at) >= 8, hand_at
    for hand in (8, 32, 65):
        monkeypatch.setattr(kernel, "HAND_ON", hand)
        for Xd in (Xte, Xte.astype(np.float32)):
            for n_jobs in (None, 2):
                got = kernel.run_forest(Xd, fa, *args, n_jobs=n_jobs, node_code=node_code)
                assert np.array_equal(got[0], never[0]) and np.array_equal(got[1], never[1]), (hand, n_jobs)
    # rows e < f < g < h by their members queried: block 1 is 56 x e and 8 x f, which it hands on (HAND_ON = 32)
    # once the e rows stop, and they stop after f's trees; block 2 is 40 x g and 24 x h, handed on after g's
    # trees, later than f's: no row is voting in between
    distinct = np.unique(never[1], return_index=True)[1]  # a row for each count of members queried, ascending
    assert len(distinct) >= 4
    e, f, g, h = distinct[[0, 1, 2, -1]]
    rows = np.repeat([e, f, g, h], [56, 8, 40, 24])
    assert never[1][f] < never[1][g]
    monkeypatch.setattr(kernel, "HAND_ON", 32)
    for n_jobs in (None, 2):
        got = kernel.run_forest(Xte[rows], fa, *args, n_jobs=n_jobs, node_code=node_code)
        assert np.array_equal(got[0], never[0][rows]) and np.array_equal(got[1], never[1][rows]), ("gap", n_jobs)
