"""Command line: ``python -m ensvote run|aggregate SUITE --profile PROFILE [...]``.

Examples
--------
    python -m ensvote run soto2016 --profile paper --n-jobs 2
    python -m ensvote run hl2011 --profile book --datasets pima,waveform --realizations 0:5
    python -m ensvote run hl2011 --profile paper --scheduler tcp://scheduler:8786
    python -m ensvote aggregate soto2016 --profile paper
"""

import argparse
import sys

from .runner import PROFILES, SUITES, aggregate, run


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m ensvote", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    for name in ("run", "aggregate"):
        p = sub.add_parser(name)
        p.add_argument("suite", choices=sorted(SUITES))
        p.add_argument("--profile", required=True, choices=PROFILES)
        p.add_argument("--out", default="results", help="results directory (default: results/)")
        if name == "run":
            p.add_argument("--datasets", help="comma-separated subset of the suite's datasets")
            p.add_argument("--realizations", help="START:STOP, a shard of the realizations")
            p.add_argument("--n-jobs", type=int, default=1, help="parallel workers (default 1)")
            p.add_argument("--scheduler", help="dask.distributed scheduler address, or 'local'")
            p.add_argument("--no-aggregate", action="store_true", help="skip the aggregation step")
    args = ap.parse_args(argv)
    try:
        if args.command == "run":
            ds = args.datasets.split(",") if args.datasets else None
            summary = run(args.suite, args.profile, out=args.out, datasets_=ds,
                          realizations=args.realizations, n_jobs=args.n_jobs, scheduler=args.scheduler)
            print(f"{args.suite}/{args.profile}: {summary['run']} task(s) run, {summary['skipped']} skipped "
                  f"(already done), {summary['adopted']} adopted from a profile with the same parameters, "
                  f"{summary['seconds']:.1f} s", file=sys.stderr)
            if summary["missing_datasets"]:
                print("not available offline (rows kept empty): " + ", ".join(summary["missing_datasets"]),
                      file=sys.stderr)
            if args.no_aggregate:
                return 0
        for path in aggregate(args.suite, args.profile, out=args.out):
            print(path)
    except ValueError as exc:
        ap.error(str(exc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
