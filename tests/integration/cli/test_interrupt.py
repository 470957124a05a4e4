"""Ctrl-C on a real command, as a subprocess: SIGINT to ``pair`` while it works ends it with one line
on stderr and exit 130, never a traceback."""

import os
import signal
import subprocess
import sys
import time

from tests.support import ROOT


def _default_sigint():
    """Ctrl-C as a terminal delivers it, however the suite was started: a shell's background job
    (``nohup pytest &``, some CI runners) ignores SIGINT, its children inherit that, and Python then
    installs no KeyboardInterrupt handler, so the command would run on to exit 0."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_sigint_during_pair_exits_130_with_one_line(tmp_path):
    # a size that ships with no pair: the command imports torch and trains until interrupted
    proc = subprocess.Popen(
        [sys.executable, "-m", "sglang_eagle3_embed.cli", "pair", "--layers", "8", "--cache", str(tmp_path)],
        cwd=ROOT, env={**os.environ, "TORCHDYNAMO_DISABLE": "1"}, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=_default_sigint,
    )  # fmt: skip
    try:
        # the event the test needs: the command is at work, its cache folder's lock taken (main()
        # runs, torch imported, the build begun), however slowly a loaded machine gets there
        deadline = time.monotonic() + 300
        while not any(tmp_path.glob("*.lock")) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None and any(tmp_path.glob("*.lock")), proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=300)  # a bound for a stuck process, not a guess of speed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.splitlines()[-1] == "sglang-eagle3-embed: pair: interrupted"
    assert out == ""
