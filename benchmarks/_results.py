"""What a benchmark does with its rows: one CSV, written whole (imported by the scripts beside it)."""

import csv


def write_csv(path, fields, rows):
    """Write ``rows`` (dicts) under the header ``fields`` to ``path``, making its directory; say so."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fields, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"written {path}")
