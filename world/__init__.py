"""The world's file formats, read and written without the managers behind them (the viewer and the
Zork server use them too):

- ``memory_file``: ``memories.md``;
- ``knowledge_file``: ``knowledgebase.md``;
- ``map_graph``: the map by engine room id (``map_state.json``, ``map.mmd``).
"""
