"""The truth oracle: is what the product tells its models true, complete and compact?

The test suite's judge of every prompt and request the product sends, against the game as the
engine has it, read independently of the product. The benchmarks' command line
(``benchmarks/context_truth.py``) and the tests (``tests/harness/test_truth.py``) both import it.

- ``engine``: the engine's side: Zork I, II or III read with Jericho and the story file alone, nothing of
  the product imported
- ``context``: the walkthrough played through the product, every request checked against the engine, the report
"""
