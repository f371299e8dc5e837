"""ZorkGPT configuration, read from ``[tool.zorkgpt.*]`` in pyproject.toml.

Every key has a default, so a missing section or key never fails. An unknown key or a
value of the wrong type fails at start (``ConfigError``) naming the section, the key and
the expected type: a typo in a config file must not silently fall back to a default.

Environment variables override TOML values: ``ZORKGPT_<SECTION>_<KEY>`` (for example
``ZORKGPT_LLM_AGENT_MODEL`` or ``ZORKGPT_MCP_ENABLED=true``), plus the short alias
``ZORKGPT_GAME_FILE`` for ``[tool.zorkgpt.files] game_file``.
"""

from __future__ import annotations

import argparse
import difflib
import os
import tomllib
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args, get_origin
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from session.errors import ConfigError
from session.providers import DEFAULT_PROVIDER_URL, GENERIC, PRESETS, ProviderPreset, guess_preset, is_loopback_url

DEFAULT_CONFIG_FILE = "pyproject.toml"
API_KEY_ENV_VARS: tuple[str, ...] = ("ZORKGPT_CLIENT_API_KEY", "CLIENT_API_KEY", "OPENROUTER_API_KEY")
DEFAULT_BASE_URL = DEFAULT_PROVIDER_URL
# The games ZorkGPT knows by name (``game_interface.games`` holds what it knows of each).
GAME_NAMES: tuple[str, ...] = ("zork1", "zork2", "zork3")
GameName = Literal["zork1", "zork2", "zork3"]
# The emulator takes its seed as a C int. Whether 0 is a seed depends on the game
# (``Game.seed_problem``): Jericho reads it as "none" and plays the game's own.
MIN_GAME_SEED = 0
MAX_GAME_SEED = 2**31 - 1
ProviderName = Literal["openrouter", "openai", "ollama", "llamacpp", "lmstudio", "vllm"]


def game_seed_argument(text: str) -> int:
    """``--seed N`` of our command lines (``type=`` of the argparse option): the seed, or the
    error argparse shows with the usage (exit 2), saying what to give."""
    # ASCII digits only: int() also takes " 7", "+5", "1_0" and other scripts' digits ("٣" is 3).
    seed = int(text) if text.isascii() and text.isdigit() else None
    if seed is None or not MIN_GAME_SEED <= seed <= MAX_GAME_SEED:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a game seed: give a whole number from {MIN_GAME_SEED} to {MAX_GAME_SEED}, e.g. --seed 7"
        )
    return seed


def check_http_url(value: str) -> str:
    """``value`` if it is an http(s) URL with a host; a ValueError saying what to write otherwise."""
    parts = urlsplit(value.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(
            "must be an http:// or https:// URL with a host, such as https://openrouter.ai/api/v1 "
            "or http://localhost:8000/v1"
        )
    return value.strip()


class _Section(BaseModel):
    # extra="forbid" is what turns a typo into an error instead of a silent default.
    # allow_inf_nan=False: TOML spells inf and nan, and neither is a usable timeout or delay.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)
    SECTION: ClassVar[str] = ""


class LLMSection(_Section):
    SECTION: ClassVar[str] = "llm"
    # A preset: the server's usual base_url and the quirks the client works around.
    provider: ProviderName | None = None
    # Unset: the provider's address (OpenRouter without a provider). Set: wins over the preset.
    base_url: str = DEFAULT_BASE_URL
    # Unset: a key is needed unless every endpoint is on this machine (loopback).
    require_api_key: bool | None = None
    agent_model: str = "anthropic/claude-sonnet-4.5"
    critic_model: str = "anthropic/claude-haiku-4.5"
    extractor_model: str = "anthropic/claude-haiku-4.5"
    memory_model: str = "anthropic/claude-haiku-4.5"
    # Per-role endpoints let one role run on a local server while the others use OpenRouter.
    agent_base_url: str | None = None
    critic_base_url: str | None = None
    extractor_base_url: str | None = None
    memory_base_url: str | None = None

    @field_validator("base_url", "agent_base_url", "critic_base_url", "extractor_base_url", "memory_base_url")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value)

    def apply_provider(self) -> None:
        """The provider's base_url, unless base_url was given (TOML or environment)."""
        if self.provider is not None and "base_url" not in self.model_fields_set:
            self.base_url = PRESETS[self.provider].base_url


