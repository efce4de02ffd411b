#!/usr/bin/env python3
"""One entry point for the two things a newcomer does: build the book, run the tests.

    python3 tools/dev.py book       # build the HTML book into _build/html, and the whole book as
                                    # one PDF beside it (_build/html/ensvote.pdf; needs Chromium)
    python3 tools/dev.py test       # unit tests, nbval on every notebook, strict book build,
                                    # every page of the book checked in headless Chromium,
                                    # then nbval on every notebook again under an emulated older CPU,
                                    # with the tests that recompute committed records and rules
    python3 tools/dev.py test ARGS  # just ``pytest ARGS`` (e.g. tests/test_records.py -k older)
    python3 tools/dev.py older-cpu [ARGS]  # ``pytest ARGS`` (default: book) under the emulated older CPU
    python3 tools/dev.py env        # only create or update the environment

Every command first creates the project's virtual environment ``.venv``
(Python >= 3.11, exact pins from requirements.txt, ensvote installed editable)
when it is missing or when requirements.txt / pyproject.toml changed since it
was made, and says which package it is installing.  Only the standard library
is used here.
"""

import hashlib
import os
import re
import subprocess
import sys
import time
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
#: Unit tests ``test`` also runs again under the emulated older CPU: they recompute committed records and
#: rules (whose last digits depend on the CPU) and compare them at the precision they are kept at.
OLDER_CPU_TESTS = ["tests/test_optimal_kernels.py", "tests/test_budget_calibration.py"]


def _digest():
    h = hashlib.sha256()
    for name in ("requirements.txt", "pyproject.toml"):
        h.update((ROOT / name).read_bytes())
    return h.hexdigest()


def _pins():
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return [s for s in (line.strip() for line in lines) if s and not s.startswith("#")]


def ensure_env():
    if sys.version_info < (3, 11):
        sys.exit(f"Python >= 3.11 is required, this is {sys.version.split()[0]}")
    want = _digest()
    if PY.exists() and STAMP.exists() and STAMP.read_text().strip() == want:
        return
    start = time.monotonic()
    if not PY.exists():
        print(f"[dev] creating virtual environment {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True, clear=True).create(VENV)
    n = len(_pins())
    print(f"[dev] installing the {n} pinned packages of requirements.txt into {VENV.name}/ "
          "(about 2 to 5 minutes the first time on 2 cores; later only what changed)", flush=True)
    _pip_with_progress(n)
    STAMP.write_text(want)
    print(f"[dev] environment ready in {time.monotonic() - start:.0f} s", flush=True)


def _pip_with_progress(n):
    """pip install -r requirements.txt, printing one line per package instead of pip's wall of text."""
    cmd = [str(PY), "-m", "pip", "install", "--disable-pip-version-check", "--progress-bar", "off",
           "-r", "requirements.txt"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen, tail = 0, []
    for line in proc.stdout:
        tail = (tail + [line.rstrip()])[-40:]
        m = re.match(r"(Collecting|Processing|Obtaining|Requirement already satisfied:) (\S+).*\(from -r requirements", line)
        if m:
            seen += 1
            what = m.group(2)
            if m.group(1) == "Processing":  # a wheel file: name-version-tags.whl
                what = "==".join(Path(what).name.split("-")[:2])
            print(f"[dev]   {seen:>3}/{n} {what}" + (" (already there)" if m.group(1).startswith("Req") else ""),
                  flush=True)
        elif line.startswith("Installing collected packages"):
            print("[dev]   installing them ...", flush=True)
        elif line.startswith("Successfully installed"):
            print(f"[dev]   installed {len(line.split()) - 2} packages", flush=True)
    if proc.wait():
        print("\n".join(tail), file=sys.stderr)
        sys.exit(f"[dev] pip failed (exit status {proc.returncode}); its last lines are above")


def run(cmd, env=None):
    proc = subprocess.run([str(c) for c in cmd], cwd=ROOT, env=None if env is None else {**os.environ, **env})
    if proc.returncode:
        sys.exit(proc.returncode)


def _has_avx2():
    try:
        return " avx2 " in Path("/proc/cpuinfo").read_text().replace("\n", " ") + " "
    except OSError:
        return False


def older_cpu(args):
    """pytest ``args`` under the emulated older CPU (skipped, saying so, where the CPU is no newer)."""
    if not _has_avx2():
        print("[dev] this CPU has no AVX2: it is already as old as the emulated one, so the pass above covered it")
        return
    print("[dev] again under an emulated older x86-64 CPU: "
          + " ".join(f"{k}={v}" for k, v in OLDER_CPU.items()), flush=True)
    run([PY, "-m", "pytest", *args], env=OLDER_CPU)


def main(argv):
    if not argv or argv[0] not in ("book", "test", "env", "older-cpu"):
        sys.exit(__doc__)
    ensure_env()
    if argv[0] == "book":
        run([BIN / "jupyter-book", "build", ".", "-W", "-n", "--keep-going"])
        print(f"[dev] book: {ROOT / '_build' / 'html' / 'index.html'}")
        print("[dev] the whole book as one PDF (tools/book_pdf.py, about a minute)", flush=True)
        if not Path(os.environ.get("ENSVOTE_CHROMIUM", "/usr/bin/chromium")).exists():
            print("[dev] no PDF: it is printed by Chromium; install Debian's chromium (apt-get install chromium)")
        else:
            run([PY, ROOT / "tools" / "book_pdf.py"])
    elif argv[0] == "test":
        run([PY, "-m", "pytest", *argv[1:]])
        if len(argv) == 1:  # the whole suite: the notebooks must give the same outputs on an older CPU too,
            # and the committed records and rules must be recomputed there (the rest of the unit tests pass
            # there too, checked by hand: ``older-cpu tests``, about 5 minutes)
            older_cpu(["book", *OLDER_CPU_TESTS])
    elif argv[0] == "older-cpu":
        older_cpu(argv[1:] or ["book"])


if __name__ == "__main__":
    main(sys.argv[1:])
