"""The viewer in a real browser: headless Chromium (Debian's ``chromium``, driven by Playwright)
opens the page on a finished scripted game and on one the test plays turn by turn, and checks
that the score, the current room on the map and the latest command appear and then update.

What the page must show comes from Jericho itself (``walkthrough_turns``), not from the files
the viewer reads. Screenshots go to the test's tmp folder (the path is printed); set
``VIEWER_SCREENSHOT_DIR`` to keep them somewhere else (the README's and the docs pages' come from there:
``VIEWER_SCREENSHOT_DIR=/tmp/shots uv run pytest tests/viewer/test_browser.py``, then copy
``viewer.png``, ``viewer-phone.png``, ``viewer-long-map.png`` and ``viewer-running.png`` to
docs/images/). Not a ``ZORKGPT_`` name: those are configuration, and an unknown one is refused.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from harness.scripted_llm import ScriptedLLMServer
from harness.walkthroughs import (
    AGENT_MODEL,
    THINK_ARGS,
    ThinkingWalkthroughModel,
    WalkthroughModel,
    e2e_config,
    play_walkthrough,
    read_events,
    walkthrough,
)
from orchestration.episode_runner import EpisodeRunner
from session.game_state import GameState
from session.redaction import Redactor
from tests.mcp_test_servers.helpers import REPO_ROOT, raw_entry, write_mcp_config
from tests.viewer_support import CRITIC_REFUSAL, ECHO_TEXT, TURNS, UNKNOWN_TOOL
from tests.walkthrough_turns import walkthrough_map as walkthrough_graph
from tests.walkthrough_turns import walkthrough_turns
from viewer.server import RunningViewer, start_viewer
from world.knowledge_file import KnowledgeDocument, Section
from world.memory_file import Memory, MemoryFile, MemoryStatus

playwright_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed (uv sync installs it)")
# Read at import: every test then runs with the ZORKGPT_* variables cleared (tests/conftest.py).
CHROMIUM = os.environ.get("ZORKGPT_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
SCREENSHOT_DIR = Path(os.environ["VIEWER_SCREENSHOT_DIR"]) if os.environ.get("VIEWER_SCREENSHOT_DIR") else None
pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        CHROMIUM is None,
        reason="no Chromium installed (Debian/Ubuntu: apt-get install chromium; or set ZORKGPT_CHROMIUM)",
    ),
]
# Never let the browser reach out: no updates, no sync, no QUIC probes.
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
expect = playwright_api.expect
expect.set_options(timeout=30_000)  # a loaded CI machine; a failure still fails, just later
T = TypeVar("T")


@pytest.fixture(scope="module")
def browser() -> Iterator[playwright_api.Browser]:
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def page(browser: playwright_api.Browser) -> Iterator[playwright_api.Page]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
    try:
        yield page
    finally:
        context.close()
    assert errors == [], f"the page logged errors: {errors}"


@pytest.fixture
def viewer(tmp_path: Path) -> Iterator[RunningViewer]:
    running = start_viewer(tmp_path / "game_files", port=0)
    try:
        yield running
    finally:
        running.close()


def screenshot(page: playwright_api.Page, tmp_path: Path, name: str) -> Path:
    folder = SCREENSHOT_DIR or tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
    return path


def in_thread(work: Callable[[], T]) -> T:
    results: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(work())
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test's thread below
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    if errors:
        raise errors[0]
    return results[0]


def expect_turn(page: playwright_api.Page, game_file: Path, turn: int, max_turns: int) -> None:
    """The page shows Jericho's truth after ``turn`` walkthrough turns."""
    truth = walkthrough_turns(game_file)[turn - 1]
    expect(page.locator("#latest-command")).to_have_text(f"> {truth.action.lower()}")
    expect(page.locator("#score")).to_have_text(f"{truth.score_after} / 350")
    expect(page.locator("#turn")).to_have_text(f"{turn} / {max_turns}")
    # Names come from the game's text ("North of House"), Jericho's object names differ ("North House");
    # the engine's room number is there, hidden unless "room ids" is ticked.
    expect(page.locator("#room .room-id")).to_have_text(f"#{truth.room_id_after}")
    room_id_shown = page.locator("#show-room-ids").is_checked()
    expect(page.locator("#room")).to_have_text(
        re.compile(rf"^\S.* #{truth.room_id_after}$" if room_id_shown else r"^[^#]*\S$"), use_inner_text=True
    )
    expect(page.locator("#map g.room.current")).to_have_attribute("data-room-id", str(truth.room_id_after))
    expect(page.locator("#map g.room.current")).to_have_count(1)
    expect(page.locator("#transcript article.turn").first).to_have_attribute("data-turn", str(turn))


