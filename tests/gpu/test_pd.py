"""A PD (prefill/decode) pair of the GPU pair on one GPU, behind SGLang's router, with the canary.

A prefill server and two decode servers, each ``python -m sglang.launch_server`` on the same GPU,
KV transferred by Mooncake over TCP (``--disaggregation-transfer-backend mooncake_tcp``: no
InfiniBand), the draft's ids at the top level (``[-1, 4, 10]``, speculators style: the case where a
side without the plugin serves silently). Two routers (``python -m sglang_router.launch_router
--pd-disaggregation --mini-lb``, as SGLang's own PD tests start it) put the prefill before each
decode server:

- prefill and decode with the plugin: ``canary --url ROUTER`` passes as the trained wiring;
- the same prefill before a decode server without the plugin: ``check PREFILL --pd-peer DECODE``
  names the decode side's ``--model-impl``, and ``canary --url ROUTER`` fails naming SGLang's
  default layers (the decode side's capture feeds the draft for every generated token).

Needs ``mooncake-transfer-engine-cuda13`` and ``sglang-router`` beside the GPU bundle
(CONTRIBUTING.md, GPU suite).
"""

import json
import subprocess
import sys
import time
import urllib.request

import pytest

from harness import engine_run
from harness.server_run import Server, cli_args
from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core import rule_ids
from sglang_eagle3_embed.doctor.pair import write_config_variant
from tests.gpu.served_pair import NUM_PROMPTS, PROMPT_LEN, SERVED, canary, record_expectations
from tests.support import ROOT

pytestmark = pytest.mark.gpu

TRANSFER = "mooncake_tcp"
READY_S = 420


def side_args(target, draft, mode: str, bootstrap_port: int, plugin: bool) -> dict:
    return {
        "model_path": str(target), "speculative_draft_model_path": str(draft), **SERVED,
        **engine_run.spec(3), "disaggregation_mode": mode, "disaggregation_transfer_backend": TRANSFER,
        "disaggregation_bootstrap_port": bootstrap_port, "nccl_port": engine_run.free_port(),
        **({"model_impl": MODEL_IMPL} if plugin else {}),
    }  # fmt: skip


def router(name: str, prefill: Server, bootstrap_port: int, decode: Server, logs):
    port = engine_run.free_port()
    command = [
        sys.executable, "-m", "sglang_router.launch_router", "--pd-disaggregation", "--mini-lb",
        "--prefill", prefill.url, str(bootstrap_port), "--decode", decode.url,
        "--host", "127.0.0.1", "--port", str(port),
    ]  # fmt: skip
    log = open(logs / f"{name}.log", "w")  # noqa: SIM115 (the process outlives this call)
    proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(url + "/health", timeout=5):
                return proc, url
        except OSError:
            time.sleep(1)
    raise RuntimeError(
        f"{name}: the router did not answer /health ({(logs / f'{name}.log').read_text()[-1500:]})"
    )


@pytest.fixture(scope="module")
def pd(gpu_pair, gpu_logs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pd")
    draft = write_config_variant(gpu_pair.draft, folder / "top", placement="top-level")
    prompts = engine_run.language_prompts(gpu_pair, NUM_PROMPTS, PROMPT_LEN)
    prompts_file = folder / "prompts.jsonl"
    prompts_file.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    (recording,) = record_expectations(
        {"top-level": 3}, {"top-level": draft}, gpu_pair.target, prompts_file, gpu_logs
    ).values()
    assert recording["expect"], recording
    bootstrap = engine_run.free_port()
    env = {"MC_TCP_ENABLE_CONNECTION_POOL": "true"}
    servers = {
        "pd-prefill": Server(
            "pd-prefill", side_args(gpu_pair.target, draft, "prefill", bootstrap, True), gpu_logs, env
        ),
        "pd-decode-plugin": Server(
            "pd-decode-plugin", side_args(gpu_pair.target, draft, "decode", bootstrap, True), gpu_logs, env
        ),
        "pd-decode-stock": Server(
            "pd-decode-stock", side_args(gpu_pair.target, draft, "decode", bootstrap, False), gpu_logs, env
        ),
    }
    routers, out = [], {"expect": recording["expect"], "servers": servers}
    try:
        for name, server in servers.items():  # one after another: SGLang's memory check races
            server.start()
            out[f"{name}-ready_s"] = server.wait_ready(READY_S)
        for decode in ("plugin", "stock"):
            proc, url = router(f"pd-router-{decode}", servers["pd-prefill"], bootstrap,
                               servers[f"pd-decode-{decode}"], gpu_logs)  # fmt: skip
            routers.append(proc)
            out[decode] = canary(url, recording["expect"])
            print(f"PD, decode {decode}: canary {out[decode]['rc']}, {out[decode]['out'].get('verdict')}")
        (gpu_logs / "pd-verdicts.json").write_text(
            json.dumps({k: out[k] for k in ("plugin", "stock")}, indent=2)
        )
        yield out
    finally:
        for proc in routers:
            proc.kill()
        for server in servers.values():
            server.stop()


def test_the_pd_pair_with_the_plugin_passes_through_the_router(pd):
    got = pd["plugin"]
    assert got["rc"] == 0, got
    assert got["out"]["trained_ids"] == [-1, 4, 10] and got["out"]["ok"] is True


def test_a_decode_side_without_the_plugin_fails_the_canary(pd):
    got = pd["stock"]
    assert got["rc"] == 1, got
    # the prefill's capture is right, so the served value sits a little above stock's defaults,
    # among wirings the noise cannot separate: each is named with its fix
    assert any("SGLang's default layers" in name for name in got["out"]["fits"]), got["out"]
    assert "not running the plugin" in got["out"]["verdict"][0], got["out"]["verdict"]


def test_check_names_the_decode_side_without_the_plugin(pd):
    prefill, decode = pd["servers"]["pd-prefill"], pd["servers"]["pd-decode-stock"]
    command = [sys.executable, "-m", "sglang_eagle3_embed.cli", "check", "--json"]
    done = subprocess.run(
        [*command, *cli_args(prefill.kwargs), "--pd-peer", *cli_args(decode.kwargs)],
        capture_output=True, text=True, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-2000:]
    found = {f["rule"]: f for f in json.loads(done.stdout)["pair"]["findings"]}
    plugin = found[rule_ids.PD_PAIR_PLUGIN]["message"]
    assert plugin.startswith("--model-impl: ") and "on the decode side too" in plugin
