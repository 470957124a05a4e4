"""What one decode step and one speculative step cost at real widths, on the real server.

Targets of real width with reduced depth and dummy weights (``--load-format dummy``): Kimi-K2.5
(hidden 7168, MLA, 384 routed experts top-8, vocab 163840, the real vision tower; 4 text layers) and
DeepSeek-V2-Lite (hidden 2048, 64 routed experts top-6, all 27 layers), each with an EAGLE-3 draft of
the real shape (``LlamaForCausalLMEagle3``, one layer of the target's width, reading ``[-1, a, b]``).
For each target, ``python -m sglang.launch_server`` runs once without speculation and once with the
plugin (EAGLE-3, 3 steps, top-k 1, CUDA graphs), one after the other (a target fills most of the
GPU). At batch 1, 8 and 32 (prompts of 64 tokens) each is warmed up, then timed generating 1 and
``--new-tokens`` tokens, ``--rounds`` times:

- measured: a decode step = (time for N tokens - time for 1) / (N - 1); a speculative step (draft
  steps + verify) = (time for N tokens - time for 1) / (verify passes - 1), the verify passes being
  the most any request of the batch took (``spec_verify_ct``); the memory SGLang logs at startup;
- derived: the tokens/s that speculation gives per request at accept length ``a`` against plain
  decoding, ``a x decode step / speculative step``, for the accept lengths measured by
  ``benchmarks/speedup.py`` of its servers that take this step (``configs.same_step``: stock SGLang
  and the plugin at 3 steps), read from its result (``--accept-from``, by default ``speedup.json``
  in ``--results``), and any given with ``--accept LABEL=VALUE``. The result records them.

    python -m benchmarks.step_times --models kimi-k25 v2-lite --logs /tmp/logs
    python -m benchmarks.step_times --accept "the seed's report=1.6" --logs /tmp/logs
    python -m benchmarks.step_times --quick --from-json results/step_times.json   # render only
"""

from __future__ import annotations

import json
import re
import statistics
import time
from pathlib import Path

from benchmarks import _common, configs, speedup
from sglang_eagle3_embed.doctor.kimi import REAL_TEXT

NAME = "step_times"
BATCHES = (1, 8, 32)
PROMPT_LEN = 64
ACCEPT_FROM = "speedup.json"
"""``speedup.py``'s result, read from ``--results`` unless ``--accept-from`` names another."""

V2_LITE_TEXT = {
    **REAL_TEXT, "architectures": ["DeepseekV2ForCausalLM"], "model_type": "deepseek_v2",
    "vocab_size": 102400, "hidden_size": 2048, "intermediate_size": 10944, "moe_intermediate_size": 1408,
    "num_hidden_layers": 27, "num_attention_heads": 16, "num_key_value_heads": 16, "n_routed_experts": 64,
    "n_shared_experts": 2, "num_experts_per_tok": 6, "q_lora_rank": None, "routed_scaling_factor": 1.0,
    "topk_method": "greedy", "scoring_func": "softmax", "norm_topk_prob": False, "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0, "max_position_embeddings": 163840,
    "rope_scaling": {"type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
                     "beta_fast": 32, "beta_slow": 1, "mscale": 0.707, "mscale_all_dim": 0.707},
}  # fmt: skip
"""DeepSeek-V2-Lite's config (16B parameters, 2.4B active): where it differs from Kimi-K2.5's text
model (the same MLA ranks and head dimensions, the first layer dense)."""


def write_config_only_kimi(folder: Path, num_layers: int) -> Path:
    """A Kimi-K2.5 folder of the real width with ``num_layers`` text layers and no weights (serve it
    with ``--load-format dummy``): config, tokenizer (the real vocabulary size) and processor."""
    from sglang_eagle3_embed.doctor.kimi import REAL_VISION, kimi_config, write_serving_files
    from sglang_eagle3_embed.doctor.tokenizer import write_tokenizer

    folder.mkdir(parents=True, exist_ok=True)
    config = kimi_config({**REAL_TEXT, "num_hidden_layers": num_layers}, REAL_VISION)
    (folder / "config.json").write_text(json.dumps(config, indent=2))
    write_tokenizer(folder, REAL_TEXT["vocab_size"])
    write_serving_files(folder)
    return folder


def write_targets(folder: Path) -> dict[str, dict]:
    """Config-only target and draft folders: {name: {"target", "draft", "suite" (its servers,
    ``configs.STEP_TIMES``), "layers"}}."""
    from sglang_eagle3_embed.doctor.tiny_draft import draft_config_dict

    def draft(name, text, ids):
        path = folder / f"{name}-draft"
        path.mkdir(parents=True, exist_ok=True)
        config = draft_config_dict(
            text["hidden_size"], text["vocab_size"], text["num_attention_heads"], ids, text["hidden_size"]
        )
        config.update(
            intermediate_size=text["intermediate_size"],
            num_key_value_heads=8,
            torch_dtype="bfloat16",
            max_position_embeddings=4096,
        )
        (path / "config.json").write_text(json.dumps(config, indent=2))
        return str(path)

    v2 = folder / "v2-lite"
    v2.mkdir(parents=True, exist_ok=True)
    (v2 / "config.json").write_text(json.dumps(V2_LITE_TEXT, indent=2))
    return {
        "kimi-k25": {
            "target": str(write_config_only_kimi(folder / "kimi-k25", 4)),
            "draft": draft("kimi-k25", REAL_TEXT, [-1, 1, 2]),
            "suite": configs.STEP_TIMES["kimi-k25"], "layers": "4 of 61",
        },
        "v2-lite": {
            "target": str(v2), "draft": draft("v2-lite", V2_LITE_TEXT, [-1, 12, 23]),
            "suite": configs.STEP_TIMES["v2-lite"], "layers": "27 of 27",
        },
    }  # fmt: skip