def test_finished_episode_shows_score_map_transcript_and_tool_calls(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, viewer: RunningViewer, page: playwright_api.Page
) -> None:
    turns = 6
    # The shipped mcp_config.json has one server, so every thinking turn calls thoughtbox.
    model = ThinkingWalkthroughModel(
        walkthrough(game_file)[:turns], every=3, rotation=[("thoughtbox__think", THINK_ARGS)]
    )
    # A generous start-up limit: the server starts once per turn on a shared, loaded machine.
    mcp = {"enabled": True, "config_file": str(REPO_ROOT / "mcp_config.json"), "server_startup_timeout_seconds": 60}
    # Played in its own thread: Playwright's sync API keeps an event loop running in this one,
    # and the MCP agent runs each turn under its own asyncio.run.
    state = in_thread(
        lambda: play_walkthrough(llm_server, tmp_path, game_file, "finished", turns, model=model, mcp=mcp)
    )
    assert model.thinking_turns == [3, 6]

    page.goto(f"{viewer.url}#finished")
    expect_turn(page, game_file, turns, turns)
    expect(page.locator("#status")).to_have_text("finished: max_turns")
    expect(page.locator("#game")).to_have_text("Zork I")
    expect(page.locator("#episode-select option", has_text=" · Zork I · ")).to_have_count(1)
    expect(page.locator("#not-configured")).to_be_hidden()  # every turn had its tools
    expect(page.locator("#transcript article.turn")).to_have_count(turns)
    # The chart: one step line whose last point is the final score.
    expect(page.locator("#chart path.score-line")).to_have_count(1)
    expect(page.locator("#chart text.score-label")).to_have_text(str(state.score))
    # The model: the configured name, and the one the scripted endpoint named in its replies.
    expect(page.locator("#model")).to_have_text(f"configured {AGENT_MODEL}, served scripted/model")
    expect(page.locator('#figures tr.role-model[data-role="Agent"]')).to_have_text(
        f"configured {AGENT_MODEL}, served scripted/model"
    )
    # The map: every room of map_state.json, by name; the engine's ids only once asked for, and kept in the URL.
    rooms = json.loads((tmp_path / "game_files" / "zork1" / "map_state.json").read_text())["rooms"]
    expect(page.locator("#map g.room")).to_have_count(len(rooms))
    no_ids = "#map g.room text.room-visits"
    expect(page.locator(no_ids)).to_have_text([re.compile(r"^\d+ visits?$")] * len(rooms))
    expect(page.locator("#transcript .turn-room").first).to_have_text(re.compile(r"^[^#]+$"), use_inner_text=True)
    page.get_by_label("room ids").check()
    expect(page).to_have_url(re.compile(r"\?room_ids=shown#finished$"))
    page.reload()
    expect(page.locator("#show-room-ids")).to_be_checked()
    expect_turn(page, game_file, turns, turns)
    for room_id in rooms:
        expect(page.locator(f'#map g.room[data-room-id="{room_id}"] text.room-visits')).to_contain_text(f"#{room_id}")
    expect(page.locator("#transcript .turn-room").first).to_have_text(re.compile(r" #\d+$"), use_inner_text=True)
    page.get_by_label("room ids").uncheck()
    expect(page.locator(no_ids)).to_have_text([re.compile(r"^\d+ visits?$")] * len(rooms))
    expect(page).to_have_url(re.compile(r"/#finished$"))
    expect_turn(page, game_file, turns, turns)
    # Figures: the scripted server counted the LLM calls; thoughtbox was called twice.
    expect(page.locator("#llm-calls")).to_have_text(str(len(llm_server.requests)))
    expect(page.locator("#mcp-calls")).to_have_text("2")
    expect(page.locator("#mcp-errors")).to_have_text("0")
    expect(page.locator("#figures table.tool-table tr", has_text="thoughtbox").first.locator("td").nth(2)).to_have_text(
        "2"
    )

    # Each turn shows its tool calls before the command; one opens on a click.
    turn_six = page.locator('#transcript article.turn[data-turn="6"]')
    expect(turn_six.locator("summary", has_text="thoughtbox.think")).to_be_visible()
    turn_three = page.locator('#transcript article.turn[data-turn="3"]')
    expect(turn_three.locator(".command")).to_have_text(f"> {walkthrough(game_file)[2].lower()}")
    tool = turn_three.locator(".steps details")
    expect(tool.locator("summary")).to_contain_text("thoughtbox.think · server thoughtbox")
    expect(tool.locator("pre").first).to_be_hidden()
    tool.locator("summary").click()
    arguments, result = tool.locator("pre").nth(0), tool.locator("pre").nth(1)
    expect(arguments).to_contain_text(json.dumps({"thought": THINK_ARGS["thought"]})[1:-1])
    expect(result).to_contain_text("thoughtNumber")
    turn_three.get_by_text("Reasoning").click()
    expect(turn_three.locator("pre.reasoning")).to_have_text("walkthrough step 3")
    screenshot(page, tmp_path, "viewer-finished.png")


