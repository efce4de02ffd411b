"""Beyond the dense stop table: the stop bits and the memo of the decisions reached give exactly the reference
engine's results.

Where ``(T + 1) ** l`` exceeds ``MAX_STOP_TABLE`` (three classes beyond
``T = 129``, two beyond 1,482, five beyond 17) the engine looks the decisions
up in the rule's stop bits where it has them (:meth:`ensvote.HaltingRule.stop_bits`:
the urn rule, two and three classes); otherwise, and for a rule without a
table key, it decides only the vote vectors the rows reach and memoises them
(:func:`ensvote.engine.stop_memo`): the compiled loop for dense ``X``
(:func:`ensvote.kernel.run_forest_lazy`, rows pausing at vectors not decided
yet), the numpy loops for sparse ``X`` and for :func:`ensvote.halt` on a vote
matrix.  The reference is :func:`ensvote.engine.run_halting` (``rule.decide``
on each block of counts, no table, no memo).
"""

import itertools
import math

import numba
import numpy as np
import pytest
from scipy import sparse
from sklearn.datasets import make_classification
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote import engine, kernel
from ensvote.datasets import load
from ensvote.rules import HaltingRule

from engine_reference import reference as _reference, random_votes as _votes

FIELDS = ("labels", "n_queried", "counts", "stopped")


def _same(res, ref, what, classes=None):
    labels = ref.labels if classes is None else classes[ref.labels]
    assert np.array_equal(res.labels, labels), what
    for f in FIELDS[1:]:
        assert np.array_equal(getattr(res, f), getattr(ref, f)), (what, f)


class _Lead(HaltingRule):
    """A user's rule without a table key: stop once the leader is ``k`` votes ahead."""

    def __init__(self, k):
        self.k = k
        self.n_decided = 0

    def decide(self, counts):
        self.n_decided += int(np.prod(counts.shape[:-1]))
        top2 = -np.sort(-counts, axis=-1)[..., :2]
        return top2[..., 0] - top2[..., 1] >= self.k


class _MemoUrn(ev.UrnRule):
    """The urn rule without its stop bits: its decisions go through the memo."""

    def stop_bits(self, n_members, n_classes):
        return None


def _rules(T, l):
    """The rules of the issue: exact, urn (uniform, out-of-bag prior), infinite, a user's rule without a key."""
    rng = np.random.default_rng(T + l)
    oob = rng.multinomial(30, rng.dirichlet(np.full(l, 0.5), size=12))
    rules = [ev.ExactRule(T), ev.InfiniteRule(0.99), ev.UrnRule(T, 0.99, prior=ev.oob_prior(oob, T)), _Lead(4)]
    if not (l == 3 and T > 462):  # the uniform prior's three-class union-bound table stops at T = 462
        rules.append(ev.UrnRule(T, 0.95))
    return rules


# --------------------------------------------------------------------------
# vote matrices: halt() around and beyond the old limit
# --------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::ensvote.SlowVoteWarning")  # the out-of-bag urn rule of 3 classes beyond T = 169
@pytest.mark.parametrize("T, l, dense", [(129, 3, True), (130, 3, False), (301, 3, False), (1482, 2, True),
                                         (1483, 2, False), (2001, 2, False), (17, 5, True), (18, 5, False),
                                         (41, 5, False), (61, 10, False)])
def test_halt_on_votes_equals_reference_around_and_beyond_the_dense_table(T, l, dense):
    votes = _votes(250, T, l, seed=T + l)
    for rule in _rules(T, l):
        tab = engine.stop_table(rule, T, l)
        assert (tab is not None and tab.flat) == (dense and rule.table_key(l) is not None), rule
        # beyond the flat table: the rule's stop bits where it has them (the urn rule, two and three classes)
        bits = not dense and rule.table_key(l) is not None and rule.stop_bits(T, l) is not None
        assert (tab is not None and not tab.flat) == bits, rule
        assert bits == (not dense and isinstance(rule, ev.UrnRule) and l <= 3 and not rule._uses_bound(l)), rule
        _same(ev.halt(votes, rule, n_classes=l), _reference(votes, rule, l), (T, l, rule))


