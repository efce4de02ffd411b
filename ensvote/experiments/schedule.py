"""Scheduling: the tasks of a suite/profile, run serially, on joblib's process pool or on Dask.

Re-running skips finished tasks (after checking their records), sets bad records
aside (``*.bad``) and computes them again, and adopts the records of a profile
with identical parameters instead of computing them.
"""

import os
import threading
import time
import warnings

from .._validation import check_positive_int
from .registry import SUITES
from .store import (RecordError, RecordWarning, adopt_from_twin_profiles, check_record, check_suite_profile,
                    read_record, record_path, write_atomic)
from .suite import available

__all__ = ["run", "run_task", "list_tasks", "SCHEDULER_TIMEOUT"]


def run_task(suite, profile, dataset, realization):
    """Run one task and return its record (a JSON-serialisable dict)."""
    params = SUITES[suite].params[profile]
    result = SUITES[suite].task(dataset, realization, params)
    return {"suite": suite, "profile": profile, "dataset": dataset, "realization": int(realization),
            "params": params, "result": result}



def _parse_realizations(spec, n):
    if spec is None:
        return range(n)
    if isinstance(spec, range):
        return spec
    try:
        a, b = str(spec).split(":")
        start = int(a) if a else 0
        stop = int(b) if b else n
    except ValueError:
        raise ValueError(f"realizations must look like START:STOP (e.g. 0:10), got {spec!r}") from None
    if not 0 <= start < stop <= n:
        raise ValueError(f"realizations {spec!r} must satisfy 0 <= START < STOP <= {n} for this profile")
    return range(start, stop)


def list_tasks(suite, profile, *, datasets=None, realizations=None):
    """The (dataset, realization) pairs of a suite/profile, missing datasets listed separately."""
    check_suite_profile(suite, profile)
    s = SUITES[suite]
    names = s.dataset_list(profile)
    if datasets is not None:
        if isinstance(datasets, str) or not all(isinstance(d, str) for d in datasets):
            raise TypeError(f"datasets must be a list of dataset names, got {datasets!r}")
        if not datasets or "" in datasets:
            raise ValueError(f"datasets {list(datasets)!r} is empty or has an empty name; valid names of suite "
                             f"{suite!r}: {', '.join(s.datasets)}")
        bad = [d for d in datasets if d not in s.datasets]
        if bad:
            raise ValueError(f"dataset(s) {', '.join(bad)} not in suite {suite!r}; valid: {', '.join(s.datasets)}")
        names = tuple(datasets)
    reals = _parse_realizations(realizations, s.realizations[profile])
    avail = [d for d in names if available(d)]
    missing = [d for d in names if d not in avail]
    return [(d, r) for d in avail for r in reals], missing


def _execute(job):
    suite, profile, dataset, r = job
    return job, run_task(suite, profile, dataset, r)


def _exit_with_parent(parent_pid, period=0.2):
    """Worker initializer: end this worker as soon as the process that started it is gone.

    A worker pool outlives a parent killed with SIGKILL (no clean-up runs); each
    worker therefore watches its parent and exits when it has been re-parented
    or the parent no longer exists.  The pool's resource tracker exits once the
    last worker has.
    """
    first_ppid = os.getppid()

    def parent_alive():
        if os.getppid() != first_ppid:
            return False
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    def watch():
        while parent_alive():
            time.sleep(period)
        os._exit(1)

    threading.Thread(target=watch, name="ensvote-exit-with-parent", daemon=True).start()


#: Seconds to wait for a Dask scheduler to answer before giving up.
SCHEDULER_TIMEOUT = 10


def _connect(scheduler, timeout=SCHEDULER_TIMEOUT):
    """A ``dask.distributed.Client`` for the scheduler at ``scheduler``, or a one-line ConnectionError."""
    import socket

    from dask.distributed import Client
    from distributed.comm import parse_address, parse_host_port

    if not isinstance(scheduler, str) or not scheduler.strip():
        raise ValueError(f"scheduler must be 'local' or an address like tcp://HOST:8786, got {scheduler!r}")
    hint = "start one with `dask scheduler`, or use scheduler='local'"
    try:
        scheme, loc = parse_address(scheduler if "://" in scheduler else f"tcp://{scheduler}")
        if scheme == "tcp":  # fail fast (refused, unknown host) before the client's retry loop
            socket.create_connection(parse_host_port(loc, default_port=8786), timeout=timeout).close()
        return Client(scheduler, timeout=timeout)
    except Exception as exc:  # whatever the client met: refused, timed out, not a Dask scheduler
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise ConnectionError(f"cannot reach the Dask scheduler at {scheduler!r} within {timeout} s "
                              f"({why}); {hint}") from None


