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


def significant(obj, digits):
    """``obj`` with every float rounded to ``digits`` significant decimal digits.

    Floats are rounded from their exact binary value (round half to even), inside
    dicts, lists and tuples too (tuples come back as lists, as JSON has them); ints,
    bools, strings and None pass unchanged.  Floating-point results differ across
    CPUs in their last bits (SIMD kernels of numpy and OpenBLAS, numba's target);
    rounded, they agree unless the noise straddles a rounding boundary, which for
    a relative noise of 1e-15 and 9 digits happens to about one value in 10^6.

    Examples
    --------
    >>> significant(-0.9988971678980845, 6), significant({"a": [2.9976e-15, 7]}, 2)
    (-0.998897, {'a': [3e-15, 7]})
    """
    if isinstance(obj, (float, np.floating)):
        return float(f"{float(obj):.{digits}g}")
    if isinstance(obj, dict):
        return {k: significant(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [significant(v, digits) for v in obj]
    return obj


#: What ``pip install 'ensvote[experiments]'`` adds to the classifier's dependencies, by import name.
EXPERIMENTS_EXTRA = ("pandas", "tqdm", "joblib", "dask", "distributed", "statsmodels")


def require_extra(who, modules=EXPERIMENTS_EXTRA):
    """ModuleNotFoundError naming the ``experiments`` extra if any of ``modules`` is not installed.

    The classifier needs numpy, scipy, scikit-learn and numba only; the
    datasets and the experiment runner need more.
    """
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        raise ModuleNotFoundError(f"{who} needs {', '.join(missing)}, which the classifier alone does not: "
                                  "pip install 'ensvote[experiments]'")
