"""Test configuration: hypothesis runs derandomized, so the same command gives the same result; shared fixtures."""

import threading

import pytest
from hypothesis import settings

settings.register_profile("ensvote", derandomize=True, deadline=None, max_examples=60)
settings.load_profile("ensvote")


def _within(seconds, f, *args, **kwargs):
    """f(*args, **kwargs), failing the test (not hanging it) if it takes longer than ``seconds``."""
    box = {}

    def call():
        try:
            box["value"] = f(*args, **kwargs)
        except BaseException as exc:  # handed back to the test
            box["error"] = exc

    t = threading.Thread(target=call, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{getattr(f, '__name__', f)} still running after {seconds} s"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.fixture
def within():
    """``within(seconds, f, *args, **kwargs)``: ``f``'s value, or a failure (not a hang) after ``seconds``."""
    return _within
