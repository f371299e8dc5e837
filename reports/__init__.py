"""Run reports: what episodes and runs recorded, counted, written and read back, and how runs compare.

Nothing here plays: these modules import no manager, agent or runner, so ``python -m reports``
(``__main__``) loads none of them. They sit below the managers because the playing side records
through them: the episode runner writes ``settings.json`` with ``run_settings``, its summary counts
with ``episode_counts``, and ``--parallel`` says how each child ended as an ``EpisodeEnd``.

- ``episode_counts``: tool calls, the critic's verdicts, fair play and the game, counted from an episode's events;
- ``run_settings``: the settings an episode and a run played with, on record, and how runs' settings differ;
- ``episode_records``: an episode's figures from what it wrote;
- ``run_results``: a run's episodes, how each ended, and their rows of ``results.csv``;
- ``run_figures``: a run's figures over its finished episodes (means, intervals);
- ``run_tables``: those figures as Markdown tables;
- ``run_plots``: score over turns as PNG;
- ``run_compare``: whether two runs' scores differ by more than chance;
- ``run_folder``: the run folder, written and read back;
- ``run_report``: the report commands (``report``, ``compare``) and ``main.py``'s end of run;
- ``__main__``: ``python -m reports report|compare ...``.
"""
