"""EAGLE-3 draft ids [-1, a, b] on a DeepSeek-V3 target: stock SGLang against the patched tree.

Self-contained: it imports only sglang, torch, transformers and the standard library. It writes
a small synthetic language (each sequence's topic is its first token; the next token follows
the previous one by the topic's table, its likeliest choice with p 0.85), trains a tiny
DeepSeek-V3 target on it (8 layers) and then an EAGLE-3 draft (LlamaForCausalLMEagle3) on
[embedding output, output of layer 2, output of layer 5], written as ids [-1, 2, 5], to guess the
target's next greedy token (seconds on a GPU; ``write --steps`` sets the budget). One draft is
written three ways:

    draft-ids-nested     eagle_config.eagle_aux_hidden_state_layer_ids = [-1, 2, 5]
    draft-ids-top-level  the same ids at the top level of the draft config
    draft-indices        eagle_config ids [0, 3, 6]: the same tensors written by hand as the
                         capture indices stock SGLang reads (index i = the input of layer i)

then serves each with sglang.Engine (EAGLE3, 3 steps, top-k 1, 4 draft tokens, deterministic
inference, triton attention, greedy, 32 prompts of the language of 40 new tokens in one batch),
each engine in its own process:

    stock    draft-ids-nested     expected: fails at startup, "captured 2 of 3 aux hidden states"
    stock    draft-indices        the reference: the tensors the draft reads, by hand
    stock    draft-ids-top-level  control: the ids are not read, the target's defaults [2, 4, 5]
    patched  draft-ids-nested     expected (PR 1): the reference's tokens and accept lengths
    patched  draft-ids-top-level  expected (PRs 1-2): the reference's tokens and accept lengths

"stock" is the sglang this interpreter imports; "patched" puts --patched-python (the ``python``
folder of a SGLang checkout with the PRs applied) first on PYTHONPATH. Speculation is lossless, so
tokens alone cannot tell a draft fed the wrong tensors from one fed the right ones; the accept
lengths can. The table therefore prints a verdict only when the control row is separated from the
reference: its mean accept length at least MARGIN lower, and at least SEPARATED of the requests'
accept lengths differing. Otherwise it says so and prints no verdict (the pair did not learn
enough: more ``--steps``).

    python reproduce_eagle3_embedding_output.py write OUT             # the models: a GPU, seconds
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

LAYERS, HIDDEN, VOCAB = 8, 128, 64
IDS = [-1, 2, 5]  # layer outputs: -1 the embedding output, k the output of layer k
INDICES = [i + 1 for i in IDS]  # capture indices: i is the input of layer i
PROMPTS, PROMPT_LEN, NEW_TOKENS = 32, 16, 40
TOPICS, P_BEST = 4, 0.85  # the language: a sequence's topic is its first token modulo TOPICS
STEPS = 400  # training steps of the target and of the draft (batches of 32 x 32 tokens)
EMBED_STD, GROWTH = 0.005, 1.5  # a small frozen embedding; layer k's output projections x GROWTH**k
MARGIN = 0.3
"""The control row's mean accept length must lie at least this far below the reference's."""
SEPARATED = 0.5
"""And at least this share of the requests' accept lengths must differ from the reference's."""
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
    """An EAGLE-3 draft whose parameter names and shapes are those SGLang's LlamaForCausalLMEagle3
    loads (``srt/models/llama_eagle3.py``: ``midlayer.*`` is its decoder layer, whose attention
    reads ``cat([norm(embeds), norm(hidden)])``; ``fc`` maps the ``len(ids)`` target tensors to
    one), whose class name ``save_pretrained`` writes as the config's architecture, and whose
    ``forward(embeds, aux)`` is its first draft step over a whole sequence (causal attention)."""
    import torch
    from torch import nn
    from transformers import LlamaConfig, PreTrainedModel
    from transformers.models.llama.modeling_llama import (
        LlamaAttention,
        LlamaMLP,
        LlamaRMSNorm,
        LlamaRotaryEmbedding,
    )

    class LlamaForCausalLMEagle3(PreTrainedModel):
        config_class = LlamaConfig
        base_model_prefix = ""

        def __init__(self, config):
            super().__init__(config)
            h, heads = config.hidden_size, config.num_attention_heads
            ids = (getattr(config, "eagle_config", None) or {}).get(
                "eagle_aux_hidden_state_layer_ids"
            ) or config.eagle_aux_hidden_state_layer_ids
            self.fc = nn.Linear(len(ids) * config.target_hidden_size, h, bias=False)
            wide = LlamaConfig(**{**config.to_dict(), "hidden_size": 2 * h, "head_dim": h // heads})
            wide._attn_implementation = "sdpa"
            self.midlayer = nn.Module()
            self.midlayer.self_attn = LlamaAttention(wide, layer_idx=0)
            self.midlayer.self_attn.o_proj = nn.Linear(h, h, bias=False)
            self.midlayer.mlp = LlamaMLP(config)
            for name in ("input_layernorm", "hidden_norm", "post_attention_layernorm"):
                setattr(self.midlayer, name, LlamaRMSNorm(h, eps=config.rms_norm_eps))
            self.norm = LlamaRMSNorm(h, eps=config.rms_norm_eps)
            self.lm_head = nn.Linear(h, config.draft_vocab_size, bias=False)
            # built at each forward: a buffer of a submodule is not restored by from_pretrained
            self.rope_config = LlamaConfig(**{**config.to_dict(), "head_dim": h // heads})
            self.post_init()

        def _init_weights(self, module):
            pass  # torch's own initialization, seeded by the caller

        def forward(self, embeds, aux):
            layer, residual = self.midlayer, self.fc(aux)
            x = torch.cat([layer.input_layernorm(embeds), layer.hidden_norm(residual)], dim=-1)
            positions = torch.arange(x.shape[1], device=x.device)[None].expand(x.shape[0], -1)
            rotary = LlamaRotaryEmbedding(self.rope_config).to(x.device)
            attn, _ = layer.self_attn(x, position_embeddings=rotary(x, positions), attention_mask=None)
            residual = attn + residual
            out = layer.mlp(layer.post_attention_layernorm(residual)) + residual
            return self.lm_head(self.norm(out))

    return LlamaForCausalLMEagle3


def language(seed: int = 0):
    """The topic table: ``table[topic, previous token]`` = (likeliest next token, the other one)."""
    import torch

    return torch.randint(VOCAB, (TOPICS, VOCAB, 2), generator=torch.Generator().manual_seed(seed))


def sample(table, batch: int, length: int, gen):
    import torch

    x = torch.empty(batch, length, dtype=torch.long)
    x[:, :2] = torch.randint(VOCAB, (batch, 2), generator=gen)
    for t in range(2, length):
        choices = table[x[:, 0] % TOPICS, x[:, t - 1]]
        other = (torch.rand(batch, generator=gen) >= P_BEST).long()
        x[:, t] = choices.gather(1, other[:, None])[:, 0]
    return x


def train(target, draft, steps: int, device: str, seed: int = 0) -> None:
    """The target on the language, then the draft on the target's states at INDICES (embedding
    of token t+1 and the states of position t, to guess the target's greedy token after t+1)."""
    import torch
    from torch.nn.functional import cross_entropy

    table, gen = language(seed), torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():  # states that differ from layer to layer, as a real model's do
        embedding = target.get_input_embeddings().weight
        embedding.normal_(0.0, EMBED_STD)
        embedding.requires_grad_(False)
        for name, p in target.named_parameters():
            if name.endswith(("o_proj.weight", "down_proj.weight", "down_proj")):
                p.mul_(GROWTH ** int(name.split(".")[2]))
    target.to(device).train()
    optimizer = torch.optim.AdamW([p for p in target.parameters() if p.requires_grad], lr=3e-3)
    for _ in range(steps):
        tokens = sample(table, 32, 32, gen).to(device)
        loss = target(tokens, labels=tokens).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    target.eval()
    draft.to(device).train()
    optimizer = torch.optim.AdamW(draft.parameters(), lr=3e-3)
    for _ in range(steps):
        tokens = sample(table, 32, 32, gen).to(device)
        with torch.no_grad():
            out = target(tokens, output_hidden_states=True)
            embeds = target.get_input_embeddings()(tokens[:, 1:])
        aux = torch.cat([out.hidden_states[i][:, :-1] for i in INDICES], dim=-1)
        logits = draft(embeds, aux)
        loss = cross_entropy(logits.flatten(0, 1), out.logits.argmax(-1)[:, 1:].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    target.cpu().eval()
    draft.cpu().eval()


def write_models(out: Path, seed: int = 0, steps: int = STEPS, device: str | None = None) -> dict[str, Path]:
    """The trained target and the three draft folders under ``out``; returns their paths."""
    import torch
    from transformers import DeepseekV3ForCausalLM

    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    target = DeepseekV3ForCausalLM(target_config())
    torch.manual_seed(seed + 1)
    draft = draft_class()(draft_config(**DRAFTS["draft-ids-nested"]))
    train(target, draft, steps, device, seed)
    paths = {"target": out / "target"}
    target.save_pretrained(paths["target"])
    weights = draft.state_dict()
    for name, ids_fields in DRAFTS.items():
        written = draft_class()(draft_config(**ids_fields))
        written.load_state_dict(weights)  # one draft, its ids written three ways
        written.save_pretrained(out / name)
        paths[name] = out / name
    return paths


def prompts(seed: int = 0) -> list[list[int]]:
    """Prompts of the language (its topics and transitions), as the pair was trained on."""
    import torch

    return sample(language(seed), PROMPTS, PROMPT_LEN, torch.Generator().manual_seed(seed + 2026)).tolist()


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
            row["accepts_differ"] = PROMPTS - row["accepts_equal"]
    (out / "summary.json").write_text(json.dumps(rows, indent=2))
    return rows


def _error(log: str) -> str:
    """The line of an engine's log that says why it did not serve."""
    found = re.findall(r"captured \d+ of \d+ aux hidden states", log)
    errors = [x for x in log.splitlines() if "Error" in x]
    error = found[-1] if found else (errors[-1] if errors else log[-200:])
    return error.strip()[:120]


def verdict(rows: list[dict]) -> list[str]:
    """What the table shows, or why it shows nothing: the control row must be separated from the
    reference (MARGIN, SEPARATED) before equal rows mean the patched tree reads the right tensors."""
    by = {r["run"]: r for r in rows}
    ref, control = by.get(REFERENCE, {}), by.get("stock, ids at the top level", {})
    if ref.get("accept_mean") is None or control.get("accept_mean") is None:
        return ["NO VERDICT: the reference and the control must both serve."]
    gap, differ = ref["accept_mean"] - control["accept_mean"], control["accepts_differ"] / PROMPTS
    if gap < MARGIN or differ < SEPARATED:
        return [
            f"NO VERDICT: the control row is not separated from the reference (accept length "
            f"{gap:+.2f}, {differ:.0%} of requests differ; needed >= {MARGIN} and >= {SEPARATED:.0%}): "
            f"train the pair longer (write --steps)."
        ]
    lines = [
        f"control separated: accept length {gap:.2f} below the reference, {differ:.0%} of requests differ."
    ]
    for name in ("patched, ids nested", "patched, ids at the top level"):
        row = by.get(name, {})
        ok = row.get("tokens_equal") == PROMPTS and row.get("accepts_equal") == PROMPTS
        lines.append(f"{name}: {'PASS, the reference on every request' if ok else 'FAIL'}")
    stock = by.get("stock, ids nested", {})
    lines.append(
        f"stock, ids nested: {'fails at startup as expected' if not stock.get('started') else 'SERVED'}"
    )
    return lines


def table(rows: list[dict]) -> str:
    lines = [
        f"target: DeepSeek-V3 trained on the language, {LAYERS} layers; draft ids {IDS} (capture indices {INDICES})",
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
    return "\n".join([*lines, "", *verdict(rows)])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    write = sub.add_parser("write", help="train and write the target and the drafts")
    write.add_argument("out", type=Path)
    write.add_argument(
        "--steps", type=int, default=STEPS, help="training steps of the target and of the draft"
    )
    write.add_argument("--device", help="where to train (default: cuda when there is one)")
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
        for name, path in write_models(args.out.resolve(), steps=args.steps, device=args.device).items():
            print(f"{name:20} {path}")
    elif args.command == "serve":
        serve(args.target, args.draft, args.result)
    else:
        rows = run_all(args.out.resolve(), args.patched_python.resolve(), args.timeout, args.runs)
        print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