def test_codes_of_several_words():
    # 1001 ** 10 > 2 ** 62: six classes in the first word, four in the second
    word, stride = engine.code_layout(1000, 10)
    assert word.tolist() == [0] * 6 + [1] * 4
    assert stride.tolist() == [1001 ** 5, 1001 ** 4, 1001 ** 3, 1001 ** 2, 1001, 1, 1001 ** 3, 1001 ** 2, 1001, 1]
    # one word: code_stride's code
    for T, l in [(10, 3), (5001, 2), (5403, 5), (1_664_509, 3)]:
        word, stride = engine.code_layout(T, l)
        assert not word.any() and stride.tolist() == [(T + 1) ** (l - 1 - c) for c in range(l)]
        assert (T + 1) ** l <= 2 ** 62
    assert np.array_equal(engine.code_layout(10, 3)[1], engine.code_stride(10, 3))
    assert engine.code_layout(5404, 5)[0].tolist() == [0, 0, 0, 0, 1]
    assert engine.code_layout(1_664_510, 3)[0].tolist() == [0, 0, 1]
    memo = engine.StopMemo(1000, 10)
    counts = np.random.default_rng(0).multinomial(1000, np.full(10, 0.1), size=50)
    codes = np.zeros((50, 2), dtype=np.int64)
    np.add.at(codes, (np.repeat(np.arange(50), 10), np.tile(memo.word, 50)), (counts * memo.stride).ravel())
    assert np.array_equal(memo.counts(codes), counts)
    # a vote matrix of 10 classes through two-word codes (101 ** 10 > 2 ** 62)
    votes = _votes(200, 100, 10, seed=3)
    assert engine.StopMemo(100, 10).n_words == 2
    for rule in (ev.ExactRule(100), ev.InfiniteRule(0.95), _Lead(5)):
        _same(ev.halt(votes, rule, n_classes=10), _reference(votes, rule, 10), rule)


# --------------------------------------------------------------------------
# forests: the compiled loop (dense X, n_jobs), the numpy loop (sparse X), one row
# --------------------------------------------------------------------------
def _forest_cases():
    X, y = load("waveform", n_samples=300 + 700, random_state=ev.SEED)
    yield "waveform T=131", X[:300], y[:300], X[300:], RandomForestClassifier(131, random_state=ev.SEED)
    yield "waveform T=201", X[:300], y[:300], X[300:], RandomForestClassifier(201, random_state=ev.SEED)
    X, y = make_classification(900, 10, n_informative=6, n_classes=5, n_clusters_per_class=1,
                               random_state=ev.SEED)
    yield "five classes T=19", X[:300], y[:300], X[300:], RandomForestClassifier(19, random_state=ev.SEED)
    X, y = load("twonorm", n_samples=200 + 500, random_state=ev.SEED)
    yield "twonorm T=1490", X[:200], y[:200], X[200:], RandomForestClassifier(1490, max_depth=3,
                                                                                random_state=ev.SEED)


@pytest.mark.parametrize("case", list(_forest_cases()), ids=lambda c: c[0])
def test_classifier_beyond_the_dense_table_equals_reference(case):
    name, Xtr, ytr, Xte, est = case
    clf = ev.HaltingClassifier(est, rule="urn", prior="oob").fit(Xtr, ytr)  # HYPER
    T, l = clf.n_members_, len(clf.classes_)
    votes, X32 = clf.member_votes(Xte), clf._X(Xte)
    ens = clf._ensemble
    memo_urn = _MemoUrn(T, clf.rule_.confidence, prior=clf.rule_.prior)
    for rule in (clf.rule_, memo_urn, ev.UrnRule(T), ev.ExactRule(T), ev.InfiniteRule(), _Lead(3)):
        plan = ens.plan(rule)
        # the stop bits (the urn rule with its prior over the full vote, two or three classes) or the memo
        bits = isinstance(rule, ev.UrnRule) and rule is not memo_urn and l <= 3 and not rule._uses_bound(l)
        assert (plan is not None and not plan[0].flat) if bits else plan is None, rule
        ref = _reference(votes, rule, l)
        for n_jobs in (None, 2):
            ev.clear_caches()  # a first predict: the memo is empty
            _same(ens.halt(X32, rule, n_jobs), ref, (name, rule, n_jobs))
            _same(ens.halt(X32, rule, n_jobs), ref, (name, rule, n_jobs, "memo filled"))
            assert np.array_equal(ens.labels(X32, rule, n_jobs), ref.labels)
        ev.clear_caches()
        _same(ens.halt(sparse.csr_matrix(X32), rule), ref, (name, rule, "sparse"))
    # the classifier's own paths: batches, one row, probabilities, string labels
    ref = _reference(votes, clf.rule_, l)
    ev.clear_caches()
    _same(clf.halt(Xte), ref, name, clf.classes_)
    assert np.array_equal(clf.predict(Xte), clf.classes_[ref.labels])
    for i in (0, 7):
        assert clf.predict(Xte[i:i + 1])[0] == clf.classes_[ref.labels[i]]
        # the compiled row-by-row loop wherever there is a flat table or stop bits (False: none, the batch loop
        # answers)
        out = np.full(2, -1, dtype=np.int64)
        ok = ens.label_rows(X32[i:i + 2], clf.rule_, out)
        assert ok == (ens.plan(clf.rule_) is not None)
        assert np.array_equal(out, ref.labels[i:i + 2] if ok else [-1, -1])
    assert np.allclose(clf.predict_proba(Xte), ref.counts / ref.n_queried[:, None])


