"""OAuth for remote MCP servers (mcp_client/oauth.py), against a real protected MCP server and
its own authorization server (tests/mcp_test_servers/oauth_server.py), over real HTTP.

The tests play the user's browser: they follow the authorization URL ZorkGPT prints, and the
authorization server (which approves at once) redirects to ZorkGPT's callback on 127.0.0.1.
Token files go to a folder of the test's own (``XDG_STATE_HOME``).
"""

from __future__ import annotations

import io
import logging
import os
import re
import shlex
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest
from pydantic import AnyHttpUrl

from harness.scripted_llm import ScriptedLLMServer, agent_reply, completion, tool_call
from harness.timing import scaled
from harness.walkthroughs import AGENT_MODEL, WalkthroughModel, read_events, walkthrough
from managers.mcp_manager import MCPManager
from mcp_client.config import MCPConfig
from mcp_client.login import run_login
from mcp_client.oauth import MCPAuthError, check_logins, cleartext_refusal, needs_login
from mcp_client.tokens import (
    FileTokenStorage,
    StoredLogin,
    UnusableLoginFileError,
    login_command,
    token_dir,
    token_file,
)
from session.episode_folder import EpisodeFolder
from session.errors import MCPConfigError, MCPError, MCPServerStartupError
from session.redaction import Redactor
from tests.main_support import NO_LEARNING, REPO, MainProcess, episode_folders_by_number, run_main, scripted_env
from tests.mcp_test_servers.helpers import (
    HTTPServer,
    Scenario,
    capture_logger,
    free_port,
    http_server,
    make_config,
    write_mcp_config,
)
from tests.mcp_test_servers.oauth_server import SECRET_WORD

OAUTH_SERVER = "tests.mcp_test_servers.oauth_server"


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's state folder for this test: where token files go."""
    folder = tmp_path / "state"
    monkeypatch.setenv("XDG_STATE_HOME", str(folder))
    return folder


@dataclass(frozen=True)
class Protected:
    server: HTTPServer
    authorization_server: str

    @property
    def url(self) -> str:
        return self.server.url

    def log(self) -> list[dict[str, Any]]:
        return httpx2.get(f"{self.authorization_server}/test/log", timeout=10).json()

    def grants(self) -> list[str]:
        return [event["grant"] for event in self.log() if event["event"] == "token"]

    def expire(self) -> None:
        httpx2.post(f"{self.authorization_server}/test/expire", timeout=10).raise_for_status()

    def revoke(self) -> None:
        httpx2.post(f"{self.authorization_server}/test/revoke", timeout=10).raise_for_status()

    def hosts(self) -> list[str]:
        """The Host of every request the authorization server was sent."""
        local = re.sub(r"//[^:/]+", "//127.0.0.1", self.authorization_server)
        return httpx2.get(f"{local}/test/hosts", timeout=10).json()


@contextmanager
def protected_server(*args: str, sse: bool = False) -> Iterator[Protected]:
    with http_server(OAUTH_SERVER, *args, sse=sse) as server:
        found = re.search(r"authorization server at (\S+)", server.startup)
        assert found, server.startup
        yield Protected(server, found.group(1))


def browse(url: str) -> httpx2.Response:
    """What the user's browser does: open the page and follow where it leads (the callback)."""
    return httpx2.get(url, follow_redirects=True, timeout=30)


def log_in(mcp_config: MCPConfig, name: str) -> tuple[str, list[httpx2.Response]]:
    """``--mcp-login NAME`` in this process, the test as the browser; what it printed, and the
    browser's last page."""
    pages: list[httpx2.Response] = []
    threads: list[threading.Thread] = []

    def open_url(url: str) -> None:
        # The login waits for the callback on its own event loop: the browser is another thread.
        thread = threading.Thread(target=lambda: pages.append(browse(url)), daemon=True)
        thread.start()
        threads.append(thread)

    out = io.StringIO()
    run_login(mcp_config, name, out=out, open_url=open_url, wait_seconds=60, redactor=Redactor())
    for thread in threads:
        thread.join(30)
    return out.getvalue(), pages


def config_of(tmp_path: Path, servers: dict[str, dict[str, Any]]) -> tuple[Path, MCPConfig]:
    path = write_mcp_config(tmp_path / "cfg", servers)
    return path, MCPConfig.from_file(path, environ={})


def episode(tmp_path: Path, config_path: Path, **mcp: Any) -> Scenario:
    mcp.setdefault("session_lifetime", "episode")
    logger, handler = capture_logger(f"test.mcp.oauth.{uuid.uuid4().hex}")
    return Scenario(MCPManager(make_config(config_path, tmp_path, **mcp), logger, redactor=Redactor()), handler)


async def secret(manager: MCPManager) -> str:
    result = await manager.call_tool("protected__secret_word", {})
    assert not result.is_error, result.content
    return result.content


def stored(server_name: str) -> StoredLogin:
    return StoredLogin.model_validate_json(token_file(server_name).read_text())


# -- where logins are kept -------------------------------------------------------------------


def test_logins_live_in_the_users_state_folder(tmp_path: Path) -> None:
    assert token_dir({"XDG_STATE_HOME": str(tmp_path)}) == tmp_path / "zorkgpt" / "oauth"
    assert token_dir({}) == Path.home() / ".local" / "state" / "zorkgpt" / "oauth"


def test_each_server_has_its_own_file_and_names_never_share_one(state: Path) -> None:
    names = ["remote", "remote/evil", "remote_evil", "..", "a b"]
    files = {token_file(name) for name in names}
    assert len(files) == len(names)
    assert all(file.parent == token_dir() for file in files)


def _server(tmp_path: Path, name: str = "remote", url: str = "https://mcp.example.com/mcp") -> Any:
    return config_of(tmp_path, {name: {"url": url, "oauth": {}}})[1].server(name)


def _save_login(storage: FileTokenStorage, access: str) -> None:
    from mcp.shared.auth import OAuthToken

    storage.save(tokens=OAuthToken(access_token=access, refresh_token=f"refresh-{access}", expires_in=60))


