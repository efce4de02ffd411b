"""The registry of rules by name (ensvote.rules.REGISTRY): every rule selectable by name is built through it —
by make_rule, HaltingClassifier and the head-to-head — and a new rule is one class and one decorator line."""

import numpy as np
import pytest
from sklearn.ensemble import RandomForestClassifier

import ensvote as ev
from ensvote.experiments import headtohead
from ensvote.rules import REGISTRY, HaltingRule, make_rule, register


def test_the_registry_holds_every_named_rule():
    assert REGISTRY == {"infinite": ev.InfiniteRule, "urn": ev.UrnRule, "exact": ev.ExactRule,
                        "fixed": ev.FixedRule, "margin": ev.MarginRule, "optimal": ev.OptimalRule}
    for name, cls in REGISTRY.items():
        assert cls.name == name


@pytest.mark.parametrize("name,strength,expected", [
    ("urn", 0.95, ev.UrnRule(21, 0.95)),
    ("infinite", 0.9, ev.InfiniteRule(0.9)),
    ("exact", None, ev.ExactRule(21)),
    ("fixed", 7, ev.FixedRule(7)),
    ("margin", 3, ev.MarginRule(3)),
    ("optimal", 0.02, ev.OptimalRule(21, 0.02)),
])
def test_make_rule_builds_each_name_like_its_constructor(name, strength, expected):
    rule = make_rule(name, n_members=21, strength=strength)
    assert type(rule) is type(expected) and repr(rule) == repr(expected)
    counts = ev.compositions(10, 2)
    assert np.array_equal(rule.stop(counts), expected.stop(counts))


def test_the_head_to_head_sweeps_registered_rules():
    for name, (registered, _, grid) in headtohead.SWEEPS.items():
        assert registered in REGISTRY and name in headtohead.RULES
        assert grid.endswith("_grid")


class _Lead(HaltingRule):
    name, strength = "test-lead", "confidence"

    def __init__(self, confidence):
        self.confidence = confidence

    @classmethod
    def from_params(cls, strength=None, *, n_members, n_classes=None, prior=None, oob_votes=None):
        return cls(strength)

    def table_key(self, n_classes):
        return (type(self), self.confidence)

    def decide(self, t):
        top2 = -np.sort(-t, axis=-1)[..., :2]
        return top2[..., 0] - top2[..., 1] >= 10 * self.confidence


def test_a_new_rule_is_one_class_and_one_registry_line():
    register(_Lead)
    try:
        X, y = ev.datasets.load("twonorm", n_samples=300, random_state=0)
        clf = ev.HaltingClassifier(RandomForestClassifier(31, random_state=0), rule="test-lead",
                                   confidence=0.3).fit(X, y)
        assert isinstance(clf.rule_, _Lead) and clf.rule_.confidence == 0.3
        direct = ev.HaltingClassifier(RandomForestClassifier(31, random_state=0), rule=_Lead(0.3)).fit(X, y)
        a, b = clf.halt(X), direct.halt(X)
        assert np.array_equal(a.labels, b.labels) and np.array_equal(a.n_queried, b.n_queried)
        assert a.n_queried.mean() < 31
        with pytest.raises(ValueError, match="'test-lead'"):  # listed by the error message
            ev.HaltingClassifier(rule="nope").fit(X, y)
    finally:
        REGISTRY.pop("test-lead")


def test_register_refuses_what_is_not_a_named_rule():
    with pytest.raises(TypeError, match="HaltingRule subclass"):
        register(int)

    class Nameless(HaltingRule):
        pass

    with pytest.raises(TypeError, match="str name"):
        register(Nameless)

    class Urn2(ev.UrnRule):
        pass

    with pytest.raises(ValueError, match="already registered: UrnRule"):
        register(Urn2)


def test_names_the_classifier_cannot_set_are_refused_with_the_way_to_use_them():
    X, y = ev.datasets.load("twonorm", n_samples=200, random_state=0)
    with pytest.raises(ValueError, match=r"set by its k.*MarginRule\(k=\.\.\.\)"):
        ev.HaltingClassifier(RandomForestClassifier(11, random_state=0), rule="margin").fit(X, y)
    with pytest.raises(ValueError, match="needs its lead k"):
        make_rule("margin", n_members=11)
    with pytest.raises(ValueError, match="unknown rule 'nope'; valid names: 'infinite', 'urn', 'exact'"):
        make_rule("nope", n_members=11)
