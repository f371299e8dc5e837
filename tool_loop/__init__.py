"""The agent's tool-calling loop: beside the agent, because it is the agent's way of answering (a
conversation with the model about tools), not part of the MCP client it calls through.

- ``toolset``: ``Toolset``, one turn's tools as the loop sees them, in plain shapes without MCP (it
  sits below the MCP client, which builds them);
- ``events``: what the loop reports: frozen events, the one-method ``ToolLoopEvents`` that hears them,
  and ``ToolLoopLog``, which writes them to the episode log;
- ``loop``: ``ToolLoop``, iterations, the turn budget and the forced final answer.
"""