MEMORY_LINES = re.compile(
    r"(Load weight end.*|KV Cache is allocated.*|Memory pool end.*|Capture cuda graph end.*)"
)


def server_kwargs(target: dict, spec: bool) -> dict:
    """The target's server from its suite (``configs.STEP_TIMES``): plain decoding, or (``spec``)
    the plugin's speculative step, its draft's weights dummy too."""
    suite = target["suite"]
    kwargs = suite.kwargs(suite.servers[1 if spec else 0], target["target"], {"nested": target["draft"]})
    return kwargs | ({"speculative_draft_load_format": "dummy"} if spec else {})


def measure(target: dict, spec: bool, logs: Path, new_tokens: int, rounds: int) -> dict:
    """One server (plain or the plugin's EAGLE-3): per batch size, the median step time in ms."""
    import random

    from harness.server_run import Server

    server_args = {
        "load_format": "dummy", "skip_tokenizer_init": True, "dtype": "bfloat16",
        "cuda_graph_max_bs_decode": max(BATCHES), "max_running_requests": max(BATCHES), "context_length": 4096,
        **server_kwargs(target, spec),
    }  # fmt: skip
    name = f"{Path(target['target']).name}-{'plugin' if spec else 'plain'}"
    rng = random.Random(0)
    out = {"steps": {}}
    with Server(name, server_args, logs) as server:
        out["startup_s"] = server.wait_ready(540)
        for batch in BATCHES:
            prompts = [[rng.randrange(100, 30000) for _ in range(PROMPT_LEN)] for _ in range(batch)]

            def timed(tokens, prompts=prompts):
                sampling = {"temperature": 0, "max_new_tokens": tokens, "ignore_eos": True}
                start = time.perf_counter()
                run = server.generate(prompts, sampling, "all")
                return time.perf_counter() - start, max(v or 0 for v in run["verify_ct"])

            timed(new_tokens)  # warm this batch shape (first passes compile kernels)
            samples = []
            for _ in range(rounds):
                (one, _), (full, verifies) = timed(1), timed(new_tokens)
                steps = (verifies - 1) if spec else (new_tokens - 1)
                samples.append(1000 * (full - one) / max(steps, 1))
            out["steps"][str(batch)] = {"ms": statistics.median(samples), "samples": samples}
        out["log_lines"] = MEMORY_LINES.findall(server.log)
        out["captures"] = [line for line in server.log.splitlines() if "EAGLE-3 draft reads" in line][:1]
    return out


def measured_accept(result: dict) -> dict[str, float]:
    """From ``speedup.py``'s ``result``: the accept length of each of its servers (by id) that takes
    the step timed here (``configs.same_step``), the median over concurrencies of the medians over
    rounds, to two decimals."""
    out = {}
    for name, by_c in speedup.summarize(result["rounds"]).items():
        accept = [s["accept_length"] for s in by_c.values() if s["accept_length"]]
        if configs.same_step(name) and accept:
            out[name] = round(statistics.median(accept), 2)
    return out


def accept_lengths(args, parser) -> dict[str, float]:
    """The accept lengths of a measurement: those given with ``--accept`` (first, and kept), then
    those of ``speedup.py``'s result."""
    given = {}
    for item in args.accept or []:
        label, _, value = item.rpartition("=")
        try:
            given[label] = float(value)
        except ValueError:
            label = ""
        if not label:
            parser.error(f"--accept {item!r}: LABEL=VALUE expected")
    source = args.accept_from or args.results / ACCEPT_FROM
    if source.exists():
        measured = measured_accept(json.loads(source.read_text()))
    elif args.accept_from:
        parser.error(f"--accept-from {source}: no such file")
    else:
        measured = {}
    measured = {configs.label(server_id): value for server_id, value in measured.items()}
    accept = {**given, **{k: v for k, v in measured.items() if k not in given}}
    if not accept:
        print(
            f"no accept lengths ({source} not found, no --accept): the derived table stays empty", flush=True
        )
    return accept