@pytest.fixture(scope="module")
def waveform_131():
    # HYPER without its stop bits, so that the memo is the path tested
    X, y = load("waveform", n_samples=300 + 1500, random_state=ev.SEED)
    est = RandomForestClassifier(131, random_state=ev.SEED)
    hyper = ev.HaltingClassifier(est, rule="urn", prior="oob").fit(X[:300], y[:300]).rule_
    clf = ev.HaltingClassifier(est, rule=_MemoUrn(131, hyper.confidence, prior=hyper.prior)).fit(X[:300], y[:300])
    assert clf._ensemble.plan(clf.rule_) is None
    return clf, X[300:], _reference(clf.member_votes(X[300:]), clf.rule_, 3)


@pytest.mark.parametrize("path_work, max_path", [(1, 1), (2 ** 17, 4), (2 ** 30, 1024)])
def test_path_lengths_do_not_change_results(waveform_131, path_work, max_path, monkeypatch):
    # H = 1: only the vectors reached are decided; long paths walk and decide past rows' stops, then go back
    clf, X, ref = waveform_131
    monkeypatch.setattr(kernel, "PATH_WORK", path_work)
    monkeypatch.setattr(kernel, "MAX_PATH", max_path)
    monkeypatch.setattr(kernel, "_CHEAP_ROUND", 1.0)  # every round's decisions count as cheap
    for n_jobs in (None, 2):
        ev.clear_caches()
        clf.set_params(n_jobs=n_jobs)
        _same(clf.halt(X), ref, (path_work, max_path, n_jobs), clf.classes_)
    memo = engine.stop_memo(clf.rule_, 131, 3)
    reached = {tuple(c) for v, q in zip(clf.member_votes(X), ref.n_queried)
               for c in np.cumsum(v[:q, None] == np.arange(3), axis=0)}
    if max_path == 1:  # no path: exactly the vectors reached were decided (those of T votes for `stopped`)
        assert memo.n_decided == len(reached)
    else:
        assert memo.n_decided >= len(reached)


def test_a_memo_emptied_and_refilled_mid_call_and_rows_in_passes(waveform_131, monkeypatch):
    clf, X, ref = waveform_131
    monkeypatch.setattr(engine, "MAX_STOP_MEMO_BYTES", 9 * 512)  # 512 slots of one word: 256 decisions
    monkeypatch.setattr(kernel, "LAZY_ROWS", 97)
    ev.clear_caches()
    emptied = []
    clear = engine.StopMemo.clear
    monkeypatch.setattr(engine.StopMemo, "clear", lambda self, slots=None: (emptied.append(1), clear(self, slots)))
    for n_jobs in (None, 2):
        clf.set_params(n_jobs=n_jobs)
        _same(clf.halt(X), ref, ("small memo", n_jobs), clf.classes_)
        _same(clf.halt(sparse.csr_matrix(X)), ref, ("small memo, sparse", n_jobs), clf.classes_)
    memo = engine.stop_memo(clf.rule_, 131, 3)
    assert memo.max_entries == 256 and len(memo) <= 256 and len(emptied) > 4


def test_a_wrong_memoised_decision_is_detected(waveform_131):
    # the comparison with the reference can fail: flip memoised decisions and the results differ
    clf, X, ref = waveform_131
    ev.clear_caches()
    _same(clf.halt(X), ref, "before")
    memo = engine.stop_memo(clf.rule_, 131, 3)
    held = np.flatnonzero(memo.keys[:, 0] >= 0)
    stops = held[memo.vals[held] == 1]
    assert len(stops) > 100
    memo.vals[stops] = 0  # every memoised stop forgotten: rows vote on
    bad = clf.halt(X)
    assert (bad.n_queried > ref.n_queried).sum() > len(X) // 2
    memo.vals[stops] = 1
    _same(clf.halt(X), ref, "restored", clf.classes_)
    ev.clear_caches()
    _same(clf.halt(X), ref, "rebuilt", clf.classes_)


