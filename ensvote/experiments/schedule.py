"""Scheduling: the tasks of a suite/profile, run serially, on joblib's process pool or on Dask.

Re-running skips finished tasks (after checking their records), sets bad records
aside (``*.bad``) and computes them again, sets aside files that name no task
(``*.stray``), removes the temporary files of writers killed mid-write, and
adopts the records of a profile with identical parameters instead of computing
them.  A task is claimed before it is computed (a locked ``.rNNN.json.gz.claim``
file beside its record), so runners sharing a results directory never compute
a task twice; a claim ends with its process, however it ends.
"""

import fcntl
import os
import signal
import threading
import time
import warnings
from contextlib import contextmanager, nullcontext

from .._validation import check_positive_int
from .registry import SUITES
from .store import (RecordError, RecordWarning, adopt_from_twin_profiles, check_record, check_suite_profile,
                    read_record, record_path, results_dir, stray_files, write_atomic)
from .suite import verify_datasets

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
    """The (dataset, realization) pairs of a suite/profile; every real dataset is loaded once to verify it."""
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
    if s.loads_datasets:
        verify_datasets(names)
    return [(d, r) for d in names for r in reals if r < s.n_realizations(profile, d)]


def _execute(job):
    suite, profile, dataset, r = job
    return job, run_task(suite, profile, dataset, r)


def _exit_with_parent(parent_pid, period=0.2):
    """Worker initializer: ignore Ctrl-C, and end this worker as soon as the process that started it is gone.

    Ctrl-C reaches the whole process group; the parent alone handles it (it
    stops the pool), so a worker neither prints a traceback nor dies half-way.
    A worker pool outlives a parent killed with SIGKILL (no clean-up runs); each
    worker therefore watches its parent and exits when it has been re-parented
    or the parent no longer exists.  The pool's resource tracker exits once the
    last worker has.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
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


@contextmanager
def _sigint_blocked():
    """Block SIGINT in this thread while worker processes start: they inherit the mask and never see Ctrl-C.

    A Ctrl-C meanwhile is not lost: it is delivered when the block ends.
    """
    from multiprocessing import resource_tracker

    resource_tracker.ensure_running()  # started inside, Python 3.11's would unblock SIGINT rather than restore it
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _results(jobs, n_jobs, dask):
    """``(job, record)`` of each job as it finishes: serially, on joblib's process pool, or on Dask."""
    from joblib import Parallel, delayed, parallel_config

    if n_jobs == 1 and not dask:
        return map(_execute, jobs)
    config = {"backend": "dask", "n_jobs": -1} if dask else {
        "backend": "loky", "n_jobs": n_jobs, "initializer": _exit_with_parent, "initargs": (os.getpid(),)}
    with parallel_config(**config), nullcontext() if dask else _sigint_blocked():
        return Parallel(return_as="generator_unordered")(delayed(_execute)(j) for j in jobs)


