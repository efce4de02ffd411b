#!/usr/bin/env python3
"""One entry point for the two things a newcomer does: build the book, run the tests.

    python3 tools/dev.py book    # build the HTML book into _build/html
    python3 tools/dev.py test    # unit tests, nbval on every notebook, strict book build,
                                 # and every page of the book checked in headless Chromium

Both create the project's virtual environment ``.venv`` (Python >= 3.11, exact
pins from requirements.txt, ensvote installed editable) when it is missing or
when requirements.txt / pyproject.toml changed since it was made.  Extra
arguments after ``test`` go to pytest.  Only the standard library is used here.
"""

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("ENSVOTE_VENV", ROOT / ".venv"))
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".ensvote-requirements.sha256"
#: An older x86-64 CPU, emulated: numpy without its AVX2/AVX-512 kernels, OpenBLAS's
#: SSE3 (Prescott) kernels, numba compiling for a generic x86-64.  ``test`` runs the
#: notebooks a second time under it; tests/test_records.py writes records under it.
OLDER_CPU = {"NPY_DISABLE_CPU_FEATURES": "X86_V3", "OPENBLAS_CORETYPE": "Prescott", "NUMBA_CPU_NAME": "generic"}


def _digest():
    h = hashlib.sha256()
    for name in ("requirements.txt", "pyproject.toml"):
        h.update((ROOT / name).read_bytes())
    return h.hexdigest()


def ensure_env():
    if sys.version_info < (3, 11):
        sys.exit(f"Python >= 3.11 is required, this is {sys.version.split()[0]}")
    want = _digest()
    if PY.exists() and STAMP.exists() and STAMP.read_text().strip() == want:
        return
    if not PY.exists():
        print(f"[dev] creating virtual environment {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    print("[dev] installing pinned requirements (requirements.txt)", flush=True)
    run([PY, "-m", "pip", "install", "--disable-pip-version-check", "-q", "-r", "requirements.txt"])
    STAMP.write_text(want)


def run(cmd):
    proc = subprocess.run([str(c) for c in cmd], cwd=ROOT)
    if proc.returncode:
        sys.exit(proc.returncode)


def main(argv):
    if not argv or argv[0] not in ("book", "test", "env"):
        sys.exit(__doc__)
    ensure_env()
    if argv[0] == "book":
        run([BIN / "jupyter-book", "build", ".", "-W", "-n", "--keep-going"])
        print(f"[dev] book: {ROOT / '_build' / 'html' / 'index.html'}")
    elif argv[0] == "test":
        run([PY, "-m", "pytest", *argv[1:]])


if __name__ == "__main__":
    main(sys.argv[1:])
