"""The reference engine and random vote matrices, shared by the tests of the engine's fast paths."""

import numpy as np

from ensvote import engine


def reference(votes, rule, l):
    """:func:`ensvote.engine.run_halting` on a vote matrix: the engine every fast path must equal."""
    v = np.asarray(votes, dtype=np.int64)
    return engine.run_halting(lambda rows, a, b: v[rows, a:b], v.shape[0], v.shape[1], l, rule)


def random_votes(n, T, l, seed):
    """``n`` rows of ``T`` votes for ``l`` classes, from clear-cut to borderline rows."""
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(l, 0.7), size=n)
    return (rng.random((n, T, 1)) > np.cumsum(p, axis=1)[:, None, :]).sum(axis=2)
