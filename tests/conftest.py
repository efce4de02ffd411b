"""Test configuration: hypothesis runs derandomized, so the same command gives the same result."""

from hypothesis import settings

settings.register_profile("ensvote", derandomize=True, deadline=None, max_examples=60)
settings.load_profile("ensvote")
