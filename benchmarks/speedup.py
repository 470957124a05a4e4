"""Speculation speedup (GPU): output tokens/s and accept length of the plugin
with the embedding draft, against no speculation and stock SGLang with the same draft.

The GPU-sized tiny pair (16-layer DeepSeek-V3 target, EAGLE-3 draft trained on ``[-1, 4, 10]``),
served in bf16 by five engines: no speculation; the plugin at ``--speculative-num-steps`` 3 and 7
(top-k 1, steps + 1 draft tokens); stock SGLang at 3 and 7 with the draft's ids at the top level of
its config (nested ids, SGLang's own format, stop stock SGLang at launch; top-level ids make it serve
the draft its default layers). Engine settings are the GPU tests' (``tests/gpu/engine_run.py``
COMMON: triton attention, pytorch sampling, radix cache off), decode CUDA graphs up to the largest
batch size, no prefill graph (8-token prompts). Per engine, after one warm-up pass per batch size
with the real shapes, ``--repeat`` rounds over the batch sizes (interleaved): the same
``--num-prompts`` prompts of the pair's language sent ``batch`` at a time, greedy, ``--new-tokens``
each. Reports output tokens/s (median of the rounds), accept length (mean
``meta_info["spec_accept_length"]``) and the speedup over no speculation at the same batch size.

The engines start one after another in one worker process (one Python start for all five); SGLang
kills that process when a scheduler dies at startup, and a new worker then serves the engines left.
The result is rewritten every few seconds, so a run stopped from outside keeps what it measured.

    python -m benchmarks.speedup --logs LOGDIR                      # H200 (or via gpu_all.py)
    python -m benchmarks.speedup --quick --from-json results/speedup.json   # render only (tests)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from benchmarks import _common as c
from tests.gpu import engine_run

NAME = "speedup"


def arguments():
    p = c.parser(__doc__)
    p.add_argument("--target", type=Path, help="target folder (default: the GPU-sized tiny pair)")
    p.add_argument(
        "--draft", type=Path, help="EAGLE-3 draft folder, ids nested (default: the GPU-sized tiny pair)"
    )
    p.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 4, 16])
    p.add_argument("--steps", type=int, nargs="+", default=[3, 7], help="--speculative-num-steps values")
    p.add_argument("--num-prompts", type=int, default=16)
    p.add_argument("--prompt-len", type=int, default=8)
    p.add_argument("--new-tokens", type=int, default=40)
    p.add_argument("--repeat", type=int, default=3, help="timed rounds per engine")
    p.add_argument("--logs", type=Path, help="folder for the stock draft variant (default: results/logs)")
    p.add_argument(
        "--from-json", type=Path, help="render the table and plot of an earlier result, measure nothing"
    )
    args = p.parse_args()
    if not args.from_json:
        if args.quick:
            p.error("speedup.py measures on a GPU only; --quick renders a result given with --from-json")
        c.require_cuda("speedup.py")
    return args


def engines(steps: list[int]) -> list[dict]:
    """No speculation, then the plugin and stock SGLang at each number of steps (chains, top-k 1)."""
    out = [{"name": "no-spec", "label": "no speculation", "kind": "none", "steps": None}]
    for kind, label in (("plugin", "plugin"), ("stock", "stock SGLang (top-level ids)")):
        out += [
            {"name": f"{kind}-steps{n}", "label": f"{label}, {n} steps", "kind": kind, "steps": n}
            for n in steps
        ]
    return out


def engine_kwargs(engine: dict, target: Path, drafts: dict, max_batch: int) -> dict:
    common = engine_run.COMMON
    kwargs = {
        **common,
        "model_path": str(target),
        "dtype": "bfloat16",
        "cuda_graph_max_bs_decode": max_batch,
        "disable_prefill_cuda_graph": True,
    }
    if engine["kind"] != "none":
        n = engine["steps"]
        kwargs.update(
            speculative_algorithm="EAGLE3",
            speculative_num_steps=n,
            speculative_eagle_topk=1,
            speculative_num_draft_tokens=n + 1,
            speculative_draft_model_path=str(drafts[engine["kind"]]),
        )
    if engine["kind"] == "plugin":
        kwargs["model_impl"] = "sglang_eagle3_embed"
    return kwargs


def serve(kwargs: dict, job: dict) -> dict:
    """Start one engine, time it over the job's batch sizes, shut it down."""
    import sglang

    run_mode = engine_run.run_mode
    prompts, batch_sizes = job["prompts"], job["batch_sizes"]
    sampling = {"temperature": 0, "max_new_tokens": job["new_tokens"], "ignore_eos": True}
    started = time.time()
    engine = sglang.Engine(**kwargs)
    startup_s = time.time() - started

    def one_pass(batch: int) -> dict:
        return run_mode(engine, f"batches-of-{batch}", prompts, sampling)

    try:
        for batch in batch_sizes:  # warm-up with the real shapes (triton JIT, graph replay paths)
            one_pass(batch)
        runs = c.interleaved(
            {b: (lambda b=b: one_pass(b)) for b in batch_sizes}, job["repetitions"], warmup=0
        )
    finally:
        engine.shutdown()
    by_batch = {}
    for batch, passes in runs.items():
        accept = [a for p in passes for a in p["accept_length"] if a is not None]
        by_batch[str(batch)] = {
            "tokens_per_s": c.stats([p["tokens_per_s"] for p in passes]),
            "accept_length": sum(accept) / len(accept) if accept else None,
        }
    return {"ok": True, "startup_s": startup_s, "by_batch": by_batch}


