"""How close are the tiny target's greedy picks, and how far does bf16 alone move them (CPU)?

The GPU lossless tests (``tests/gpu/test_acceptance.py``) accept an output that leaves the
no-speculation output where the target's top two tokens were nearly tied (or that plain decoding
itself produced in another batching or layout): in bf16, verify and decode run different kernels,
so near-tied picks can flip, in stock SGLang too. This script measures
what "nearly tied" has to mean for the GPU pair: the margin (top-1 minus top-2 logprob) at every
greedy position of the float32 HF target, and the float32 margin at each position where the same
target in bf16 picks another token. Same prompts as the GPU tests: the pair's language, seed 2026.

    python -m benchmarks.near_ties                # GPU pair on the CPU (built if missing: ~4 min)
    python -m benchmarks.near_ties --quick --target DIR   # test suite
"""

from __future__ import annotations

from pathlib import Path

from benchmarks import _common as c
from tests.gpu import engine_run

NAME = "near_ties"
THRESHOLDS = (0.05, 0.25, 0.5, 1.0)


def arguments():
    p = c.parser(__doc__)
    p.add_argument("--target", type=Path, help="target folder (default: the GPU-sized tiny pair)")
    p.add_argument("--num-prompts", type=int, help="default 48, as the GPU tests (--quick: 8)")
    p.add_argument("--new-tokens", type=int, help="default 40, as the GPU tests (--quick: 8)")
    p.add_argument("--from-json", type=Path, help="render a result written before")
    args = p.parse_args()
    args.num_prompts = args.num_prompts or (8 if args.quick else 48)
    args.new_tokens = args.new_tokens or (8 if args.quick else 40)
    return args


def greedy(model, prompts, new_tokens):
    """Greedy continuation and its per-position margins (float32 log-softmax of the scores)."""
    import torch

    with torch.no_grad():
        out = model.generate(
            prompts, attention_mask=torch.ones_like(prompts), max_new_tokens=new_tokens,
            do_sample=False, output_scores=True, return_dict_in_generate=True, pad_token_id=0,
        )  # fmt: skip
    top = torch.log_softmax(torch.stack(out.scores, 1).float(), -1).topk(2, -1).values
    return out.sequences[:, prompts.shape[1] :], top[..., 0] - top[..., 1]


def measure(args) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    target = args.target or c.pair_folders(None, None, gpu=True, device="cpu")[0]
    prompts = c.language_prompts(target, args.num_prompts, 8, seed=2026)
    model = AutoModelForCausalLM.from_pretrained(str(target), dtype=torch.float32).eval()
    ref, gaps = greedy(model, prompts, args.new_tokens)
    bf16, _ = greedy(model.to(torch.bfloat16), prompts, args.new_tokens)
    flips = []
    for i in range(ref.shape[0]):
        differ = (ref[i] != bf16[i]).nonzero()
        if len(differ):
            position = int(differ[0])
            flips.append({"prompt": i, "position": position, "margin": round(float(gaps[i, position]), 4)})
    flat = gaps.flatten()
    return {
        "target": str(target),
        "num_prompts": ref.shape[0],
        "new_tokens": args.new_tokens,
        "median_margin": round(float(flat.median()), 4),
        "margin_p10": round(float(flat.quantile(0.1)), 4),
        "below": {str(t): int((flat < t).sum()) for t in THRESHOLDS},
        "positions": flat.numel(),
        "prompts_with_a_margin_below": {str(t): int((gaps < t).any(1).sum()) for t in THRESHOLDS},
        "bf16_flips": flips,
        "largest_flip_margin": max((f["margin"] for f in flips), default=None),
        "margins": [round(float(g), 4) for g in flat],
    }


def table(r: dict) -> str:
    rows = [
        (f"< {t}", r["below"][str(t)], f"{100 * r['below'][str(t)] / r['positions']:.1f}%",
         r["prompts_with_a_margin_below"][str(t)])
        for t in THRESHOLDS
    ]  # fmt: skip
    head = (
        f"{r['num_prompts']} prompts x {r['new_tokens']} greedy tokens; median margin "
        f"{r['median_margin']}, 10th percentile {r['margin_p10']}\n\n"
    )
    flips = ", ".join(f"prompt {f['prompt']} at {f['position']} ({f['margin']})" for f in r["bf16_flips"])
    tail = (
        f"\n\nbf16 against float32: {len(r['bf16_flips'])} of {r['num_prompts']} prompts differ; "
        f"float32 margin where they first differ: {flips or 'none'}; largest {r['largest_flip_margin']}"
    )
    return head + c.markdown_table(("margin", "positions", "share", "prompts with one"), rows) + tail


def plot(r: dict, results: Path) -> None:
    plt = c.pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.5))
    margins = [max(m, 1e-3) for m in r["margins"]]
    bins = [10 ** (k / 10) for k in range(-30, 12)]
    ax.hist(margins, bins=bins, color="#888", label="greedy positions (float32 target)")
    for f in r["bf16_flips"]:
        ax.axvline(max(f["margin"], 1e-3), color="#c33", lw=1)
    near_tie = engine_run.NEAR_TIE
    ax.axvline(near_tie, color="#36c", ls="--", label=f"NEAR_TIE = {near_tie} in the GPU tests")
    ax.plot([], [], color="#c33", label="where bf16 picks another token")
    ax.set_xscale("log")
    ax.set_xlabel("margin: top-1 minus top-2 logprob (nats)")
    ax.set_ylabel("positions")
    ax.legend(fontsize=8)
    c.save_figure(fig, results, NAME)


def main() -> None:
    args = arguments()
    c.apply_threads(args)
    if args.from_json:
        import json

        c.publish(args, NAME, json.loads(args.from_json.read_text()), plot, table, measured_on=None)
        return
    c.publish(args, NAME, measure(args), plot, table, measured_on="cpu")


if __name__ == "__main__":
    main()