def _stop(results):
    """Stop the tasks of ``results`` still running (on an error or Ctrl-C), without joblib's warning about them."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"\d+ tasks ", UserWarning)
        getattr(results, "close", lambda: None)()


#: Seconds to wait for a Dask scheduler to answer before giving up (read at each connection).
SCHEDULER_TIMEOUT = 10


def _ask_scheduler(address, timeout):
    """Raise unless a Dask scheduler at ``address`` answers within ``timeout`` seconds.

    ``Client(timeout=...)`` bounds the connection but not the handshake after
    it: a listener that never answers, or answers something else, hung it
    forever.  The question runs on its own event loop in a daemon thread, with
    a hard deadline, so that it needs no loop of the caller's and can never
    keep the process alive.
    """
    import asyncio

    from distributed.comm import connect

    async def identity():
        comm = await connect(address, timeout=timeout)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    box = {}

    def ask():
        try:
            box["reply"] = asyncio.run(asyncio.wait_for(identity(), timeout))
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=ask, name="ensvote-scheduler-check", daemon=True)
    thread.start()
    thread.join(timeout + 1)
    if thread.is_alive() or isinstance(box.get("error"), TimeoutError):
        raise TimeoutError("no answer to the Dask handshake: is it a Dask scheduler?")
    if isinstance(box.get("error"), OSError):  # refused, reset, closed
        raise box["error"]
    if "error" in box:
        raise ConnectionError(f"its answer is not Dask's protocol ({type(box['error']).__name__})")
    kind = box["reply"].get("type") if isinstance(box["reply"], dict) else None
    if kind != "Scheduler":
        raise ConnectionError(f"it is a Dask {kind}, not a scheduler" if kind else
                              f"it answered {box['reply']!r:.60}, not as a Dask scheduler")


def _connect(scheduler, timeout=None):
    """A ``dask.distributed.Client`` for the scheduler at ``scheduler``, or a one-line ConnectionError.

    Bounded by ``timeout`` seconds (default :data:`SCHEDULER_TIMEOUT`), handshake included.
    """
    import socket

    from dask.distributed import Client
    from distributed.comm import parse_address, parse_host_port

    timeout = SCHEDULER_TIMEOUT if timeout is None else timeout
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise ValueError(f"scheduler must be 'local' or an address like tcp://HOST:8786, got {scheduler!r}")
    hint = "start one with `dask scheduler`, or use scheduler='local'"
    try:
        scheme, loc = parse_address(scheduler if "://" in scheduler else f"tcp://{scheduler}")
        if scheme == "tcp":  # fail fast (refused, unknown host) before the client's retry loop
            socket.create_connection(parse_host_port(loc, default_port=8786), timeout=timeout).close()
        _ask_scheduler(f"{scheme}://{loc}", timeout)
        return Client(scheduler, timeout=timeout)
    except Exception as exc:  # whatever the client met: refused, timed out, not a Dask scheduler
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise ConnectionError(f"cannot reach the Dask scheduler at {scheduler!r} within {timeout} s "
                              f"({why}); {hint}") from None


def _set_aside(path, kind):
    """Rename ``path`` to ``<name>.<kind>`` (``.<kind>1``, ... if taken); the new path, or None if it is gone."""
    for i in range(1000):
        target = path.with_name(f"{path.name}.{kind}{i or ''}")
        if not (target.exists() or target.is_symlink()):
            try:
                os.rename(path, target)
            except FileNotFoundError:  # another runner set it aside first
                return None
            return target
    raise FileExistsError(f"too many set-aside copies of {path}")


def _set_aside_strays(suite, profile, out):
    """Set aside (``*.stray``) every record-like file that names no task of the profile; their paths."""
    moved = []
    for path, why in stray_files(suite, profile, out=out):
        results_dir(out, suite, profile, "tasks", path.parent.name)  # never a rename outside the results directory
        target = _set_aside(path, "stray")
        if target is not None:
            moved.append(path)
            warnings.warn(RecordWarning(f"{path} names no task of {suite}/{profile} ({why}); "
                                        f"moved to {target.name}"), stacklevel=3)
    return moved


class _Claims:
    """The tasks this process has claimed: an exclusive ``flock`` on ``.rNNN.json.gz.claim`` beside each record.

    The kernel releases a lock when its process ends, even by SIGKILL, so a
    claim file left behind is taken over.  A claim file is removed while still
    locked; :meth:`take` then notices that it locked a removed file and tries
    again.  Thread-safe (joblib claims tasks from its own threads); after
    :meth:`close` no task is claimed.
    """

    def __init__(self, out):
        self.out, self.held, self.closed, self.lock = out, {}, False, threading.Lock()

    def _file(self, job):
        path = record_path(self.out, *job)
        return path.with_name(f".{path.name}.claim")

    def take(self, job):
        """Claim ``job``; False if another runner holds it.

        An interrupt (Ctrl-C) anywhere in here leaves no claim file behind: a
        file locked but not yet registered is removed before the interrupt goes on.
        """
        file = self._file(job)
        fd, locked = None, False
        try:
            while True:
                fd = os.open(file, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    fd = None
                    return False
                locked = True
                try:
                    same = os.path.samestat(os.fstat(fd), os.stat(file, follow_symlinks=False))
                except FileNotFoundError:
                    same = False
                if same:
                    break
                os.close(fd)  # its holder removed it as we opened it: try again
                fd, locked = None, False
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())  # for a curious reader
            with self.lock:
                self.held[job], closed = fd, self.closed
            fd = None  # registered: release() removes it
        except BaseException:
            if fd is not None:
                if locked:
                    file.unlink(missing_ok=True)
                os.close(fd)
            raise
        if closed:
            self.release(job)
        return not closed

    def release(self, job):
        with self.lock:
            fd = self.held.pop(job, None)
        if fd is not None:
            try:
                self._file(job).unlink(missing_ok=True)
            finally:  # an interrupt during the removal still closes (and so unlocks) the claim
                os.close(fd)

    def wait(self, job):
        """Block until no runner holds ``job`` (it finished or died)."""
        try:
            fd = os.open(self._file(job), os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_SH)
        finally:
            os.close(fd)

    def close(self):
        with self.lock:
            self.closed = True
        for job in list(self.held):
            self.release(job)


def _finished(out, job):
    """Whether the task has a good record."""
    path = record_path(out, *job)
    if not (path.exists() or path.is_symlink()):
        return False
    try:
        read_record(path, job)
    except RecordError:
        return False
    return True


def _settle(out, job, bad):
    """Under the task's claim: ``"done"`` (a good record), ``"adopted"``, or ``"todo"``.

    Removes the temporary files of a writer killed mid-write (only a claim's
    holder writes the record) and sets a bad record aside (``*.bad``),
    appending its path to ``bad``.
    """
    path = record_path(out, *job)
    for stale in path.parent.glob(f".{path.name}.*.tmp"):
        stale.unlink(missing_ok=True)
    if path.exists() or path.is_symlink():
        try:
            read_record(path, job)
            return "done"
        except RecordError as exc:
            moved = _set_aside(path, "bad")
            if moved is not None:
                bad.append(path)
                warnings.warn(RecordWarning(f"{exc}; moved to {moved.name} and computed again"), stacklevel=2)
    return "adopted" if adopt_from_twin_profiles(out, [job]) else "todo"


def run(suite, profile, *, out="results", datasets=None, realizations=None, n_jobs=1,
        scheduler=None, progress=True):
    """Run every unfinished task of a suite, writing one record per task.

    Parameters
    ----------
    suite : str
        A suite of :data:`ensvote.experiments.SUITES`.
    profile : {"smoke", "book", "paper"}
    out : path, default "results"
        The results directory.  It may be a symlink, but no directory below
        it may be: records are written only inside it.
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
    dict with ``run`` (tasks computed by this call), ``skipped`` (finished
    already, or meanwhile by another runner), ``adopted``,
    ``bad_records`` (paths of the records found bad,
    set aside as ``*.bad`` and computed again), ``stray_files`` (paths of
    the files ``tasks/*/r*.json.gz`` that name no task of the profile, set
    aside as ``*.stray``) and ``seconds``.  Each bad record and stray file is
    also reported with a :class:`RecordWarning`.

    Every existing record of the tasks is checked (:func:`read_record`) before
    the task counts as done.  Runners may share a results directory: each
    claims a task before computing it, and waits at the end for the tasks
    another runner holds.  Worker processes ignore Ctrl-C, which reaches the
    whole process group: this process stops them.  With ``n_jobs > 1``
    (joblib's process pool) each worker also exits as soon as this process is
    gone, even after SIGKILL.
    """
    from tqdm import tqdm

    n_jobs = check_positive_int(n_jobs, name="n_jobs")
    if scheduler is not None and scheduler != "local" and (not isinstance(scheduler, str) or not scheduler.strip()):
        raise ValueError(f"scheduler must be 'local' or an address like tcp://HOST:8786, got {scheduler!r}")
    tasks = list_tasks(suite, profile, datasets=datasets, realizations=realizations)
    for d in dict.fromkeys(d for d, _ in tasks):
        results_dir(out, suite, profile, "tasks", d)
    strays = _set_aside_strays(suite, profile, out)
    todo = [(suite, profile, d, r) for d, r in tasks if not _finished(out, (suite, profile, d, r))]
    counts, bad = {"run": 0, "done": len(tasks) - len(todo), "adopted": 0}, []
    claims = _Claims(out)
    t0 = time.perf_counter()
    client = cluster = bar = None

    def claimed(jobs, deferred):
        """The jobs to compute, each claimed; those another runner holds go to ``deferred``."""
        for job in jobs:
            if not claims.take(job):
                deferred.append(job)
                continue
            state = _settle(out, job, bad)
            if state == "todo":
                yield job
                continue
            claims.release(job)
            counts[state] += 1
            bar.update(1)

    try:
        if scheduler == "local":
            from dask.distributed import Client, LocalCluster

            with _sigint_blocked():
                cluster = LocalCluster(n_workers=n_jobs, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
            client = Client(cluster)
        elif scheduler is not None:
            client = _connect(scheduler)
        bar = tqdm(total=len(tasks), initial=counts["done"], desc=f"{suite}/{profile}", unit="task",
                   disable=not progress)
        while todo:
            deferred = []
            results = _results(claimed(todo, deferred), n_jobs, dask=client is not None)
            try:
                for job, rec in results:
                    check_record(rec, job)  # never write what would not be read back
                    write_atomic(record_path(out, *job), rec)
                    claims.release(job)
                    counts["run"] += 1
                    bar.update(1)
            finally:
                _stop(results)
            for job in deferred:
                claims.wait(job)
            todo = deferred
    finally:
        claims.close()
        if bar is not None:
            bar.close()
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
    return {"run": counts["run"], "skipped": counts["done"], "adopted": counts["adopted"],
            "bad_records": bad, "stray_files": strays,
            "seconds": time.perf_counter() - t0}
