"""tools/gpu_follow.sh: a job started by one call outlives it, as the GPU machine's calls need (what a
call leaves running is killed unless it started its own session); later calls follow it, report
its exit code once it has ended, and never start it twice."""

import os
import signal
import subprocess
import time

from tests.support import ROOT

SCRIPT = ROOT / "tools" / "gpu_follow.sh"


def follow(tmp_path, *args, limit: int = 0) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "FOLLOW_DIR": str(tmp_path / "follow"), "T": str(limit)}
    return subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip


def wait_for(path, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(0.1)


def test_a_job_spans_calls_reports_its_exit_code_and_runs_once(tmp_path):
    runs, gate = tmp_path / "runs", tmp_path / "gate"
    job = (
        "bash",
        "-c",
        f"echo run >> {runs}; while [ ! -f {gate} ]; do sleep 0.1; done; echo finished; exit 3",
    )
    first = follow(tmp_path, "job", *job)
    assert first.returncode == 0 and "job: started" in first.stdout
    assert "still running; call again" in first.stdout
    second = follow(tmp_path, "job", *job)  # the job is running: followed, not started again
    assert second.returncode == 0 and "job: running since" in second.stdout
    gate.touch()
    third = follow(tmp_path, "job", limit=20)  # no command needed to follow it
    assert third.returncode == 3 and "finished" in third.stdout and "job: ended, exit 3" in third.stdout
    again = follow(tmp_path, "job", *job)  # ended: reported, never started twice
    assert again.returncode == 3 and "job: ended, exit 3" in again.stdout
    assert runs.read_text() == "run\n"


def test_the_job_outlives_the_call_that_started_it(tmp_path):
    """The device kills a call's process group when the call returns: the job is in its own."""
    done, gate = tmp_path / "done", tmp_path / "gate"
    job = ("bash", "-c", f"while [ ! -f {gate} ]; do sleep 0.1; done; touch {done}")
    caller = subprocess.Popen(
        ["bash", str(SCRIPT), "job", *job],
        env={"PATH": "/usr/bin:/bin", "FOLLOW_DIR": str(tmp_path / "follow"), "T": "30"},
        stdout=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    wait_for(tmp_path / "follow" / "job.pid")
    time.sleep(0.5)
    os.killpg(caller.pid, signal.SIGKILL)  # the call and everything in its group
    caller.wait()
    gate.touch()
    wait_for(done)
    assert done.exists()
    assert follow(tmp_path, "job", limit=20).returncode == 0


def test_bad_invocations_exit_2(tmp_path):
    usage = follow(tmp_path)
    assert usage.returncode == 2 and "T=SECONDS bash tools/gpu_follow.sh NAME" in usage.stdout
    assert follow(tmp_path, "a/b", "true").returncode == 2  # a name that is not a file name
    nothing = follow(tmp_path, "never-started")
    assert nothing.returncode == 2 and "no COMMAND to start it" in nothing.stderr
