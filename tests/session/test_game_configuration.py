"""GameConfiguration: defaults, TOML loading, env overrides, fail-fast errors (properties 4, 45)."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic.fields import FieldInfo

from session.game_configuration import (
    API_KEY_ENV_VARS,
    SECTIONS,
    ConfigError,
    GameConfiguration,
    process_environ,
    resolve_api_key,
)


def write_toml(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "pyproject.toml"
    path.write_text(body, encoding="utf-8")
    return path


def test_missing_sections_and_keys_use_defaults(tmp_path: Path) -> None:
    config = GameConfiguration.from_toml(write_toml(tmp_path, "[project]\nname = 'x'\n"), environ={})
    assert config.mcp.enabled is False
    assert config.gameplay.turn_delay_seconds == 0
    assert config.gameplay.enable_critic is False
    assert config.llm.base_url == "https://openrouter.ai/api/v1"
    assert config.base_dir == tmp_path.resolve()


def test_values_from_toml_are_loaded(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path,
        """
[tool.zorkgpt.llm]
agent_model = "openai/gpt-4o"
critic_base_url = "http://localhost:8000/v1"
[tool.zorkgpt.agent_sampling]
temperature = 0.4
max_tokens = 512
[tool.zorkgpt.gameplay]
max_turns_per_episode = 7
[tool.zorkgpt.retry]
request_timeout = 15
""",
    )
    config = GameConfiguration.from_toml(path, environ={})
    assert config.llm.agent_model == "openai/gpt-4o"
    assert config.base_url_for("critic") == "http://localhost:8000/v1"
    assert config.base_url_for("agent") == config.llm.base_url
    assert config.sampling_for("agent").temperature == 0.4
    assert config.sampling_for("agent").top_p is None
    assert config.gameplay.max_turns_per_episode == 7
    assert config.retry.request_timeout == 15.0


def test_unknown_key_names_section_and_key(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[tool.zorkgpt.mcp]\nenabeld = true\n")
    with pytest.raises(ConfigError) as err:
        GameConfiguration.from_toml(path, environ={})
    message = str(err.value)
    assert "enabeld" in message and "[tool.zorkgpt.mcp]" in message and "enabled" in message


def test_unknown_section_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"tool\.zorkgpt\.mpc"):
        GameConfiguration.from_toml(write_toml(tmp_path, "[tool.zorkgpt.mpc]\nenabled = true\n"), environ={})


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ('[tool.zorkgpt.mcp]\nmax_tool_iterations = "20"\n', "max_tool_iterations"),
        ("[tool.zorkgpt.mcp]\nenabled = 1\n", "bool"),
        ("[tool.zorkgpt.mcp]\nmax_tool_iterations = 0\n", ">= 1"),
        ("[tool.zorkgpt.gameplay]\nturn_delay_seconds = -1\n", "turn_delay_seconds"),
    ],
)
def test_wrong_type_or_range_names_key_and_expected_type(tmp_path: Path, body: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as err:
        GameConfiguration.from_toml(write_toml(tmp_path, body), environ={})
    assert fragment in str(err.value)
    assert "expected" in str(err.value)


def test_invalid_toml_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid TOML"):
        GameConfiguration.from_toml(write_toml(tmp_path, "[tool.zorkgpt.mcp\n"), environ={})


def test_explicit_missing_config_file_fails(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not found"):
        GameConfiguration.from_toml(tmp_path / "nope.toml", environ={})


def test_env_overrides_toml(tmp_path: Path) -> None:
    path = write_toml(tmp_path, "[tool.zorkgpt.mcp]\nenabled = false\nmax_tool_iterations = 3\n")
    env = {
        "ZORKGPT_MCP_ENABLED": "true",
        "ZORKGPT_MCP_MAX_TOOL_ITERATIONS": "9",
        "ZORKGPT_MCP_TOOL_CHOICE": "thoughtbox.think",
        "ZORKGPT_LLM_AGENT_MODEL": "m/x",
    }
    config = GameConfiguration.from_toml(path, environ=env)
    assert config.mcp.enabled is True
    assert config.mcp.max_tool_iterations == 9
    assert config.mcp.tool_choice == "thoughtbox.think"
    assert config.llm.agent_model == "m/x"


def _env_text(value: object) -> str:
    """A value as a user would write it in a ``ZORKGPT_*`` variable."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


