"""From start to the first model request: a fresh ``main.py`` and an episode forked by ``--parallel``.

Each run plays one turn of Zork I against the test suite's scripted OpenAI-compatible server,
which answers at once; the figure is the time from the start until the server receives the
run's first request, and the CPU the playing process had used by then (``/proc``). Side by side:

* fresh: ``python main.py --episodes 1 --max-turns 1``, as a user starts a run (and as each
  ``--parallel`` episode started before), importing the whole product first;
* forked: the same episode forked from the warm parent ``--parallel`` starts once per run
  (``orchestration.parallel.ForkServer``), from the request to fork until the first model request.

The warm parent's own start (its imports, once per run) is printed apart. The machine's load
average is printed first: on a loaded machine every figure grows.

    uv run python benchmarks/main_startup.py [--game-file PATH] [--runs 5]
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
from orchestration.parallel import ForkServer, child_argv
from tests.e2e_support import AGENT_MODEL, TurnKeyedWalkthroughModel, walkthrough
from tests.scripted_llm import Reply, ScriptedLLMServer

REPO = Path(__file__).resolve().parent.parent
TICKS = os.sysconf("SC_CLK_TCK")


def process_cpu_ms(pid: int) -> float:
    """User + system CPU milliseconds the process has used (``/proc/<pid>/stat``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / TICKS


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
            self.cpu_ms = process_cpu_ms(self.pid)
            self.seen.set()
        return self.model(body, index)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--game-file", default=None)
    parser.add_argument("--runs", type=int, default=5, help="runs of each way (default 5)")
    args = parser.parse_args()
    game_file = resolve_story_file(args.game_file)
    first = FirstRequest(TurnKeyedWalkthroughModel(walkthrough(game_file), delay=0))
    server = ScriptedLLMServer().start()
    server.respond_with(first)
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
        argv = child_argv(str(REPO / "pyproject.toml"), 1, str(game_file), ["--quiet"])
        print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPU(s); {args.runs} runs each")
        started = time.perf_counter()
        fork_server = ForkServer()
        times: dict[str, list[tuple[float, float]]] = {"fresh": [], "forked": []}
        try:
            for run in range(args.runs + 1):  # the first forked run also waits for the warm parent's imports
                for way in ("forked", "fresh"):
                    began = time.perf_counter()
                    if way == "fresh":
                        process = subprocess.Popen(
                            [sys.executable, str(REPO / "main.py"), *argv], cwd=tmp, stderr=subprocess.PIPE, text=True
                        )
                        first.expect(process.pid)
                        _, stderr = process.communicate()
                        code = process.returncode
                    else:
                        episode = fork_server.launch(argv, figures=False)
                        first.expect(episode.pid)
                        if run == 0:  # the launch waited for the warm parent to be ready
                            ready = time.perf_counter() - started
                            print(f"warm parent: ready {ready:.2f} s after its start (once per run)")
                        assert episode.stderr is not None
                        stderr = episode.stderr.read()
                        episode.stderr.close()
                        code = episode.wait()
                    if code != 0 or not first.seen.is_set():
                        sys.stderr.write(stderr[-3000:])
                        print(f"{way}: exit code {code}, first request seen: {first.seen.is_set()}", file=sys.stderr)
                        return 1
                    if run > 0:
                        times[way].append(((first.at - began) * 1000, first.cpu_ms))
        finally:
            fork_server.close()
            server.stop()
    print(f"{'way':<8} {'to first request: wall ms':>26} {'CPU ms':>8}")
    for way, figures in times.items():
        wall = statistics.median(w for w, _ in figures)
        cpu = statistics.median(c for _, c in figures)
        print(f"{way:<8} {wall:>26.0f} {cpu:>8.0f}")
    print("(forked: the episode's own CPU since the fork; it shares the warm parent's imported pages)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