def job(args) -> dict:
    """Everything the engine worker needs: the engines' kwargs, the prompts, the shapes."""
    from sglang_eagle3_embed.doctor.pair import write_config_variant

    target, draft = c.pair_folders(args.target, args.draft, gpu=True, device="cuda")
    top = write_config_variant(draft, args.logs / "draft-top-level", placement="top-level")
    prompts = c.language_prompts(target, args.num_prompts, args.prompt_len, seed=2026)  # the GPU tests'
    drafts = {"plugin": draft, "stock": top}
    return {
        "target": str(target),
        "draft": str(draft),
        "draft_top_level": str(top),
        "batch_sizes": args.batch_sizes,
        "num_prompts": args.num_prompts,
        "prompt_len": args.prompt_len,
        "new_tokens": args.new_tokens,
        "repetitions": args.repeat,
        "prompts": prompts.tolist(),
        "engines": [
            {**e, "kwargs": engine_kwargs(e, target, drafts, max(args.batch_sizes))}
            for e in engines(args.steps)
        ],
    }


def engine_worker(job_file: Path, out_file: Path) -> None:
    """Serve the job's engines one after another in this process, a JSON line each into ``out_file``.
    An engine's Python error is recorded and the next one starts; SGLang kills this whole process
    when a scheduler dies at startup (its SIGQUIT handler): then ``measure`` starts a new worker."""
    job = json.loads(job_file.read_text())
    for engine in job["engines"]:
        entry = dict(engine)
        try:
            entry.update(serve(engine["kwargs"], job))
        except Exception as err:
            entry.update(ok=False, error=f"{type(err).__name__}: {err}")
        with open(out_file, "a") as f:
            f.write(json.dumps(entry) + "\n")


def measure(args) -> dict:
    """Run engine workers until every engine has a result; rewrite the result every few seconds."""
    args.logs = args.logs or args.results / "logs"
    args.logs.mkdir(parents=True, exist_ok=True)
    spec = job(args)
    result = {"device": "cuda", **{k: v for k, v in spec.items() if k not in ("prompts", "engines")}}
    result.update(env=c.environment("cuda"), engines={})
    out_file = args.logs / "speedup-engines.jsonl"
    out_file.unlink(missing_ok=True)
    for attempt in range(len(spec["engines"])):
        pending = [e for e in spec["engines"] if e["name"] not in result["engines"]]
        if not pending:
            break
        job_file = args.logs / f"speedup-job-{attempt}.json"
        job_file.write_text(json.dumps({**spec, "engines": pending}))
        log = args.logs / f"speedup-worker-{attempt}.log"
        with open(log, "w") as f:
            command = [
                sys.executable,
                "-m",
                "benchmarks.speedup",
                "--engine-worker",
                str(job_file),
                str(out_file),
            ]
            proc = subprocess.Popen(command, stdout=f, stderr=subprocess.STDOUT, cwd=c.ROOT)
            while proc.poll() is None:
                time.sleep(5)
                collect(result, out_file, args.results)
        collect(result, out_file, args.results)
        failed = next((e for e in pending if e["name"] not in result["engines"]), None)
        if failed is not None:  # SGLang killed the worker while this engine started or ran
            error = c.last_error_line(log.read_text(), f"worker exited with {proc.returncode}")
            result["engines"][failed["name"]] = {**failed, "ok": False, "error": error}
            c.write_json(args.results, NAME, result)
    return result