class RetrySection(_Section):
    SECTION: ClassVar[str] = "retry"
    max_retries: int = Field(default=5, ge=0, le=20)
    initial_delay: float = Field(default=1.0, ge=0, le=600)
    max_delay: float = Field(default=60.0, ge=0, le=3600)
    backoff_base: float = Field(default=2.0, ge=1.0, le=10)
    jitter: float = Field(default=0.25, ge=0, le=1.0, description="fraction of the delay added at random")
    request_timeout: float = Field(default=120.0, gt=0, le=3600)
    circuit_breaker_threshold: int = Field(default=5, ge=1, le=1000)
    circuit_breaker_reset_seconds: float = Field(default=60.0, ge=0, le=3600)


class Sampling(_Section):
    """One role's sampling settings, carried unchanged from ``[tool.zorkgpt.<role>_sampling]`` to
    the request body. A setting left as None is not sent: the provider's default applies. The
    ranges are what OpenAI-compatible providers accept; a value outside them would fail on the
    first call instead of at start."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, ge=0, le=1)
    top_k: int | None = Field(default=None, ge=0, le=1000)
    min_p: float | None = Field(default=None, ge=0, le=1)
    max_tokens: int | None = Field(default=None, ge=1, le=1_000_000)

    def request_args(self) -> dict[str, float | int | None]:
        """The settings as ``LLMClient.complete`` keywords."""
        return self.model_dump()


class AgentSampling(Sampling):
    SECTION: ClassVar[str] = "agent_sampling"


class CriticSampling(Sampling):
    SECTION: ClassVar[str] = "critic_sampling"


class ExtractorSampling(Sampling):
    SECTION: ClassVar[str] = "extractor_sampling"


class MemorySampling(Sampling):
    SECTION: ClassVar[str] = "memory_sampling"


class GameplaySection(_Section):
    SECTION: ClassVar[str] = "gameplay"
    max_turns_per_episode: int = Field(default=500, ge=1, le=1_000_000)
    turn_delay_seconds: float = Field(default=0.0, ge=0, le=3600)
    enable_critic: bool = False
    # When the critic model is asked (the free engine check runs on every proposal): "risky" only for
    # actions that cost something if wrong (a fight, an action that cannot be undone, moving in the
    # dark, putting out a light; never dropping, opening or closing); "always" for every proposal the
    # engine check let through.
    critic_when: Literal["risky", "always"] = "risky"
    critic_rejection_threshold: float = Field(default=-0.05, ge=-1.0, le=1.0)
    max_rejection_rounds: int = Field(default=3, ge=0, le=10)
    # The idle rule: turns in a row without progress (``session.progress``: a new room, a score change,
    # an item taken or dropped, a reply the game had not given before) warn the agent, then end the
    # episode; a limit of 0 turns the rule off.
    stuck_warning_turns: int = Field(default=20, ge=1, le=100_000)
    stuck_limit_turns: int = Field(default=40, ge=0, le=100_000)
    exit_probe: bool = True
    # What the models may be told. "seen": only rooms, ways, objects, creatures and refusals the
    # player has seen (the engine's exit probe still runs, for the free checks, but what it alone
    # found reaches no model). "engine": also what the engine knows (every way out, where it leads,
    # refusals of ways never tried, creatures' names and what they carry): scores are not comparable.
    fair_play: Literal["seen", "engine"] = "seen"
    # The game's random numbers (the thief, combat, the carousel room): episode i of a run plays seed + i - 1.
    # None: the game's own seed (Jericho's, with which its walkthrough wins).
    seed: int | None = Field(default=None, ge=MIN_GAME_SEED, le=MAX_GAME_SEED)

    @field_validator("stuck_limit_turns")
    @classmethod
    def _warned_before_the_end(cls, limit: int, info: ValidationInfo) -> int:
        warning = info.data.get("stuck_warning_turns")
        if limit and warning is not None and warning >= limit:
            raise ValueError(
                f"stuck_warning_turns ({warning}) must be below it, or the episode ends before the agent is "
                "warned: raise stuck_limit_turns, lower stuck_warning_turns, or set stuck_limit_turns = 0 to turn "
                "the idle rule off"
            )
        return limit


class FilesSection(_Section):
    SECTION: ClassVar[str] = "files"
    # Which game to play. None: the game of game_file, else Zork I.
    game: GameName | None = None
    game_file: str | None = None
    game_workdir: str = "game_files"
    knowledge_file: str = "knowledgebase.md"
    map_file: str = "map_state.json"
    memories_file: str = "memories.md"
    objectives_file: str = "objectives.json"
    agent_prompt_file: str = "prompts/agent.md"


class LangfuseSection(_Section):
    SECTION: ClassVar[str] = "langfuse"
    # Keys come from LANGFUSE_PUBLIC_KEY / LANGFUSE_SECRET_KEY; without both, no tracing.
    enabled: bool = True
    host: str | None = None

    @field_validator("host")
    @classmethod
    def _host(cls, value: str | None) -> str | None:
        return None if value is None else check_http_url(value)


class MCPSection(_Section):
    SECTION: ClassVar[str] = "mcp"
    enabled: bool = False
    config_file: str = "mcp_config.json"
    max_tool_iterations: int = Field(default=20, ge=1, le=100)
    tool_call_timeout_seconds: float = Field(default=30, gt=0, le=600)
    # A Python MCP server starts in about a second on an idle core and took 3-12 s on a loaded
    # 2-core machine: 30 s leaves room for that, and a start past half of it is warned about.
    server_startup_timeout_seconds: float = Field(default=30, gt=0, le=300)
    force_tool_support: bool = False
    max_tool_result_chars: int = Field(default=8000, ge=256, le=1_000_000)
    # Tool calls run per model reply; the rest of a longer reply each get an error result.
    max_tool_calls_per_reply: int = Field(default=16, ge=1, le=256)
    # A tool reply larger than this is dropped and the model reads an error saying so.
    max_tool_reply_bytes: int = Field(default=4_000_000, ge=1_000_000, le=1_000_000_000)
    # "turn": a freshly started server every turn (started ahead, while earlier turns run);
    # "episode": one session per server for the whole episode. A server entry's "lifetime" wins.
    session_lifetime: Literal["turn", "episode"] = "turn"
    # Turn lifetime: fresh servers started ahead of the turns that take them over. Two hide a
    # Python SDK server's ~1 s start behind a model that answers in a second; 0 starts each
    # turn's servers when the turn begins.
    servers_started_ahead: int = Field(default=2, ge=0, le=8)
    # One agent call's whole tool loop; when spent, the model is asked for its action at once.
    turn_timeout_seconds: float = Field(default=300, gt=0, le=86_400)
    # Tools offered to the model per turn, of every server together. OpenAI's API refuses more than 128
    # and models choose worse long before; 100 stays under that with room, and is far more than a game needs.
    max_tools_offered: int = Field(default=100, ge=1, le=10_000)
    # The first model request of each turn: "auto" lets the model choose; "required" makes it call
    # some tool; "server.tool" makes it call that one (the form llama-cpp-python enforces with a
    # grammar; it does not enforce "required"). Later requests of the turn are "auto".
    tool_choice: str = "auto"

    @field_validator("tool_choice")
    @classmethod
    def _tool_choice(cls, value: str) -> str:
        if value in ("auto", "required"):
            return value
        server, dot, tool = value.partition(".")
        if not (dot and server.strip() and tool.strip()):
            raise ValueError(
                f'{value!r} is not a tool choice: use "auto", "required" or a tool as '
                '"server.tool" (e.g. "thoughtbox.think")'
            )
        return value


class MemorySection(_Section):
    SECTION: ClassVar[str] = "memory"
    enabled: bool = True
    long_response_chars: int = Field(default=400, ge=1, le=100_000)
    max_memories_in_context: int = Field(default=8, ge=0, le=1000)
    # Meaningful turns are batched into one LLM call at most every N turns (deaths flush at
    # once): this is what keeps memory near 0.13 calls per turn instead of one per move.
    min_turns_between_calls: int = Field(default=8, ge=1, le=10_000)
    max_batch_events: int = Field(default=12, ge=1, le=1000)


class ObjectivesSection(_Section):
    SECTION: ClassVar[str] = "objectives"
    enabled: bool = True
    discovery_interval_turns: int = Field(default=15, ge=1, le=10_000)
    max_active: int = Field(default=8, ge=1, le=100)


class KnowledgeSection(_Section):
    SECTION: ClassVar[str] = "knowledge"
    enabled: bool = True
    update_interval_turns: int = Field(default=100, ge=1, le=100_000)


class ModelPrice(BaseModel):
    """USD per million tokens for one model; ``cached_input`` for prompt tokens served from cache."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)


