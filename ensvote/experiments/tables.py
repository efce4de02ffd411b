"""Aggregation: a suite's records into the CSV tables the book renders.

The tables are the suite's own (its ``tables`` function); this module checks the
record set first and writes the tables atomically.
"""

import warnings

import numpy as np

from .registry import SUITES
from .store import (IncompleteRecordsError, RecordSetError, RecordWarning, check_suite_profile, results_dir,
                    scan_records, write_csv)

__all__ = ["aggregate"]


def _checked_records(suite, profile, out, allow_missing):
    """The good records of a suite/profile, or RecordSetError: bad records, none at all, or (unless allowed) missing ones."""
    scan = scan_records(suite, profile, out=out)
    redo = f"`python -m ensvote run {suite} --profile {profile}`"
    if scan.bad:
        shown = "; ".join(f"{p}: {why}" for p, why in scan.bad[:3])
        more = f"; and {len(scan.bad) - 3} more" if len(scan.bad) > 3 else ""
        raise RecordSetError(f"{len(scan.bad)} bad record(s) under {scan.directory}: {shown}{more}. "
                             f"{redo} sets them aside (a bad record of a task as *.bad, and computes it again; "
                             "a file that names no task as *.stray)")
    if not scan.records:
        where = "" if scan.directory.is_dir() else " (the directory does not exist)"
        raise RecordSetError(f"no records of {suite}/{profile} under {scan.directory}{where}; run {redo} first")
    if scan.missing:
        k = sum(map(len, scan.missing.values()))
        text = f"{suite}/{profile} is incomplete: {k} of {scan.n_expected} records missing ({scan.missing_text()})"
        if not allow_missing:
            raise IncompleteRecordsError(f"{text}; run them with {redo}, or pass allow_missing=True "
                                         "(--allow-missing) to tabulate what there is", scan.missing)
        warnings.warn(RecordWarning(f"{text}; tabulating the {len(scan.records)} there are"), stacklevel=3)
    return scan.records




def aggregate(suite, profile, *, out="results", allow_missing=False):
    """Turn a suite's task records into the CSV tables the book renders.

    Every record is checked first (:func:`scan_records`).  Bad records are an
    error (:func:`run` sets them aside and computes them again), and so is a
    directory without any record.  An incomplete set (a dataset or
    realization of the profile without its record) is an error naming what is
    missing, unless ``allow_missing=True``: then the tables are made from the
    records there are, with a :class:`RecordWarning` naming the missing ones.
    Datasets of the suite without records keep their row, with empty values
    and ``n_realizations = 0``.

    Returns the list of files written.

    Raises
    ------
    RecordSetError
        Bad records, or no records (naming the directory).
    IncompleteRecordsError
        Missing records and ``allow_missing`` is False (a RecordSetError).
    """
    check_suite_profile(suite, profile)
    if not isinstance(allow_missing, (bool, np.bool_)):
        raise TypeError(f"allow_missing must be True or False, got {allow_missing!r}")
    recs = _checked_records(suite, profile, out, allow_missing)
    s = SUITES[suite]
    target = results_dir(out, suite, profile)  # tables too are written only inside out
    written = []
    for name, df in s.tables(recs, s.params[profile]).items():
        write_csv(df, target / name)
        written.append(target / name)
    return written