def test_a_login_is_one_file_readable_only_by_its_owner(tmp_path: Path, state: Path) -> None:
    first, second = _server(tmp_path, "first"), _server(tmp_path, "second")
    _save_login(FileTokenStorage(first), "token-one")
    _save_login(FileTokenStorage(second), "token-two")
    files = sorted(token_dir().iterdir())
    assert [f.name for f in files] == ["first.json", "second.json"]
    assert stat.S_IMODE(token_dir().stat().st_mode) == 0o700
    assert all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert stored("first").tokens is not None and stored("first").tokens.access_token == "token-one"
    assert stored("second").tokens is not None and stored("second").tokens.access_token == "token-two"


def test_a_save_replaces_the_file_whole(tmp_path: Path, state: Path) -> None:
    """Written beside and renamed over: a reader holding the old file reads all of the old login,
    the path gives all of the new one, and no temporary file is left behind."""
    storage = FileTokenStorage(_server(tmp_path))
    _save_login(storage, "old-token")
    with storage.path.open(encoding="utf-8") as old:
        inode = os.fstat(old.fileno()).st_ino
        _save_login(storage, "new-token")
        assert StoredLogin.model_validate_json(old.read()).tokens.access_token == "old-token"  # type: ignore[union-attr]
    assert storage.path.stat().st_ino != inode
    assert stored("remote").tokens.access_token == "new-token"  # type: ignore[union-attr]
    assert [f.name for f in token_dir().iterdir()] == ["remote.json"]


def test_a_login_for_another_address_does_not_count(tmp_path: Path, state: Path) -> None:
    _save_login(FileTokenStorage(_server(tmp_path, url="https://old.example.com/mcp")), "old-token")
    moved = _server(tmp_path, url="https://new.example.com/mcp")
    assert FileTokenStorage(moved).load() is None
    assert needs_login(moved)


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b'{"tokens": {"access_token": "sekrit-value\xff\xfe"}}', "not UTF-8 text"),
        (b'{"tokens": {"access_token": "sekrit-value"', "not JSON"),
        (b'["sekrit-value"]', "not a login"),
    ],
)
def test_a_damaged_file_stops_the_start_naming_the_login_that_replaces_it(
    tmp_path: Path, state: Path, content: bytes, why: str
) -> None:
    server = _server(tmp_path)
    path = token_file("remote")
    path.parent.mkdir(parents=True, mode=0o700)
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(UnusableLoginFileError) as caught:
        check_logins(config_of(tmp_path, {"remote": {"url": server.url}})[1])  # even without "oauth"
    message = str(caught.value)
    assert f"is damaged ({why})" in message and str(path) in message and login_command("remote") in message
    assert "sekrit-value" not in message


def _unusable(tmp_path: Path) -> str:
    _, mcp_config = config_of(tmp_path, {"remote": {"url": "https://mcp.example.com/mcp", "oauth": {}}})
    with pytest.raises(MCPAuthError) as caught:
        check_logins(mcp_config)
    return str(caught.value)


@pytest.mark.parametrize("mode", [0o666, 0o620, 0o644, 0o604], ids=oct)
def test_a_token_file_open_to_other_users_is_refused_with_the_fix(tmp_path: Path, state: Path, mode: int) -> None:
    _save_login(FileTokenStorage(_server(tmp_path)), "token-one")
    path = token_file("remote")
    path.chmod(mode)
    message = _unusable(tmp_path)
    assert f"open to other users (mode {mode:o})" in message and f"chmod 600 {path}" in message
    assert login_command("remote") in message and "token-one" not in message
    path.chmod(0o600)  # the fix the message gives
    check_logins(config_of(tmp_path, {"remote": {"url": "https://mcp.example.com/mcp", "oauth": {}}})[1])
    path.chmod(mode)  # or a login, which replaces the file
    assert FileTokenStorage(_server(tmp_path)).replace_unusable() == f"is open to other users (mode {mode:o})"
    assert not path.exists()


@pytest.mark.parametrize("mode", [0o777, 0o770, 0o702], ids=oct)
def test_a_token_folder_others_may_write_is_refused_with_the_fix(tmp_path: Path, state: Path, mode: int) -> None:
    _save_login(FileTokenStorage(_server(tmp_path)), "token-one")
    token_dir().chmod(mode)
    message = _unusable(tmp_path)
    assert f"open to other users (mode {mode:o})" in message and f"chmod 700 {token_dir()}" in message
    with pytest.raises(MCPAuthError, match="chmod 700"):  # a login does not write into it either
        run_login(
            config_of(tmp_path, {"remote": {"url": "https://mcp.example.com/mcp", "oauth": {}}})[1],
            "remote",
            redactor=Redactor(),
        )


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a file to another user needs root (CI runs as root)")
@pytest.mark.parametrize("what", ["file", "folder"])
def test_a_token_file_or_folder_owned_by_another_user_is_refused(tmp_path: Path, state: Path, what: str) -> None:
    _save_login(FileTokenStorage(_server(tmp_path)), "token-one")
    path = token_file("remote") if what == "file" else token_dir()
    os.chown(path, 4242, 4242)
    message = _unusable(tmp_path)
    assert f"{path} is owned by another user (uid 4242, not 0)" in message and f"chown 0 {path}" in message


def test_folders_a_login_creates_are_its_owners_alone_whatever_the_umask(tmp_path: Path, state: Path) -> None:
    old = os.umask(0)
    try:
        _save_login(FileTokenStorage(_server(tmp_path)), "token-one")
    finally:
        os.umask(old)
    for folder in (state, state / "zorkgpt", token_dir()):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder
    assert stat.S_IMODE(token_file("remote").stat().st_mode) == 0o600


# -- the entry's "oauth" -----------------------------------------------------------------


def _invalid(tmp_path: Path, entry: dict[str, Any], environ: dict[str, str] | None = None) -> str:
    path = write_mcp_config(tmp_path / "bad", {"remote": entry})
    with pytest.raises(MCPConfigError) as caught:
        MCPConfig.from_file(path, environ=environ or {})
    return str(caught.value)


def test_oauth_values_are_expanded_and_secrets_redacted(tmp_path: Path) -> None:
    path = write_mcp_config(
        tmp_path,
        {"remote": {"url": "https://mcp.example.com/mcp", "oauth": {"clientId": "${ID}", "clientSecret": "${SECRET}"}}},
    )
    server = MCPConfig.from_file(path, environ={"ID": "zork-client", "SECRET": "s3cret-value"}).server("remote")
    assert server.oauth is not None and server.oauth_declared
    assert (server.oauth.client_id, server.oauth.client_secret) == ("zork-client", "s3cret-value")
    assert "s3cret-value" in server.secrets()
    assert "s3cret-value" not in repr(server)


