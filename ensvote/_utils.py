"""Small shared helpers: the project's single seed constant and RNG handling."""

import numpy as np

#: The one seed constant that feeds every random choice in ensvote
#: (datasets, experiments, Monte Carlo estimates) when no ``random_state``
#: is given.  Changing it changes every random number the book shows.
SEED = 20110426


def check_random_state(random_state=None):
    """Return a :class:`numpy.random.Generator`.

    ``None`` means "use :data:`SEED`" (never fresh entropy: the same command
    must give the same bytes).  An ``int`` seeds a new generator; a
    ``Generator`` is passed through.
    """
    if random_state is None:
        return np.random.default_rng(SEED)
    if isinstance(random_state, np.random.Generator):
        return random_state
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        if random_state < 0:
            raise ValueError(f"random_state must be a non-negative int, got {random_state}")
        return np.random.default_rng(int(random_state))
    raise TypeError(
        "random_state must be None, a non-negative int or a numpy Generator, "
        f"got {type(random_state).__name__}"
    )
