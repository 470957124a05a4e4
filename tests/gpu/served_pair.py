"""What the GPU tests that serve the GPU pair through ``launch_server`` share: the requests, the
servers' common arguments, and ``probe --backend engine`` on the same prompts."""

import json
import sys

from sglang_eagle3_embed.core.draft_config import resolve_capture_plan
from sglang_eagle3_embed.doctor.pair import GPU_PAIR
from sglang_eagle3_embed.testing.engine_run import BUNDLE

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