def test_an_episode_whose_settings_did_not_hold_says_so_above_its_figures(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, viewer: RunningViewer, page: playwright_api.Page
) -> None:
    """MCP on and a real server that offers no tools: the page says "Not as configured" where it is
    seen, not only in the API's fields."""
    mcp_file = write_mcp_config(tmp_path / "mcp", {"empty": raw_entry(env={"RAW_SERVER_TOOLS": "[]"})})
    mcp = {"enabled": True, "config_file": str(mcp_file)}
    in_thread(lambda: play_walkthrough(llm_server, tmp_path, game_file, "toolless", 2, mcp=mcp))
    page.goto(f"{viewer.url}#toolless")
    expect(page.locator("#status")).to_have_text("finished: max_turns")
    banner = page.locator("#not-configured")
    expect(banner).to_be_visible()
    expect(banner).to_have_text("Not as configured: MCP on: tools in 0 of 2 turns (without: no tools offered 2)")


class SteppedEpisode:
    """A real episode played in a thread, one turn each time the test says so."""

    def __init__(self, orchestrator: EpisodeRunner) -> None:
        self.orchestrator = orchestrator
        self.state: GameState | None = None
        self.error: BaseException | None = None
        self._gate = threading.Semaphore(0)
        play_turn = orchestrator._process_turn

        def gated_turn() -> bool:
            if not self._gate.acquire(timeout=300):
                raise TimeoutError("the test never released the next turn")
            return play_turn()

        orchestrator._process_turn = gated_turn  # type: ignore[method-assign]
        self._thread = threading.Thread(target=self._play, name="stepped-episode")
        self._thread.start()

    def _play(self) -> None:
        try:
            self.state = self.orchestrator.play_episode()
        except BaseException as exc:  # noqa: BLE001 - handed to the test thread, which re-raises it
            self.error = exc
        finally:
            self.orchestrator.close()

    def advance(self, turns: int = 1) -> None:
        self._gate.release(turns)

    def finish(self) -> GameState:
        self.orchestrator.stop_requested = True  # ends after the turn in flight, if any
        self._gate.release(1)
        self._thread.join()
        if self.error is not None:
            raise self.error
        assert self.state is not None
        return self.state


