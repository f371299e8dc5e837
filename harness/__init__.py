"""What the tests and the benchmarks share to drive the product for real.

The scripted OpenAI-compatible server (``scripted_llm``), walkthrough players and episode
configurations (``e2e``, ``learning``, ``managers``, ``config``), our servers started as processes
(``servers``), and one time scale for loaded machines (``timing``). It sits above the product and
below ``tests/`` and ``benchmarks/``: it imports neither, so neither imports the other.
"""