class PricingSection(_Section):
    """``[tool.zorkgpt.pricing."<model>"]`` tables: input/output (and cached_input) USD per million tokens.

    Keys are model names, so the section takes any key and checks each value's shape.
    Used when the provider does not report what a call cost (OpenRouter does).
    """

    SECTION: ClassVar[str] = "pricing"
    model_config = ConfigDict(extra="allow", validate_assignment=True)

    @model_validator(mode="after")
    def _check_prices(self) -> PricingSection:
        extra = self.__pydantic_extra__ or {}
        for model, price in list(extra.items()):
            if isinstance(price, ModelPrice):
                continue
            try:
                extra[model] = ModelPrice.model_validate(price, strict=True)
            except ValidationError as exc:
                err = exc.errors()[0]
                where = ".".join(str(p) for p in err.get("loc", ())) or "the table"
                raise ValueError(
                    f'price for "{model}": {where}: {err.get("msg")} (got {err.get("input")!r}). Write '
                    f'[tool.zorkgpt.pricing."{model}"] with input = <USD per million prompt tokens>, '
                    "output = <USD per million completion tokens> and optionally cached_input"
                ) from None
        return self

    @property
    def models(self) -> dict[str, ModelPrice]:
        return dict(self.__pydantic_extra__ or {})

    def price_for(self, model: str) -> ModelPrice | None:
        return (self.__pydantic_extra__ or {}).get(model)