def test_running_episode_updates_without_reloading(
    llm_server: ScriptedLLMServer, tmp_path: Path, game_file: Path, viewer: RunningViewer, page: playwright_api.Page
) -> None:
    # An earlier episode mapped the forest: those rooms are known but not visited by the new one.
    play_walkthrough(llm_server, tmp_path, game_file, "earlier", 4)
    commands = walkthrough(game_file)
    max_turns = 6
    llm_server.respond_with(WalkthroughModel(commands))
    config = e2e_config(tmp_path, llm_server.base_url, game_file)
    game = SteppedEpisode(
        EpisodeRunner(
            episode_id="running", config=config, console=False, max_turns_per_episode=max_turns, redactor=Redactor()
        )
    )
    try:
        page.goto(viewer.url)  # no episode named: the page follows the newest one
        expect(page.locator("#status")).to_have_text("live")
        expect(page.locator("#turn")).to_have_text(f"0 / {max_turns}")
        expect(page.locator("#map g.room.current")).to_have_attribute("data-room-id", "180")  # West of House
        expect(page.locator('#map g.room.unvisited[data-room-id="88"]')).to_have_count(1)  # Up a Tree

        game.advance()
        expect_turn(page, game_file, 1, max_turns)
        game.advance(3)  # up the tree and "get egg": +5
        expect_turn(page, game_file, 4, max_turns)
        expect(page.locator('#map g.room.visited[data-room-id="75"]')).to_have_count(1)  # Forest Path, passed
        expect(page.locator("#chart text.score-label")).to_have_text("5")
        screenshot(page, tmp_path, "viewer-running.png")

        game.advance(2)
        expect_turn(page, game_file, max_turns, max_turns)
        expect(page.locator("#status")).to_have_text("finished: max_turns")
        expect(page.locator("#transcript .banner").first).to_contain_text("Episode ended: max_turns")
    finally:
        state = game.finish()
    assert state.turn_count == max_turns


