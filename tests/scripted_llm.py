"""Moved to ``harness/scripted_llm.py``, which tests and benchmarks share; new code imports it from there.

This name stays while benchmarks/context_truth.py and test modules written before the move still
import it.
"""

from harness.scripted_llm import *  # noqa: F403
