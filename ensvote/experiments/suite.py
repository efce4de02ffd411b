"""What a suite is: its datasets, realizations and parameters per profile, and its three functions."""

from dataclasses import dataclass, field
from typing import Callable

from .. import datasets as _datasets

__all__ = ["Suite", "PROFILES", "SYNTHETIC", "profile_params", "verify_datasets"]

#: ``smoke`` (seconds; what notebooks run live), ``book`` (what the book shows),
#: ``paper`` (the papers' protocol: 100 realizations).
PROFILES = ("smoke", "book", "paper")
#: Datasets drawn from a generator (a sample size and a random state) rather than read from a file.
SYNTHETIC = ("led", "ringnorm", "threenorm", "twonorm", "waveform")


@dataclass(frozen=True)
class Suite:
    """A set of independent tasks, one per ``(dataset, realization)``.

    ``task(dataset, realization, params)`` computes one result (a JSON-serialisable
    dict), seeded from the task alone (:func:`ensvote.experiments.task_seed`);
    ``check(result, params)`` raises ValueError saying what is wrong with a result
    read back; ``tables(records, params)`` returns ``{file name: DataFrame}``, the
    CSV tables :func:`ensvote.experiments.aggregate` writes.  A new suite is one
    module defining ``SUITE = Suite(...)`` plus its line in
    :mod:`ensvote.experiments.registry`.
    """

    name: str
    datasets: tuple
    realizations: dict  # profile -> int
    params: dict  # profile -> dict
    task: Callable = field(repr=False, compare=False)
    check: Callable = field(repr=False, compare=False)
    tables: Callable = field(repr=False, compare=False)
    smoke_datasets: tuple = field(default=())
    book_datasets: tuple = field(default=())  # a subset for the book profile (default: all)

    def dataset_list(self, profile):
        if profile == "book" and self.book_datasets:
            return self.book_datasets
        return self.smoke_datasets if profile == "smoke" else self.datasets


def profile_params(full, **smoke):
    """The same parameters for ``book`` and ``paper``; ``smoke`` overrides a few to run in seconds."""
    return {"smoke": {**full, **smoke}, "book": dict(full), "paper": dict(full)}


def verify_datasets(names):
    """Load every real dataset of ``names`` once: every dataset ships with ensvote, and a missing or damaged
    vendored file stops a run before it starts, with an error naming the file (FileNotFoundError,
    ChecksumError)."""
    for dataset in names:
        if dataset not in SYNTHETIC and dataset != "circle":
            _datasets.load(dataset)
