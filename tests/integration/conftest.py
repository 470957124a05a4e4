"""Fixtures of the integration tier: the installed plugin, loaded by SGLang's own ``load_plugins()``
in a fresh process (plugins load once per process), one report per mode of
``tests/support/plugin_probe.py``."""

import functools
import json
import os
import subprocess
import sys

import pytest

from tests.support import ROOT


@functools.cache
def plugin_report(mode: str) -> dict:
    """The probe's report for ``mode``, run once per test process."""
    env = {**os.environ, "TORCHDYNAMO_DISABLE": "1"}
    run = subprocess.run(
        [sys.executable, "-m", "tests.support.plugin_probe", mode],
        capture_output=True, text=True, env=env, timeout=300, check=False, cwd=ROOT,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert "crash" not in report, report.get("crash")
    return report


@pytest.fixture
def healthy_plugin():
    """The report of a process where the plugin registered and activated."""
    return plugin_report("healthy")
