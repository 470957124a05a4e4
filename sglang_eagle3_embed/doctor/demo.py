"""``sglang-eagle3-embed demo``: the failure and the fix on a tiny model pair, on CPU, in plain words.

Everything shown comes from running code: the pair ships with the package (else it is trained
into the cache), stock SGLang 0.5.23's own DeepSeek-V3 model captures what stock SGLang would
capture (and fails where it fails), the plugin's model captures what the draft was trained on, and
the draft runs a greedy speculation chain on both to predict the accept length a server would
measure. It ends with :func:`closing_lines`: how to serve with the plugin from here.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import torch

from sglang_eagle3_embed import MODEL_IMPL
from sglang_eagle3_embed.core.capture.draft_config import resolve_capture_plan
from sglang_eagle3_embed.core.capture.ids import IDS_FIELD, describe_capture_indices
from sglang_eagle3_embed.core.capture.stock_sglang import stock_reading
from sglang_eagle3_embed.doctor.chain import score, simulate

__all__ = ["SERVE", "closing_lines", "run_demo"]

PROMPTS, PROMPT_LEN, NEW_TOKENS, STEPS = 64, 8, 40, 7

SERVE = (
    "python -m sglang.launch_server --model-path TARGET --speculative-algorithm EAGLE3 \\\n"
    f"     --speculative-draft-model-path DRAFT --model-impl {MODEL_IMPL}"
)
"""The one flag, on SGLang's own launcher."""

_NO_CUDA = "Cannot detect CUDA architecture."
"""What SGLang logs when it imports its attention backends on a machine without CUDA
(``srt/layers/attention/trtllm_mla_backend.py:182`` probes the GPU at import)."""


def _say(text: str = "") -> None:
    print(text, flush=True)


def _accept_length(draft, embedding, tokens, aux) -> float:
    runs, hits = simulate(draft, embedding, tokens, aux, STEPS, PROMPT_LEN - 1, NEW_TOKENS - 1)
    return score(torch.cat(runs), hits, STEPS).accept_length


def closing_lines() -> list[str]:
    """The demo's last lines: what works from here. The serve command when SGLang would load the
    plugin in a new process; else why not, and the install from this checkout."""
    from sglang_eagle3_embed.doctor.check import plugin_status

    loads, why = plugin_status()
    if loads:
        return [
            "The plugin is installed and SGLang will load it (from this checkout: pip install -e .).",
            "Serve a real target and draft with one flag:",
            f"   {SERVE}",
        ]
    return [
        f"SGLang would not load the plugin here: {why}.",
        "Install it from this checkout (pip install -e .), then serve with one flag:",
        f"   {SERVE}",
    ]


class _CpuOnly(logging.Filter):
    """Drops SGLang's "no CUDA here" warning: the demo runs on the CPU by design."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.getMessage() != _NO_CUDA


def _quiet_libraries() -> None:
    """Library chatter that says nothing to the demo's reader: warnings, transformers' progress and
    info, SGLang's import-time probe for a GPU (only where there is none)."""
    import warnings

    from transformers.utils import logging as hf_logging

    warnings.filterwarnings("ignore")
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if not torch.cuda.is_available():
        logging.getLogger("sglang.kernels.jit.utils.arch").addFilter(_CpuOnly())


