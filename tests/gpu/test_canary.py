"""The canary against real servers: ``python -m sglang.launch_server`` over HTTP, and the startup
self-check inside it.

The GPU pair (16-layer DeepSeek-V3 target, draft trained on ``[-1, 4, 10]``) is served from three
draft folders of the same weights, with expectations recorded by ``probe --backend engine`` (3
steps, the servers' prompts), as a user records them:

- **nested** ``[-1, 4, 10]``, with the plugin: ``canary`` exits 0 and reports the trained wiring as
  the match; the startup self-check (``--warmups eagle3_embed_canary``) passes it, and adds under
  :data:`SELF_CHECK_S` seconds to the time the server takes from its CUDA graphs to ready, against
  the same server without the check started beside it (the check's own time includes the first
  speculative request's kernel compilation, which SGLang's own warm-up request pays otherwise);
- **top-level** ``[-1, 4, 10]``, stock SGLang, with the expectations recorded for that folder: it
  serves its default layers, and ``canary`` exits 1 naming SGLang's defaults;
- **off by one**: the nested config, its convention declared ``layer_output``, with the ``-1``
  "fixed" to ``0`` after the expectations were recorded (``[0, 4, 10]``), with the plugin, which
  then feeds the draft layer 0's output where it was trained on the embedding output (capture
  indices ``[1, 5, 11]``). The probe cannot record expectations for this folder itself: the draft's
  trained wiring ties with its neighbouring layers, so it names none, and the config's reading is
  not among the best. Judged by the nested folder's recording (the same weights), ``canary``
  exits 1 naming that wiring; the self-check in ``log`` mode serves and logs the error, in ``raise``
  mode stops the server before it listens.

Expectations recorded for 2 steps against the 3-step plugin server: exit 2, nothing compared.
"""

import json

import pytest

from harness import engine_run
from harness.server_run import run_servers
from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.canary.expectations import (
    ENV_FILE,
    ENV_MODE,
    WARMUP,
    Expectations,
    Served,
    judge,
)
from sglang_eagle3_embed.core.capture.ids import CONVENTION_FIELD
from sglang_eagle3_embed.doctor.pair import write_config_variant
from tests.gpu.served_pair import NUM_PROMPTS, PROMPT_LEN, SERVED, TRAINED, canary, record_expectations

pytestmark = pytest.mark.gpu

OFF_BY_ONE_IDS = [0, 4, 10]
OFF_BY_ONE = (1, 5, 11)
"""What the plugin captures for ``[0, 4, 10]``: layer 0's output in the embedding's place."""
SELF_CHECK_S = 5.0
"""What the startup self-check adds to a correct server's time to ready, at most (seconds)."""
GRAPHS_DONE, READY = "Engine startup timings (s):", "The server is fired up and ready to roll!"
"""Log lines of SGLang 0.5.23: its schedulers and CUDA graphs are up; it answers requests."""
RECORDINGS = {"nested": 3, "top-level": 3, "nested-2-steps": 2}
"""Expectations recorded per draft folder, and the number of steps each is recorded for (a name
ending in ``-N-steps`` is the folder of the name before it)."""


def jobs_for(target, drafts, recordings) -> dict[str, dict]:
    def job(draft: str, expect: str, *, plugin: bool, self_check: str | None = None, extra=()):
        server = {
            "model_path": str(target), "speculative_draft_model_path": str(drafts[draft]),
            **SERVED, **engine_run.spec(3), **({"model_impl": MODEL_IMPL} if plugin else {}),
        }  # fmt: skip
        env = {}
        if self_check:
            server["warmups"] = WARMUP
            env = {ENV_FILE: str(recordings[expect]["expect"]), ENV_MODE: self_check}

        def after(srv):
            return {name: canary(srv.url, recordings[name]["expect"]) for name in (expect, *extra)}

        return {"server": server, "env": env, "prompts": [], "modes": [], "warmup": False, "after": after}

    return {
        "plugin": job("nested", "nested", plugin=True, self_check="log", extra=("nested-2-steps",)),
        "plugin-unchecked": job("nested", "nested", plugin=True),
        "stock-top-level": job("top-level", "top-level", plugin=False),
        "off-by-one-log": job("off-by-one", "nested", plugin=True, self_check="log"),
        "off-by-one-raise": job("off-by-one", "nested", plugin=True, self_check="raise"),
    }


def off_by_one(draft, out):
    """The draft's folder with its ``-1`` "fixed" to ``0`` under a declared ``layer_output``
    convention (the weights linked)."""
    folder = write_config_variant(draft, out, placement="nested", ids=OFF_BY_ONE_IDS)
    config = json.loads((folder / "config.json").read_text())
    config["eagle_config"][CONVENTION_FIELD] = "layer_output"
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    return folder


def record(gpu_pair, folder, logs) -> tuple[dict, dict]:
    """The draft folders the servers load, and :data:`RECORDINGS` recorded for them into ``logs``
    (kept there for a later command: ``python -m tests.gpu.test_canary LOGS`` records them alone,
    the PD test's among them, while a bare machine builds its kernels)."""
    drafts = {
        "nested": gpu_pair.draft,
        "top-level": write_config_variant(gpu_pair.draft, folder / "top", placement="top-level"),
        "off-by-one": off_by_one(gpu_pair.draft, folder / "off"),
    }
    prompts = engine_run.language_prompts(gpu_pair, NUM_PROMPTS, PROMPT_LEN)
    prompts_file = folder / "prompts.jsonl"
    prompts_file.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    return drafts, record_expectations(RECORDINGS, drafts, gpu_pair.target, prompts_file, logs)


