#!/usr/bin/env python3
"""Re-execute notebooks in place, so the committed outputs are what the code computes now.

    .venv/bin/python tools/execute_notebooks.py                  # every notebook under book/
    .venv/bin/python tools/execute_notebooks.py book/a.ipynb ... # just these

Each notebook runs with its own folder as working directory, in the current
Python environment's kernel; execution timestamps are not stored in the
notebooks, so the same code gives the same bytes.

The wall-clock time of each notebook executed (rounded to the second) is
merged into ``book/data/execution_times.json`` (keys are paths relative to
the repository, sorted), which the page "Reproducing this book" reads; the
times are data in a file, so no notebook output depends on the clock.  A
notebook that reads that file is executed after all the others, and is
re-executed whenever other notebooks were, so that it shows the times just
recorded.
"""

import json
import re
import sys
import time
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
TIMES = ROOT / "book" / "data" / "execution_times.json"
# the plain-text repr of some objects (a pandas Styler) carries a memory address;
# it is written as the placeholder nbval's sanitizer uses, so the same code gives the same bytes
ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")


def execute(path, timeout=1800):
    """Execute the notebook at ``path`` in place; return the wall-clock seconds it took."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - start
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        for out in cell.get("outputs", []):
            plain = out.get("data", {}).get("text/plain")
            if isinstance(plain, str):
                out["data"]["text/plain"] = ADDRESS.sub("0xADDRESS", plain)
    nbformat.write(nb, path)
    return seconds


def record_time(path, seconds, times_file=TIMES):
    """Merge ``path``'s execution time (whole seconds) into the JSON file ``times_file``."""
    times = json.loads(times_file.read_text()) if times_file.exists() else {}
    times[path.relative_to(ROOT).as_posix()] = int(round(seconds))
    times_file.parent.mkdir(parents=True, exist_ok=True)
    times_file.write_text(json.dumps(times, indent=1, sort_keys=True) + "\n")


def reads_times(path):
    """True if a code cell of the notebook at ``path`` mentions the times file."""
    nb = nbformat.read(path, as_version=4)
    return any(TIMES.name in cell.source for cell in nb.cells if cell.cell_type == "code")


def main(argv):
    paths = [Path(a).resolve() for a in argv] or sorted((ROOT / "book").rglob("*.ipynb"))
    paths = [p for p in paths if ".ipynb_checkpoints" not in p.parts]
    missing = [str(p) for p in paths if not p.is_file()]
    if missing:
        raise SystemExit(f"no such notebook: {', '.join(missing)}")
    readers = sorted(p for p in (ROOT / "book").rglob("*.ipynb")
                     if ".ipynb_checkpoints" not in p.parts and reads_times(p))
    others = [p for p in paths if p not in readers]
    # the pages that show the times run last, and again whenever other notebooks ran
    last = readers if others else [p for p in paths if p in readers]
    for p in others + last:
        why = "" if p in paths else " (it shows the execution times just recorded)"
        print(f"executing {p.relative_to(ROOT)}{why}", flush=True)
        record_time(p, execute(p))


if __name__ == "__main__":
    main(sys.argv[1:])
