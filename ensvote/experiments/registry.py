"""The suites, by name: one line per suite (its module defines ``SUITE``)."""

from . import circle, headtohead, hl2011, perrow, soto2016

__all__ = ["SUITES"]

SUITES = {s.name: s for s in (hl2011.SUITE, circle.SUITE, soto2016.SUITE, headtohead.SUITE, perrow.SUITE)}