@pytest.fixture(scope="module")
def runs(gpu_pair, gpu_logs, tmp_path_factory):
    drafts, recordings = record(gpu_pair, tmp_path_factory.mktemp("canary"), gpu_logs)
    assert all(r["expect"] for r in recordings.values()), f"a recording failed: {recordings}"
    results = run_servers(jobs_for(gpu_pair.target, drafts, recordings), gpu_logs, timeout=420)
    for name, result in results.items():
        verdicts = {k: (v["rc"], v["out"].get("matched")) for k, v in (result.get("after") or {}).items()}
        print(
            f"{name}: {engine_run.outcome(result)}, ready in {result.get('startup_s')} s, canary {verdicts}"
        )
    (gpu_logs / "canary-verdicts.json").write_text(
        json.dumps({n: r.get("after") for n, r in results.items()}, indent=2, default=str)
    )
    return results, {name: Expectations.read(r["expect"]) for name, r in recordings.items()}


def wiring_of(expectations: Expectations, name: str):
    return next(w for w in expectations.wirings if w.name == name)


def verdict(runs, server: str, recording: str) -> dict:
    results, _ = runs
    (result,) = engine_run.finished(results, server)
    return result["after"][recording]


def test_the_recording_separates_the_off_by_one_wiring(runs):
    _, expectations = runs
    off = expectations["nested"]
    assert off.trained.capture_indices == TRAINED
    served_wrong = next(w for w in off.wirings if w.capture_indices == OFF_BY_ONE)
    gap = off.trained.accept_length - served_wrong.accept_length
    print(
        f"trained {off.trained.accept_length:.3f}, off by one {served_wrong.accept_length:.3f} (gap {gap:.3f})"
    )
    # told apart by the canary's own rule: a server at the off-by-one's prediction, with its noise,
    # fails naming that wiring, and the two predictions are not "alike"
    verdict = judge(off, Served(served_wrong.accept_length, served_wrong.se, NUM_PROMPTS, 0))
    assert not verdict.ok and served_wrong in verdict.fits and served_wrong not in verdict.alike, verdict


def test_the_plugin_server_passes_as_the_trained_wiring(runs):
    _, expectations = runs
    got = verdict(runs, "plugin", "nested")
    assert got["rc"] == 0, got
    assert got["out"]["matched"] == expectations["nested"].trained.name
    assert got["out"]["trained_ids"] == [-1, 4, 10]


def test_stock_sglang_with_top_level_ids_is_named_as_its_defaults(runs):
    _, expectations = runs
    got = verdict(runs, "stock-top-level", "top-level")
    assert got["rc"] == 1, got
    matched = wiring_of(expectations["top-level"], got["out"]["matched"])
    assert "defaults" in matched.kinds, matched
    assert "not running the plugin" in got["out"]["verdict"][0]


def test_an_off_by_one_server_is_named(runs):
    _, expectations = runs
    got = verdict(runs, "off-by-one-log", "nested")
    assert got["rc"] == 1, got
    matched = wiring_of(expectations["nested"], got["out"]["matched"])
    assert matched.capture_indices == OFF_BY_ONE, matched


def test_other_settings_are_not_compared(runs):
    got = verdict(runs, "plugin", "nested-2-steps")
    assert got["rc"] == 2, got
    assert "--speculative-num-steps is 3 on the server, 2 in the expectations" in got["out"]["refused"]


def self_check_line(log: str) -> str:
    lines = [line for line in log.splitlines() if "sglang_eagle3_embed startup canary" in line]
    assert lines, "no startup canary line in the log"
    return lines[-1]


def seconds_to_ready(log: str) -> float:
    """From SGLang's line that its CUDA graphs are captured to its line that it serves (the time
    the warm-ups take, custom ones included), from the log's timestamps."""
    from datetime import datetime

    def stamp(marker: str) -> datetime:
        line = next(line for line in log.splitlines() if marker in line)
        return datetime.strptime(line[1:20], "%Y-%m-%d %H:%M:%S")

    return (stamp(READY) - stamp(GRAPHS_DONE)).total_seconds()


def test_the_self_check_passes_a_correct_server_quickly(runs):
    results, _ = runs
    plugin, unchecked = engine_run.finished(results, "plugin", "plugin-unchecked")
    line = self_check_line(plugin["log"])
    assert "as the trained wiring [-1, 4, 10]" in line, line
    own = float(line.rsplit("(", 1)[1].split(" s)")[0])
    checked, plain = seconds_to_ready(plugin["log"]), seconds_to_ready(unchecked["log"])
    print(f"startup self-check: {own} s itself; CUDA graphs to ready {checked} s, without it {plain} s")
    assert checked - plain < SELF_CHECK_S


def test_the_self_check_in_log_mode_serves_and_logs_the_error(runs):
    results, _ = runs
    (logged,) = engine_run.finished(results, "off-by-one-log")
    line = self_check_line(logged["log"])
    assert "the draft was trained on [-1, 4, 10]" in line and "as the trained wiring" not in line, line
    assert "its weights are the recorded draft's" in line, line


def test_the_self_check_in_raise_mode_stops_the_server_before_it_listens(runs):
    results, _ = runs
    stopped = results["off-by-one-raise"]
    assert not stopped["ok"] and "startup_s" not in stopped, engine_run.outcome(stopped)
    assert "stopping the server (SGLANG_EAGLE3_EMBED_CANARY_MODE=raise)" in stopped["log"]


if __name__ == "__main__":
    import sys
    import tempfile
    from pathlib import Path

    from sglang_eagle3_embed.doctor.pair import GPU_PAIR, build_pair

    with tempfile.TemporaryDirectory() as scratch:
        _, recorded = record(build_pair(GPU_PAIR, device="cuda"), Path(scratch), Path(sys.argv[1]))
    sys.exit(0 if all(r["expect"] for r in recorded.values()) else 1)