# --------------------------------------------------------------------------
# the memo itself: cached per key, per call without one, bounded, refusing too wide codes
# --------------------------------------------------------------------------
def test_memo_is_cached_per_table_key_and_kept_for_one_call_without_one():
    T, l = 301, 3
    votes = _votes(300, T, l, seed=5)
    ev.clear_caches()
    rule = ev.InfiniteRule(0.99)
    first = ev.halt(votes, rule, n_classes=l)
    memo = engine.stop_memo(rule, T, l)
    n = memo.n_decided
    assert n > 0 and engine.stop_memo(ev.InfiniteRule(0.99), T, l) is memo
    _same(ev.halt(votes, ev.InfiniteRule(0.99), n_classes=l), first, "cached")
    assert memo.n_decided == n  # nothing decided again
    assert engine.stop_memo(ev.InfiniteRule(0.95), T, l) is not memo  # another threshold, another memo
    assert engine.stop_memo(ev.UrnRule(T, 0.99), T, l) is not engine.stop_memo(ev.UrnRule(T, 0.9), T, l)
    lead = _Lead(4)
    ev.halt(votes, lead, n_classes=l)
    once = lead.n_decided
    ev.halt(votes, lead, n_classes=l)
    assert lead.n_decided == 2 * once  # no key: the decisions are not kept across calls
    assert engine.stop_memo(lead, T, l) is not engine.stop_memo(lead, T, l)


def test_memo_cache_is_bounded_in_bytes():
    ev.clear_caches()
    for T in range(300, 340, 4):
        ev.halt(_votes(200, T, 3, seed=T), ev.ExactRule(T), n_classes=3)
    info = {c.name: c for c in ev.cache_info()}["stop decision memos"]
    assert info.entries == 10 and 0 < info.nbytes <= 2 * engine.MAX_STOP_MEMO_BYTES
    cache = engine._STOP_MEMOS
    small = engine.StopMemo(5, 2)
    old_max = cache.max_bytes
    try:
        cache.max_bytes = 2 * small.keys.nbytes + 2 * small.vals.nbytes + small.word.nbytes + small.stride.nbytes
        for k in range(5):
            cache[("test", k)] = engine.StopMemo(5, 2)
        assert len(cache) == 1  # only the newest fits the bound
    finally:
        cache.max_bytes = old_max
        ev.clear_caches()


def test_too_wide_codes_are_refused_with_the_limit_named():
    with pytest.raises(ValueError, match="MAX_STOP_MEMO_BYTES = 40,000,000"):
        engine.StopMemo(2, 2_000_000)
    with pytest.raises(ValueError, match="fewer than 64 stop decisions"):
        ev.halt(np.array([[0, 1_999_999]]), ev.ExactRule(2))
    with pytest.raises(ValueError, match="at once"):
        engine.StopMemo(5, 2).reserve(10 ** 7)


def test_a_failing_decide_leaves_no_pending_entry():
    class Flaky(_Lead):
        def decide(self, counts):
            if counts.sum(axis=-1).max() >= 10:
                raise RuntimeError("flaky")
            return super().decide(counts)

        def table_key(self, n_classes):
            return ("flaky", self.k)

    votes = _votes(100, 301, 3, seed=1)
    ev.clear_caches()
    with pytest.raises(RuntimeError, match="flaky"):
        ev.halt(votes, Flaky(50), n_classes=3)
    memo = engine.stop_memo(Flaky(50), 301, 3)
    assert len(memo) == 0 and not (memo.vals == 2).any()
    _same(ev.halt(votes, _Lead(3), n_classes=3), _reference(votes, _Lead(3), 3), "after")


class _LeadAsked(_Lead):
    """:class:`_Lead` noting the fewest votes of any vector it is asked about."""

    def decide(self, counts):
        self.fewest = min(getattr(self, "fewest", np.inf), int(counts.sum(axis=-1).min(initial=np.iinfo(int).max)))
        return super().decide(counts)


class _LeadFrom(_LeadAsked):
    """... saying it cannot stop with fewer than ``k`` votes (true: a lead of ``k`` takes ``k``)."""

    def min_votes(self, n_members, n_classes):
        return self.k


class _CountingFixed(ev.FixedRule):
    """FixedRule noting the fewest votes of any vector it is asked about."""

    def decide(self, counts):
        self.fewest = min(getattr(self, "fewest", np.inf), int(counts.sum(axis=-1).min(initial=np.iinfo(int).max)))
        return super().decide(counts)


