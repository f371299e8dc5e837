"""Which values are secrets, and taking them out of text before it is written anywhere.

A run builds one ``Redactor`` where it starts (``main.py``'s run, ``--check``, ``--mcp-login``),
with ``Redactor.for_run``: the LLM API key, the provider and Langfuse keys in the environment or
``.env``, and the header, env and OAuth secret values of the MCP servers' entries (read by
``mcp_client.config`` only when MCP is on). It hands it to everything that writes, each of which
requires it as ``redactor`` and keeps it under that name: the episode logger, the LLM clients, the
learning files, the MCP manager, the live status, the run report. There is no fallback: a part
that was not handed the run's redactor does not start, rather than redacting less.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from session.game_configuration import API_KEY_ENV_VARS, GameConfiguration, process_environ

# Our secrets: the LLM keys and Langfuse's. One list for redaction here and for what the
# MCP server subprocess must not inherit (mcp_client.config).
SECRET_ENV_VARS: frozenset[str] = frozenset({*API_KEY_ENV_VARS, "LANGFUSE_SECRET_KEY", "LANGFUSE_PUBLIC_KEY"})
REDACTED = "[REDACTED]"
# Shorter values are not treated as secrets: replacing a short test key everywhere would
# mangle ordinary words.
MIN_SECRET_CHARS = 8


def known_secrets(environ: Mapping[str, str] | None = None) -> list[str]:
    """Secret values present in the environment (long enough to be real)."""
    env = os.environ if environ is None else environ
    return [v for k in sorted(SECRET_ENV_VARS) if len(v := env.get(k, "")) >= MIN_SECRET_CHARS]


@dataclass(frozen=True)
class Redactor:
    """Replaces every secret in a text with ``[REDACTED]``: in any letter case (the map
    lowercases actions) and in its JSON-escaped spelling (a secret inside a logged JSON line)."""

    secrets: tuple[str, ...] = ()
    _pattern: re.Pattern[str] | None = field(init=False, repr=False, compare=False, default=None)
    _needles: tuple[str, ...] = field(init=False, repr=False, compare=False, default=())

    def __post_init__(self) -> None:
        kept = {s for s in self.secrets if s and len(s) >= MIN_SECRET_CHARS}
        spellings = kept | {json.dumps(s, ensure_ascii=False)[1:-1] for s in kept}
        # Longest first, so a secret that contains another is replaced whole.
        ordered = sorted(spellings, key=lambda s: (-len(s), s))
        object.__setattr__(self, "secrets", tuple(sorted(kept)))
        pattern = re.compile("|".join(map(re.escape, ordered)), re.IGNORECASE) if ordered else None
        object.__setattr__(self, "_pattern", pattern)
        object.__setattr__(self, "_needles", tuple(spelling.lower() for spelling in ordered))

    def __call__(self, text: str) -> str:
        # Nearly every text holds no secret: a plain search of the lowercased text (about 1 µs
        # for a log line) settles that before the case-blind pattern (about 18 µs) runs.
        if self._pattern is None:
            return text
        lowered = text.lower()
        if not any(needle in lowered for needle in self._needles):
            return text
        return self._pattern.sub(REDACTED, text)

    def __repr__(self) -> str:  # never the values themselves
        return f"Redactor({len(self.secrets)} secrets)"

    @classmethod
    def of(cls, *secrets: str | None) -> Redactor:
        return cls(tuple(s for s in secrets if s))

    @classmethod
    def from_environment(cls, extra: Iterable[str | None] = (), environ: Mapping[str, str] | None = None) -> Redactor:
        """The secrets in the environment, and ``extra``."""
        return cls.of(*known_secrets(environ), *extra)

    @classmethod
    def for_run(cls, config: GameConfiguration, mcp_secrets: Iterable[str] = ()) -> Redactor:
        """Every secret a run knows of: the API key, the keys in the environment and ``.env``, and
        ``mcp_secrets`` (the MCP servers' header, env and OAuth values, from
        ``mcp_client.config.configured_secrets`` or ``MCPConfig.secrets``)."""
        environ = process_environ()
        return cls.from_environment([config.api_key, *mcp_secrets], environ)
