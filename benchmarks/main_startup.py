"""From start to the first model request: a fresh ``main.py`` and an episode forked by ``--parallel``.

Each run plays one turn of Zork I against the test suite's scripted OpenAI-compatible server,
which answers at once; the figure is the time from the start until the server receives the
run's first request, and the CPU the playing process had used by then (``/proc``). Side by side:

* fresh: ``python main.py --episodes 1 --max-turns 1``, as a user starts a run (and as each
  ``--parallel`` episode started before), importing the whole product first;
* forked: the same episode forked from the warm parent ``--parallel`` starts once per run
  (``orchestration.parallel.ForkServer``), from the request to fork until the first model request;
* forked, not frozen: the same, from a warm parent as it was before it froze its imported
  objects (``gc.freeze``) before forking: each child's garbage collector then walks them all.

Last, the CPU of the whole episode (``--turns``, default 20; the kernel's account of the reaped
process). The warm parents' own start (their imports, once per run) is printed apart. The
machine's load average is printed first: on a loaded machine every figure grows.

    uv run python benchmarks/main_startup.py [--game-file PATH] [--runs 5] [--turns 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from game_interface import resolve_story_file
from harness.cpu import children_cpu, process_cpu, reaped_cpu
from harness.scripted_llm import Reply, ScriptedLLMServer
from harness.walkthroughs import AGENT_MODEL, TurnKeyedWalkthroughModel, walkthrough
from orchestration import parallel
from orchestration.parallel import ForkServer, child_argv

REPO = Path(__file__).resolve().parent.parent
# main.py with gc.freeze undone: the warm parent before it froze its objects.
NOT_FROZEN = """
import gc, runpy, sys
sys.path.insert(0, {repo!r})
gc.freeze = lambda: None
sys.argv[0] = {main!r}
runpy.run_path({main!r}, run_name="__main__")
"""


class FirstRequest:
    """The walkthrough model, noting when the first request of the run being timed arrives and
    the CPU its process had used by then."""

    def __init__(self, model: TurnKeyedWalkthroughModel) -> None:
        self.model = model
        self.pid = 0
        self.at = 0.0
        self.cpu_ms = 0.0
        self.seen = threading.Event()

    def expect(self, pid: int) -> None:
        self.pid, self.at, self.cpu_ms = pid, 0.0, 0.0
        self.seen.clear()

    def __call__(self, body: dict[str, Any], index: int) -> Reply:
        if not self.seen.is_set() and self.pid:
            self.at = time.perf_counter()
            self.cpu_ms = process_cpu(self.pid) * 1000
            self.seen.set()
        return self.model(body, index)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--game-file", default=None)
    parser.add_argument("--runs", type=int, default=5, help="runs of each way (default 5)")
    parser.add_argument("--turns", type=int, default=20, help="turns per episode (default 20)")
    args = parser.parse_args()
    game_file = resolve_story_file(args.game_file)
    first = FirstRequest(TurnKeyedWalkthroughModel(walkthrough(game_file), delay=0))
    server = ScriptedLLMServer().start()
    server.respond_with(first)
    ways = ("fresh", "forked", "forked, not frozen")
    times: dict[str, list[tuple[float, float, float]]] = {way: [] for way in ways}
    with tempfile.TemporaryDirectory(prefix="zorkgpt-main-startup-") as tmp:
        for key in [key for key in os.environ if key.startswith("ZORKGPT_")]:
            del os.environ[key]
        os.environ.update(
            {
                "OPENROUTER_API_KEY": "benchmark-key-123456",
                "ZORKGPT_LLM_BASE_URL": server.base_url,
                "ZORKGPT_LLM_AGENT_MODEL": AGENT_MODEL,
                "ZORKGPT_GAME_FILE": str(game_file),
                "ZORKGPT_FILES_GAME_WORKDIR": str(Path(tmp) / "game_files"),
            }
        )
        argv = child_argv(str(REPO / "pyproject.toml"), args.turns, str(game_file), ["--quiet"])
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPU(s); {args.runs} runs each")
        wrapper = Path(tmp) / "main_not_frozen.py"
        wrapper.write_text(NOT_FROZEN.format(repo=str(REPO), main=str(REPO / "main.py")), encoding="utf-8")
        started = time.perf_counter()
        servers = {"forked": ForkServer()}
        parallel.MAIN_PY, shipped = wrapper, parallel.MAIN_PY
        try:
            servers["forked, not frozen"] = ForkServer()
        finally:
            parallel.MAIN_PY = shipped
        try:
            for run in range(args.runs + 1):  # the first forked runs also wait for the warm parents' imports
                for way in ways:
                    began = time.perf_counter()
                    if way == "fresh":
                        cpu_before = children_cpu() * 1000
                        process = subprocess.Popen(
                            [sys.executable, str(REPO / "main.py"), *argv], cwd=tmp, stderr=subprocess.PIPE, text=True
                        )
                        first.expect(process.pid)
                        _, stderr = process.communicate()
                        code = process.returncode
                        episode_cpu = children_cpu() * 1000 - cpu_before
                    else:
                        fork_server = servers[way]
                        cpu_before = reaped_cpu(fork_server.process.pid) * 1000
                        episode = fork_server.launch(argv, figures=False)
                        first.expect(episode.pid)
                        if run == 0:  # the launch waited for the warm parent to be ready
                            ready = time.perf_counter() - started
                            print(f"warm parent ({way}): ready {ready:.2f} s after its start (once per run)")
                        assert episode.stderr is not None
                        stderr = episode.stderr.read()
                        episode.stderr.close()
                        code = episode.wait()
                        episode_cpu = reaped_cpu(fork_server.process.pid) * 1000 - cpu_before
                    if code != 0 or not first.seen.is_set():
                        sys.stderr.write(stderr[-3000:])
                        print(f"{way}: exit code {code}, first request seen: {first.seen.is_set()}", file=sys.stderr)
                        return 1
                    if run > 0:
                        times[way].append(((first.at - began) * 1000, first.cpu_ms, episode_cpu))
        finally:
            for fork_server in servers.values():
                fork_server.close()
            server.stop()
    print(f"{'way':<20} {'to first request: wall ms':>26} {'CPU ms':>8} {f'episode of {args.turns} turns: CPU ms':>30}")
    for way, figures in times.items():
        wall, cpu, whole = (statistics.median(figure[i] for figure in figures) for i in range(3))
        print(f"{way:<20} {wall:>26.0f} {cpu:>8.0f} {whole:>30.0f}")
    print("(forked: the episode's own CPU since the fork; it shares the warm parent's imported pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