def run_demo(cache_dir: Path | None = None) -> int:
    from sglang_eagle3_embed.doctor.backends import HFBackend
    from sglang_eagle3_embed.doctor.eagle3_draft import load_draft
    from sglang_eagle3_embed.doctor.pair import PairSpec, build_pair, shipped_pair
    from sglang_eagle3_embed.doctor.tiny_target import cache_root

    cache_dir = cache_root(cache_dir)  # a file named as the cache is refused even when it is not needed
    _quiet_libraries()
    # The pair is tiny: one thread does its work, and threads beyond the free cores stall each other.
    torch.set_num_threads(1)
    start = time.time()
    spec = PairSpec()
    layers = spec.target.num_layers
    _say("sglang-eagle3-embed demo: why an EAGLE-3 draft trained on the embedding output fails in")
    _say("stock SGLang on DeepSeek-architecture targets, and what the plugin changes.")
    _say()
    _say(f"1. A tiny pair: a {layers}-layer DeepSeek-V3 target trained on a small synthetic language, and")
    _say(f"   an EAGLE-3 draft distilled from it on ids {list(spec.ids)}, i.e.")
    _say(f"   cat([{describe_capture_indices([i + 1 for i in spec.ids])}]).")
    pair = shipped_pair(spec)
    if pair is None:
        _say("   Not shipped with this install: training it once into the cache (a minute or two).")
        pair = build_pair(spec, cache_dir)
    _say(f"   ready after {time.time() - start:.0f} s: {pair.target.parent}")
    config = json.loads((pair.draft / "config.json").read_text())
    draft, _ = load_draft(pair.draft)
    hf = HFBackend(pair.target)
    prompts = pair.language.sample(PROMPTS, PROMPT_LEN, torch.Generator().manual_seed(1234))
    tokens = hf.generate(prompts, NEW_TOKENS + STEPS)  # every start gets a whole chain to check
    _say(f"   The target continues {PROMPTS} prompts greedily ({NEW_TOKENS} tokens each); the draft guesses")
    _say(f"   {STEPS} tokens ahead each time, and the server keeps the guesses until the first wrong one.")
    _say()

    from sglang.srt.models import deepseek_v2 as stock

    from sglang_eagle3_embed.doctor import sglang_cpu
    from sglang_eagle3_embed.patch import deepseek_capture as capture
    from sglang_eagle3_embed.patch import deepseek_models as models

    plugin_model, hf_config = sglang_cpu.load_model(models.DeepseekV3ForCausalLM, pair.target)
    stock_model, _ = sglang_cpu.load_model(stock.DeepseekV3ForCausalLM, pair.target)
    plan = resolve_capture_plan(config, layers)
    capture.configure(plugin_model, config["eagle_config"][IDS_FIELD], draft_config=config)
    plugin_len = _accept_length(
        draft, hf.embedding, tokens, sglang_cpu.prefill_captures(plugin_model, hf_config, tokens)
    )

    _say("2. The draft config writes its ids where SGLang and SpecForge do (eagle_config):")
    _say(f'   "eagle_config": {{"{IDS_FIELD}": {list(spec.ids)}}}')
    stock_model.set_eagle3_layers_to_capture(config["eagle_config"][IDS_FIELD])
    try:
        sglang_cpu.prefill_captures(stock_model, hf_config, tokens)
        nested = "serves (unexpected)"
    except RuntimeError as exc:  # SGLang's own packer: the real startup failure
        nested = f"RuntimeError: {exc}"
    _say("   stock SGLang : fails while starting (CUDA-graph capture runs this forward):")
    _say(f"                         {nested}")
    _say("                         (-1 matches no layer in its capture loop: only 2 of 3 tensors come out;")
    _say("                         with CUDA graphs off it fails on the first request instead)")
    _say(f"   with --model-impl {MODEL_IMPL}: captures [{plan.describe()}]")
    _say(f"                         predicted accept length {plugin_len:.2f} tokens per step")
    _say()

    top = {k: v for k, v in config.items() if k != "eagle_config"} | {IDS_FIELD: list(spec.ids)}
    default_indices = stock_reading(top, layers).indices
    stock_model.set_eagle3_layers_to_capture(None)
    stock_len = _accept_length(
        draft, hf.embedding, tokens, sglang_cpu.prefill_captures(stock_model, hf_config, tokens)
    )
    _say("3. The same ids at the top level of the config (vLLM speculators style):")
    _say(f'   "{IDS_FIELD}": {list(spec.ids)}')
    _say("   stock SGLang : starts, ignores the ids without a word and captures its defaults")
    _say(f"                         [{describe_capture_indices(default_indices)}]")
    _say(f"                         predicted accept length {stock_len:.2f} tokens per step")
    _say(f"   with --model-impl {MODEL_IMPL}: reads them, captures [{plan.describe()}]")
    _say(f"                         predicted accept length {plugin_len:.2f} tokens per step")
    _say()
    _say("In short:")
    _say(f"   stock SGLang : fails to start (nested ids) or accept length {stock_len:.2f} (top-level ids)")
    _say(f"   plugin       : accept length {plugin_len:.2f} either way (1.00 = speculation never helps)")
    _say("   Check a real deployment: sglang-eagle3-embed check <your launch arguments>")
    _say("   Measure a real draft under each wiring: sglang-eagle3-embed probe --target T --draft D")
    _say(f"(demo took {time.time() - start:.0f} s)")
    _say()
    for line in closing_lines():
        _say(line)
    return 0