@pytest.mark.parametrize(
    ("oauth", "words"),
    [
        ({"grant": "client_credentials"}, '"clientId"'),
        ({"grant": "client_credentials", "clientId": "a"}, 'exactly one of "clientSecret"'),
        ({"clientSecret": "s3cret-value"}, 'no "clientId"'),
        ({"clientId": "a", "privateKey": "k"}, '"grant": "client_credentials"'),
        ({"clientMetadataUrl": "http://example.com/client.json"}, "https URL with a path"),
        ({"callbackPort": 0}, "callbackPort"),
        ({"clientId": "a", "clientSecret": 12}, "clientSecret"),
        ({"scope": "read"}, "scope"),
    ],
)
def test_an_unusable_oauth_entry_is_a_config_error_naming_it(tmp_path: Path, oauth: dict[str, Any], words: str) -> None:
    message = _invalid(tmp_path, {"url": "https://mcp.example.com/mcp", "oauth": oauth})
    assert words in message
    assert "s3cret-value" not in message


def test_oauth_is_for_remote_servers(tmp_path: Path) -> None:
    assert "remote servers" in _invalid(tmp_path, {"command": "python", "oauth": {}})


# -- logging in ----------------------------------------------------------------------------


@pytest.mark.e2e
def test_logging_in_stores_the_login_and_episodes_use_it(tmp_path: Path, state: Path) -> None:
    port = free_port()
    with protected_server() as protected:
        config_path, mcp_config = config_of(
            tmp_path, {"protected": {"url": protected.url, "oauth": {"callbackPort": port}}}
        )
        with pytest.raises(MCPAuthError) as missing:
            check_logins(mcp_config)
        assert login_command("protected") in str(missing.value)

        printed, pages = log_in(mcp_config, "protected")
        assert f"open this page:\n{protected.authorization_server}/authorize?" in printed
        assert "Logged in to MCP server 'protected'" in printed and "secret_word" in printed
        assert pages[-1].status_code == 200 and "Logged in to protected" in pages[-1].text
        check_logins(mcp_config)  # nothing missing now

        # The spec's flow: registered dynamically, the resource named, the server's scope asked for.
        log = protected.log()
        assert [e["event"] for e in log] == ["register", "authorize", "token"]
        assert log[1]["resource"] == protected.url and log[1]["scope"] == "zork"
        login = stored("protected")
        assert login.tokens is not None and login.tokens.refresh_token and login.client is not None
        assert login.expires_at is not None and login.authorization_server is not None

        assert episode(tmp_path, config_path).run(secret) == SECRET_WORD
        assert protected.grants() == ["authorization_code"]  # the stored token, as it was


@pytest.mark.e2e
def test_a_token_refused_mid_episode_is_refreshed_and_the_call_goes_through(tmp_path: Path, state: Path) -> None:
    with protected_server() as protected:
        config_path, mcp_config = config_of(
            tmp_path, {"protected": {"url": protected.url, "oauth": {"callbackPort": free_port()}}}
        )
        log_in(mcp_config, "protected")
        first = stored("protected").tokens
        scenario = episode(tmp_path, config_path)

        async def two_calls(manager: MCPManager) -> list[str]:
            before = await secret(manager)
            protected.expire()  # the access token runs out while the session is open
            return [before, await secret(manager)]

        assert scenario.run(two_calls) == [SECRET_WORD, SECRET_WORD]
        assert protected.grants() == ["authorization_code", "refresh_token"]
        refreshed = stored("protected").tokens
        assert refreshed is not None and first is not None
        assert refreshed.access_token != first.access_token and refreshed.refresh_token != first.refresh_token


@pytest.mark.e2e
def test_a_token_that_ran_out_while_nobody_played_is_refreshed_before_the_first_request(
    tmp_path: Path, state: Path
) -> None:
    """The file says when the token runs out; a later process refreshes it up front, at the token
    endpoint the file remembers (the SDK alone would send it, and meet a 401)."""
    with protected_server() as protected:
        config_path, mcp_config = config_of(
            tmp_path, {"protected": {"url": protected.url, "oauth": {"callbackPort": free_port()}}}
        )
        log_in(mcp_config, "protected")
        storage = FileTokenStorage(mcp_config.server("protected"))
        storage.save(expires_at=1.0)  # long ago
        assert episode(tmp_path, config_path).run(secret) == SECRET_WORD
        assert protected.grants() == ["authorization_code", "refresh_token"]
        assert stored("protected").expires_at > 1.0  # type: ignore[operator]


@pytest.mark.e2e
def test_a_refused_refresh_stops_the_start_naming_the_login_command(tmp_path: Path, state: Path) -> None:
    with protected_server() as protected:
        config_path, mcp_config = config_of(
            tmp_path, {"protected": {"url": protected.url, "oauth": {"callbackPort": free_port()}}}
        )
        log_in(mcp_config, "protected")
        tokens = stored("protected").tokens
        protected.revoke()
        with pytest.raises(MCPServerStartupError) as caught:
            episode(tmp_path, config_path).run(secret)
        message = str(caught.value)
        assert "could not be refreshed" in message and login_command("protected") in message
        assert tokens is not None and tokens.access_token not in message and str(tokens.refresh_token) not in message


async def secret_or_error(manager: MCPManager) -> str:
    """The tool's answer, or what the failed call says."""
    try:
        result = await manager.call_tool("protected__secret_word", {})
    except MCPError as exc:
        return f"error: {exc}"
    return f"error: {result.content}" if result.is_error else result.content


