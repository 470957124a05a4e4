"""Speed as users measure it: SGLang's own serving benchmark against ``launch_server``.

The GPU pair (its tokenizer makes the pair's language text) is served by ``python -m
sglang.launch_server`` in every configuration of ``configs.SPEEDUP`` (``benchmarks/configs.py``: no
speculation; stock SGLang with the same draft, top-level ids, so it serves its default layers; the
plugin at several steps and with a tree), side by side with capped KV pools, each server's memory
share the suite's divided among them. Each is measured alone by SGLang's client, ``python -m
sglang.benchmark.serving`` (``sglang.bench_serving`` in older releases), on a ``custom`` dataset of
the pair's language written as text, at each concurrency in ``--concurrency``, after its own warm-up
requests, for ``--rounds`` rounds in rotating order. Reported: output tokens/s, median time per
output token, the accept length bench_serving reads from the server, the spread between rounds, and
each one's ratio to no speculation in the same round.

    python -m benchmarks.speedup --logs /tmp/speedup                         # on the GPU machine
    python -m benchmarks.speedup --quick --from-json results/speedup.json    # render only

The client runs in this process through its own command line
(``harness.server_run.run_client``: the same arguments as the shell command each
run's log names, one import for all runs), on the dataset ``server_run.write_dataset`` writes, with
``server_run.bench_command``'s arguments.
"""

from __future__ import annotations

import statistics
from pathlib import Path

from benchmarks import _common, configs
from harness.server_run import (
    Server,
    bench_command,
    client_record,
    run_client,
    write_dataset,
)

NAME = "speedup"
CONCURRENCY = (1, 4, 16, 64)
SUITE = configs.SPEEDUP
CONFIGS = SUITE.servers
"""The servers, by id (``configs.SERVERS``), in the order they are started and rotated."""
RESULT_KEYS = ("output_throughput", "median_tpot_ms", "median_ttft_ms", "accept_length", "completed")


def summarize(rounds: dict[str, dict[str, list[dict]]]) -> dict:
    """Per configuration and concurrency (in numeric order, whatever order the JSON keeps): medians
    over rounds, the spread (min-max) of tokens/s, and the median of each round's ratio to no
    speculation (None where no speculation was not run)."""
    base = rounds.get(configs.BASELINE)
    out = {}
    for name, by_c in rounds.items():
        out[name] = {}
        for c, runs in sorted(by_c.items(), key=lambda item: int(item[0])):
            if not runs:  # a run stopped before this one was measured
                continue
            rates = [r["output_throughput"] for r in runs]
            ratios = [
                r["output_throughput"] / b["output_throughput"] for r, b in zip(runs, (base or {}).get(c, []))
            ]
            accept = [r["accept_length"] for r in runs if r.get("accept_length")]
            out[name][c] = {
                "tokens_per_s": statistics.median(rates), "spread": [min(rates), max(rates)],
                "tpot_ms": statistics.median(r["median_tpot_ms"] for r in runs),
                "accept_length": statistics.median(accept) if accept else None,
                "vs_no_speculation": statistics.median(ratios) if ratios else None,
            }  # fmt: skip
    return out


def render(result: dict) -> str:
    header = ["server", "concurrency", "output tokens/s (min-max)", "TPOT ms", "accept length",
              "vs no speculation"]  # fmt: skip
    rows = [
        [configs.label(name), c, f"{s['tokens_per_s']:.0f} ({s['spread'][0]:.0f}-{s['spread'][1]:.0f})", f"{s['tpot_ms']:.2f}",
         _common.fmt(s["accept_length"]), _common.ratio(s["vs_no_speculation"])]
        for name, by_c in summarize(result["rounds"]).items() for c, s in by_c.items()
    ]  # fmt: skip
    return _common.markdown_table(header, rows)


