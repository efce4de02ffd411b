"""VoteStream: a streaming vote over answers not known in advance (ensvote/stream.py)."""

import numpy as np
import pytest
from scipy import special, stats

import ensvote as ev
from ensvote import VoteStream
from ensvote.manyclass import max_pair_table_T, pair_table, urn_confidence_bound
from ensvote.manyclass import _SMALL_TABLES as _TABLES
from ensvote.stream import MAX_URN_SAMPLES


def eq7(a, b):
    """Eq. 7 of Hernández-Lobato et al. (2011): P(p_a > p_b) under Beta(a + 1, b + 1)."""
    return float(special.betainc(b + 1, a + 1, 0.5))


# ---------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("kwargs, error, words", [
    ({"rule": 3}, TypeError, "rule must be a string"),
    ({"rule": "Infinite"}, ValueError, "rule must be one of ('infinite', 'urn')"),
    ({"rule": "optimal"}, ValueError, "'optimal'"),
    ({"confidence": 0}, ValueError, "confidence must lie strictly between 0 and 1"),
    ({"confidence": 1.0}, ValueError, "confidence"),
    ({"confidence": 1.5}, ValueError, "confidence"),
    ({"confidence": float("nan")}, ValueError, "confidence"),
    ({"confidence": "0.9"}, TypeError, "confidence must be a real number"),
    ({"confidence": True}, TypeError, "confidence"),
    ({"confidence": None}, TypeError, "confidence"),
    ({"max_samples": 0}, ValueError, "max_samples must be >= 1"),
    ({"max_samples": -3}, ValueError, "max_samples"),
    ({"max_samples": 2.5}, TypeError, "max_samples must be an int"),
    ({"max_samples": 40.0}, TypeError, "max_samples"),
    ({"max_samples": True}, TypeError, "max_samples"),
    ({"rule": "urn"}, ValueError, "rule='urn' needs max_samples=T"),
    ({"rule": "urn", "max_samples": 0}, ValueError, "max_samples must be >= 1"),
    ({"rule": "urn", "max_samples": MAX_URN_SAMPLES + 1}, ValueError, f"max_samples <= {MAX_URN_SAMPLES}"),
])
def test_bad_arguments_are_refused_naming_the_argument(kwargs, error, words):
    with pytest.raises(error) as info:
        VoteStream(**kwargs)
    assert words in str(info.value)


def test_the_urn_limit_is_the_many_class_tables_limit_and_is_accepted():
    assert MAX_URN_SAMPLES == max_pair_table_T(3) == max_pair_table_T(50) == 462  # one table size whatever l
    with pytest.raises(ValueError, match="use rule='infinite'"):
        VoteStream("urn", max_samples=MAX_URN_SAMPLES + 1)
    vote = VoteStream("urn", max_samples=MAX_URN_SAMPLES)
    assert vote.max_samples == MAX_URN_SAMPLES and not vote.add("a")
    assert np.int64(7) == VoteStream("urn", max_samples=np.int64(7)).max_samples  # numpy ints are ints


@pytest.mark.parametrize("answer", [["a"], {"a": 1}, {1, 2}, np.array([1, 2]), ([1], 2)])
def test_unhashable_answers_raise_type_error_naming_their_type_and_change_nothing(answer):
    vote = VoteStream()
    vote.add("x")
    with pytest.raises(TypeError, match=f"got an unhashable {type(answer).__name__}$"):
        vote.add(answer)
    assert vote.counts == {"x": 1} and vote.n_samples == 1 and vote.confidence == 0.75


def test_adding_after_a_stop_raises_runtime_error_and_changes_nothing():
    vote = VoteStream(confidence=0.9)
    assert [vote.add("a") for _ in range(3)] == [False, False, True]
    for _ in range(2):
        with pytest.raises(RuntimeError, match=r"^the vote has stopped \(confidence 0.9375 > 0.9 after 3 answers\)"):
            vote.add("a")
    assert vote.counts == {"a": 3} and vote.stopped and vote.answer == "a"


@pytest.mark.parametrize("rule", ["infinite", "urn"])
def test_adding_beyond_max_samples_raises_value_error(rule):
    vote = VoteStream(rule, confidence=0.999999, max_samples=3)
    assert [vote.add(a) for a in "abc"] == [False, False, True]  # stopped by the cap, not by the confidence
    assert vote.stopped and vote.n_samples == 3
    with pytest.raises(ValueError, match="max_samples=3 answers have been added; the vote is over"):
        vote.add("a")
    assert vote.n_samples == 3


