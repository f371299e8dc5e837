"""What a run is set up with and what an episode has so far, shared by the layers above:

- ``events``: every event name the episode log holds, for its writers and its readers;
- ``episode_events``: each event as a typed record, the one way to write one and the one way to read one;
- ``errors``: every error ZorkGPT raises on purpose, and what the program does with each;
- ``providers``: what ZorkGPT knows of the OpenAI-compatible servers people use;
- ``game_configuration``: the ``[tool.zorkgpt.*]`` settings, their env overrides and ``.env``;
- ``objective_spec``: how an objective says it is done;
- ``progress``: what counts as progress for the idle rule;
- ``game_state``: the episode's state, owned by the episode runner;
- ``episode_folder``: every file name of an episode folder, and the one reader of its events;
- ``redaction``: the run's secrets, taken out of text before it is written anywhere;
- ``episode_log``: the JSONL and human logs;
- ``stop_signals``: Ctrl-C and SIGTERM.
"""
