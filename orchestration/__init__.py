"""Playing episodes: the layer between ``main.py`` and the agent and managers (reading finished runs
back is ``reports/``, below it: the runner writes its records in the shapes the reports read).

- ``turn_figures``: one played turn's figures for whoever watches;
- ``context_builder``: the agent's per-turn user message;
- ``episode_runner``: the episode runner, one synchronous turn at a time;
- ``terminal_status``: the live status at the bottom of a terminal;
- ``parallel``: ``--parallel K``, one ``main.py`` process per episode;
- ``setup_check``: ``main.py --check``;
- ``embedded_model``: the bundled model that plays when no key and no endpoint are set.
"""
