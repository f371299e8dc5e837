"""The pieces of the chat-completions client; ``llm_client.LLMClient`` is their public face.

One job per module, each importing only downward (``session``, ``shared_utils``) and from the
modules listed before it:

- ``wire``: the shapes a reply becomes (``LLMResponse``, ``ToolCall``...) and per-name usage.
- ``models``: what a model family accepts (reasoning models, Anthropic, tool support).
- ``payload``: the request body and headers, built without a network.
- ``replies``: a provider's reply body read into an ``LLMResponse``.
- ``structured``: which structured-output form an endpoint accepts, negotiated and remembered.
- ``cost``: what a call cost and the per-name totals.
- ``tracing``: the Langfuse client, the observation helper, and the generation around a call.
- ``deadline``: a whole-request deadline that cuts a reply trickling in.
- ``transport``: one HTTP attempt and what its status means.
- ``retry``: backoff timing and the retry loop.
- ``breaker``: the circuit breaker that stops calling a provider that keeps failing.
"""
