"""EAGLE-3 draft ids [-1, a, b] on a DeepSeek-V3 target: stock SGLang against the patched tree.

Self-contained: it imports only sglang, torch, transformers and the standard library. It writes
a random tiny DeepSeek-V3 target (8 layers) and a random EAGLE-3 draft (LlamaForCausalLMEagle3)
that reads [embedding output, output of layer 2, output of layer 5], written as ids [-1, 2, 5]:

    draft-ids-nested     eagle_config.eagle_aux_hidden_state_layer_ids = [-1, 2, 5]
    draft-ids-top-level  the same ids at the top level of the draft config
    draft-indices        eagle_config ids [0, 3, 6]: the same tensors written by hand as the
                         capture indices stock SGLang reads (index i = the input of layer i)

then serves each with sglang.Engine (EAGLE3, 3 steps, top-k 1, 4 draft tokens, deterministic
inference, triton attention, greedy, 32 prompts of 40 new tokens in one batch), each engine in its
own process:

    stock    draft-ids-nested     expected: fails at startup, "captured 2 of 3 aux hidden states"
    stock    draft-indices        the reference: the tensors the draft reads, by hand
    stock    draft-ids-top-level  control: the ids are not read, the target's defaults [2, 4, 5]
    patched  draft-ids-nested     expected (PR 1): the reference's tokens and accept lengths
    patched  draft-ids-top-level  expected (PRs 1-2): the reference's tokens and accept lengths

"stock" is the sglang this interpreter imports; "patched" puts --patched-python (the ``python``
folder of a SGLang checkout with the PRs applied) first on PYTHONPATH. With random weights the
draft rarely guesses the target's token, so accept lengths stay near 1; what the table checks is
that each request's tokens and accept length equal the reference's (the draft's guesses depend on
every tensor it reads, which the control row shows).

    python reproduce_eagle3_embedding_output.py write OUT             # the models, CPU, seconds
    python reproduce_eagle3_embedding_output.py run OUT --patched-python SGLANG/python   # GPU
    # the same in two calls (about a minute per engine): --runs 1,2,3 then --runs 4,5
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

LAYERS, HIDDEN, VOCAB = 8, 128, 32
IDS = [-1, 2, 5]  # layer outputs: -1 the embedding output, k the output of layer k
INDICES = [i + 1 for i in IDS]  # capture indices: i is the input of layer i
PROMPTS, PROMPT_LEN, NEW_TOKENS = 32, 16, 40
DRAFTS = {
    "draft-ids-nested": {"eagle_config": {"eagle_aux_hidden_state_layer_ids": IDS}},
    "draft-ids-top-level": {"eagle_aux_hidden_state_layer_ids": IDS},
    "draft-indices": {"eagle_config": {"eagle_aux_hidden_state_layer_ids": INDICES}},
}
RUNS = [  # name, sglang, draft
    ("stock, ids nested", "stock", "draft-ids-nested"),
    ("stock, capture indices by hand", "stock", "draft-indices"),
    ("stock, ids at the top level", "stock", "draft-ids-top-level"),
    ("patched, ids nested", "patched", "draft-ids-nested"),
    ("patched, ids at the top level", "patched", "draft-ids-top-level"),
]
REFERENCE = "stock, capture indices by hand"


def target_config():
    from transformers import DeepseekV3Config

    # kv_lora_rank + qk_rope_head_dim = 288: a head size SGLang's triton MLA kernels take
    return DeepseekV3Config(
        vocab_size=VOCAB, hidden_size=HIDDEN, intermediate_size=2 * HIDDEN,
        moe_intermediate_size=HIDDEN // 2, num_hidden_layers=LAYERS, num_attention_heads=4,
        num_key_value_heads=4, n_routed_experts=4, n_shared_experts=1, num_experts_per_tok=2,
        first_k_dense_replace=1, moe_layer_freq=1, n_group=1, topk_group=1, kv_lora_rank=256,
        q_lora_rank=None, qk_rope_head_dim=32, qk_nope_head_dim=32, v_head_dim=32,
        max_position_embeddings=256, tie_word_embeddings=False, topk_method="noaux_tc",
        scoring_func="sigmoid", norm_topk_prob=True, architectures=["DeepseekV3ForCausalLM"],
        bos_token_id=None, eos_token_id=None, pad_token_id=None,
    )  # fmt: skip


def draft_config(**ids_fields):
    from transformers import LlamaConfig

    return LlamaConfig(
        hidden_size=HIDDEN, intermediate_size=2 * HIDDEN, num_attention_heads=4,
        num_key_value_heads=4, num_hidden_layers=1, vocab_size=VOCAB, draft_vocab_size=VOCAB,
        target_hidden_size=HIDDEN, max_position_embeddings=256, rms_norm_eps=1e-6,
        tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None,
        **ids_fields,
    )  # fmt: skip


def draft_class():
    """A module whose parameter names and shapes are those SGLang's LlamaForCausalLMEagle3 loads
    (``srt/models/llama_eagle3.py``: ``midlayer.*`` is its decoder layer, whose attention reads
    ``cat([embeds, hidden])``; ``fc`` maps the ``len(ids)`` target tensors to one), and whose
    class name ``save_pretrained`` writes as the config's architecture."""
    import torch
    from torch import nn
    from transformers import LlamaConfig, PreTrainedModel

    def norm(width):
        module = nn.Module()
        module.weight = nn.Parameter(torch.ones(width))
        return module

    def linear(fan_in, fan_out):
        return nn.Linear(fan_in, fan_out, bias=False)

    class LlamaForCausalLMEagle3(PreTrainedModel):
        config_class = LlamaConfig
        base_model_prefix = ""

        def __init__(self, config):
            super().__init__(config)
            h, i = config.hidden_size, config.intermediate_size
            ids = (getattr(config, "eagle_config", None) or {}).get(
                "eagle_aux_hidden_state_layer_ids"
            ) or config.eagle_aux_hidden_state_layer_ids
            self.fc = linear(len(ids) * config.target_hidden_size, h)
            self.midlayer = nn.Module()
            self.midlayer.input_layernorm = norm(h)
            self.midlayer.hidden_norm = norm(h)
            self.midlayer.post_attention_layernorm = norm(h)
            self.midlayer.self_attn = nn.Module()
            for name in ("q_proj", "k_proj", "v_proj"):
                setattr(self.midlayer.self_attn, name, linear(2 * h, h))
            self.midlayer.self_attn.o_proj = linear(h, h)
            self.midlayer.mlp = nn.Module()
            self.midlayer.mlp.gate_proj = linear(h, i)
            self.midlayer.mlp.up_proj = linear(h, i)
            self.midlayer.mlp.down_proj = linear(i, h)
            self.norm = norm(h)
            self.lm_head = linear(h, config.draft_vocab_size)
            self.post_init()

        def _init_weights(self, module):
            pass  # nn.Linear's own random initialization, seeded by the caller

    return LlamaForCausalLMEagle3