@pytest.mark.parametrize("section", sorted(name for name, cls in SECTIONS.items() if cls.model_fields))
def test_every_key_of_every_section_takes_an_env_override(tmp_path: Path, section: str) -> None:
    """Frozen sections once refused every override ("Instance is frozen"): each key, set through
    the environment, loads and lands in its section (paths come back resolved)."""
    section_cls = SECTIONS[section]
    defaults = section_cls()
    for key in section_cls.model_fields:
        var = f"ZORKGPT_{section}_{key}".upper()
        config = GameConfiguration.from_toml(write_toml(tmp_path, ""), environ={var: _env_text(getattr(defaults, key))})
        assert key in getattr(config, section).model_fields_set, var


@pytest.mark.parametrize("role", ["agent", "critic", "extractor", "memory"])
def test_sampling_env_override_reaches_the_section(tmp_path: Path, role: str) -> None:
    """The offline page's recipe (docs/offline.md) sets ZORKGPT_AGENT_SAMPLING_MAX_TOKENS."""
    path = write_toml(tmp_path, f"[tool.zorkgpt.{role}_sampling]\ntemperature = 0.5\n")
    env = {f"ZORKGPT_{role.upper()}_SAMPLING_MAX_TOKENS": "200"}
    sampling = getattr(GameConfiguration.from_toml(path, environ=env), f"{role}_sampling")
    assert (sampling.max_tokens, sampling.temperature) == (200, 0.5)


def test_the_game_seed_comes_from_toml_or_the_environment(tmp_path: Path) -> None:
    # None: the game's own seed, decided once the story file is found (main.first_seed).
    assert GameConfiguration.from_toml(write_toml(tmp_path, ""), environ={}).gameplay.seed is None
    path = write_toml(tmp_path, "[tool.zorkgpt.gameplay]\nseed = 40\n")
    assert GameConfiguration.from_toml(path, environ={}).gameplay.seed == 40
    assert GameConfiguration.from_toml(path, environ={"ZORKGPT_GAMEPLAY_SEED": "7"}).gameplay.seed == 7
    for text, problem in (("-3", "greater than or equal to 0"), ("7.5", "valid integer"), ("seven", "valid integer")):
        with pytest.raises(ConfigError, match=rf"ZORKGPT_GAMEPLAY_SEED: .*{problem}"):
            GameConfiguration.from_toml(path, environ={"ZORKGPT_GAMEPLAY_SEED": text})


def test_bad_env_value_names_the_variable(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="ZORKGPT_MCP_MAX_TOOL_ITERATIONS"):
        GameConfiguration.from_toml(write_toml(tmp_path, ""), environ={"ZORKGPT_MCP_MAX_TOOL_ITERATIONS": "many"})


def test_game_file_env_alias_resolves_against_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = GameConfiguration.from_toml(write_toml(tmp_path, ""), environ={"ZORKGPT_GAME_FILE": "games/z.z5"})
    assert config.files.game_file == str(tmp_path / "games" / "z.z5")


def test_relative_paths_resolve_against_config_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    config = GameConfiguration.from_toml(write_toml(tmp_path, ""), environ={})
    assert config.resolve_path(config.mcp.config_file) == tmp_path.resolve() / "mcp_config.json"
    assert config.workdir == tmp_path.resolve() / "game_files"


def test_api_key_order() -> None:
    assert resolve_api_key({"OPENROUTER_API_KEY": "c", "CLIENT_API_KEY": "b"}) == "b"
    assert resolve_api_key({v: v.lower() for v in API_KEY_ENV_VARS}) == "zorkgpt_client_api_key"
    assert resolve_api_key({}) is None