class ExtractorSection(_Section):
    SECTION: ClassVar[str] = "extractor"
    llm_enabled: bool = True
    min_text_change_chars: int = Field(default=40, ge=0, le=100_000)


SECTIONS: dict[str, type[_Section]] = {
    cls.SECTION: cls
    for cls in (
        LLMSection,
        RetrySection,
        AgentSampling,
        CriticSampling,
        ExtractorSampling,
        MemorySampling,
        GameplaySection,
        FilesSection,
        LangfuseSection,
        MCPSection,
        MemorySection,
        ObjectivesSection,
        KnowledgeSection,
        ExtractorSection,
        PricingSection,
    )
}

# The roles that call a model, each with its model, sampling and (optionally) its own endpoint.
MODEL_ROLES = ("agent", "critic", "extractor", "memory")

ENV_ALIASES: dict[str, tuple[str, str]] = {"ZORKGPT_GAME_FILE": ("files", "game_file")}


class GameConfiguration(BaseModel):
    """The whole configuration. Sections are attributes (``config.mcp.enabled``)."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    llm: LLMSection = Field(default_factory=LLMSection)
    retry: RetrySection = Field(default_factory=RetrySection)
    agent_sampling: AgentSampling = Field(default_factory=AgentSampling)
    critic_sampling: CriticSampling = Field(default_factory=CriticSampling)
    extractor_sampling: ExtractorSampling = Field(default_factory=ExtractorSampling)
    memory_sampling: MemorySampling = Field(default_factory=MemorySampling)
    gameplay: GameplaySection = Field(default_factory=GameplaySection)
    files: FilesSection = Field(default_factory=FilesSection)
    langfuse: LangfuseSection = Field(default_factory=LangfuseSection)
    mcp: MCPSection = Field(default_factory=MCPSection)
    memory: MemorySection = Field(default_factory=MemorySection)
    objectives: ObjectivesSection = Field(default_factory=ObjectivesSection)
    knowledge: KnowledgeSection = Field(default_factory=KnowledgeSection)
    extractor: ExtractorSection = Field(default_factory=ExtractorSection)
    pricing: PricingSection = Field(default_factory=PricingSection)
    # Folder relative paths resolve against: the config file's folder, so the product
    # behaves the same from any working directory.
    base_dir: Path = Field(default_factory=Path.cwd)
    api_key: str | None = Field(default=None, repr=False, exclude=True)
    # "section.key" -> where its value came from ("[tool.zorkgpt.llm] base_url in /x/pyproject.toml", "the
    # environment variable ZORKGPT_LLM_BASE_URL", "the --fair-play flag"); a key not here has its default.
    value_sources: dict[str, str] = Field(default_factory=dict, repr=False, exclude=True)

    def source_of(self, section: str, key: str) -> str:
        """Where the value of ``[tool.zorkgpt.<section>] <key>`` came from, in words: a fix names that place."""
        return self.value_sources.get(f"{section}.{key}", f"the default of [tool.zorkgpt.{section}] {key}")

    def resolve_path(self, value: str | os.PathLike[str]) -> Path:
        """A configured path: absolute as given, relative against ``base_dir``."""
        path = Path(value).expanduser()
        return path if path.is_absolute() else (self.base_dir / path)

    @property
    def workdir(self) -> Path:
        return self.resolve_path(self.files.game_workdir)

    def base_url_for(self, role: str) -> str:
        """The endpoint for one role (agent, critic, extractor, memory)."""
        return getattr(self.llm, f"{role}_base_url", None) or self.llm.base_url

    def endpoints(self) -> list[str]:
        """Every endpoint a run talks to, without repeats."""
        return list(dict.fromkeys(self.base_url_for(role) for role in MODEL_ROLES))

    def preset_for_url(self, base_url: str) -> ProviderPreset:
        """The quirks for one endpoint: the configured provider's for its base_url, else guessed by host."""
        if self.llm.provider is not None and base_url.rstrip("/") == self.llm.base_url.rstrip("/"):
            return PRESETS[self.llm.provider]
        return guess_preset(base_url) if base_url else GENERIC

    @property
    def api_key_required(self) -> bool:
        """A key is needed unless ``require_api_key = false`` or every endpoint is on loopback."""
        if self.llm.require_api_key is not None:
            return self.llm.require_api_key
        return not all(is_loopback_url(url) for url in self.endpoints())

    def model_for(self, role: str) -> str:
        return getattr(self.llm, f"{role}_model")

    def sampling_for(self, role: str) -> Sampling:
        return getattr(self, f"{role}_sampling")

    @classmethod
    def from_toml(
        cls,
        path: str | os.PathLike[str] = DEFAULT_CONFIG_FILE,
        environ: dict[str, str] | None = None,
    ) -> GameConfiguration:
        """Load ``[tool.zorkgpt.*]`` from a TOML file, then apply env overrides.

        A missing default ``pyproject.toml`` is allowed (all defaults: a user may run with env
        vars alone); a missing file that was asked for by name is an error.
        """
        env = process_environ() if environ is None else dict(environ)
        requested = Path(path)
        path = requested.expanduser().resolve()
        raw: dict[str, Any] = {}
        if path.exists():
            try:
                with path.open("rb") as fh:
                    raw = tomllib.load(fh).get("tool", {}).get("zorkgpt", {})
            except tomllib.TOMLDecodeError as exc:
                raise ConfigError(f"{path} is not valid TOML: {exc}. Fix the syntax and run again.") from exc
            except UnicodeDecodeError as exc:
                raise ConfigError(
                    f"{path} is not UTF-8 text (byte {exc.start}: {exc.reason}). Save it as UTF-8 and run again."
                ) from None
            except OSError as exc:
                raise ConfigError(f"Cannot read {path}: {exc.strerror}. Check the file's permissions.") from None
        elif requested != Path(DEFAULT_CONFIG_FILE):
            raise ConfigError(f"Config file not found: {path}. Pass an existing file with --config.")
        return cls.from_mapping(raw, base_dir=path.parent, environ=env, source=str(path))

    @classmethod
    def from_mapping(
        cls,
        raw: dict[str, Any],
        base_dir: Path | None = None,
        environ: dict[str, str] | None = None,
        source: str = "pyproject.toml",
    ) -> GameConfiguration:
        env = process_environ() if environ is None else dict(environ)
        if not isinstance(raw, dict):
            raise ConfigError(f"[tool.zorkgpt] in {source} must be a table.")
        unknown = sorted(set(raw) - set(SECTIONS))
        if unknown:
            close = difflib.get_close_matches(unknown[0], SECTIONS, n=1)
            hint = f" Did you mean [tool.zorkgpt.{close[0]}]?" if close else ""
            raise ConfigError(
                f"Unknown section [tool.zorkgpt.{unknown[0]}] in {source}.{hint} "
                f"Known sections: {', '.join(sorted(SECTIONS))}."
            )
        sections: dict[str, Any] = {}
        sources: dict[str, str] = {}
        _reject_unknown_env_vars(env)
        for name, section_cls in SECTIONS.items():
            table = raw.get(name, {})
            if not isinstance(table, dict):
                raise ConfigError(
                    f"[tool.zorkgpt.{name}] in {source} must be a table of keys (got {type(table).__name__} "
                    f"{table!r}); write it as a [tool.zorkgpt.{name}] section."
                )
            values = dict(table)
            env_values = _env_overrides(name, section_cls, env)
            sections[name] = _build_section(section_cls, values, env_values, source)
            sources |= {f"{name}.{key}": f"[tool.zorkgpt.{name}] {key} in {source}" for key in values}
            sources |= {f"{name}.{key}": f"the environment variable {_env_var(name, key, env)}" for key in env_values}
        llm = sections["llm"]
        if llm.provider is not None and "llm.base_url" not in sources:
            sources["llm.base_url"] = f"the {llm.provider} provider's address (provider from {sources['llm.provider']})"
        return cls(
            **sections,
            base_dir=(base_dir or Path.cwd()).resolve(),
            api_key=resolve_api_key(env),
            value_sources=sources,
        )


