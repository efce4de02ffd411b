#!/usr/bin/env python3
"""The whole book as one PDF, made offline: Sphinx's single-page build, typeset by MathJax and printed by Chromium.

    .venv/bin/python tools/book_pdf.py [HTML_DIR]

builds the book as a single page (``jupyter-book build --builder singlehtml``,
strict, into ``_build/pdf/``), opens it in headless Chromium (Debian's
``chromium``, driven by Playwright, every request to the network refused),
waits until MathJax has typeset every equation and prints it to
``HTML_DIR/ensvote.pdf`` (default ``_build/html/``, beside the HTML book, whose
introduction links to it).  ``python3 tools/dev.py book`` runs it after the
HTML build.  About a minute.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("ENSVOTE_CHROMIUM", "/usr/bin/chromium"))
#: The file name the introduction links to (``../ensvote.pdf`` from ``book/intro.html``).
PDF_NAME = "ensvote.pdf"


def jupyter_book():
    """The ``jupyter-book`` command of this Python environment (else the one on PATH)."""
    jb = Path(sys.executable).parent / "jupyter-book"
    return str(jb) if jb.exists() else shutil.which("jupyter-book")


def single_page(work):
    """Build the book as one HTML page under ``work``; the page's path."""
    proc = subprocess.run([jupyter_book(), "build", str(ROOT), "--builder", "singlehtml", "--path-output", str(work),
                           "-W", "-n", "--keep-going"], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode:
        raise RuntimeError("the single-page build failed:\n" + proc.stdout[-4000:] + proc.stderr[-4000:])
    html = work / "_build" / "singlehtml"
    # the root document lives in book/, but the single page's links are relative to the output's root
    page = html / "whole.html"
    shutil.copyfile(html / "book" / "intro.html", page)
    return page


def print_pdf(page, out):
    """Print the HTML page ``page`` to the PDF ``out`` once MathJax has typeset it; no request leaves the machine."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"])
        try:
            tab = browser.new_page()
            tab.route("http*://**", lambda route: route.abort())  # offline: the book needs nothing from the web
            tab.goto(page.as_uri(), wait_until="load")
            tab.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise",
                                  timeout=60_000)
            tab.evaluate("() => MathJax.startup.promise")
            tab.emulate_media(media="print")
            out.parent.mkdir(parents=True, exist_ok=True)
            tab.pdf(path=str(out), format="A4", print_background=True, outline=True, tagged=True,
                    margin={"top": "15mm", "bottom": "15mm", "left": "14mm", "right": "14mm"})
        finally:
            browser.close()
    return out


def build_pdf(html_dir=ROOT / "_build" / "html", work=ROOT / "_build" / "pdf"):
    """Build the single page under ``work`` and print it to ``html_dir/ensvote.pdf``; the PDF's path."""
    if not CHROMIUM.exists():
        raise FileNotFoundError(f"no Chromium at {CHROMIUM}: install Debian's chromium (apt-get install chromium) "
                                "or set ENSVOTE_CHROMIUM")
    return print_pdf(single_page(Path(work)), Path(html_dir) / PDF_NAME)


if __name__ == "__main__":
    path = build_pdf(*(Path(a) for a in sys.argv[1:2]))
    print(f"[pdf] {path} ({path.stat().st_size / 2**20:.1f} MiB)")