def write_models(out: Path, seed: int = 0) -> dict[str, Path]:
    """The random target and the three draft folders under ``out``; returns their paths."""
    import torch
    from transformers import DeepseekV3ForCausalLM

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    paths = {"target": out / "target"}
    DeepseekV3ForCausalLM(target_config()).save_pretrained(paths["target"])
    torch.manual_seed(seed + 1)
    weights = draft_class()(draft_config(**DRAFTS["draft-ids-nested"])).state_dict()
    for name, ids_fields in DRAFTS.items():
        draft = draft_class()(draft_config(**ids_fields))
        draft.load_state_dict(weights)  # one draft, its ids written three ways
        draft.save_pretrained(out / name)
        paths[name] = out / name
    return paths


def prompts(seed: int = 0) -> list[list[int]]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    return torch.randint(VOCAB, (PROMPTS, PROMPT_LEN), generator=gen).tolist()


def serve(target: str, draft: str, result: str) -> None:
    """One engine (run in its own process): greedy outputs and accept lengths to ``result``."""
    import sglang

    engine = sglang.Engine(
        model_path=target, speculative_draft_model_path=draft, speculative_algorithm="EAGLE3",
        speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4,
        enable_deterministic_inference=True, attention_backend="triton", sampling_backend="pytorch",
        disable_radix_cache=True, dtype="bfloat16",
        skip_tokenizer_init=True, mem_fraction_static=0.5, max_running_requests=PROMPTS,
        cuda_graph_max_bs_decode=PROMPTS,
    )  # fmt: skip
    try:
        outs = engine.generate(
            input_ids=prompts(),
            sampling_params={"temperature": 0, "max_new_tokens": NEW_TOKENS, "ignore_eos": True},
        )
    finally:
        engine.shutdown()
    Path(result).write_text(
        json.dumps(
            {
                "tokens": [o["output_ids"] for o in outs],
                "accept": [o["meta_info"].get("spec_accept_length") for o in outs],
            }
        )
    )


