#!/usr/bin/env python3
"""Re-execute notebooks in place, so the committed outputs are what the code computes now.

    .venv/bin/python tools/execute_notebooks.py                  # every notebook under book/
    .venv/bin/python tools/execute_notebooks.py book/a.ipynb ... # just these

Each notebook runs with its own folder as working directory, in the current
Python environment's kernel; execution timestamps are not recorded, so the
same code gives the same bytes.
"""

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]


def execute(path, timeout=1800):
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", record_timing=False,
                            resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    nbformat.write(nb, path)


def main(argv):
    paths = [Path(a).resolve() for a in argv] or sorted((ROOT / "book").rglob("*.ipynb"))
    paths = [p for p in paths if ".ipynb_checkpoints" not in p.parts]
    for p in paths:
        print(f"executing {p.relative_to(ROOT)}", flush=True)
        execute(p)


if __name__ == "__main__":
    main(sys.argv[1:])
