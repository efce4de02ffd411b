"""Every number glued into the book's text is stored at the precision a reader can see.

nbval compares the stored value, so a float glued at 17 digits fails on a CPU
whose SIMD kernels round the last bit differently, while one glued at
``GLUE_DIGITS`` significant digits fails only when a digit changes that some
sentence could show.  These tests read the committed notebooks: every glued
float is at most ``GLUE_DIGITS`` digits, no ``{glue:text}`` format shows more
digits than that, and every chapter glues through the rounding helper.
"""

import ast
import re
from pathlib import Path

import nbformat
import pytest

from ensvote.experiments.report import GLUE_DIGITS

BOOK = Path(__file__).resolve().parents[1] / "book"
NOTEBOOKS = sorted(BOOK.glob("*.ipynb"))
REF = re.compile(r"\{glue:text\}`([^`:]+)(?::([^`]*))?`")


def shown_digits(text):
    """Significant digits a number written as ``text`` shows (``"0.0131"`` -> 3, ``"84.00"`` -> 4)."""
    mantissa = text.strip().lstrip("+-").lower().split("e")[0]
    digits = mantissa.replace(",", "").replace(".", "").replace("%", "").lstrip("0")
    return len(digits)


def glued(nb):
    """``{name: value}`` of every glued Python float, int or str in a notebook's outputs."""
    out = {}
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            book = o.get("metadata", {}).get("scrapbook", {})
            name = book.get("name")
            plain = o.get("data", {}).get(book.get("mime_prefix", "") + "text/plain")
            if name is None or plain is None:
                continue
            try:
                out[name] = ast.literal_eval(plain)
            except (ValueError, SyntaxError):
                out[name] = plain  # a table, a figure, an array
    return out


@pytest.mark.parametrize("digits", [("0.0131", 3), ("84.00", 4), ("-2.9e-15", 2), ("1,000,001", 7), ("+0.50", 2)])
def test_shown_digits(digits):
    assert shown_digits(digits[0]) == digits[1]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_glued_floats_are_stored_and_shown_at_glue_digits(path):
    nb = nbformat.read(path, as_version=4)
    values = glued(nb)
    too_long = {k: v for k, v in values.items() if isinstance(v, float) and shown_digits(repr(v)) > GLUE_DIGITS}
    assert not too_long, f"glued at more than {GLUE_DIGITS} significant digits: {too_long}"
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    wide = []
    for name, fmt in REF.findall(text):
        v = values.get(name)
        if fmt and isinstance(v, float) and shown_digits(format(v, fmt)) > GLUE_DIGITS:
            wide.append(f"{name}:{fmt} shows {format(v, fmt)}")
    assert not wide, f"formats showing more than the {GLUE_DIGITS} digits stored: {wide}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_chapters_glue_through_the_rounding_helper(path):
    code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
    assert "from myst_nb import glue" not in code and "myst_nb.glue" not in code
