"""Moved to ``harness/managers.py``, which tests and benchmarks share; new code imports it from there.

This name stays while benchmarks/context_truth.py and test modules written before the move still
import it.
"""

from harness.managers import *  # noqa: F403
