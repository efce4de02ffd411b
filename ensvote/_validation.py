"""Input validation shared by the public functions (scikit-learn style helpers)."""

import math
import numbers

import numpy as np

#: Vote counts (and numbers of votes) must lie below this bound: every integer
#: up to it is exactly representable as a float64, so no count is rounded by
#: the floating-point formulas, and int64 sums of counts cannot overflow.
MAX_COUNT = 2**53
#: Largest ensemble size ``T`` accepted where a cost grows with ``T`` (the exact
#: two-class confidence of the urn model costs time proportional to ``T`` per row:
#: about 0.1 s per row at this limit).
MAX_T = 10**8
#: Largest array (number of entries) a function allocates for its own work
#: (400 MB of float64): tables, enumerations, Monte Carlo draws.
MAX_ENTRIES = 50_000_000


def _fmt(value):
    """A number for an error message: integers exactly, floats to 6 significant digits."""
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    return f"{int(value):,}"


def check_size(n_entries, *, what, limit=MAX_ENTRIES, hint=""):
    """Refuse work whose array would exceed ``limit`` entries, naming the limit."""
    if n_entries > limit:
        raise ValueError(f"{what} would need {_fmt(n_entries)} entries, more than the limit of "
                         f"{_fmt(limit)}{hint}")


def power_exceeds(base, exponent, limit):
    """Whether ``base ** exponent > limit``, without computing a huge power."""
    value = 1
    for _ in range(int(exponent)):
        value *= int(base)
        if value > limit:
            return True
    return False


def largest_T(limit, n_classes):
    """The largest ``T`` with ``(T + 1) ** n_classes <= limit`` (a table over every count vector's code)."""
    T = int(round(limit ** (1 / n_classes))) + 1
    while power_exceeds(T + 1, n_classes, limit):
        T -= 1
    return T


def as_numeric_array(x, *, name, what):
    """``np.asarray(x)``, refusing ragged, boolean and non-numeric input with a clear error."""
    try:
        arr = np.asarray(x)
    except ValueError as exc:
        raise ValueError(f"{name} must be a rectangular array of {what}: {exc}") from None
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be an array of {what}, got dtype {arr.dtype}")
    return arr


def check_counts(counts, *, name="counts", max_sum=None, max_sum_desc=None):
    """Validate vote counts of shape ``(..., l)``, ``l >= 2``; return an int64 array.

    Counts must be non-negative integers below :data:`MAX_COUNT` (``2**53``), and
    so must each row's total.  Float input is accepted only when every value is
    integral (e.g. ``np.array([3.0, 2.0])``); booleans and anything non-numeric
    are rejected.  With ``max_sum`` (an ensemble size ``T``), a row whose total
    exceeds it is refused first, with a message naming ``max_sum_desc``; the
    total is computed exactly, so counts that would overflow int64 cannot hide
    it.
    """
    arr = as_numeric_array(counts, name=name, what="integer vote counts")
    if arr.ndim == 0:
        raise ValueError(f"{name} must have shape (..., n_classes) with n_classes >= 2, got a scalar")
    if arr.shape[-1] < 2:
        raise ValueError(
            f"{name} must have at least 2 classes along the last axis, got shape {arr.shape}"
        )
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)):
            raise ValueError(f"{name} must be finite")
        if np.any(arr != np.round(arr)):
            raise ValueError(f"{name} must be integers; got non-integer values")
    if np.any(arr < 0):
        raise ValueError(f"{name} must be non-negative")
    if max_sum is not None:
        over = np.any(arr > max_sum, axis=-1)
        if np.any(over):  # that row's total exceeds max_sum; add it up exactly for the message
            row = arr[over][0]
            total = sum(float(v) if arr.dtype.kind == "f" else int(v) for v in row)
            raise ValueError(f"{name} sum to {_fmt(total)}, more than {max_sum_desc or max_sum}")
    big = arr >= MAX_COUNT
    if np.any(big):
        raise ValueError(f"{name} must be below 2**53 (integers exactly representable as float64), "
                         f"got {_fmt(arr[big][0])}")
    out = arr.astype(np.int64)
    # each count is below 2**53, so a row total overflows int64 only beyond 1024 classes; the
    # float64 total is enough to tell whether it reaches 2**53
    if out.size and out.sum(axis=-1, dtype=np.float64).max() >= MAX_COUNT:
        raise ValueError(f"{name} must total below 2**53 votes per row")
    if max_sum is not None:
        s = out.sum(axis=-1)
        if np.any(s > max_sum):
            raise ValueError(f"{name} sum to {_fmt(s.max())}, more than {max_sum_desc or max_sum}")
    return out


def check_probability(value, *, name="confidence"):
    """A threshold strictly inside (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in (0, 1), got {value!r}")
    value = float(value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value}")
    return value


def check_nonnegative_float(value, *, name):
    """A finite real number ``>= 0``, as a float (TypeError for a non-number, ValueError otherwise)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a non-negative real number, got {value!r}")
    value = float(value)
    if not (math.isfinite(value) and value >= 0.0):
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return value


def check_positive_int(value, *, name, minimum=1, maximum=None, why=""):
    """An int (not bool) ``>= minimum``; with ``maximum``, also ``<= maximum`` (``why`` says why)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be <= {_fmt(maximum)}{f' ({why})' if why else ''}, got {_fmt(value)}")
    return value


def check_label(label, n_classes, shape=None):
    """``label`` is None or an int (or int array broadcastable to ``shape``, the rows) in 0..l-1."""
    if label is None:
        return None
    arr = np.asarray(label)
    if arr.dtype == bool or arr.dtype.kind not in "iu":
        raise TypeError(f"label must be an integer class index, got {label!r}")
    if np.any(arr < 0) or np.any(arr >= n_classes):
        raise ValueError(f"label must lie in 0..{n_classes - 1}, got {label!r}")
    if shape is not None:
        try:
            fits = np.broadcast_shapes(arr.shape, tuple(shape)) == tuple(shape)
        except ValueError:
            fits = False
        if not fits:
            raise ValueError(f"label must be one class index or an array broadcastable to the counts' "
                             f"row shape {tuple(shape)}, got shape {arr.shape}")
    return arr.astype(np.int64)


def prior_argument(prior):
    """The ``prior`` argument of the urn model: None for the uniform prior (None or ``"uniform"``)."""
    if prior is None:
        return None
    if isinstance(prior, str):
        if prior == "uniform":
            return None
        if prior == "oob":
            raise ValueError("prior='oob' means 'estimate it from out-of-bag votes', which only "
                             "HaltingClassifier can do; here pass ensvote.oob_prior(oob_votes, T), "
                             "or None / 'uniform'")
        raise ValueError("prior must be None or 'uniform' (the uniform prior), an array of shape "
                         f"(T + 1,) or a pair (support, probs); got {prior!r}")
    return prior