def test_api_key_never_in_repr_or_dump() -> None:
    config = GameConfiguration.from_mapping({}, environ={"OPENROUTER_API_KEY": "sk-or-secret-123456"})
    assert config.api_key == "sk-or-secret-123456"
    assert "sk-or-secret" not in repr(config)
    assert "sk-or-secret" not in config.model_dump_json()


def test_repo_pyproject_loads() -> None:
    """The shipped pyproject documents the defaults: its values must be exactly them."""
    config = GameConfiguration.from_toml(Path(__file__).resolve().parents[2] / "pyproject.toml", environ={})
    assert set(SECTIONS) >= {"llm", "mcp", "gameplay"}
    defaults = GameConfiguration.from_mapping({}, environ={})
    assert config.model_dump(exclude={"base_dir"}) == defaults.model_dump(exclude={"base_dir"})


# -- Property 4: configuration loading consistency ---------------------------------------
mcp_values = st.fixed_dictionaries(
    {},
    optional={
        "enabled": st.booleans(),
        "config_file": st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=20).map(
            lambda s: s + ".json"
        ),
        "max_tool_iterations": st.integers(1, 100),
        "tool_call_timeout_seconds": st.integers(1, 600),
        "server_startup_timeout_seconds": st.floats(0.5, 300, allow_nan=False),
        "force_tool_support": st.booleans(),
    },
)


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


@given(values=mcp_values)
def test_property_04_configuration_loading_consistency(tmp_path_factory: pytest.TempPathFactory, values: dict) -> None:
    """Property 4: any valid [tool.zorkgpt.mcp] table loads with values matching the file."""
    body = "[tool.zorkgpt.mcp]\n" + "".join(f"{k} = {_toml_value(v)}\n" for k, v in values.items())
    path = tmp_path_factory.mktemp("cfg") / "pyproject.toml"
    path.write_text(body, encoding="utf-8")
    config = GameConfiguration.from_toml(path, environ={})
    for key, value in values.items():
        assert getattr(config.mcp, key) == value


@given(values=mcp_values)
def test_property_45_configuration_defaults(values: dict) -> None:
    """Property 45: every MCP key absent from the config takes its documented default."""
    defaults = {
        "enabled": False,
        "config_file": "mcp_config.json",
        "max_tool_iterations": 20,
        "tool_call_timeout_seconds": 30,
        "server_startup_timeout_seconds": 30,
        "force_tool_support": False,
    }
    config = GameConfiguration.from_mapping({"mcp": values}, environ={})
    for key, default in defaults.items():
        assert getattr(config.mcp, key) == values.get(key, default)


