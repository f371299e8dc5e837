"""The world's file formats, read and written without the managers behind them (the viewer and the
Zork server use them too):

- ``memory_file``: ``memories.md``;
- ``knowledge_file``: ``knowledgebase.md``;
- ``named_ways``: the ways a room's description names, by a short list of phrasing rules;
- ``map_graph``: the map by engine room id (``map_state.json``, ``map.mmd``).
"""