def plot(result: dict, results_dir: Path, name: str = NAME, title: str | None = None) -> Path:
    """Output tokens/s and the ratio to no speculation against concurrency, one line per server."""
    plt = _common.pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    summary = summarize(result["rounds"])
    for server, by_c in summary.items():
        levels = [int(c) for c in by_c]
        stock = server in configs.SERVERS and configs.SERVERS[server].stock
        style = {"linestyle": "--" if stock else "-", "marker": "o", "label": configs.label(server)}
        left.plot(levels, [s["tokens_per_s"] for s in by_c.values()], **style)
        right.plot(levels, [s["vs_no_speculation"] or float("nan") for s in by_c.values()], **style)
    panels = [(left, "output tokens/s (median)"), (right, "tokens/s vs no speculation")]
    levels = sorted({int(c) for by_c in summary.values() for c in by_c})
    _common.log2_axes(panels, "concurrency (requests in flight)", levels)
    right.legend(fontsize=7)
    env = result.get("env", {})
    title = title or f"SGLang's serving client, tiny GPU pair: {env.get('gpu', 'GPU')}, {env.get('date', '')}"
    fig.suptitle(title, fontsize=10)
    return _common.save_figure(fig, results_dir, name)


def server_kwargs(server_id: str, target, drafts: dict) -> dict:
    """``launch_server``'s arguments for the server ``server_id`` of :data:`SUITE` (``drafts``: folder by
    placement); a nested draft is served by the plugin, a top-level one by stock SGLang."""
    return SUITE.kwargs(server_id, target, drafts)


def measure(args) -> dict:
    from sglang_eagle3_embed.doctor.pair import GPU_PAIR, build_pair, write_config_variant

    pair = build_pair(GPU_PAIR, device="cuda")
    logs = args.logs
    logs.mkdir(parents=True, exist_ok=True)
    drafts = {
        "nested": str(pair.draft),
        "top-level": str(write_config_variant(pair.draft, logs / "top-level-draft", placement="top-level")),
    }
    most = prompts_at(max(args.concurrency), args.num_prompts)
    dataset = write_dataset(pair, logs / "language.jsonl", most, args.prompt_len, args.output_len)
    servers = {}
    for name in CONFIGS:  # ports chosen here, apart from each other
        kwargs = server_kwargs(name, pair.target, drafts)
        servers[name] = Server(name, kwargs, logs, ports=[s.port for s in servers.values()])
    rounds = {name: {str(c): [] for c in args.concurrency} for name in CONFIGS}
    try:
        for server in servers.values():
            server.start()
        for server in servers.values():
            print(f"{server.name}: ready in {server.wait_ready(600)} s", flush=True)
        names = list(CONFIGS)
        for r in range(args.rounds):
            for c in args.concurrency:
                for name in names[r % len(names) :] + names[: r % len(names)]:
                    out = logs / f"bench-{r}-{c}-{servers[name].name}.jsonl"
                    command = bench_command(servers[name].port, dataset, str(pair.target), c,
                                            prompts_at(c, args.num_prompts), args.output_len, out, seed=r)  # fmt: skip
                    run_client(command, out.with_suffix(".log"))
                    rounds[name][str(c)].append(client_record(out, RESULT_KEYS))
            _common.write_json(args.results, NAME, {"rounds": rounds, "partial": True})
            print(f"round {r + 1} of {args.rounds} measured", flush=True)
    finally:
        for server in servers.values():
            server.stop()
    return {"rounds": rounds}


def prompts_at(concurrency: int, num_prompts: int) -> int:
    """Requests per run: ``num_prompts``, or four waves at high concurrency."""
    return max(num_prompts, 4 * concurrency)


def main() -> dict:
    p = _common.gpu_parser(__doc__, logs="/tmp/speedup", rounds=3)
    p.add_argument("--concurrency", type=int, nargs="+", default=list(CONCURRENCY))
    p.add_argument("--num-prompts", type=int, default=24, help="requests per run (at least 4 x concurrency)")
    p.add_argument("--prompt-len", type=int, default=8)
    p.add_argument("--output-len", type=int, default=40)
    args = p.parse_args()
    result = _common.saved_or_gpu(p, args, "speedup.py")
    if result is None:
        return _common.publish(args, NAME, measure(args), plot, render, measured_on="cuda")
    return _common.publish(args, NAME, result, plot, render, measured_on=None)


if __name__ == "__main__":
    main()