def collect(result: dict, out_file: Path, results_dir: Path) -> None:
    """Add the engines the worker finished to ``result`` and rewrite the result file."""
    if out_file.exists():
        for line in out_file.read_text().splitlines():
            entry = json.loads(line)
            result["engines"][entry["name"]] = entry
    c.write_json(results_dir, NAME, result)


def speedups(result: dict) -> dict:
    """engine -> batch -> tokens/s over no speculation's at the same batch size (None if missing)."""
    base = result["engines"].get("no-spec", {}).get("by_batch", {})
    out = {}
    for name, engine in result["engines"].items():
        out[name] = {}
        for batch, r in engine.get("by_batch", {}).items():
            ref = base.get(batch, {}).get("tokens_per_s", {}).get("median")
            out[name][batch] = r["tokens_per_s"]["median"] / ref if ref else None
    return out


def table(result: dict) -> str:
    ratio = speedups(result)
    rows = []
    for name, engine in result["engines"].items():
        if not engine.get("ok"):
            rows.append((engine["label"], "", f"fails: {engine.get('error', '')[:100]}", "", ""))
            continue
        for batch, r in engine["by_batch"].items():
            rows.append(
                (
                    engine["label"],
                    batch,
                    f"{r['tokens_per_s']['median']:.1f}",
                    c.fmt(r["accept_length"]),
                    c.fmt(ratio[name].get(batch)),
                )
            )
    header = ("engine", "batch size", "output tokens/s", "accept length", "speedup vs no speculation")
    note = (
        f"{result['num_prompts']} prompts x {result['new_tokens']} greedy tokens per pass, sent batch-size "
        f"at a time; medians of {result['repetitions']} rounds. {c.environment_line(result['env'])}"
    )
    return f"{c.markdown_table(header, rows)}\n\n{note}"


def plot(result: dict, results_dir: Path):
    """Accept length and speedup against batch size, one line per speculative engine."""
    plt = c.pyplot()
    ratio = speedups(result)
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    styles = {"plugin": ("#dd8452", "-"), "stock": ("#4c72b0", "--")}
    markers = {3: "o", 7: "s"}
    for name, engine in result["engines"].items():
        if engine["kind"] == "none" or not engine.get("ok"):
            continue
        batches = [int(b) for b in engine["by_batch"]]
        color, line = styles[engine["kind"]]
        style = dict(
            color=color, linestyle=line, marker=markers.get(engine["steps"], "^"), label=engine["label"]
        )
        left.plot(batches, [r["accept_length"] for r in engine["by_batch"].values()], **style)
        right.plot(batches, [ratio[name][str(b)] for b in batches], **style)
    right.axhline(1.0, color="#999999", linewidth=1, label="no speculation")
    for ax, what in (
        (left, "accept length (tokens per verify)"),
        (right, "output tokens/s / no speculation"),
    ):
        ax.set_xscale("log", base=2)
        ax.set_xticks(result["batch_sizes"], [str(b) for b in result["batch_sizes"]])
        ax.set_xlabel("batch size")
        ax.set_ylabel(what)
        ax.grid(alpha=0.3)
    if left.lines:
        left.set_ylim(bottom=1.0)
    right.legend(fontsize=7)
    env = result.get("env", {})
    fig.suptitle(
        f"EAGLE-3 speedup, tiny GPU pair, {env.get('gpu', 'GPU')}, {env.get('date', '')}", fontsize=10
    )
    return c.save_figure(fig, results_dir, NAME)


def main() -> dict:
    if sys.argv[1:2] == ["--engine-worker"]:
        return engine_worker(Path(sys.argv[2]), Path(sys.argv[3]))
    args = arguments()
    result = json.loads(args.from_json.read_text()) if args.from_json else measure(args)
    plot(result, args.results)
    print(table(result))
    return result


if __name__ == "__main__":
    main()
