"""The papers' experiments: resumable suites of seeded tasks, their records and their tables.

A *suite* is a set of independent tasks, one per ``(dataset, realization)``;
each suite is one module holding its task, the schema of its results and its
tables (:class:`~ensvote.experiments.suite.Suite`), listed in
:mod:`~ensvote.experiments.registry`:

``hl2011``     Hernández-Lobato, Martínez-Muñoz & Suárez (2011), §4: Tables 2-3 and Fig. 6
               (:mod:`~ensvote.experiments.hl2011`).
``circle``     Hernández-Lobato et al. (2011), §2.2 / Fig. 4 (:mod:`~ensvote.experiments.circle`).
``soto2016``   Soto, Suárez & Martínez-Muñoz (2016), §3: Tables 1-2 and Fig. 1
               (:mod:`~ensvote.experiments.soto2016`).
``headtohead`` beyond both papers: every stopping rule's parameter swept on the
               partitions and forests of ``soto2016`` (:mod:`~ensvote.experiments.headtohead`).
``perrow``     per-row guarantees and Kalman & Moscovich's (2026) rules on the same forests
               (:mod:`~ensvote.experiments.perrow`).
``budget-calibration``  the budget mode against a known truth, simulated datasets of the small
               real problems (:mod:`~ensvote.experiments.calibration`).
``many-classes``  the exhaustive check of the many-class union bound
               (:mod:`~ensvote.experiments.manyclasses`).

Shared machinery: :mod:`~ensvote.experiments.store` (seeding, record files and
their validation), :mod:`~ensvote.experiments.schedule` (:func:`run`),
:mod:`~ensvote.experiments.tables` (:func:`aggregate`) and
:mod:`~ensvote.experiments.report` (:func:`compare_with_published` and
:func:`listing`, for the chapters).  Profiles: ``smoke`` (seconds; what notebooks run live), ``book``
(what the book shows), ``paper`` (the papers' protocol: 100 realizations).

Command line: ``python -m ensvote run|aggregate SUITE --profile PROFILE``.
"""

from .._utils import require_extra

require_extra("ensvote.experiments")

from .headtohead import MarginRule  # noqa: E402  (after the check, which names the extra to install)
from .hl2011 import PI_GRID
from .hl2011 import PROBLEMS as HL2011_PROBLEMS
from .registry import SUITES
from .report import compare_with_published, listing
from .schedule import list_tasks, run, run_task
from .soto2016 import ALPHAS
from .soto2016 import PROBLEMS as SOTO2016_PROBLEMS
from .store import (IncompleteRecordsError, RecordError, RecordScan, RecordSetError, RecordWarning, check_record,
                    read_record, record_path, scan_records, task_seed)
from .suite import PROFILES, SYNTHETIC, Suite
from .tables import aggregate

__all__ = ["SUITES", "PROFILES", "SYNTHETIC", "Suite", "HL2011_PROBLEMS", "SOTO2016_PROBLEMS", "PI_GRID", "ALPHAS",
           "MarginRule", "run", "run_task", "list_tasks", "aggregate", "task_seed", "record_path", "read_record",
           "check_record", "scan_records", "RecordScan", "RecordError", "RecordSetError", "IncompleteRecordsError",
           "RecordWarning", "compare_with_published", "listing"]
