"""The truth oracle: is what the product tells its models true, complete and compact?

The test suite's judge of every prompt and request the product sends, against the game as the
engine has it, read independently of the product. The benchmarks' command line
(``benchmarks/context_truth.py``) and the tests (``tests/harness/test_truth.py``) both import it.

- ``story``: the story file read alone: objects, properties, the dictionary's directions and nouns
- ``engine``: the engine's side: Zork I, II or III replayed with Jericho and ``story``, nothing of the product imported
- ``verdicts``: the checks by name, the roles' request budgets, and the ledger of verdicts
- ``prompt_text``: the product's prompts and requests read back, by their formats
- ``transcript``, ``player``: what the player read and saw, turn by turn (the seen level's side)
- ``ways_checks``, ``view_checks``, ``prompt_checks``, ``request_checks``: the checks by family: the ways
  and routes; the location, objects and inventory; the prompt's bookkeeping; every role's requests
- ``replay``: the walkthrough played through the product with a scripted model
- ``report``: one walkthrough checked (``check_walkthrough``): the figures and every disagreement
"""
