"""The benchmarks' one CPU reader (``harness/cpu.py``): ``/proc/<pid>/stat`` and ``getrusage`` agree,
a child's time reaches its parent once reaped, and no benchmark reads either on its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness.cpu import children_cpu, cpu_while_alive, family_cpu, process_cpu, reaped_cpu, self_cpu, usage_cpu

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(not Path("/proc/self/stat").is_file(), reason="no /proc on this system")


def _busy(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_proc_stat_and_getrusage_count_this_process_alike() -> None:
    _busy(0.3)
    read, used = process_cpu(os.getpid()), self_cpu()
    assert read >= 0.3
    assert abs(read - used) < 0.05  # the clock ticks /proc counts in against getrusage's microseconds


def test_a_reaped_child_counts_for_its_parent() -> None:
    before_children, before_family = children_cpu(), family_cpu(os.getpid())
    busy = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", busy], check=True)
    assert children_cpu() - before_children >= 0.3
    assert reaped_cpu(os.getpid()) >= children_cpu() - 0.05
    # /proc counts in clock ticks, each of utime, stime, cutime and cstime rounded on its own (and the
    # sum of those hundredths is a float): a 0.3 s child can read a tick or two short of getrusage's figure.
    assert family_cpu(os.getpid()) - before_family >= 0.3 - 0.05


def test_a_process_gone_reads_none_and_a_wait4_answer_reads_its_cpu() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    _, _, usage = os.wait4(child.pid, 0)
    assert cpu_while_alive(child.pid) is None and cpu_while_alive(child.pid, with_reaped=True) is None
    assert usage_cpu(usage) > 0
    assert cpu_while_alive(os.getpid()) == pytest.approx(process_cpu(os.getpid()), abs=0.05)


def test_no_benchmark_reads_cpu_on_its_own() -> None:
    """Every benchmark counts CPU through ``harness/cpu.py``, so all of them count it the same way."""
    own = {
        path.name: sorted(set(re.findall(r"/proc/\{[^}]+\}/stat\b|getrusage|SC_CLK_TCK|ru_[us]time", text)))
        for path in sorted((REPO / "benchmarks").glob("*.py"))
        if (text := path.read_text(encoding="utf-8"))
    }
    assert {name: found for name, found in own.items() if found} == {}