def test_dotenv_file_supplies_key_and_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (*API_KEY_ENV_VARS, "ZORKGPT_MCP_ENABLED", "ZORKGPT_LLM_AGENT_MODEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("ZORKGPT_LLM_AGENT_MODEL", "from/real-env")
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_text(
        "OPENROUTER_API_KEY=sk-or-from-dotenv-123\nZORKGPT_MCP_ENABLED=true\nZORKGPT_LLM_AGENT_MODEL=from/dotenv\n"
    )
    config = GameConfiguration.from_toml(write_toml(tmp_path, ""))
    assert config.api_key == "sk-or-from-dotenv-123"
    assert config.mcp.enabled is True
    assert config.llm.agent_model == "from/real-env"  # the real environment wins over .env


@pytest.mark.parametrize("body", ['[tool.zorkgpt]\nllm = "x"\n', "[tool.zorkgpt]\nmcp = 5\n"])
def test_section_that_is_not_a_table_names_the_section(tmp_path: Path, body: str) -> None:
    with pytest.raises(ConfigError, match=r"must be a table"):
        GameConfiguration.from_toml(write_toml(tmp_path, body), environ={})


def test_misspelt_env_override_fails_with_a_suggestion(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"ZORKGPT_LLM_AGENTMODEL.*ZORKGPT_LLM_AGENT_MODEL"):
        GameConfiguration.from_toml(write_toml(tmp_path, ""), environ={"ZORKGPT_LLM_AGENTMODEL": "x"})


def test_from_toml_path_keyword_and_missing_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = GameConfiguration.from_toml(
        path=write_toml(tmp_path, "[tool.zorkgpt.gameplay]\nmax_turns_per_episode = 3\n")
    )
    assert config.gameplay.max_turns_per_episode == 3
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    # The default file may be absent (env-only use), whether named as str or Path.
    assert GameConfiguration.from_toml(Path("pyproject.toml"), environ={}).mcp.enabled is False


def test_the_configuration_page_lists_every_config_key() -> None:
    """The configuration page's table is the user's reference: it must name every key."""
    readme = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text(encoding="utf-8")
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    for name, section_cls in SECTIONS.items():
        row = next((r for r in rows if f"`{name}`" in r.split("|")[1]), None)
        assert row is not None, f"docs/configuration.md has no row for [tool.zorkgpt.{name}]"
        for key in section_cls.model_fields:
            if name == "llm" and key.endswith("_base_url") and key != "base_url":
                assert "<role>_base_url" in row
                continue
            assert f"`{key}`" in row, f"docs/configuration.md's row for [tool.zorkgpt.{name}] does not mention {key}"
            bounds = allowed_range(section_cls.model_fields[key])
            if bounds is not None:
                entry = row.split(f"`{key}`", 1)[1].split("`", 1)[0]
                assert bounds in entry, (
                    f"docs/configuration.md gives [tool.zorkgpt.{name}] {key} no range {bounds} (has {entry!r})"
                )


def allowed_range(field: FieldInfo) -> str | None:
    """A numeric key's range as docs/configuration.md writes it: [0, 20] inclusive, (0, 3,600] excluding 0."""
    low = high = None
    low_open = high_open = False
    for meta in field.metadata:
        if getattr(meta, "ge", None) is not None:
            low = meta.ge
        if getattr(meta, "gt", None) is not None:
            low, low_open = meta.gt, True
        if getattr(meta, "le", None) is not None:
            high = meta.le
        if getattr(meta, "lt", None) is not None:
            high, high_open = meta.lt, True
    if low is None and high is None:
        return None

    def number(value: float) -> str:
        return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"

    return f"{'(' if low_open else '['}{number(low)}, {number(high)}{')' if high_open else ']'}"


def test_every_numeric_key_has_finite_bounds() -> None:
    """No number in the config may be unbounded: inf, 1e300 or a negative count would fail later, not at start."""
    for name, section_cls in SECTIONS.items():
        for key, field in section_cls.model_fields.items():
            if field.annotation in (bool, bool | None) or not (
                {int, float} & set(get_args(field.annotation) or [field.annotation])
            ):
                continue
            bounds = allowed_range(field)
            assert bounds is not None and "None" not in bounds, f"[tool.zorkgpt.{name}] {key} has no finite range"


@pytest.mark.parametrize(
    ("section", "key", "value", "problem"),
    [
        ("retry", "request_timeout", float("inf"), "finite number"),
        ("retry", "request_timeout", float("nan"), "finite number"),
        ("retry", "request_timeout", 0, "greater than 0"),
        ("gameplay", "turn_delay_seconds", 1e300, "less than or equal to 3600"),
        ("gameplay", "seed", -1, "greater than or equal to 0"),
        ("gameplay", "seed", 2**31, "less than or equal to 2147483647"),
        ("gameplay", "seed", 7.0, "valid integer"),
        ("agent_sampling", "temperature", -0.5, "greater than or equal to 0"),
        ("critic_sampling", "max_tokens", -1, "greater than or equal to 1"),
        ("memory_sampling", "top_p", 1.5, "less than or equal to 1"),
        ("llm", "base_url", "not a url", "http:// or https:// URL"),
        ("llm", "agent_base_url", "localhost:8000/v1", "http:// or https:// URL"),
        ("llm", "memory_base_url", "https://", "http:// or https:// URL"),
        ("langfuse", "host", "cloud.langfuse.com", "http:// or https:// URL"),
        ("mcp", "tool_choice", "think", 'not a tool choice: use "auto", "required" or a tool as "server.tool"'),
        ("mcp", "tool_choice", "thoughtbox.", "not a tool choice"),
        ("gameplay", "stuck_limit_turns", -1, "greater than or equal to 0"),
        (
            "gameplay",
            "stuck_limit_turns",
            20,
            r"stuck_warning_turns \(20\) must be below it.*= 0 to turn the idle rule off",
        ),
    ],
)
def test_out_of_range_values_are_config_errors_naming_the_key(
    section: str, key: str, value: object, problem: str
) -> None:
    with pytest.raises(ConfigError, match=problem) as refused:
        GameConfiguration.from_mapping({section: {key: value}}, environ={})
    assert f"[tool.zorkgpt.{section}] {key}" in str(refused.value)


def test_out_of_range_env_values_are_config_errors_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match=r"ZORKGPT_RETRY_REQUEST_TIMEOUT.*finite number"):
        GameConfiguration.from_mapping({}, environ={"ZORKGPT_RETRY_REQUEST_TIMEOUT": "inf"})
    with pytest.raises(ConfigError, match=r"ZORKGPT_LLM_BASE_URL.*http:// or https://"):
        GameConfiguration.from_mapping({}, environ={"ZORKGPT_LLM_BASE_URL": "not a url"})


