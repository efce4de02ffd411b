"""Command line: ``python -m ensvote run|aggregate SUITE --profile PROFILE [...]``.

Examples
--------
    python -m ensvote run soto2016 --profile paper --n-jobs 2
    python -m ensvote run hl2011 --profile book --datasets pima,waveform --realizations 0:5
    python -m ensvote run hl2011 --profile paper --scheduler tcp://scheduler:8786
    python -m ensvote aggregate soto2016 --profile paper
    python -m ensvote aggregate hl2011 --profile paper --allow-missing

Every error is one line on stderr (exit status 1; 2 for a malformed command
line); a record found bad is reported by path, set aside as ``*.bad`` and
computed again; a file ``tasks/*/r*.json.gz`` that names no task is reported
by path and set aside as ``*.stray``.  Ctrl-C stops ``run`` (and its worker
processes) with one line and exit status 130; the finished records are kept.
"""

import argparse
import signal
import sys
import threading
import warnings

try:
    from . import datasets
    from .experiments import PROFILES, SUITES, IncompleteRecordsError, aggregate, run
except ModuleNotFoundError as exc:  # the experiments extra is not installed: one line, naming it
    sys.exit(f"python -m ensvote: {exc}")
except KeyboardInterrupt:  # Ctrl-C while starting: nothing ran
    print("python -m ensvote: interrupted", file=sys.stderr)
    sys.exit(130)

#: Options whose value may start with "-" (e.g. ``--realizations -1:1``), which
#: argparse would otherwise take for an option and answer "expected one argument".
_VALUE_OPTIONS = ("--datasets", "--realizations", "--out", "--scheduler")
_ERRORS = (ValueError, OSError) + ((datasets.ChecksumError,) if hasattr(datasets, "ChecksumError") else ())


def _attach_values(argv):
    """``[..., "--realizations", "-1:1"]`` -> ``[..., "--realizations=-1:1"]``."""
    out, i = [], 0
    while i < len(argv):
        if argv[i] in _VALUE_OPTIONS and i + 1 < len(argv) and argv[i + 1].startswith("-") \
                and argv[i + 1] not in ("-h", "--help"):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def _one_line(message):
    return " ".join(str(message).split())


def _dataset_list(spec, suite):
    if spec is None:
        return None
    names = [n.strip() for n in spec.split(",")]
    if not any(names):
        raise ValueError(f"--datasets is empty; give comma-separated dataset names of suite {suite!r}: "
                         f"{','.join(SUITES[suite].datasets)}")
    if "" in names:
        raise ValueError(f"--datasets {spec!r} has an empty name")
    return names


def _interrupt_once(signum, frame):
    """SIGINT handler: KeyboardInterrupt, and a second Ctrl-C no longer interrupts the clean-up of the first."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def main(argv=None):
    own = signal.getsignal(signal.SIGINT) is signal.default_int_handler and \
        threading.current_thread() is threading.main_thread()
    if own:
        signal.signal(signal.SIGINT, _interrupt_once)
    try:
        return _main(argv)
    finally:
        if own and signal.getsignal(signal.SIGINT) is _interrupt_once:  # after an interrupt it stays ignored
            signal.signal(signal.SIGINT, signal.default_int_handler)


def _main(argv):
    argv = _attach_values(list(sys.argv[1:] if argv is None else argv))
    ap = argparse.ArgumentParser(prog="python -m ensvote", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    for name in ("run", "aggregate"):
        p = sub.add_parser(name)
        p.add_argument("suite", choices=sorted(SUITES))
        p.add_argument("--profile", required=True, choices=PROFILES)
        p.add_argument("--out", default="results", help="results directory (default: results/)")
        p.add_argument("--allow-missing", action="store_true",
                       help="tabulate an incomplete set of records (the missing ones are listed on stderr)")
        if name == "run":
            p.add_argument("--datasets", help="comma-separated subset of the suite's datasets")
            p.add_argument("--realizations", help="START:STOP, a shard of the realizations")
            p.add_argument("--n-jobs", type=int, default=1, help="parallel workers (default 1)")
            p.add_argument("--scheduler", help="dask.distributed scheduler address, or 'local'")
            p.add_argument("--no-aggregate", action="store_true", help="skip the aggregation step")
    args = ap.parse_args(argv)
    prog = f"{ap.prog} {args.command}"

    def show(message, category, filename, lineno, file=None, line=None):
        from tqdm import tqdm  # a line of its own, above the progress bar of run

        tqdm.write(f"{prog}: warning: {_one_line(message)}", file=sys.stderr)

    with warnings.catch_warnings():
        warnings.showwarning = show
        try:
            if args.command == "run":
                summary = run(args.suite, args.profile, out=args.out,
                              datasets=_dataset_list(args.datasets, args.suite),
                              realizations=args.realizations, n_jobs=args.n_jobs, scheduler=args.scheduler)
                print(f"{args.suite}/{args.profile}: {summary['run']} task(s) run, {summary['skipped']} skipped "
                      f"(already done), {summary['adopted']} adopted from a profile with the same parameters, "
                      f"{len(summary['bad_records'])} bad record(s) set aside and computed again, "
                      f"{summary['seconds']:.1f} s", file=sys.stderr)
                if args.no_aggregate:
                    return 0
                try:
                    written = aggregate(args.suite, args.profile, out=args.out, allow_missing=args.allow_missing)
                except IncompleteRecordsError as exc:  # a shard: the run itself succeeded
                    print(f"{prog}: note: tables not written: {_one_line(exc)}", file=sys.stderr)
                    return 0
            else:
                written = aggregate(args.suite, args.profile, out=args.out, allow_missing=args.allow_missing)
            for path in written:
                print(path)
        except _ERRORS as exc:
            print(f"{prog}: error: {_one_line(exc)}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"{prog}: interrupted; the finished records are kept: the same command resumes", file=sys.stderr)
            return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