def test_turns_show_refused_proposals_and_tool_calls_as_they_happened(
    critic_and_tools: Path, tmp_path: Path, page: playwright_api.Page
) -> None:
    episode = critic_and_tools
    events = read_events(episode)
    failed = [e for e in events if e["event_type"] in ("mcp_tool_error", "mcp_tool_timeout") or e.get("is_error")]
    running = start_viewer(episode.parent.parent, port=0)
    try:
        page.goto(f"{running.url}#{episode.name}")
        expect(page.locator("#status")).to_have_text("finished: max_turns")
        # The figures: every failed call of the log, the made-up tool apart from the server.
        expect(page.locator("#mcp-calls")).to_have_text("6")
        expect(page.locator("#mcp-errors")).to_have_text(str(len(failed)))
        expect(page.locator("#rejections")).to_have_text("2")
        table = page.locator("#figures table.tool-table")
        any_time = re.compile(r"^[0-9,]+$|^–$")
        expect(table.locator("tr", has_text="structured").locator("td")).to_have_text(
            ["misc", "structured", "2", "2", any_time]
        )
        expect(table.locator("tr.unknown-tool td")).to_have_text(["(no such tool)", UNKNOWN_TOOL, "1", "1", "–"])
        expect(page.locator("#figures .critic-figures")).to_contain_text(
            "6 proposals judged · 2 refused (1 by the critic model, 1 by the engine check)"
        )

        # Turn 1 as it happened: three tool calls, "take sword" refused by the engine check, then "north".
        first = page.locator('#transcript article.turn[data-turn="1"]')
        steps = first.locator(".steps > *")
        expect(steps).to_have_count(4)
        expect(steps.nth(0)).to_contain_text("misc.structured · server misc")
        expect(steps.nth(0).locator(".outcome")).to_have_text("refused")
        expect(steps.nth(1)).to_contain_text(f"{UNKNOWN_TOOL} · no such tool")
        expect(steps.nth(2).locator(".outcome")).to_have_text("ok")
        expect(steps.nth(3)).to_contain_text('> take sword refused by the engine check: There is no "sword" here')
        expect(first.locator(".command")).to_have_text("> north")
        # The unknown tool's error once, not again as a note; its text and the echo's read as text.
        expect(first.get_by_text(f"Unknown tool '{UNKNOWN_TOOL}'")).to_have_count(1)
        steps.nth(0).locator("summary").click()
        refusal = steps.nth(0).locator("pre.error")
        expect(refusal).to_contain_text("Input should be a valid integer")
        assert "\\n" not in refusal.inner_text()
        expect(steps.nth(0).locator("pre").first).to_contain_text('"count": "lots"')
        steps.nth(2).locator("summary").click()
        expect(steps.nth(2).locator("pre").nth(1)).to_have_text(ECHO_TEXT)

        # A result the log kept shortened (no longer JSON) still reads as text, line breaks and all.
        third = page.locator('#transcript article.turn[data-turn="3"] .steps details').nth(1)
        third.locator("summary").click()
        shortened = third.locator("pre").nth(1)
        expect(shortened).to_contain_text(re.compile(r"^a line of a long answer\na line of a long answer"))
        assert "\\n" not in shortened.inner_text()
        # The call that reported progress: its revision and its progress, as the log has them.
        progressed = page.locator('#transcript article.turn[data-turn="3"] .steps details').nth(2)
        progressed.locator("summary").click()
        expect(progressed).to_contain_text("MCP revision 2025-11-25")
        expect(progressed.locator("ul.progress li").first).to_have_text("1 / 3 · step 1")
        echo = page.locator('#transcript article.turn[data-turn="3"] .steps details').nth(1)
        expect(echo).to_contain_text("MCP revision 2026-07-28")

        second = page.locator('#transcript article.turn[data-turn="2"]')
        expect(second.locator(".rejection")).to_have_text(f"> jump refused by the critic model: {CRITIC_REFUSAL}")
        expect(second.locator(".command")).to_have_text("> east")

        # Filters: only turns with tool calls (1, 3); with score changes (4, the Kitchen).
        visible = page.locator("#transcript article.turn:visible")
        page.get_by_label("tool calls").check()
        expect(visible).to_have_count(2)
        expect(visible.nth(0)).to_have_attribute("data-turn", "3")
        page.get_by_label("tool calls").uncheck()
        page.get_by_label("score changes").check()
        expect(visible).to_have_count(1)
        expect(visible.nth(0)).to_have_attribute("data-turn", "4")
        page.get_by_label("score changes").uncheck()
        expect(visible).to_have_count(TURNS)
        screenshot(page, tmp_path, "viewer-critic-tools.png")
    finally:
        running.close()


def in_view(page: playwright_api.Page, inner: str, outer: str) -> bool:
    """Whether the element ``inner`` is drawn wholly inside ``outer``'s box on screen."""
    a, b = page.locator(inner).bounding_box(), page.locator(outer).bounding_box()
    assert a is not None and b is not None
    return (
        a["x"] >= b["x"]
        and a["y"] >= b["y"]
        and a["x"] + a["width"] <= b["x"] + b["width"]
        and a["y"] + a["height"] <= b["y"] + b["height"]
    )