@pytest.mark.e2e
def test_a_login_revoked_mid_episode_stops_the_calls_and_the_next_start(
    tmp_path: Path, state: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The session ends (the call in flight reads that), the terminal says why and what to run,
    the next connect says it again, and so does the next start, before playing."""
    with protected_server() as protected:
        config_path, mcp_config = config_of(
            tmp_path, {"protected": {"url": protected.url, "oauth": {"callbackPort": free_port()}}}
        )
        log_in(mcp_config, "protected")

        async def calls(manager: MCPManager) -> list[str]:
            before = await secret_or_error(manager)
            protected.revoke()
            return [before, await secret_or_error(manager)]

        with caplog.at_level(logging.WARNING, logger="mcp_client.oauth"):
            before, after = episode(tmp_path, config_path).run(calls)
        assert before == SECRET_WORD
        assert after.startswith("error: MCP server 'protected' is no longer available")
        (warning,) = [r.getMessage() for r in caplog.records if getattr(r, "event_type", "") == "mcp_login_needed"]
        assert "could not be refreshed" in warning and login_command("protected") in warning
        with pytest.raises(MCPServerStartupError) as reconnect:
            episode(tmp_path, config_path).run(secret)
        assert login_command("protected") in str(reconnect.value)
        with pytest.raises(MCPAuthError) as caught:
            check_logins(mcp_config)
        assert "could not be refreshed" in str(caught.value) and login_command("protected") in str(caught.value)
        log_in(mcp_config, "protected")
        check_logins(mcp_config)
        assert episode(tmp_path, config_path).run(secret) == SECRET_WORD


@pytest.mark.e2e
def test_more_access_asked_for_mid_episode_is_asked_for_at_the_next_login(tmp_path: Path, state: Path) -> None:
    """Step-up: a tool call needs a scope the login lacks; the episode cannot log in, so it says
    how, and remembers the scope: the next login asks for it beside the first one."""
    with protected_server("--call-scope", "write") as protected:
        config_path, mcp_config = config_of(
            tmp_path, {"protected": {"url": protected.url, "oauth": {"callbackPort": free_port()}}}
        )
        log_in(mcp_config, "protected")
        assert episode(tmp_path, config_path).run(secret_or_error).startswith("error: ")
        with pytest.raises(MCPAuthError) as caught:
            check_logins(mcp_config)
        assert "more access (scope write)" in str(caught.value) and login_command("protected") in str(caught.value)
        log_in(mcp_config, "protected")
        scopes = [event["scope"] for event in protected.log() if event["event"] == "authorize"]
        assert scopes == ["zork", "zork write"]
        assert episode(tmp_path, config_path).run(secret) == SECRET_WORD


@pytest.mark.e2e
def test_a_server_that_asks_without_an_oauth_entry_gets_the_flow_too(tmp_path: Path, state: Path) -> None:
    """No "oauth" key: the first 401 starts the spec's flow; an episode cannot log in, so it says
    how; after the login the episode plays with the stored tokens."""
    with protected_server() as protected:
        config_path, mcp_config = config_of(tmp_path, {"protected": {"url": protected.url}})
        check_logins(mcp_config)  # nothing declared: known only once the server answers
        with pytest.raises(MCPServerStartupError) as caught:
            episode(tmp_path, config_path).run(secret)
        assert "needs a login" in str(caught.value) and login_command("protected") in str(caught.value)
        assert protected.log() == []  # the episode neither registered nor asked for anything
        # The default callback port (33418) may be taken on this machine; a login picks its own.
        _, with_port = config_of(
            tmp_path, {"protected": {"url": protected.url, "oauth": {"callbackPort": free_port()}}}
        )
        log_in(with_port, "protected")
        assert episode(tmp_path, config_path).run(secret) == SECRET_WORD


@pytest.mark.e2e
def test_a_pre_registered_client_logs_in_and_its_secret_is_never_stored(tmp_path: Path, state: Path) -> None:
    port = free_port()
    redirect = f"http://127.0.0.1:{port}/callback"
    secret_value = "pre-registered-s3cret"
    args = ("--no-registration", "--client-id", "zorkgpt", "--client-secret", secret_value, "--redirect-uri", redirect)
    with protected_server(*args) as protected:
        entry = {
            "url": protected.url,
            "oauth": {"clientId": "zorkgpt", "clientSecret": "${SECRET}", "callbackPort": port},
        }
        config_path = write_mcp_config(tmp_path / "cfg", {"protected": entry})
        mcp_config = MCPConfig.from_file(config_path, environ={"SECRET": secret_value})
        log_in(mcp_config, "protected")
        assert [e["event"] for e in protected.log()] == ["authorize", "token"]
        assert secret_value not in token_file("protected").read_text()
        os.environ["SECRET"] = secret_value  # the episode expands ${SECRET} from the environment
        try:
            protected.expire()
            assert episode(tmp_path, config_path).run(secret) == SECRET_WORD  # refreshed with the entry's secret
        finally:
            del os.environ["SECRET"]
        assert protected.grants() == ["authorization_code", "refresh_token"]


@pytest.mark.e2e
def test_a_server_that_registers_nobody_says_how_to_register(tmp_path: Path, state: Path) -> None:
    with protected_server("--no-registration") as protected:
        port = free_port()
        _, mcp_config = config_of(tmp_path, {"protected": {"url": protected.url, "oauth": {"callbackPort": port}}})
        with pytest.raises(MCPAuthError) as caught:
            log_in(mcp_config, "protected")
        message = str(caught.value)
        assert f"http://127.0.0.1:{port}/callback" in message and '"clientId"' in message


def test_a_busy_callback_port_is_named_with_the_setting_that_moves_it(tmp_path: Path, state: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        _, mcp_config = config_of(
            tmp_path, {"protected": {"url": "http://127.0.0.1:9/mcp", "oauth": {"callbackPort": port}}}
        )
        with pytest.raises(MCPAuthError) as caught:
            run_login(mcp_config, "protected", out=io.StringIO(), open_url=lambda url: None, redactor=Redactor())
    assert f"127.0.0.1:{port}" in str(caught.value) and "callbackPort" in str(caught.value)


def test_only_a_remote_server_logs_in(tmp_path: Path, state: Path) -> None:
    _, mcp_config = config_of(tmp_path, {"local": {"command": "python", "args": ["-V"]}})
    with pytest.raises(MCPConfigError, match="stdio"):
        run_login(mcp_config, "local", out=io.StringIO(), redactor=Redactor())
    with pytest.raises(MCPConfigError, match="No MCP server 'nope'"):
        run_login(mcp_config, "nope", out=io.StringIO(), redactor=Redactor())


# -- accounts without a person -------------------------------------------------------------


def _key_pair(folder: Path) -> tuple[Path, Path]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = folder / "client.pem"
    public = folder / "client.pub.pem"
    private.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    public.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    return private, public


@pytest.mark.e2e
@pytest.mark.parametrize("proof", ["secret", "signed-jwt"])
def test_client_credentials_need_no_login(tmp_path: Path, state: Path, proof: str) -> None:
    private, public = _key_pair(tmp_path)
    server_args = ["--cc-client-id", "robot"]
    oauth: dict[str, Any] = {"grant": "client_credentials", "clientId": "robot"}
    if proof == "secret":
        server_args += ["--cc-client-secret", "robot-s3cret"]
        oauth["clientSecret"] = "robot-s3cret"
    else:
        server_args += ["--cc-public-key", str(public)]
        oauth["privateKeyFile"] = str(private)
    with protected_server(*server_args) as protected:
        oauth["issuer"] = protected.authorization_server
        config_path, mcp_config = config_of(tmp_path, {"protected": {"url": protected.url, "oauth": oauth}})
        check_logins(mcp_config)  # nobody needs to log in
        assert episode(tmp_path, config_path).run(secret) == SECRET_WORD
        (grant,) = [e for e in protected.log() if e["event"] == "token"]
        assert grant["grant"] == "client_credentials" and grant["resource"] == protected.url
        assert "robot-s3cret" not in token_file("protected").read_text()


@pytest.mark.e2e
def test_wrong_client_credentials_say_what_to_check(tmp_path: Path, state: Path) -> None:
    with protected_server("--cc-client-id", "robot", "--cc-client-secret", "right") as protected:
        oauth = {"grant": "client_credentials", "clientId": "robot", "clientSecret": "wrong-s3cret"}
        config_path, _ = config_of(tmp_path, {"protected": {"url": protected.url, "oauth": oauth}})
        with pytest.raises(MCPServerStartupError) as caught:
            episode(tmp_path, config_path).run(secret)
        message = str(caught.value)
        assert '"clientSecret"' in message and "needs no login" in message and "wrong-s3cret" not in message


# -- the whole thing, through main.py ----------------------------------------------------


class SecretAskingModel:
    """Plays the walkthrough; on the first ``asking`` turns it first calls the protected tool.
    Before the second call it makes the authorization server expire every access token, so that
    call meets a refused token in the middle of the episode."""

    def __init__(self, commands: list[str], protected: Protected, asking: int = 2) -> None:
        self.walkthrough = WalkthroughModel(commands)
        self.protected = protected
        self.asking = asking
        self.turns = 0

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        fresh_turn = body.get("model") == AGENT_MODEL and not any(m["role"] == "tool" for m in body["messages"])
        if fresh_turn:
            self.turns += 1
            if self.turns <= self.asking and body.get("tools"):
                if self.turns == 2:
                    self.protected.expire()
                return completion(tool_calls=[tool_call("protected__secret_word", {}, f"call_{self.turns}")])
        return self.walkthrough(body, index)


def _login_secrets(name: str) -> set[str]:
    login = stored(name)
    values = set()
    if login.tokens is not None:
        values |= {login.tokens.access_token, login.tokens.refresh_token or ""}
    if login.client is not None and login.client.client_secret:
        values.add(login.client.client_secret)
    return {value for value in values if value}


def _own_folders(tmp_path: Path) -> dict[str, str]:
    """The environment that keeps every file main.py may write under ``tmp_path``: its home,
    caches, settings and temp files (the state folder is the ``state`` fixture's)."""
    folders = {
        "HOME": tmp_path / "home",
        "TMPDIR": tmp_path / "tmp",
        "XDG_CACHE_HOME": tmp_path / "home" / ".cache",
        "XDG_CONFIG_HOME": tmp_path / "home" / ".config",
        "XDG_DATA_HOME": tmp_path / "home" / ".local" / "share",
    }
    for folder in folders.values():
        folder.mkdir(parents=True, exist_ok=True)
    return {name: str(folder) for name, folder in folders.items()}


def _files_written(tmp_path: Path, since: float) -> list[Path]:
    """Every file under ``tmp_path`` (the processes' working, state, home and temp folders, the
    episode folders), and every file of the machine's temp folder changed since ``since``, for a
    program that ignored TMPDIR."""
    files = [path for path in tmp_path.rglob("*") if path.is_file() and not path.is_symlink()]
    for root, _, names in os.walk(tempfile.gettempdir()):
        if Path(root).is_relative_to(tmp_path):
            continue
        for name in names:
            path = Path(root) / name
            try:
                changed = path.lstat().st_mtime >= since and path.is_file() and not path.is_symlink()
            except FileNotFoundError:  # another test's file, gone meanwhile
                continue
            if changed:
                files.append(path)
    return files


def _leaks(secrets: set[str], files: list[Path], outputs: dict[str, str]) -> list[str]:
    """Where a token or secret was found: a file's path, or the name of a process's stream."""
    found = []
    for path in files:
        try:
            content = path.read_bytes()
        except (FileNotFoundError, PermissionError):  # another test's file, gone or not ours to read
            continue
        if any(value.encode() in content for value in secrets):
            found.append(str(path))
    found += [name for name, text in outputs.items() if any(value in text for value in secrets)]
    return found


@pytest.mark.e2e
@pytest.mark.parametrize("transport", ["http", "sse"])
def test_main_logs_in_then_plays_with_the_protected_tool_through_a_refresh(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, state: Path, transport: str
) -> None:
    """A user's whole day: the start stops asking for a login, ``--mcp-login`` logs in (the test
    is the browser), and an episode calls the protected tool twice, the token refused and
    refreshed in between. No token or secret reaches any file a process wrote (only the login's
    own file holds them), nor a byte of any process's stdout or stderr."""
    since = time.time() - 1  # file times may be rounded down to the second
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    # The config in the working folder: whatever it names by a relative path is written there too.
    config_path = cwd / "pyproject.toml"
    shutil.copyfile(REPO / "pyproject.toml", config_path)
    config = str(config_path)
    with protected_server(sse=transport == "sse") as protected:
        entry: dict[str, Any] = {"url": protected.url, "oauth": {"callbackPort": free_port()}}
        if transport == "sse":
            entry["type"] = "sse"
        mcp_file = write_mcp_config(tmp_path / "mcp-config", {"protected": entry})
        env = scripted_env(
            llm_server,
            tmp_path,
            game_file,
            **NO_LEARNING,
            **_own_folders(tmp_path),
            ZORKGPT_MCP_ENABLED="true",
            ZORKGPT_MCP_CONFIG_FILE=str(mcp_file),
            ZORKGPT_MCP_SESSION_LIFETIME="episode",
            XDG_STATE_HOME=str(state),
        )

        unready = run_main(["--config", config, "--max-turns", "3"], env, cwd)
        assert unready.returncode == 2, unready.stderr[-2000:]
        assert f"uv run python main.py --config {shlex.quote(config)} --mcp-login protected" in unready.stderr
        assert llm_server.requests == [] and protected.log() == []

        login = MainProcess(["--config", config, "--mcp-login", "protected"], env, cwd)
        try:
            login.wait_for_stderr("/authorize?")
            found = re.search(r"^(http://\S+/authorize\?\S+)$", login.stderr, re.MULTILINE)
            assert found, login.stderr
            assert browse(found.group(1)).status_code == 200
            assert login.wait(60) == 0, login.stderr
        finally:
            login.kill()
        assert "Logged in to MCP server 'protected'" in login.stderr and str(token_file("protected")) in login.stderr
        secrets = _login_secrets("protected")

        llm_server.respond_with(SecretAskingModel(walkthrough(game_file), protected))
        done = run_main(["--config", config, "--max-turns", "3"], env, cwd, timeout=180)
        assert done.returncode == 0, done.stderr[-3000:]
        assert protected.grants() == ["authorization_code", "refresh_token"]

    (log_file,) = (tmp_path / "runs").rglob(EpisodeFolder.LOG)
    events = read_events(log_file.parent)
    results = [e for e in events if e["event_type"] == "mcp_tool_result"]
    assert [e.get("tool_name") for e in results] == ["protected.secret_word"] * 2
    assert not any(e.get("is_error") for e in results)
    answers = [m["content"] for body in llm_server.bodies for m in body.get("messages", []) if m["role"] == "tool"]
    assert sum(SECRET_WORD in answer for answer in answers) >= 2
    secrets |= _login_secrets("protected")
    assert len(secrets) >= 5  # the login's access and refresh tokens, the refreshed pair, the client secret
    login_file = token_file("protected")
    assert login_file.is_relative_to(state) and any(value in login_file.read_text() for value in secrets)
    written = [path for path in _files_written(tmp_path, since) if path != login_file]
    assert log_file in written and config_path in written  # the scan reaches the episode and the working folder
    outputs = {
        "the first start's stdout": unready.stdout,
        "the first start's stderr": unready.stderr,
        "the login's stdout": login.stdout,
        "the login's stderr": login.stderr,
        "the episode's stdout": done.stdout,
        "the episode's stderr": done.stderr,
    }
    assert not _leaks(secrets, written, outputs), "a token or secret was written outside the login's own file"


# -- the login on hostile ground -------------------------------------------------------------


def _login_env(tmp_path: Path, state: Path, mcp_file: Path) -> dict[str, str]:
    """``main.py --mcp-login`` needs no game and no model: the MCP config and the state folder."""
    return {
        **_own_folders(tmp_path),
        "ZORKGPT_MCP_ENABLED": "true",
        "ZORKGPT_MCP_CONFIG_FILE": str(mcp_file),
        "XDG_STATE_HOME": str(state),
        "PYTHONUNBUFFERED": "1",
    }


def _authorization_url(login: MainProcess) -> str:
    login.wait_for_stderr("/authorize?")
    found = re.search(r"^(http://\S+/authorize\?\S+)$", login.stderr, re.MULTILINE)
    assert found, login.stderr
    return found.group(1)


@pytest.mark.e2e
def test_the_login_callback_takes_only_its_own_redirect_and_ignores_idle_connections(
    tmp_path: Path, state: Path
) -> None:
    """Any web page can make the browser request the callback; a browser preconnects and sends
    nothing. A stray request without the login's state gets a 400 and the login goes on waiting;
    the idle connection is closed without a word; the real redirect then logs in."""
    port = free_port()
    with protected_server() as protected:
        mcp_file = write_mcp_config(
            tmp_path / "mcp-config", {"protected": {"url": protected.url, "oauth": {"callbackPort": port}}}
        )
        login = MainProcess(["--mcp-login", "protected"], _login_env(tmp_path, state, mcp_file), tmp_path)
        try:
            url = _authorization_url(login)
            callback = f"http://127.0.0.1:{port}/callback"
            for stray in ("?code=x&state=wrong", "?code=x", "?error=access_denied&state=wrong"):
                answer = httpx2.get(callback + stray, timeout=30)
                assert answer.status_code == 400, (stray, answer.text)
                assert "Logged in" not in answer.text
            with socket.create_connection(("127.0.0.1", port), timeout=30):  # a preconnect: sends nothing
                page = browse(url)
                assert page.status_code == 200 and "Logged in to protected" in page.text
                assert login.wait(60) == 0, login.stderr
        finally:
            login.kill()
    assert "Logged in to MCP server 'protected'" in login.stderr
    assert "Traceback" not in login.stderr + login.stdout, login.stderr


@pytest.mark.e2e
def test_a_login_refused_by_a_server_quoting_its_secrets_prints_none_of_them(tmp_path: Path, state: Path) -> None:
    """The authorization server quotes the client secret, the authorization code and the PKCE
    verifier in its refusal: the login says it was refused, and no byte of its output or of any
    file it wrote holds them, nor the start of one (a message cut short would keep a prefix)."""
    since = time.time() - 1
    port = free_port()
    client_secret = "pre-registered-s3cret-value"
    args = ("--echo-secrets", "--no-registration", "--client-id", "zorkgpt", "--client-secret", client_secret)
    with protected_server(*args, "--redirect-uri", f"http://127.0.0.1:{port}/callback") as protected:
        entry = {
            "url": protected.url,
            "oauth": {"clientId": "zorkgpt", "clientSecret": "${SECRET}", "callbackPort": port},
        }
        mcp_file = write_mcp_config(tmp_path / "mcp-config", {"protected": entry})
        env = {**_login_env(tmp_path, state, mcp_file), "SECRET": client_secret}
        login = MainProcess(["--mcp-login", "protected"], env, tmp_path)
        try:
            browse(_authorization_url(login))
            code = login.wait(60)
        finally:
            login.kill()
        (echoed,) = [event for event in protected.log() if event["event"] == "echoed"]
    assert code == 2, login.stderr
    assert "400" in login.stderr and "refused" in login.stderr and "Traceback" not in login.stderr
    values = {echoed["code"], echoed["code_verifier"], echoed["client_secret"]}
    assert client_secret in values and all(len(value) >= 20 for value in values)
    needles = values | {value[:12] for value in values}
    outputs = {"the login's stdout": login.stdout, "the login's stderr": login.stderr}
    assert not _leaks(needles, _files_written(tmp_path, since), outputs), login.stderr


# -- one login, several processes ----------------------------------------------------------


class SecretEveryTurnModel:
    """Each turn of every episode first calls the protected tool, then looks around: a model any
    number of concurrent episodes can share."""

    def __call__(self, body: dict[str, Any], index: int) -> dict[str, Any]:
        if body.get("model") != AGENT_MODEL:
            return WalkthroughModel([])(body, index)
        if body.get("tools") and not any(m["role"] == "tool" for m in body["messages"]):
            return completion(tool_calls=[tool_call("protected__secret_word", {}, f"call_{index}")])
        return agent_reply("look")


@pytest.mark.e2e
def test_parallel_episodes_refreshing_one_login_at_once_all_play_and_keep_it_alive(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, state: Path
) -> None:
    """Three episodes start together with a login whose access token ran out; the authorization
    server rotates refresh tokens (each works once) and holds refreshes until all three came in.
    One process refreshes, the others wait for it and use what it stored: every episode plays
    its protected calls, and the token file ends with a refresh token that still works."""
    episodes = 3
    # With the login shared, only one refresh ever comes, so the server holds it this long for the two
    # that never come: long enough that, were each process to refresh on its own, all three (started
    # together) would be held together, which makes the rotation bite.
    hold = f"{scaled(5):g}"
    with protected_server("--refresh-together", str(episodes), "--together-seconds", hold) as protected:
        entry = {"url": protected.url, "oauth": {"callbackPort": free_port()}}
        mcp_file = write_mcp_config(tmp_path / "mcp-config", {"protected": entry})
        mcp_config = MCPConfig.from_file(mcp_file, environ={})
        log_in(mcp_config, "protected")
        FileTokenStorage(mcp_config.server("protected")).save(expires_at=1.0)  # ran out while nobody played
        protected.expire()
        env = scripted_env(
            llm_server,
            tmp_path,
            game_file,
            **NO_LEARNING,
            ZORKGPT_MCP_ENABLED="true",
            ZORKGPT_MCP_CONFIG_FILE=str(mcp_file),
            ZORKGPT_MCP_SESSION_LIFETIME="episode",
            XDG_STATE_HOME=str(state),
        )
        llm_server.respond_with(SecretEveryTurnModel())
        args = ["--episodes", str(episodes), "--parallel", str(episodes), "--max-turns", "2"]
        done = run_main([*args, "--config", str(REPO / "pyproject.toml")], env, tmp_path, timeout=300)
        assert done.returncode == 0, done.stderr[-4000:]
        assert protected.grants() == ["authorization_code", "refresh_token"]  # one refresh, shared
        assert "Traceback" not in done.stderr and "needs a login" not in done.stderr, done.stderr[-4000:]

        folders = episode_folders_by_number(done.stderr, tmp_path / "runs")
        assert sorted(folders) == list(range(1, episodes + 1)), done.stderr[-3000:]
        for folder in folders.values():
            results = [e for e in read_events(folder) if e["event_type"] == "mcp_tool_result"]
            assert len(results) == 2 and not any(e.get("is_error") for e in results), results
        login = stored("protected")
        assert login.login_needed is None and login.tokens is not None

        # The stored refresh token is the live one: the next process refreshes with it.
        protected.expire()
        assert episode(tmp_path, mcp_file).run(secret) == SECRET_WORD
        assert protected.grants() == ["authorization_code", "refresh_token", "refresh_token"]


@pytest.mark.e2e
def test_a_damaged_token_file_stops_every_start_until_a_login_replaces_it(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, state: Path
) -> None:
    port = free_port()
    with protected_server() as protected:
        mcp_file = write_mcp_config(
            tmp_path / "mcp-config", {"protected": {"url": protected.url, "oauth": {"callbackPort": port}}}
        )
        path = token_file("protected")
        path.parent.mkdir(parents=True, mode=0o700)
        path.write_bytes(b"\xff\xfe\x00 not a login")
        path.chmod(0o600)
        env = {**scripted_env(llm_server, tmp_path, game_file, **NO_LEARNING), **_login_env(tmp_path, state, mcp_file)}
        start = run_main(["--max-turns", "1"], env, tmp_path)
        assert start.returncode == 2, start.stderr
        assert "is damaged (not UTF-8 text)" in start.stderr and "--mcp-login protected" in start.stderr
        assert "Traceback" not in start.stderr and llm_server.requests == []

        login = MainProcess(["--mcp-login", "protected"], env, tmp_path)
        try:
            browse(_authorization_url(login))
            assert login.wait(60) == 0, login.stderr
        finally:
            login.kill()
        assert f"The login file {path} is damaged (not UTF-8 text); this login replaces it." in login.stderr
        assert "Traceback" not in login.stderr
        assert stored("protected").tokens is not None and stat.S_IMODE(path.stat().st_mode) == 0o600


# -- https unless loopback -------------------------------------------------------------------


def _another_address_of_this_machine() -> str:
    """An address of this machine that is not loopback, where a request sent would reach our
    server listening everywhere (so a test sees that none was); a name that resolves nowhere on a
    machine without one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # picks the route's source address; sends nothing
        except OSError:
            return "example.invalid"
        address = probe.getsockname()[0]
    return "example.invalid" if address.startswith("127.") else address


@pytest.mark.e2e
def test_a_login_never_sends_anything_to_an_authorization_server_over_plain_http_elsewhere(
    tmp_path: Path, state: Path
) -> None:
    """The protected server's metadata names an authorization server at http://<another address>:
    the login stops naming it and the fix, and not one request reached it."""
    elsewhere = _another_address_of_this_machine()
    with protected_server("--as-host", elsewhere, "--listen-everywhere") as protected:
        mcp_file = write_mcp_config(
            tmp_path / "mcp-config", {"protected": {"url": protected.url, "oauth": {"callbackPort": free_port()}}}
        )
        login = MainProcess(["--mcp-login", "protected"], _login_env(tmp_path, state, mcp_file), tmp_path)
        try:
            assert login.wait(60) == 2, login.stderr
        finally:
            login.kill()
        hosts = protected.hosts()
    assert f"its OAuth metadata address http://{elsewhere}:" in login.stderr
    assert "is plain http on another machine" in login.stderr and "https" in login.stderr
    assert "Traceback" not in login.stderr and "/authorize?" not in login.stderr
    assert hosts == []


@pytest.mark.e2e
def test_an_episode_never_refreshes_at_a_plain_http_token_endpoint_elsewhere(tmp_path: Path, state: Path) -> None:
    """A login whose remembered token endpoint moved to http://<another address>: the refresh is
    refused before it is sent (the refresh token and the client secret would travel readable)."""
    elsewhere = _another_address_of_this_machine()
    with protected_server("--listen-everywhere") as protected:
        config_path, mcp_config = config_of(
            tmp_path, {"protected": {"url": protected.url, "oauth": {"callbackPort": free_port()}}}
        )
        log_in(mcp_config, "protected")
        storage = FileTokenStorage(mcp_config.server("protected"))
        login = storage.load()
        assert login is not None and login.authorization_server is not None
        port = urlsplit(protected.authorization_server).port
        endpoint = AnyHttpUrl(f"http://{elsewhere}:{port}/token")
        moved = login.authorization_server.model_copy(update={"token_endpoint": endpoint})
        storage.save(authorization_server=moved, expires_at=1.0)
        with pytest.raises(MCPServerStartupError) as caught:
            episode(tmp_path, config_path).run(secret)
        hosts = protected.hosts()
        grants = protected.grants()
    assert f"its token endpoint http://{elsewhere}:{port}/token is plain http on another machine" in str(caught.value)
    assert not any(host.startswith(elsewhere) for host in hosts), hosts
    assert grants == ["authorization_code"]


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("http://127.0.0.1:8000/token", False),
        ("http://127.9.9.9/token", False),
        ("http://[::1]:8000/token", False),
        ("http://localhost/token", False),
        ("https://auth.example.com/token", False),
        ("http://auth.example.com/token", True),
        ("http://10.0.0.5/token", True),
        ("http://[fd00::2]/token", True),
        ("HTTP://192.0.2.2/token", True),
    ],
)
def test_plain_http_is_for_this_machine_only(tmp_path: Path, url: str, refused: bool) -> None:
    assert (cleartext_refusal(_server(tmp_path), "token endpoint", url) is not None) is refused


def test_an_unsafe_token_folder_stops_only_what_would_use_it(tmp_path: Path, state: Path) -> None:
    """A server that never logged in reads nothing from the folder: it plays on. A login would
    write there: refused with the fix, and nothing is written."""
    token_dir().mkdir(parents=True)
    token_dir().chmod(0o777)
    _, mcp_config = config_of(tmp_path, {"plain": {"url": "https://mcp.example.com/mcp"}})
    check_logins(mcp_config)
    with pytest.raises(MCPAuthError, match=f"chmod 700 {token_dir()}"):
        _save_login(FileTokenStorage(mcp_config.server("plain")), "token-one")
    assert list(token_dir().iterdir()) == []


# Another ZorkGPT process refreshing the login, hung while it holds the lock: a real process holding a real lock.
HOLD_LOCK = """
import sys, time
from filelock import FileLock
lock = FileLock(sys.argv[1], mode=0o600, thread_local=False)
lock.acquire()
print("held", flush=True)
time.sleep(600)
"""


@pytest.mark.e2e
def test_a_start_cut_short_by_a_hung_refresh_names_the_process_holding_the_login(tmp_path: Path, state: Path) -> None:
    """The lock's own deadline is longer than a start's: the start's error must name the lock (and
    the process holding it), not tell the user to check the server's address and headers."""
    with protected_server() as protected:
        config_path, mcp_config = config_of(
            tmp_path, {"protected": {"url": protected.url, "oauth": {"callbackPort": free_port()}}}
        )
        log_in(mcp_config, "protected")
        storage = FileTokenStorage(mcp_config.server("protected"))
        storage.save(expires_at=1.0)  # ran out: the start refreshes it first
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLD_LOCK, str(storage.lock_path)], stdout=subprocess.PIPE, text=True
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            with pytest.raises(MCPServerStartupError) as caught:
                episode(tmp_path, config_path, server_startup_timeout_seconds=3).run(secret)
        finally:
            holder.kill()
            holder.communicate()  # reaped and its pipe closed: no unclosed file for a later test's check
        assert protected.grants() == ["authorization_code"]  # no refresh was sent meanwhile
    message = str(caught.value)
    assert "another ZorkGPT process has been refreshing its login for" in message, message
    assert str(storage.lock_path) in message and "End that process, or wait for it" in message
    assert "reachable" not in message and "address" not in message


@pytest.mark.e2e
def test_check_gives_the_login_command_as_the_fix_for_a_refused_refresh(
    tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from orchestration.setup_check import check_setup

    with protected_server() as protected:
        config_path, mcp_config = config_of(
            tmp_path, {"protected": {"url": protected.url, "oauth": {"callbackPort": free_port()}}}
        )
        log_in(mcp_config, "protected")
        protected.revoke()  # its token is refused, and so is the refresh
        settings = tmp_path / "pyproject.toml"
        settings.write_text(f'[tool.zorkgpt.mcp]\nenabled = true\nconfig_file = "{config_path}"\n', encoding="utf-8")
        monkeypatch.chdir(tmp_path)
        report = check_setup(str(settings)).render()
    lines = report.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("protected "))
    row = lines[at : at + 3]
    assert "FAIL" in row[0] and "needs login" in row[0], report
    assert "could not be refreshed" in row[1], report
    assert row[2] == f"    fix: {login_command('protected')}", report
    assert "Then start again" not in report
