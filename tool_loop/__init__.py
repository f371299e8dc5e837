"""The agent's tool-calling loop: beside the agent, because it is the agent's way of answering (a
conversation with the model about tools), not part of the MCP client it calls through.

- ``events``: what the loop reports, as episode log events;
- ``loop``: ``ToolLoop``, iterations, the turn budget and the forced final answer.
"""
