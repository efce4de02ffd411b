"""The package's table caches: bounded, listed in one place, cleared by one call.

Rules precompute tables once per configuration (t*(t; π), urn confidences,
pair tables, stop and label tables, optimal policies) and keep them for the
next call.  Every such cache is a :class:`BoundedCache`, which evicts its
least recently used entry beyond ``maxsize`` entries and registers itself, so
that :func:`clear_caches` empties all of them and :func:`cache_info` lists
them.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import NamedTuple

import numpy as np

__all__ = ["clear_caches", "cache_info", "CacheInfo"]

_REGISTRY = []


class CacheInfo(NamedTuple):
    """What one cache holds (see :func:`cache_info`)."""

    name: str  #: what the cache keeps
    entries: int  #: entries held
    maxsize: int  #: entries kept at most
    nbytes: int  #: bytes of the NumPy arrays held (the tables)


def _nbytes(value):
    if isinstance(value, np.ndarray):
        return value.nbytes
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    if isinstance(value, dict):
        return sum(_nbytes(v) for v in value.values())
    if hasattr(value, "__dict__"):
        return sum(_nbytes(v) for v in vars(value).values())
    return 0


class BoundedCache:
    """A least-recently-used mapping of at most ``maxsize`` entries, registered for :func:`clear_caches`.

    With ``max_bytes``, least recently used entries are also evicted while
    the NumPy arrays held take more than ``max_bytes`` bytes (never the entry
    just set).  An entry that grows in place (a memo) is counted again when it
    is set again.
    """

    def __init__(self, name, maxsize, max_bytes=None):
        self.name, self.maxsize = name, int(maxsize)
        self.max_bytes = None if max_bytes is None else int(max_bytes)
        self._data = OrderedDict()
        _REGISTRY.append(self)

    def get(self, key, default=None):
        try:
            self._data.move_to_end(key)
        except KeyError:
            return default
        return self._data[key]

    def __setitem__(self, key, value):
        self._data[key] = value
        self._data.move_to_end(key)
        while len(self._data) > self.maxsize:
            self._data.popitem(last=False)
        if self.max_bytes is not None:
            while len(self._data) > 1 and sum(_nbytes(v) for v in self._data.values()) > self.max_bytes:
                self._data.popitem(last=False)

    def __len__(self):
        return len(self._data)

    def clear(self):
        self._data.clear()

    def info(self):
        return CacheInfo(self.name, len(self._data), self.maxsize,
                         sum(_nbytes(v) for v in self._data.values()))


def _load_all():
    # the modules that own caches register them on import
    from . import confidence, engine, manyclass, optimal, rules  # noqa: F401


def clear_caches() -> None:
    """Empty every table cache of ensvote (the memory is freed once nothing else refers to the tables).

    Tables are rebuilt on demand, so results do not change; only the next
    call that needs a table pays for building it again.  Fitted
    :class:`~ensvote.HaltingClassifier` objects keep the tables they use.

    Examples
    --------
    >>> import ensvote
    >>> ensvote.UrnRule(T=101).stop([[10, 0]])
    array([ True])
    >>> ensvote.clear_caches()
    >>> sum(c.entries for c in ensvote.cache_info())
    0
    """
    _load_all()
    for cache in _REGISTRY:
        cache.clear()
    from .confidence import _LRU_FUNCTIONS
    for f in _LRU_FUNCTIONS:
        f.cache_clear()


def cache_info() -> list[CacheInfo]:
    """One :class:`CacheInfo` per table cache: name, entries held, entries kept at most, bytes of tables.

    Examples
    --------
    >>> import ensvote
    >>> names = [c.name for c in ensvote.cache_info()]
    >>> "stop tables" in names
    True
    """
    _load_all()
    return [c.info() for c in _REGISTRY]
