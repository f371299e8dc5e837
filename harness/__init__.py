"""What the tests and the benchmarks share to drive the product for real.

It sits above the product and below ``tests/`` and ``benchmarks/``, and imports neither: both
import it, so neither needs the other.

- ``cpu``: the benchmarks' one reader of CPU time (``/proc/<pid>/stat``, ``getrusage``), in seconds
- ``timing``: one time scale for every wait (``HARNESS_TIME_SCALE``) and ``wait_until``
- ``scripted_llm``: the scripted OpenAI-compatible server on 127.0.0.1, real HTTP
- ``config``: test configurations: scripted models, instant retries, files under the test's folder
- ``servers``: our servers started as processes on free loopback ports, and MCP config entries
- ``walkthroughs``, ``learning``, ``managers``: scripted models that play the walkthrough (thinking with
  MCP tools, learning for the managers), episode configurations, and the managers' shared pieces
- ``truth``: the truth oracle: every request the product sends checked against the engine, read independently
"""
