"""Managers: each owns one job of the turn loop behind the small ``BaseManager`` interface.

- ``base_manager``: the interface (``reset_episode``, ``process_turn``, ``context_section``, ...);
- ``structured_llm``: a manager's JSON-schema model call, validated, never a crash;
- ``learning_file``: one locked read-merge-write discipline for every shared learning file;
- ``learning_manager``: the base of the managers that learn, each with its model role and its learning file;
- ``turn_events``: which turns teach something, and the room the lesson belongs to;
- ``map_manager``: the map kept in step with the game, and its prompt section;
- ``critic``, ``critic_manager``: the free engine check and the optional critic model; re-asks and trust;
- ``extractor_manager``: what the game's last reply means, from the engine where it can answer;
- ``in_view``: what the player saw that still matters, kept in view;
- ``memory_manager``, ``objective_manager``, ``knowledge_manager``: what the agent learns, in its files;
- ``episode_synthesizer``: the episode summary (counted by ``reports.episode_counts``) and stuck detection;
- ``mcp_manager``: ``MCPManager``, every configured MCP server as one set of tools per turn.
"""
