"""What the GPU tests that serve the GPU pair through ``launch_server`` share: the requests, the
servers' common arguments, ``probe --backend engine`` on the same prompts, and the canary's
expectations recorded with it and asked of a server."""

import json
import subprocess
import sys
import time
from pathlib import Path

from harness.engine_run import BUNDLE
from sglang_eagle3_embed.core.canary.expectations import Expectations, config_digest
from sglang_eagle3_embed.core.capture.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.errors import InputError
from sglang_eagle3_embed.doctor.pair import GPU_PAIR
from tests.support import ROOT

NUM_PROMPTS, PROMPT_LEN, NEW_TOKENS = 48, 8, 40
TRAINED = resolve_capture_plan(
    {"eagle_config": {"eagle_aux_hidden_state_layer_ids": list(GPU_PAIR.ids)}}, GPU_PAIR.target.num_layers
).indices
"""The capture indices of the GPU pair's ids ``[-1, 4, 10]``: ``(0, 5, 11)``, what stock SGLang is
given by hand to serve the same tensors."""
SERVED = dict(
    skip_tokenizer_init=True, dtype="bfloat16", mem_fraction_static=0.5, max_total_tokens=16384,
    max_running_requests=NUM_PROMPTS, cuda_graph_max_bs_decode=NUM_PROMPTS,
)  # fmt: skip
"""Every server's arguments: token ids in and out, a capped KV pool (servers share the GPU), every
request of a pass inside a decode graph."""


def probe_engine_args(trust_remote_code: bool = False) -> dict:
    """The ``sglang.Engine`` arguments of the probe beside the servers."""
    engine = {**BUNDLE, "dtype": "bfloat16", "mem_fraction_static": 0.5, "max_total_tokens": 16384}
    return {**engine, "trust_remote_code": True} if trust_remote_code else engine


def probe_command(target, draft, prompts_file, report, trust_remote_code: bool = False) -> list[str]:
    """``probe --backend engine`` of ``draft`` on ``target`` over the served prompts, 3 steps."""
    engine = probe_engine_args(trust_remote_code)
    return [
        sys.executable, "-m", "sglang_eagle3_embed.cli", "probe", "--backend", "engine",
        "--target", str(target), "--draft", str(draft), "--prompts", str(prompts_file),
        "--num-prompts", str(NUM_PROMPTS), "--new-tokens", str(NEW_TOKENS), "--num-steps", "3",
        "--json", "--no-progress", "--output", str(report),
        *(f"--engine-arg={k}={json.dumps(v)}" for k, v in engine.items()),
    ]  # fmt: skip


def _recorded(expect: Path, target, draft, prompts_file, steps: int) -> bool:
    """Whether ``expect`` already holds expectations for this target and draft config, these prompts
    and ``steps`` (a recording made by an earlier command on the same machine, kept in the logs)."""
    try:
        read = Expectations.read(expect)
    except InputError:
        return False
    prompts = tuple(tuple(json.loads(line)) for line in Path(prompts_file).read_text().splitlines())
    return (
        read.num_steps == steps and read.prompts == prompts
        and (read.target_config_sha256, read.draft_config_sha256) == (config_digest(target), config_digest(draft))
    )  # fmt: skip


def record_expectations(recordings: dict[str, int], drafts: dict, target, prompts_file, logs: Path) -> dict:
    """``probe --backend engine --expectations`` for each of ``recordings`` (name: steps; the draft
    folder is ``drafts[name]``, a name ending in ``-2-steps`` that of the name before it), side by
    side, staggered (SGLang's memory check races when engines start at once). A file in ``logs``
    recorded for the same folder, prompts and steps is kept. Returns each one's exit code and file."""
    procs = {}
    for name, steps in recordings.items():
        folder = drafts[name.removesuffix(f"-{steps}-steps")]
        expect, report = logs / f"canary-expect-{name}.json", logs / f"canary-probe-{name}.json"
        if _recorded(expect, target, folder, prompts_file, steps):
            procs[name] = (None, None, expect)
            continue
        command = probe_command(target, folder, prompts_file, report)
        command[command.index("--num-steps") + 1] = str(steps)
        log = open(logs / f"canary-probe-{name}.log", "w")  # noqa: SIM115 (closed below)
        procs[name] = (
            subprocess.Popen(
                [*command, "--expectations", str(expect)], stdout=log, stderr=subprocess.STDOUT, cwd=ROOT
            ),
            log,
            expect,
        )
        time.sleep(5)
    out = {}
    for name, (proc, log, expect) in procs.items():
        rc = "kept" if proc is None else proc.wait(timeout=600)
        if log is not None:
            log.close()
        out[name] = {"rc": rc, "expect": expect if expect.exists() else None}
        print(f"probe --expectations on {name}: {rc}, file {'written' if expect.exists() else 'missing'}")
    return out


def canary(url: str, expect, timeout: float = 300) -> dict:
    """``sglang-eagle3-embed canary --url URL --expect FILE --json``, as a user runs it: its exit
    code, its JSON (or the end of what it printed) and the end of its stderr."""
    command = [sys.executable, "-m", "sglang_eagle3_embed.cli", "canary", "--url", url, "--json"]
    done = subprocess.run(
        [*command, "--expect", str(expect)], capture_output=True, text=True, timeout=timeout, cwd=ROOT
    )
    try:
        out = json.loads(done.stdout)
    except json.JSONDecodeError:
        out = {"stdout": done.stdout[-2000:]}
    return {"rc": done.returncode, "out": out, "stderr": done.stderr[-2000:]}