def _reject_unknown_env_vars(env: dict[str, str]) -> None:
    """A misspelt ``ZORKGPT_*`` override would otherwise be ignored without a word."""
    known = set(API_KEY_ENV_VARS) | set(ENV_ALIASES)
    for name, section_cls in SECTIONS.items():
        known |= {f"ZORKGPT_{name}_{key}".upper() for key in section_cls.model_fields}
    unknown = sorted(var for var in env if var.startswith("ZORKGPT_") and var not in known)
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, n=1)
        hint = f" Did you mean {close[0]}?" if close else " Variables are named ZORKGPT_<SECTION>_<KEY>."
        raise ConfigError(f"Unknown environment variable {unknown[0]}.{hint}")


def _env_var(section: str, key: str, env: dict[str, str]) -> str:
    """The variable that set ``section.key``: its own name, or the alias it was given by."""
    own = f"ZORKGPT_{section}_{key}".upper()
    if own in env:
        return own
    return next((var for var, target in ENV_ALIASES.items() if target == (section, key) and env.get(var)), own)


def _env_overrides(section: str, section_cls: type[_Section], env: dict[str, str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for key in section_cls.model_fields:
        var = f"ZORKGPT_{section}_{key}".upper()
        if var in env:
            found[key] = env[var]
    for var, (alias_section, key) in ENV_ALIASES.items():
        if alias_section == section and var in env and env[var]:
            found.setdefault(key, env[var])
    return found


def _build_section(
    section_cls: type[_Section], values: dict[str, Any], env_values: dict[str, str], source: str
) -> _Section:
    name = section_cls.SECTION
    try:
        # TOML values are validated strictly (a string "30" for an int is a mistake in a
        # TOML file); env values are strings by nature, so they are coerced.
        section = section_cls.model_validate(values, strict=True)
        if env_values:
            overrides = {key: _coerce_env(text) for key, text in env_values.items()}
            if name == "files":
                # Paths given in the environment are relative to where the user runs from.
                overrides = {
                    key: str(Path(value).expanduser().resolve()) if isinstance(value, str) and key != "game" else value
                    for key, value in overrides.items()
                }
            # Validated again as a whole rather than assigned key by key: some sections are
            # frozen, and the set of keys given (TOML's and the environment's) must survive.
            section = section_cls.model_validate(section.model_dump(exclude_unset=True) | overrides)
        if isinstance(section, LLMSection):
            section.apply_provider()
    except ValidationError as exc:
        err = exc.errors()[0]
        if name == PricingSection.SECTION:
            # Model names are the keys here, so the generic "key: expected type" form does not fit.
            message = str(err.get("msg", "")).removeprefix("Value error, ")
            raise ConfigError(f"Invalid [tool.zorkgpt.pricing] in {source}: {message}.") from None
        key = ".".join(str(p) for p in err.get("loc", ())) or "?"
        from_env = key in env_values
        where = (
            f"env var ZORKGPT_{name.upper()}_{key.upper()}" if from_env else f"[tool.zorkgpt.{name}] {key} in {source}"
        )
        if err.get("type") == "extra_forbidden":
            known = ", ".join(section_cls.model_fields)
            close = difflib.get_close_matches(key, section_cls.model_fields, n=1)
            hint = f" Did you mean {close[0]}?" if close else ""
            raise ConfigError(
                f"Unknown key '{key}' in [tool.zorkgpt.{name}] ({source}).{hint} Known keys: {known}."
            ) from None
        expected = _describe_field(section_cls, key)
        message = str(err.get("msg", "")).removeprefix("Value error, ")  # our validators' own words
        raise ConfigError(
            f"Invalid value for {where}: {message} (got {err.get('input')!r}; expected {expected})."
        ) from None
    return section


def _coerce_env(text: str) -> Any:
    lowered = text.strip().lower()
    if lowered in {"true", "yes", "on"}:
        return True
    if lowered in {"false", "no", "off"}:
        return False
    if lowered in {"", "none", "null"}:
        return None
    return text


def _describe_field(section_cls: type[_Section], key: str) -> str:
    field = section_cls.model_fields.get(key)
    if field is None:
        return "a known key"
    choices = _literal_choices(field.annotation)
    text = " | ".join(map(repr, choices)) if choices else getattr(field.annotation, "__name__", None)
    text = text or str(field.annotation)
    symbols = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
    bounds = [
        f"{symbol} {getattr(m, attr)}"
        for m in field.metadata
        for attr, symbol in symbols.items()
        if getattr(m, attr, None) is not None
    ]
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def _literal_choices(annotation: Any) -> tuple[Any, ...]:
    """The allowed values of a ``Literal[...]`` (or ``Literal[...] | None``) annotation, else ()."""
    if get_origin(annotation) is Literal:
        return get_args(annotation)
    return tuple(c for arg in get_args(annotation) for c in _literal_choices(arg))


def process_environ(dotenv_path: str | os.PathLike[str] = ".env") -> dict[str, str]:
    """The process environment plus a ``.env`` file in the working directory, if any.

    Values already in the environment win over the file, as with ``python-dotenv``'s
    defaults, so users can keep keys out of their shell history without surprises.
    """
    env = dict(os.environ)
    from dotenv import dotenv_values

    try:
        values = dotenv_values(dotenv_path)
    except UnicodeDecodeError as exc:
        where = Path(dotenv_path).resolve()
        raise ConfigError(
            f"{where} is not UTF-8 text (byte {exc.start}: {exc.reason}). Save it as UTF-8, or remove it "
            "and set the variables in the environment."
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"Cannot read {Path(dotenv_path).resolve()}: {exc.strerror}. Check its permissions."
        ) from None
    for key, value in values.items():
        if value is not None:
            env.setdefault(key, value)
    return env


def resolve_api_key(environ: dict[str, str] | None = None) -> str | None:
    """The LLM API key from the first set variable in ``API_KEY_ENV_VARS`` (``.env`` included)."""
    env = process_environ() if environ is None else environ
    for var in API_KEY_ENV_VARS:
        if env.get(var):
            return env[var]
    return None
