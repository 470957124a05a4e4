"""The installed plugin, loaded by SGLang's own load_plugins() in a fresh process.

Each case runs tests/unit/plugin_probe.py in a subprocess (plugins load once per process)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PROBE = Path(__file__).with_name("plugin_probe.py")
OURS = "sglang_eagle3_embed"
FAMILY = [
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "KimiK25ForConditionalGeneration",
]


def probe(mode: str) -> dict:
    env = {**os.environ, "TORCHDYNAMO_DISABLE": "1"}
    run = subprocess.run(
        [sys.executable, str(PROBE), mode], capture_output=True, text=True, env=env, timeout=300, check=False
    )
    assert run.returncode == 0, run.stderr[-3000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    assert "crash" not in report, report.get("crash")
    return report


@pytest.fixture(scope="module")
def healthy():
    return probe("healthy")


def test_entry_point_is_discovered_and_run_by_load_plugins(healthy):
    assert healthy["entry_points"]["eagle3_embed"] == "sglang_eagle3_embed.plugin:register"
    assert healthy["active"] is True
    assert healthy["arch_hook_applied"] is True
    assert healthy["module_level_name_rebound"] is True  # `from ... import get_model_architecture` sites


def test_model_impl_selects_plugin_classes_only_for_targets(healthy):
    resolve = healthy["resolve"]
    for arch in FAMILY:
        assert resolve[f"{OURS}/{arch}"]["ok"] == f"sglang_eagle3_embed.models.{arch}"
        for impl in ("sglang", "auto", "transformers_typo"):
            assert resolve[f"{impl}/{arch}"]["ok"].startswith("sglang.srt.models."), (impl, arch)
    assert (
        resolve["draft/DeepseekV3ForCausalLM"]["ok"] == "sglang.srt.models.deepseek_v2.DeepseekV3ForCausalLM"
    )
    assert resolve[f"{OURS}/LlamaForCausalLM"]["error"] == "UnsupportedModeError"


def test_healthy_plugin_lets_every_launch_resolve(healthy):
    assert all("ok" in v for v in healthy["launch"].values()), healthy["launch"]


@pytest.mark.parametrize(
    ("mode", "fragment"),
    [
        ("old-sglang", "supports sglang==0.5.23 only, but sglang 0.5.22 is installed"),
        ("arch-hook-not-applied", "SGLang did not apply the plugin's hook"),
    ],
)
def test_broken_plugin_stops_only_launches_that_ask_for_it(mode, fragment):
    report = probe(mode)
    launch = report["launch"]
    assert launch[OURS]["error"] == "PluginInactiveError"
    assert fragment in launch[OURS]["message"]
    assert "ok" in launch["sglang"] and "ok" in launch["auto"]


def test_without_the_guard_the_model_load_still_fails_closed():
    report = probe("guard-not-registered")
    assert report["active"] is False
    failure = report["resolve"][f"{OURS}/DeepseekV3ForCausalLM"]
    assert failure["error"] == "PluginInactiveError" and "no_such_step" in failure["message"]
    assert report["resolve"]["sglang/DeepseekV3ForCausalLM"]["ok"].startswith("sglang.srt.models.")


def test_launch_with_the_seed_flags_is_refused_before_any_gpu_work(healthy):
    """The validator wraps SGLang's handle_speculative_decoding step in the launcher process."""
    refused = healthy["seed_launch"]["sglang_eagle3_embed"]
    assert refused["error"] == "ValidationError"
    assert "[draft-tokens-rewritten]" in refused["message"]
    assert "--speculative-num-steps 15" in refused["message"]
    assert "--speculative-num-draft-tokens 2" in refused["message"]
    assert healthy["seed_launch"]["null"]["ok"] == "resolved"  # other launches: SGLang as before


def test_warnings_are_logged_and_the_launch_goes_on(healthy):
    assert healthy["warned_launch"]["ok"] == "resolved"
    logged = [w for w in healthy["warnings"] if "[draft-ids-undeclared]" in w]
    assert len(logged) == 1, healthy["warnings"]