def derived(result: dict) -> list[dict]:
    """Per model, batch and accept length: the tokens/s ratio of speculation to plain decoding."""
    rows = []
    for model, runs in result["models"].items():
        plain, plugin = runs.get("plain", {}).get("steps", {}), runs.get("plugin", {}).get("steps", {})
        for batch in map(str, BATCHES):
            if batch not in plain or batch not in plugin:
                continue
            decode, spec = plain[batch]["ms"], plugin[batch]["ms"]
            for who, accept in result["accept"].items():
                rows.append(dict(model=model, batch=int(batch), decode_ms=decode, spec_ms=spec, who=who,
                                 accept=accept, ratio=accept * decode / spec))  # fmt: skip
    return rows


def render(result: dict) -> str:
    measured = []
    for model, runs in result["models"].items():
        for batch in map(str, BATCHES):
            plain = runs.get("plain", {}).get("steps", {}).get(batch, {}).get("ms")
            spec = runs.get("plugin", {}).get("steps", {}).get(batch, {}).get("ms")
            ratio = _common.fmt(spec / plain) if plain and spec else "-"
            measured.append(
                [model, runs.get("layers", ""), batch, _common.fmt(plain), _common.fmt(spec), ratio]
            )
    rows = derived(result)
    ratios = []
    for model in result["models"]:
        for batch in BATCHES:
            cells = [f"{r['ratio']:.2f}x" for r in rows if r["model"] == model and r["batch"] == batch]
            if cells:
                ratios.append([model, batch, *cells])
    header = ["model", "layers", "batch", "decode step (ms)", "speculative step (ms)", "spec / decode"]
    derived_header = ["model", "batch", *(f"{who} ({a})" for who, a in result["accept"].items())]
    return "\n\n".join([
        _common.markdown_table(header, measured),
        "Derived: tokens/s with speculation / without, per request (accept length x decode step / speculative step)",
        _common.markdown_table(derived_header, ratios),
    ])  # fmt: skip


def plot(result: dict, results_dir: Path) -> Path:
    """Step times against batch size (measured), and the derived ratio per accept length."""
    plt = _common.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4.2))
    rows = derived(result)
    for k, (model, runs) in enumerate(result["models"].items()):
        model_line = ("-", "--", ":")[k % 3]  # one line style per model, one colour per series
        for mode, color in (("plain", "C0"), ("plugin", "C3")):
            steps = runs.get(mode, {}).get("steps", {})
            if steps:
                label = f"{model}: {'decode step' if mode == 'plain' else 'speculative step'}"
                left.plot([int(b) for b in steps], [v["ms"] for v in steps.values()], model_line,
                          color=color, marker="o", label=label)  # fmt: skip
        for j, (who, accept) in enumerate(result["accept"].items()):
            mine = [r for r in rows if r["model"] == model and r["who"] == who]
            if mine:
                right.plot([r["batch"] for r in mine], [r["ratio"] for r in mine], model_line, color=f"C{j + 1}",
                           marker="o", label=f"{model}, {who} ({accept})")  # fmt: skip
    right.axhline(1.0, color="#999999", linewidth=1, label="no speculation")
    panels = [(left, "ms per step (measured)"), (right, "tokens/s vs no speculation (derived)")]
    _common.log2_axes(panels, "batch size", BATCHES)
    for ax, _ in panels:
        ax.legend(fontsize=6)
    env = result.get("env", {})
    fig.suptitle(
        f"Real width, reduced depth, dummy weights: {env.get('gpu', 'GPU')}, {env.get('date', '')}",
        fontsize=10,
    )
    return _common.save_figure(fig, results_dir, NAME)


def main() -> dict:
    p = _common.gpu_parser(__doc__, logs="/tmp/step-times", rounds=3)
    p.add_argument("--models", nargs="+", default=["kimi-k25", "v2-lite"], choices=["kimi-k25", "v2-lite"])
    p.add_argument("--modes", nargs="+", default=["plain", "plugin"], choices=["plain", "plugin"])
    p.add_argument("--new-tokens", type=int, default=64)
    p.add_argument(
        "--accept-from", type=Path, help=f"speedup.py's result (default: {ACCEPT_FROM} in --results)"
    )
    p.add_argument(
        "--accept", nargs="+", metavar="LABEL=VALUE", help="more accept lengths to derive ratios for"
    )
    args = p.parse_args()
    result = _common.saved_or_gpu(p, args, "step_times.py")
    if result is None:
        accept = accept_lengths(args, p)
        args.logs.mkdir(parents=True, exist_ok=True)
        targets = write_targets(args.logs / "models")
        result = {"accept": accept, "models": {}, "env": _common.environment("cuda")}
        for model in args.models:
            result["models"][model] = {"layers": targets[model]["layers"]}
            for mode in args.modes:
                try:
                    result["models"][model][mode] = measure(
                        targets[model], mode == "plugin", args.logs, args.new_tokens, args.rounds
                    )
                except Exception as err:  # a failed server is reported, the next one still runs
                    result["models"][model][mode] = {"error": f"{type(err).__name__}: {err}"}
                _common.write_json(args.results, NAME, result)  # after every server: a crash keeps the rest
                print(f"{model} {mode}: {json.dumps(result['models'][model][mode])[:600]}", flush=True)
    return _common.publish(args, NAME, result, plot, render, measured_on=None)


if __name__ == "__main__":
    main()
