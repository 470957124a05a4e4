"""Offline probe throughput (CPU and GPU): prompts/s of `probe` per backend.

Times ``run_probe`` (sglang_eagle3_embed/probe.py: greedy target continuation, captures, the draft's
chain under every candidate wiring) over the same prompts for each backend, the backends
interleaved over ``--repeat`` rounds after a warm-up probe of 2 prompts (the engine backend starts
its engines there). Loading and the warm-up are timed apart. Reports prompts/s and generated target
tokens/s (``new_tokens + num_steps`` per prompt, what the probe generates). The progress bar is the
probe's own.

    python -m benchmarks.probe_throughput                        # CPU pair, hf and sglang-cpu
    python -m benchmarks.probe_throughput --quick --no-progress  # test suite
    python -m benchmarks.probe_throughput --size gpu --device cuda --backends hf engine   # GPU
"""

from __future__ import annotations

import time
from pathlib import Path

from benchmarks import _common as c
from harness import engine_run

NAME = "probe_throughput"


def arguments():
    p = c.parser(__doc__)
    p.add_argument("--target", type=Path, help="target folder (default: the tiny pair of --size)")
    p.add_argument("--draft", type=Path, help="draft folder (default: the tiny pair of --size)")
    p.add_argument(
        "--size", choices=["cpu", "gpu"], default="cpu", help="tiny pair built when no folders given"
    )
    p.add_argument(
        "--backends", nargs="+", default=["hf", "sglang-cpu"], choices=["hf", "sglang-cpu", "engine"]
    )
    p.add_argument("--device", default="cpu", help="cpu or cuda (the engine backend always uses cuda)")
    p.add_argument("--num-prompts", type=int, help="default 64 (--quick: 8)")
    p.add_argument("--prompt-len", type=int, default=8)
    p.add_argument("--new-tokens", type=int, help="greedy tokens per prompt, default 40 (--quick: 8)")
    p.add_argument("--num-steps", type=int, default=7, help="chain length (--speculative-num-steps)")
    p.add_argument("--repeat", type=int, help="timed rounds per backend, default 3 (--quick: 1)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    args = p.parse_args()
    args.num_prompts = args.num_prompts or (8 if args.quick else 64)
    args.new_tokens = args.new_tokens or (8 if args.quick else 40)
    args.repeat = args.repeat or (1 if args.quick else 3)
    if "engine" in args.backends or args.device.startswith("cuda"):
        c.require_cuda("probe_throughput.py --device cuda / --backend engine")
    return args


def pair_folders(args) -> tuple[Path, Path]:
    device = "cuda" if args.device.startswith("cuda") else "cpu"
    return c.pair_folders(args.target, args.draft, gpu=args.size == "gpu", device=device)


def engine_args() -> dict:
    """The GPU tests' engine settings (``engine_run.COMMON``: triton attention, pytorch sampling,
    no radix cache), without the token-ids-only flag the engine backend sets itself."""
    return {k: v for k, v in engine_run.COMMON.items() if k != "skip_tokenizer_init"}


def measure(args) -> dict:
    from dataclasses import replace

    from sglang_eagle3_embed.core.readers.model_folder import ModelFolder
    from sglang_eagle3_embed.doctor.backends import make_backend
    from sglang_eagle3_embed.doctor.eagle3_draft import load_draft
    from sglang_eagle3_embed.doctor.probe import run_probe
    from sglang_eagle3_embed.doctor.request import ProbeRequest, load_prompts
    from sglang_eagle3_embed.doctor.wirings import candidate_wirings

    target, draft_dir = pair_folders(args)
    request = ProbeRequest(
        target, draft_dir, device=args.device, num_prompts=args.num_prompts, prompt_len=args.prompt_len,
        new_tokens=args.new_tokens, num_steps=args.num_steps, progress=not args.no_progress,
    )  # fmt: skip
    tokens = load_prompts(request)  # the probe's default prompts (the tiny target's language, its seed)
    config = ModelFolder.read(request.draft, "--draft").config
    loaded, load_s = {}, {}
    for name in args.backends:
        start = time.perf_counter()
        engine = name == "engine"  # the engine backend scores on the GPU
        run = replace(request, backend=name, device="cuda" if engine else request.device,
                      engine_args=engine_args() if engine else {})  # fmt: skip
        backend = make_backend(run.backend, run.target, run.device, dict(run.engine_args))  # as probe_folders
        draft, token_map = load_draft(run.draft, backend.device)
        wirings = candidate_wirings(config, backend.num_layers, width=draft.captures)  # as probe_folders
        loaded[name] = (backend, draft, token_map, wirings)
        load_s[name] = time.perf_counter() - start

    def probe(name: str, part, progress: bool):
        backend, draft, token_map, wirings = loaded[name]
        start = time.perf_counter()
        run_probe(
            backend,
            draft,
            token_map,
            wirings,
            part,
            new_tokens=request.new_tokens,
            steps=request.num_steps,
            progress=progress,
        )
        return time.perf_counter() - start

    warmup_s = {}  # lazy imports, kernels, and the engine backend's engines, which start here
    for name in args.backends:
        warmup_s[name] = probe(name, tokens[:2], progress=False)
    progress = None if request.progress else False
    seconds = c.interleaved(
        {name: (lambda n=name: probe(n, tokens, progress)) for name in args.backends}, args.repeat, warmup=0
    )
    for backend, *_ in loaded.values():
        getattr(backend, "close", lambda: None)()
    generated = args.num_prompts * (args.new_tokens + args.num_steps)
    out = {}
    for name, samples in seconds.items():
        s = c.stats(samples)
        out[name] = {
            "load_s": load_s[name],
            "warmup_s": warmup_s[name],
            "seconds": s,
            "prompts_per_s": args.num_prompts / s["median"],
            "tokens_per_s": generated / s["median"],
            "wirings": len(loaded[name][3]),
        }
    return {
        "target": str(target),
        "draft": str(draft_dir),
        "device": args.device,
        "num_prompts": args.num_prompts,
        "prompt_len": args.prompt_len,
        "new_tokens": args.new_tokens,
        "num_steps": args.num_steps,
        "repetitions": args.repeat,
        "backends": out,
    }


def table(result: dict) -> str:
    rows = [
        (
            name,
            f"{b['load_s']:.1f}",
            f"{b['warmup_s']:.1f}" if "warmup_s" in b else "-",
            f"{b['seconds']['median']:.2f}",
            f"{b['prompts_per_s']:.1f}",
            f"{b['tokens_per_s']:.0f}",
            b["wirings"],
        )
        for name, b in result["backends"].items()
    ]
    header = (
        "backend", "load s", "warm-up s (2 prompts)", "probe s (median)", "prompts/s", "target tokens/s",
        "wirings scored",
    )  # fmt: skip
    return c.markdown_table(header, rows)


def plot(result: dict, results_dir: Path):
    plt = c.pyplot()
    names = list(result["backends"])
    backends = [result["backends"][n] for n in names]
    rate = [b["prompts_per_s"] for b in backends]
    # error bars from the quartiles of the probe's time
    low = [r - result["num_prompts"] / b["seconds"]["q3"] for r, b in zip(rate, backends)]
    high = [result["num_prompts"] / b["seconds"]["q1"] - r for r, b in zip(rate, backends)]
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.bar(names, rate, yerr=[low, high], capsize=4, color=["#4c72b0", "#55a868", "#dd8452"][: len(names)])
    for x, (r, b) in enumerate(zip(rate, backends)):
        ax.text(
            x, r / 2, f"{r:.1f}/s\n{b['tokens_per_s']:.0f} tok/s", ha="center", va="center", color="white"
        )
    ax.set_ylabel("prompts per second")
    ax.set_title(
        f"probe throughput on {result['device']}: {result['num_prompts']} prompts x "
        f"{result['new_tokens']} tokens, {result['num_steps']} steps",
        fontsize=10,
    )
    return c.save_figure(fig, results_dir, NAME)


def main() -> dict:
    args = arguments()
    c.apply_threads(args)
    return c.publish(args, NAME, measure(args), plot, table, measured_on=args.device)


if __name__ == "__main__":
    main()