def test_local_endpoints_are_urls_too() -> None:
    config = GameConfiguration.from_mapping(
        {"llm": {"base_url": "http://localhost:8000/v1", "agent_base_url": "http://127.0.0.1:9/v1"}}, environ={}
    )
    assert config.base_url_for("agent") == "http://127.0.0.1:9/v1"


def test_non_utf8_config_and_dotenv_files_are_config_errors_naming_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = tmp_path / "pyproject.toml"
    config.write_bytes(b'[tool.zorkgpt.llm]\nagent_model = "caf\xe9"\n')  # Latin-1, not UTF-8
    with pytest.raises(ConfigError, match=r"pyproject\.toml is not UTF-8"):
        GameConfiguration.from_toml(config, environ={})
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".env").write_bytes(b"OPENROUTER_API_KEY=sk-\xff\xfe\n")
    with pytest.raises(ConfigError, match=r"\.env is not UTF-8"):
        process_environ()


def test_the_idle_rule_is_a_setting_and_0_turns_it_off() -> None:
    off = GameConfiguration.from_mapping({"gameplay": {"stuck_limit_turns": 0}}, environ={})
    assert off.gameplay.stuck_limit_turns == 0
    env = GameConfiguration.from_mapping({}, environ={"ZORKGPT_GAMEPLAY_STUCK_LIMIT_TURNS": "120"})
    assert env.gameplay.stuck_limit_turns == 120


def test_the_game_comes_from_toml_or_the_environment_and_an_unknown_one_is_refused(tmp_path: Path) -> None:
    # Unset: the game of the story file, else Zork I.
    assert GameConfiguration.from_toml(write_toml(tmp_path, ""), environ={}).files.game is None
    path = write_toml(tmp_path, '[tool.zorkgpt.files]\ngame = "zork3"\n')
    assert GameConfiguration.from_toml(path, environ={}).files.game == "zork3"
    assert GameConfiguration.from_toml(path, environ={"ZORKGPT_FILES_GAME": "zork2"}).files.game == "zork2"
    with pytest.raises(ConfigError, match=r"ZORKGPT_FILES_GAME: .*'zork1', 'zork2' or 'zork3'"):
        GameConfiguration.from_toml(path, environ={"ZORKGPT_FILES_GAME": "zork4"})
