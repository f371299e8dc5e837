"""A read-only web page for watching ZorkGPT episodes, past and running (``python -m viewer``).

- ``map_layout``: rooms placed on a grid from the engine's directions;
- ``workdir``: what a game workdir holds, read while a run may be writing it;
- ``server``: the HTTP server, the page and its read-only JSON API;
- ``cli``: the command line;
- ``__main__``: ``python -m viewer``.
"""

DEFAULT_PORT = 8765
