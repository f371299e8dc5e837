"""Playing episodes and reporting on them: the layer between ``main.py`` and the agent and managers.

- ``turn_figures``: one played turn's figures for whoever watches;
- ``run_settings``: the settings an episode and a run played with, on record, and how runs' settings differ;
- ``context_builder``: the agent's per-turn user message;
- ``episode_runner``: the episode runner, one synchronous turn at a time;
- ``episode_records``: an episode's figures from what it wrote;
- ``run_results``: a run's episodes, how each ended, and their rows of ``results.csv``;
- ``run_figures``: a run's figures over its finished episodes (means, intervals);
- ``run_tables``: those figures as Markdown tables;
- ``run_plots``: score over turns as PNG;
- ``run_compare``: whether two runs' scores differ by more than chance;
- ``run_folder``: the run folder, written and read back;
- ``run_report``: the report commands (``report``, ``compare``) and ``main.py``'s end of run;
- ``terminal_status``: the live status at the bottom of a terminal;
- ``parallel``: ``--parallel K``, one ``main.py`` process per episode;
- ``setup_check``: ``main.py --check``;
- ``embedded_model``: the bundled model that plays when no key and no endpoint are set.
"""
