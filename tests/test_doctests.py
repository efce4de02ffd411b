"""The docstrings' examples run as doctests, and every public callable has an Examples section."""

import doctest
import importlib
import inspect

import pytest

import ensvote
from ensvote import datasets, engine
from ensvote.rules import HaltingRule

FLAGS = doctest.NORMALIZE_WHITESPACE | doctest.ELLIPSIS

DOCTEST_MODULES = [
    "ensvote.classifier",
    "ensvote.engine",
    "ensvote.rules",
    "ensvote.confidence",
    "ensvote.expected",
    "ensvote.datasets",
    "ensvote.manyclass",
    "ensvote._cache",
    "ensvote._urn",
    "ensvote.optimal",
    "ensvote.priors",
    "ensvote.experiments.report",
    "ensvote.stream",
]
MAY_HAVE_NO_EXAMPLES = set()  # every module listed has examples


@pytest.mark.parametrize("name", DOCTEST_MODULES)
def test_module_doctests_pass(name):
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=FLAGS)
    report = []
    for test in doctest.DocTestFinder(exclude_empty=True).find(module, name):
        runner.run(test, out=report.append)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, "".join(report)
    if name not in MAY_HAVE_NO_EXAMPLES:
        assert result.attempted > 0, f"{name} has no doctest examples"


# --------------------------------------------------------------------------
# every public callable documents an example
# --------------------------------------------------------------------------
EXEMPT = set()  # no public callable is exempt
# The rule protocol on HaltingRule's subclasses: HaltingRule documents it, with an example.
PROTOCOL = {"decide", "prepare", "table_key", "min_votes", "stop_bits", "from_params"}


def _public_objects():
    """``(qualified name, object)`` of every public function and class the examples check covers."""
    objs = {}
    for name in ensvote.__all__:
        if name != "SEED" and name not in EXEMPT:
            objs[f"ensvote.{name}"] = getattr(ensvote, name)
    for module, names in [
        (datasets, [n for n in datasets.__all__ if callable(getattr(datasets, n))]),
        (engine, ["TreeEnsemble", "stop_table", "label_table", "run_halting", *engine.__all__]),
    ]:
        for name in names:
            objs[f"{module.__name__}.{name}"] = getattr(module, name)
    for module_name in ["ensvote.confidence", "ensvote.expected", "ensvote.manyclass", "ensvote.rules",
                        "ensvote.optimal", "ensvote.priors"]:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj) and name not in EXEMPT:
                objs[f"{module_name}.{name}"] = obj
    return objs


def _members(cls):
    """Public methods and properties of ``cls`` defined in ensvote (not inherited from scikit-learn etc.)."""
    out = {}
    for klass in reversed(cls.__mro__):
        if not klass.__module__.startswith("ensvote"):
            continue
        for name, attr in vars(klass).items():
            if name.startswith("_"):
                continue
            if isinstance(attr, property):
                attr = attr.fget
            elif isinstance(attr, (classmethod, staticmethod)):
                attr = attr.__func__
            elif not inspect.isfunction(attr):
                continue  # data: fields, constants
            if name in PROTOCOL and issubclass(cls, HaltingRule) and cls is not HaltingRule:
                continue
            out[name] = attr
    return out


def _documented():
    items = []
    for qualname, obj in _public_objects().items():
        items.append((qualname, obj))
        if inspect.isclass(obj):
            for name, attr in _members(obj).items():
                items.append((f"{qualname}.{name}", attr))
    return items


def _lacking_examples():
    return sorted(q for q, obj in _documented()
                  if "Examples\n" not in inspect.cleandoc(getattr(obj, "__doc__", None) or ""))


def test_the_check_covers_the_public_api():
    names = {q for q, _ in _documented()}
    for expected in ["ensvote.HaltingClassifier.predict_proba", "ensvote.HaltingClassifier.oob_votes",
                     "ensvote.UrnRule.T", "ensvote.UrnRule.stop", "ensvote.HaltResult.speedup",
                     "ensvote.HaltingRule.decide", "ensvote.engine.StopTable.min_votes",
                     "ensvote.engine.TreeEnsemble.label_rows", "ensvote.datasets.load",
                     "ensvote.datasets.catalog", "ensvote.engine.run_halting",
                     "ensvote.manyclass.PairPrior.uniform"]:
        assert expected in names
    # scikit-learn's inherited methods and the subclasses' protocol methods are not ours to document
    assert "ensvote.HaltingClassifier.get_params" not in names
    assert "ensvote.UrnRule.decide" not in names
    assert {"ensvote.OptimalRule.from_oob_votes", "ensvote.policy_value", "ensvote.oob_prior"} <= names


def test_every_public_callable_has_examples():
    missing = _lacking_examples()
    assert not missing, "no Examples section in the docstring of: " + ", ".join(missing)