def run_all(out: Path, patched_python: Path, timeout: int, only: set[int] | None = None) -> list[dict]:
    """Serve the runs (``only``: their 1-based numbers; the others are read from ``out`` where an
    earlier call left their results) and compare each with the reference."""
    paths = write_models(out) if not (out / "target").is_dir() else {
        name: out / name for name in ["target", *DRAFTS]
    }  # fmt: skip
    rows, results = [], {}
    for number, (name, sglang_tree, draft) in enumerate(RUNS, 1):
        result = out / (re.sub(r"\W+", "-", name) + ".json")
        log_file = out / (result.stem + ".log")
        if only is not None and number not in only:
            if result.exists():
                results[name] = json.loads(result.read_text())
                rows.append({"run": name, "started": True})
            elif log_file.exists():
                rows.append({"run": name, "started": False, "error": _error(log_file.read_text())})
            else:
                rows.append({"run": name, "started": False, "error": "not run"})
            continue
        result.unlink(missing_ok=True)
        env = dict(os.environ)
        if sglang_tree == "patched":
            # the patched tree goes first, after entries that customize the interpreter
            entries = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
            site = [p for p in entries if (Path(p) / "sitecustomize.py").exists()]
            rest = [p for p in entries if p not in site]
            env["PYTHONPATH"] = os.pathsep.join([*site, str(patched_python), *rest])
        command = [sys.executable, __file__, "serve", str(paths["target"]), str(paths[draft])]
        try:
            run = subprocess.run(
                [*command, str(result)], env=env, cwd=out, capture_output=True, text=True,
                timeout=timeout,
            )  # fmt: skip
            log = run.stdout + run.stderr
        except subprocess.TimeoutExpired as err:
            log = f"timed out after {timeout} s\n{err.stderr or ''}"
        log_file.write_text(log)
        if result.exists():
            results[name] = json.loads(result.read_text())
            rows.append({"run": name, "started": True})
        else:
            rows.append({"run": name, "started": False, "error": _error(log)})
    reference = results.get(REFERENCE)
    for row in rows:
        got = results.get(row["run"])
        if got is None:
            continue
        accepts = [a for a in got["accept"] if a is not None]
        row["accept_mean"] = round(sum(accepts) / len(accepts), 3) if accepts else None
        if reference is not None:
            row["tokens_equal"] = sum(map(list.__eq__, got["tokens"], reference["tokens"]))
            row["accepts_equal"] = sum(a == b for a, b in zip(got["accept"], reference["accept"]))
    (out / "summary.json").write_text(json.dumps(rows, indent=2))
    return rows


def _error(log: str) -> str:
    """The line of an engine's log that says why it did not serve."""
    found = re.findall(r"captured \d+ of \d+ aux hidden states", log)
    errors = [x for x in log.splitlines() if "Error" in x]
    error = found[-1] if found else (errors[-1] if errors else log[-200:])
    return error.strip()[:120]


def table(rows: list[dict]) -> str:
    lines = [
        f"target: random DeepSeek-V3, {LAYERS} layers; draft ids {IDS} (capture indices {INDICES})",
        f"{PROMPTS} prompts x {NEW_TOKENS} greedy tokens; 'equal' counts requests equal to '{REFERENCE}'",
        "",
        f"{'run':32} {'starts':6} {'accept':>7} {'tokens equal':>12} {'accepts equal':>13}  error",
    ]
    for r in rows:
        lines.append(
            f"{r['run']:32} {'yes' if r['started'] else 'no':6} {r.get('accept_mean', '-')!s:>7} "
            f"{r.get('tokens_equal', '-')!s:>12} {r.get('accepts_equal', '-')!s:>13}  "
            f"{r.get('error', '')}"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="write the target and the drafts (CPU)")
    write.add_argument("out", type=Path)
    run = sub.add_parser("run", help="write the models if absent, serve every run, print a table")
    run.add_argument("out", type=Path)
    run.add_argument("--patched-python", type=Path, required=True,
                     help="the python/ folder of a SGLang tree with the PRs applied")  # fmt: skip
    run.add_argument("--timeout", type=int, default=600, help="seconds per engine")
    run.add_argument(
        "--runs", type=lambda v: {int(x) for x in v.split(",")}, default=None,
        help="serve only these runs (1-5, comma-separated); the others' results are read from OUT",
    )  # fmt: skip
    serve_cmd = sub.add_parser("serve", help=argparse.SUPPRESS)
    for name in ("target", "draft", "result"):
        serve_cmd.add_argument(name)
    args = parser.parse_args()
    if args.command == "write":
        for name, path in write_models(args.out.resolve()).items():
            print(f"{name:20} {path}")
    elif args.command == "serve":
        serve(args.target, args.draft, args.result)
    else:
        rows = run_all(args.out.resolve(), args.patched_python.resolve(), args.timeout, args.runs)
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
