"""The suites, by name: one line per suite (its module defines ``SUITE``)."""

from . import calibration, circle, headtohead, hl2011, manyclasses, perrow, soto2016

__all__ = ["SUITES", "CHAPTER_RESULTS", "CHAPTER_LIVE"]

SUITES = {s.name: s for s in (hl2011.SUITE, circle.SUITE, soto2016.SUITE, headtohead.SUITE, perrow.SUITE,
                                calibration.SUITE, manyclasses.SUITE)}

#: The committed tables each chapter of the book reads, as ``(suite, profile)`` pairs: the reproducing page
#: lists them per chapter (``tests/test_registry.py`` checks them against the chapters' code).
CHAPTER_RESULTS = {
    "glance": (("headtohead", "paper"), ("perrow", "book"), ("soto2016", "paper")),
    "many_classes": (("many-classes", "book"),),
    "hl2011_experiments": (("circle", "paper"), ("hl2011", "paper")),
    "soto2016_experiments": (("soto2016", "paper"),),
    "optimal": (("headtohead", "book"), ("headtohead", "paper")),
    "budget": (("headtohead", "book"), ("headtohead", "paper"), ("perrow", "book"), ("budget-calibration", "book")),
}
#: The suites whose ``smoke`` profile a chapter runs while it executes, checked against the committed records.
CHAPTER_LIVE = {"hl2011_experiments": ("circle", "hl2011"), "soto2016_experiments": ("soto2016",)}
