"""The agent's tool-calling loop: beside the agent, because it is the agent's way of answering (a
conversation with the model about tools), not part of the MCP client it calls through. What it
calls through is ``shared_utils.toolset``'s ``Toolset``, the contract every tool provider fills.

- ``events``: what the loop reports: frozen events, the one-method ``ToolLoopEvents`` that hears them,
  and ``ToolLoopLog``, which writes them to the episode log;
- ``loop``: ``ToolLoop``, iterations, the turn budget and the forced final answer.
"""