def test_before_the_first_answer():
    vote = VoteStream()
    assert vote.answer is None and np.isnan(vote.confidence) and vote.counts == {}
    assert vote.n_samples == 0 and not vote.stopped
    assert "0 answers" in repr(vote)


# ---------------------------------------------------------------------------------- labels, ties
def test_the_label_set_grows_in_order_of_first_appearance():
    vote = VoteStream(confidence=0.999999)
    answers = ["7", 7, (1, 2), None, "7", 7.0, frozenset({1}), "new", (1, 2)]
    for a in answers:
        vote.add(a)
    assert list(vote.counts) == ["7", 7, (1, 2), None, frozenset({1}), "new"]
    assert vote.counts == {"7": 2, 7: 2, (1, 2): 2, None: 1, frozenset({1}): 1, "new": 1}  # 7 == 7.0
    assert vote.n_samples == len(answers) == sum(vote.counts.values())
    assert vote.answer == "7"  # three answers tied at 2: the first seen leads
    vote.counts["7"] = 100  # a copy
    assert vote.counts["7"] == 2


def test_ties_go_to_the_answer_seen_first():
    vote = VoteStream(confidence=0.999)
    for a, leader in zip("babab", "bbbbb"):
        vote.add(a)
        assert vote.answer == leader
    vote.add("a")  # 3 to 3
    assert vote.answer == "b"
    assert vote.confidence == pytest.approx(float(ev.infinite_confidence([3, 3, 0])))
    vote.add("a")
    assert vote.answer == "a"
    assert vote.confidence == pytest.approx(float(ev.infinite_confidence([3, 4, 0])))


def test_a_tie_at_the_cap_goes_to_the_answer_seen_first():
    vote = VoteStream("urn", confidence=0.999, max_samples=4)
    for a in "xyyx":
        stop = vote.add(a)
    assert stop and vote.answer == "x"
    # T = 2: the first answer can at worst be tied, so it is already the majority of the two
    assert VoteStream("urn", max_samples=2).add("x")


# ---------------------------------------------------------------------------------- the confidences
def _random_answers(rng, n, n_distinct):
    return [f"a{int(k)}" for k in rng.zipf(1.6, size=n) % n_distinct]


@pytest.mark.parametrize("seed", range(4))
def test_confidence_is_the_package_function_on_the_counts_plus_one_class_for_the_unseen(seed):
    rng = np.random.default_rng([ev.SEED, seed])
    answers = _random_answers(rng, 30, 8)
    T = 30
    inf, urn = VoteStream("infinite", 0.999999), VoteStream("urn", 0.999999, max_samples=T)
    for a in answers:
        if inf.stopped or urn.stopped:
            break
        inf.add(a)
        urn.add(a)
        votes = np.array([*inf.counts.values(), 0])
        assert inf.counts == urn.counts
        assert inf.confidence == float(ev.infinite_confidence(votes))
        direct = ev.finite_confidence(votes, T) if len(votes) == 2 else urn_confidence_bound(votes, T)
        assert urn.confidence == float(direct)
        assert list(inf.counts)[int(ev.current_majority(votes))] == inf.answer == urn.answer


def test_the_urn_rule_is_exact_for_one_answer_and_a_certified_bound_beyond():
    vote = VoteStream("urn", 0.999999, max_samples=12)
    for a in "aaab":
        vote.add(a)
        if len(vote.counts) == 1:  # Eq. 3 exactly for the counts [n, 0]
            assert vote.confidence == float(ev.finite_confidence([vote.n_samples, 0], 12))
    exact = float(ev.manyclass.urn_confidence_exact([3, 1, 0], 12))
    assert vote.confidence <= exact + 1e-12 and vote.confidence == pytest.approx(exact, abs=0.02)


