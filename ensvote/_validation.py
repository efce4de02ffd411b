"""Input validation shared by the public functions (scikit-learn style helpers)."""

import numbers

import numpy as np


def as_numeric_array(x, *, name, what):
    """``np.asarray(x)``, refusing ragged, boolean and non-numeric input with a clear error."""
    try:
        arr = np.asarray(x)
    except ValueError as exc:
        raise ValueError(f"{name} must be a rectangular array of {what}: {exc}") from None
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be an array of {what}, got dtype {arr.dtype}")
    return arr


def check_counts(counts, *, name="counts"):
    """Validate vote counts of shape ``(..., l)``, ``l >= 2``; return an int64 array.

    Counts must be non-negative integers.  Float input is accepted only when
    every value is integral (e.g. ``np.array([3.0, 2.0])``); booleans and
    anything non-numeric are rejected.
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
    return arr.astype(np.int64)


def check_probability(value, *, name="confidence"):
    """A threshold strictly inside (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number in (0, 1), got {value!r}")
    value = float(value)
    if not 0.0 < value < 1.0:
        raise ValueError(f"{name} must lie strictly between 0 and 1, got {value}")
    return value


def check_positive_int(value, *, name, minimum=1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {value!r}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def check_label(label, n_classes):
    """``label`` is None or an int (or int array broadcastable to the rows) in 0..l-1."""
    if label is None:
        return None
    arr = np.asarray(label)
    if arr.dtype == bool or arr.dtype.kind not in "iu":
        raise TypeError(f"label must be an integer class index, got {label!r}")
    if np.any(arr < 0) or np.any(arr >= n_classes):
        raise ValueError(f"label must lie in 0..{n_classes - 1}, got {label!r}")
    return arr.astype(np.int64)
