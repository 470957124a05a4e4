"""tools/gpu_streams.sh: commands side by side, each pinned to its GPUs, stopped at the time limit;
what the streams started is stopped, nothing else."""

import subprocess
import time
from pathlib import Path

from tests.support import ROOT

SCRIPT = ROOT / "tools" / "gpu_streams.sh"


def test_streams_run_pinned_with_their_own_logs_and_stop_at_the_limit(tmp_path):
    run = subprocess.run(
        ["bash", str(SCRIPT), "3", '0|echo "gpus $CUDA_VISIBLE_DEVICES logs $EAGLE3_EMBED_GPU_LOGS"; echo "1 passed"',
         "1,2|sleep 30"],
        capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "STREAM_LOGS": str(tmp_path)}, timeout=60,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "stream 0 [GPUs 0] exit 0" in run.stdout
    assert "stream 1 [GPUs 1,2] exit 124" in run.stdout  # stopped by the limit
    assert (tmp_path / "s0" / "out.txt").read_text().startswith(f"gpus 0 logs {tmp_path}/s0\n")
    assert "1 passed" in run.stdout  # the summary lines of each stream


def test_without_streams_it_prints_its_usage():
    run = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True)
    assert run.returncode == 2 and "LIMIT_S" in run.stdout


FAKE_ENGINE = """
import subprocess, sys, time
worker = subprocess.Popen(["bash", "-c", "exec -a sglang::detokenizer sleep 300"])
open(sys.argv[1], "w").write(str(worker.pid))
time.sleep(300)
"""


def running(pid: int) -> bool:
    """Alive and not a zombie (a killed child stays one until its parent, killed too, is gone)."""
    try:
        return "Z" not in Path(f"/proc/{pid}/stat").read_text().split()[2]
    except FileNotFoundError:
        return False


def gone(pid: int) -> bool:
    for _ in range(50):
        if not running(pid):
            return True
        time.sleep(0.1)
    return False


def test_a_stopped_stream_leaves_nothing_it_started_and_spares_the_rest(tmp_path):
    """An engine in its own session, with a renamed SGLang worker (one left behind can hold a
    DP-attention port the next engines need), is stopped; a process of someone else is not."""
    engine = tmp_path / "engine.py"
    engine.write_text(FAKE_ENGINE)
    pid_file = tmp_path / "worker.pid"
    bystander = subprocess.Popen(["bash", "-c", "exec -a sglang::scheduler sleep 300"])
    try:
        run = subprocess.run(
            ["bash", str(SCRIPT), "3", f"0|setsid python3 {engine} {pid_file} & sleep 30"],
            capture_output=True, text=True, env={"PATH": "/usr/bin:/bin", "STREAM_LOGS": str(tmp_path)},
            timeout=60,
        )  # fmt: skip
        assert "stream 0 [GPUs 0] exit 124" in run.stdout, run.stdout + run.stderr
        assert gone(int(pid_file.read_text())), "the engine's worker still runs"
        assert running(bystander.pid), "a process the script did not start was killed"
    finally:
        bystander.kill()