def _set_aside(path):
    """Rename a bad record to ``<name>.bad`` (``.bad1``, ``.bad2``, ... if taken); return the new path."""
    for i in range(1000):
        target = path.with_name(f"{path.name}.bad{i or ''}")
        if not (target.exists() or target.is_symlink()):
            os.rename(path, target)
            return target
    raise FileExistsError(f"too many set-aside copies of {path}")


def run(suite, profile, *, out="results", datasets=None, realizations=None, n_jobs=1,
        scheduler=None, progress=True):
    """Run every unfinished task of a suite, writing one record per task.

    Parameters
    ----------
    suite : str
        A suite of :data:`ensvote.experiments.SUITES`.
    profile : {"smoke", "book", "paper"}
    out : path, default "results"
    datasets : list of str, optional
        Restrict to these datasets of the suite.
    realizations : "START:STOP", optional
        Restrict to these realizations (a shard).
    n_jobs : int
        Parallel workers (one task each; trees inside a task single-threaded).
    scheduler : str, optional
        A ``dask.distributed`` scheduler address, or ``"local"`` for a
        ``LocalCluster`` with ``n_jobs`` single-threaded workers; default: joblib's
        process backend.
    progress : bool
        Show a tqdm progress bar.

    Returns
    -------
    dict with ``run``, ``skipped``, ``adopted``, ``missing_datasets``,
    ``bad_records`` (paths of the records found bad, set aside as ``*.bad``
    and computed again; each is also reported with a :class:`RecordWarning`)
    and ``seconds``.

    Every existing record of the tasks is checked (:func:`read_record`) before
    the task counts as done.  With ``n_jobs > 1`` (joblib's process pool) each
    worker exits as soon as this process is gone, even after SIGKILL.
    """
    from joblib import Parallel, delayed, parallel_config
    from tqdm import tqdm

    n_jobs = check_positive_int(n_jobs, name="n_jobs")
    if scheduler is not None and scheduler != "local" and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise ValueError(f"scheduler must be 'local' or an address like tcp://HOST:8786, got {scheduler!r}")
    tasks, missing = list_tasks(suite, profile, datasets=datasets, realizations=realizations)
    todo, bad = [], []
    for d, r in tasks:
        path = record_path(out, suite, profile, d, r)
        if path.exists() or path.is_symlink():
            try:
                read_record(path, (suite, profile, d, r))
                continue
            except RecordError as exc:
                moved = _set_aside(path)
                bad.append(path)
                warnings.warn(RecordWarning(f"{exc}; moved to {moved.name} and computed again"), stacklevel=2)
        todo.append((suite, profile, d, r))
    adopted = adopt_from_twin_profiles(out, todo)
    todo = [j for j in todo if j not in adopted]
    skipped = len(tasks) - len(todo) - len(adopted)
    t0 = time.perf_counter()
    client = cluster = bar = None
    try:
        backend = "loky"
        if scheduler is not None:
            from dask.distributed import Client, LocalCluster

            if scheduler == "local":
                cluster = LocalCluster(n_workers=n_jobs, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
                client = Client(cluster)
            else:
                client = _connect(scheduler)
            backend = "dask"
        bar = tqdm(total=len(tasks), initial=skipped, desc=f"{suite}/{profile}", unit="task",
                   disable=not progress)
        if n_jobs == 1 and scheduler is None:
            results = (_execute(j) for j in todo)
        elif backend == "loky":
            with parallel_config(backend="loky", n_jobs=n_jobs, initializer=_exit_with_parent,
                                 initargs=(os.getpid(),)):
                par = Parallel(return_as="generator_unordered")
                results = par(delayed(_execute)(j) for j in todo)
        else:
            with parallel_config(backend=backend, n_jobs=-1):
                par = Parallel(return_as="generator_unordered")
                results = par(delayed(_execute)(j) for j in todo)
        for (s_, p_, d, r), rec in results:
            check_record(rec, (s_, p_, d, r))  # never write what would not be read back
            write_atomic(record_path(out, s_, p_, d, r), rec)
            bar.update(1)
    finally:
        if bar is not None:
            bar.close()
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    return {"run": len(todo), "skipped": skipped, "adopted": len(adopted), "missing_datasets": missing,
            "bad_records": bad, "seconds": time.perf_counter() - t0}