def test_no_decision_before_the_rules_min_votes(waveform_131):
    """The memo path skips the look-ups (and decisions) of the vote vectors with fewer than min_votes votes."""
    clf, X, _ = waveform_131
    ens, T = clf._ensemble, clf.n_members_
    X32, votes = clf._X(X), clf.member_votes(X)
    for rule, first in ((ev.FixedRule(T), T), (ev.FixedRule(40), 40), (ev.ExactRule(T), (T + 1) // 2),
                        (ev.MarginRule(5), 5), (_MemoUrn(T), 1)):
        assert rule.min_votes(T, 3) == first and ens.plan(rule) is None  # the memo is the path tested
        ev.clear_caches()
        _same(ens.halt(X32, rule), _reference(votes, rule, 3), rule)
    fixed = _CountingFixed(T)
    _same(ens.halt(X32, fixed), _reference(votes, ev.FixedRule(T), 3), "counting")
    assert fixed.fewest == T  # asked only about the full votes (whether the rule itself stopped them)
    early, plain = _LeadFrom(4), _LeadAsked(4)
    _same(ens.halt(X32, early), ens.halt(X32, plain), "min_votes")
    assert early.fewest == 4 and plain.fewest < 4


@pytest.mark.parametrize("bad", [0, 132, 2.5, True, None])
def test_a_bad_min_votes_is_refused_naming_it(waveform_131, bad):
    clf, X, _ = waveform_131

    class Bad(_Lead):
        def min_votes(self, n_members, n_classes):
            return bad

    with pytest.raises(ValueError, match=r"Bad.min_votes\(131, 3\) must be an int in 1..131"):
        clf._ensemble.halt(clf._X(X[:20]), Bad(3))


@pytest.mark.parametrize("T", [5, 6, 11])
@pytest.mark.parametrize("l", [2, 3])
def test_min_votes_of_the_rules_is_where_their_table_first_stops(T, l):
    """Exhaustively: no vote vector with fewer votes stops, and one with that many does (the bound is tight)."""
    for rule in (ev.FixedRule(3), ev.FixedRule(T), ev.ExactRule(T), ev.MarginRule(2), ev.MarginRule(T + 3)):
        assert engine.stop_table(rule, T, l).min_votes == rule.min_votes(T, l), rule
    for rule in (ev.UrnRule(T), ev.InfiniteRule(0.9), _Lead(2)):
        assert rule.min_votes(T, l) == 1  # no bound claimed


# --------------------------------------------------------------------------
# the stop bits: the compiled look-up, the numpy one and the rule agree on every code
# --------------------------------------------------------------------------
@numba.njit
def _compiled_stops(table, codes, lay):
    out = np.empty(codes.shape[0], dtype=np.bool_)
    for k in range(codes.shape[0]):
        out[k] = kernel._stops_bits(table, codes[k], lay)
    return out


@pytest.mark.parametrize("T, l", [(1, 2), (7, 2), (60, 2), (1, 3), (7, 3), (21, 3)])
def test_stop_bits_look_up_every_code_as_the_rule_decides(monkeypatch, T, l):
    monkeypatch.setattr(engine, "MAX_STOP_TABLE", 1)  # no flat table: the stop bits, even at small T
    rng = np.random.default_rng(T + l)
    oob = rng.multinomial(30, rng.dirichlet(np.full(l, 0.5), size=12))
    for rule in (ev.UrnRule(T, 0.9, prior=ev.oob_prior(oob, T)), ev.UrnRule(T, 0.99)):
        tab = engine.stop_table(rule, T, l)
        assert not tab.flat and len(tab.table) == -(-math.comb(T + l, l) // 8)
        t = np.array(list(itertools.product(range(T + 1), repeat=l)))
        t = t[(t.sum(axis=1) >= 1) & (t.sum(axis=1) <= T)]
        codes = (t @ tab.stride).astype(np.int32)
        want = rule.decide(t) | (t.sum(axis=1) == T)
        np.testing.assert_array_equal(tab.stops(codes), want)
        table, lay, _ = tab.kernel_args()
        np.testing.assert_array_equal(_compiled_stops(table, codes, lay), want)
        np.testing.assert_array_equal(tab.counts(codes), t)
        # codes from radix ** l up (a parked row, votes added after it stopped) never stop
        parked = (tab.layout[2] + codes[: 5]).astype(np.int32)
        assert not tab.stops(parked).any() and not _compiled_stops(table, parked, lay).any()
        for s in range(1, T + 1):  # stops_at: some vote vector of s votes stops
            assert tab.stops_at[s] == want[t.sum(axis=1) == s].any()


def test_bad_stop_bits_are_refused_naming_the_rule():
    class Short(_Lead):
        def table_key(self, n_classes):
            return ("short", self.k)

        def stop_bits(self, n_members, n_classes):
            return np.zeros(3, dtype=np.uint8)

    with pytest.raises(ValueError, match=r"Short.stop_bits\(1500, 2\) must be a uint8 array of 140,907 bytes"):
        ev.halt(_votes(20, 1500, 2, seed=1), Short(3))