def test_a_long_games_map_memories_and_knowledge_read_well_on_a_wide_and_a_narrow_screen(
    critic_and_tools: Path, tmp_path: Path, game_file: Path, browser: playwright_api.Browser
) -> None:
    episode = critic_and_tools
    workdir = episode.parent.parent
    learnt = workdir / "zork1"  # Zork I's learning files, in the game's own folder
    # The house's own contradiction, as this episode mapped it: Behind House → west is the Kitchen.
    small_map = json.loads((learnt / "map_state.json").read_text())
    assert small_map["edges"]["79"]["west"] == 203
    # Files the learning managers write, in their own format: memories by room, a knowledge base.
    memories = [
        Memory(1, 180, "West of House", "item", "A leaflet is in the mailbox", MemoryStatus.ACTIVE, episode.name, 2),
        Memory(2, 79, "Behind House", "path", "The window opens", MemoryStatus.TENTATIVE, "2026-01-02T03-04-05Z", 9),
    ]
    (learnt / "memories.md").write_text(MemoryFile(list(memories)).render())
    knowledge = KnowledgeDocument.empty()
    knowledge.sections.append(Section("Dangers", ["- The troll in the Troll Room kills the unarmed."]))
    (learnt / "knowledgebase.md").write_text(knowledge.render())

    running = start_viewer(workdir, port=0)
    try:
        for name, size in (("wide", {"width": 1400, "height": 900}), ("phone", {"width": 390, "height": 844})):
            context = browser.new_context(viewport=size)
            page = context.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
            try:
                page.goto(f"{running.url}#{episode.name}")
                expect(page.locator("#status")).to_have_text("finished: max_turns")
                # The map: engine directions, the contradiction said in words, ways and stubs apart.
                expect(page.locator("#map-misfits")).to_contain_text("North of House → east leads to Behind House")
                expect(page.locator("#map path.edge.misfit")).to_have_count(1)
                expect(
                    page.locator('#map g.room[data-room-id="203"] g.stub.named[data-direction="up"] text')
                ).to_have_text("↑ up")
                expect(page.locator('#map g.room[data-room-id="180"] g.stub[data-direction="south"]')).to_have_count(1)
                assert in_view(page, "#map g.room.current", "#map")
                # Memories by room with badges and short labels; no file title or editing instructions.
                box = page.locator("#memories")
                expect(box.locator("h3").first).to_contain_text("West of House")
                expect(box.locator("li.memory.active")).to_contain_text("A leaflet is in the mailbox")
                expect(box.locator("li.memory.active .tag.when")).to_have_text("this episode · turn 2")
                expect(box.locator("li.memory.tentative .tag.when")).to_have_text("01-02 03:04 · turn 9")
                expect(box.locator("li.memory.tentative .badge")).to_have_text("tentative")
                expect(box).not_to_contain_text("edit")
                expect(page.locator("#knowledge h3")).to_have_text("Dangers")
                expect(page.locator("#knowledge li")).to_have_text("The troll in the Troll Room kills the unarmed.")
                expect(page.locator("#knowledge")).not_to_contain_text("edit freely")
                expect(page.locator("#objectives li.objective.active .badge")).to_have_text("active")
                # Nothing wider than the screen.
                assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
                screenshot(page, tmp_path, "viewer.png" if name == "wide" else f"viewer-{name}.png")
            finally:
                context.close()
            assert errors == []

        # A long game's map: the walkthrough's 100-odd rooms, panned and zoomed, the current room kept in view.
        walkthrough_graph(game_file).save(learnt / "map_state.json")
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        page = context.new_page()
        try:
            page.goto(f"{running.url}#{episode.name}")
            expect(page.locator("#map g.room")).to_have_count(len(walkthrough_graph(game_file).rooms))
            expect(page.locator('#map g.room.current[data-room-id="203"]')).to_have_count(1)
            assert in_view(page, "#map g.room.current", "#map")
            screenshot(page, tmp_path, "viewer-long-map.png")
            page.click("#map-whole")
            page.click("#map-zoom-in")
            page.mouse.move(700, 500)
            map_box = page.locator("#map").bounding_box()
            assert map_box is not None
            page.mouse.move(map_box["x"] + 20, map_box["y"] + 20)
            page.mouse.down()
            page.mouse.move(map_box["x"] + map_box["width"] - 20, map_box["y"] + map_box["height"] - 20, steps=5)
            page.mouse.up()
            page.click("#map-current")
            assert in_view(page, "#map g.room.current", "#map")
        finally:
            context.close()
    finally:
        running.close()
