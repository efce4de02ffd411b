"""ensvote: stopping a majority vote early.

The statistics of two papers on halting the majority vote of a classification
ensemble once its outcome is (almost) certain:

* Hernández-Lobato, Martínez-Muñoz & Suárez (2011), inference on the prediction
  of ensembles of infinite size: :func:`infinite_confidence`,
  :func:`infinite_confidence_exact`, :class:`InfiniteRule`;
* Soto, Suárez & Martínez-Muñoz (2016), an urn model for a finite ensemble:
  :func:`finite_confidence`, :class:`UrnRule`, :func:`oob_prior`,
  :func:`expected_queries`;

plus the engine :func:`halt`, the rules :class:`ExactRule` and
:class:`FixedRule`, the margin rule :class:`MarginRule`, the Bayes-optimal policy for a disagreement budget
:class:`OptimalRule` (with :func:`policy_value`), and the scikit-learn
meta-estimator :class:`HaltingClassifier`, and :class:`VoteStream`, which stops a vote of sampled answers
not known in advance (the answers of a randomised predictor) with the same rules.  Rules keep the tables they
build in bounded caches; :func:`clear_caches` empties them and
:func:`cache_info` lists them.

``import ensvote`` stays light: scikit-learn (which loads pandas when it is
installed) is imported on first use of :class:`HaltingClassifier`; the
experiments (:mod:`ensvote.experiments`, pandas, joblib, tqdm, Dask) and the
datasets (:mod:`ensvote.datasets`) are imported only when asked for.
"""

from ._cache import cache_info, clear_caches
from ._utils import SEED
from .confidence import (
    compositions,
    current_majority,
    finite_confidence,
    infinite_confidence,
    infinite_confidence_exact,
    uniform_prior,
)
from .engine import HaltResult, halt
from .expected import expected_queries
from .optimal import OptimalRule, policy_value
from .priors import oob_prior
from .rules import ExactRule, FixedRule, HaltingRule, InfiniteRule, MarginRule, SlowVoteWarning, UrnRule
from .stream import VoteStream

__version__ = "0.2.0"


#: Submodules reached as attributes on first use (``ensvote.datasets.load("pima")`` after ``import ensvote``);
#: they need the ``experiments`` extra (``_utils.EXPERIMENTS_EXTRA``).
_LAZY_MODULES = ("datasets", "experiments")


def __getattr__(name):
    if name == "HaltingClassifier":  # scikit-learn (and with it pandas) only when the classifier is used
        from .classifier import HaltingClassifier

        return HaltingClassifier
    if name in _LAZY_MODULES:
        import importlib

        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | {"HaltingClassifier", *_LAZY_MODULES})


__all__ = [
    "SEED",
    "HaltingClassifier",
    "HaltResult",
    "HaltingRule",
    "InfiniteRule",
    "OptimalRule",
    "UrnRule",
    "ExactRule",
    "FixedRule",
    "MarginRule",
    "SlowVoteWarning",
    "VoteStream",
    "cache_info",
    "clear_caches",
    "compositions",
    "current_majority",
    "expected_queries",
    "finite_confidence",
    "halt",
    "infinite_confidence",
    "infinite_confidence_exact",
    "oob_prior",
    "policy_value",
    "uniform_prior",
]
