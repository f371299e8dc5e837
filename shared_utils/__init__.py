"""Helpers every layer uses, one module per job:

- ``text``: terminal-safe text and the cutting helpers;
- ``model_json``: JSON schemas for structured output and the one reader of JSON a model wrote;
- ``files``: atomic writes: a file replaced whole or not at all, its mode kept;
- ``version``: the product's version and the ``--version`` argument;
- ``cli``: the command lines' parser: whole option names only, a did-you-mean for the others;
- ``processes``: child processes that die with their parent (``die_with_parent``), and the reaper of orphans;
- ``toolset``: the tools contract: one turn's tools as the agent sees them (``Toolset``), in plain shapes with no
  MCP in them, which the MCP client fills and the agent's tool loop reads.
"""