def test_the_extra_class_is_conservative_and_eq7_as_stated():
    rng = np.random.default_rng(ev.SEED)
    for _ in range(300):
        seen = rng.integers(1, 30, size=rng.integers(2, 8))
        with_unseen = float(ev.infinite_confidence(np.r_[seen, 0]))
        without = float(ev.infinite_confidence(seen))
        lead = seen.max()
        # the extra factor of Eq. 8 is I_1/2(1, t_c + 1) = 1 - 2^-(t_c + 1) <= 1
        assert with_unseen <= without
        assert with_unseen == pytest.approx(without * (1 - 2.0 ** -(lead + 1)), rel=1e-12)
    for a in range(1, 25):
        vote = VoteStream(confidence=0.999999999)
        for _ in range(a):
            vote.add("x")
        assert vote.confidence == pytest.approx(1 - 2.0 ** -(a + 1), rel=1e-14) == eq7(a, 0)  # one answer: Eq. 7
        for b in range(1, a + 1):
            vote.add("y")
            # two distinct answers: Eq. 7 for the pair times the factor of the unseen class
            assert vote.confidence == pytest.approx(eq7(a, b) * eq7(a, 0), rel=1e-12)
            assert vote.confidence <= eq7(a, b)


def test_the_urn_rule_stops_at_T_and_its_answer_is_then_the_majority():
    T = 9
    vote = VoteStream("urn", confidence=0.999999, max_samples=T)
    stops = [vote.add(a) for a in [f"a{k}" for k in range(T)]]  # all distinct: never confident before T
    assert stops == [False] * (T - 1) + [True]
    assert vote.stopped and vote.n_samples == T and vote.answer == "a0" and vote.confidence == 1.0


def test_the_infinite_rule_stops_at_its_optional_cap():
    vote = VoteStream("infinite", confidence=0.99, max_samples=5)
    assert [vote.add(a) for a in "ababa"] == [False] * 4 + [True]
    assert vote.confidence < 0.99 and vote.answer == "a"
    assert VoteStream(confidence=0.99).max_samples is None


def test_stops_strictly_above_the_threshold():
    # [1, 0]: 1 - 2 ** -2 = 0.75 exactly
    assert not VoteStream(confidence=0.75).add("x")
    assert VoteStream(confidence=np.nextafter(0.75, 0)).add("x")


def test_small_pair_tables_are_kept_across_streams():
    ev.clear_caches()
    for T in (20, 110, 111):
        vote = VoteStream("urn", 0.999999, max_samples=T)
        for a in "abcd":
            vote.add(a)
    kept = sorted(k[:2] for k in _TABLES._data)
    assert kept == [(20, 3), (20, 4), (20, 5), (110, 3), (110, 4), (110, 5)]  # T = 111 is not kept
    assert all(pair_table(*k).nbytes * _TABLES.maxsize <= 64 * 2 ** 20 for k in kept)
    assert pair_table(111, 3).nbytes * _TABLES.maxsize > 64 * 2 ** 20
    assert "small pair tables" in {c.name for c in ev.cache_info()}
    ev.clear_caches()
    assert len(_TABLES) == 0


# ---------------------------------------------------------------------------------- calibration
def _stopped_answers(rule, p, confidence, T, n_runs, rng):
    """The stopped answer and the target of ``n_runs`` votes of draws from ``p`` (answers are strings)."""
    wrong = []
    cap = 400 if T is None else T
    for _ in range(n_runs):
        draws = rng.choice(len(p), size=cap, p=p)
        vote = VoteStream(rule, confidence, max_samples=T)
        for k in draws:
            if vote.add(f"answer {k}"):
                break
        if T is None:
            target = f"answer {int(np.argmax(p))}"  # the population mode
        else:
            counts = np.bincount(draws, minlength=len(p))
            first = {int(k): i for i, k in reversed(list(enumerate(draws)))}  # first appearance of each answer
            target = f"answer {min(first, key=lambda k: (-counts[k], first[k]))}"  # the full-T majority
        wrong.append(vote.answer != target)
    return np.array(wrong)


PREDICTORS = {
    "clear majority": np.r_[0.5, 0.25, 0.1, np.full(3, 0.05)],
    "long tail": np.r_[0.35, np.full(30, 0.65 / 30)],
}


@pytest.mark.parametrize("name", PREDICTORS)
@pytest.mark.parametrize("rule, T", [("infinite", None), ("urn", 21)])
def test_realized_disagreement_is_at_most_one_minus_confidence(rule, T, name):
    rng = np.random.default_rng([ev.SEED, T or 0, len(PREDICTORS[name])])
    confidence, n_runs = 0.9, 600
    wrong = _stopped_answers(rule, PREDICTORS[name], confidence, T, n_runs, rng)
    test = stats.binomtest(int(wrong.sum()), n_runs, 1 - confidence, alternative="greater")
    assert test.pvalue > 0.01, (rule, name, wrong.mean())
