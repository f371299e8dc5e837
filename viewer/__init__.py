"""A read-only web page for watching ZorkGPT episodes, past and running (``python -m viewer``)."""

DEFAULT_PORT = 8765
