"""Capture overhead: the target's forward time with the plugin's capture of
``[-1, a, b]`` against stock SGLang capturing three layer outputs, and against no capture.

Three captures of one target, measured in one run, interleaved (none, stock, plugin, then the next
round starting one further on), medians:

- ``none``: stock SGLang, no aux hidden states;
- ``stock``: stock SGLang capturing the outputs of layers 0, a and b (capture indices
  ``[1, a+1, b+1]``, passed as ids ``[a+1, b+1, 1]``: a first id other than 1 is read as raw
  capture indices, ``srt/models/deepseek_v2.py:3470-3473``);
- ``plugin``: ``--model-impl sglang_eagle3_embed`` capturing ``[-1, a, b]`` = embedding output and
  outputs of layers a and b (capture indices ``[0, a+1, b+1]``).

Stock and plugin both copy three ``[tokens, hidden]`` tensors into SGLang's packed aux buffer
(``AuxHiddenStatePacker``, ``srt/layers/aux_hidden_states.py:63-70``): the bytes copied per forward
(captures x tokens x hidden x dtype bytes) are reported; plugin minus stock is zero by construction.

CPU (default): SGLang's real DeepSeek forward through ``sglang_eagle3_embed.doctor.sglang_cpu`` (torch_native
attention, float32, eager), on the tiny CPU target: prefill of batch x seq tokens, then one decode
step of the batch. GPU (``--device cuda``): one process per capture and target, started together,
each holding an SGLang ModelRunner built and timed by SGLang's own one-batch benchmark
(``sglang/benchmark/one_batch.py``: prefill and decode under CUDA graphs), driven in turn so that
only one uses the GPU at a time (``benchmarks/_capture_worker.py``); targets: the GPU-sized tiny target and a
DeepSeek-V3-width configuration written here (hidden 7168, 4 layers, MLA 512+64, 16 routed
experts, bf16, ``--load-format dummy``). Goal: plugin / stock within 1%. Processes of one capture
differ by several percent on the tiny target (its step is bound by launches and Python):
``--replicas N`` starts N processes per capture, pools their rounds and shows each process's median,
the noise floor of the ratios (docs/benchmarks.md).

    TORCHDYNAMO_DISABLE=1 python -m benchmarks.capture_overhead --target TARGET --threads 1
    python -m benchmarks.capture_overhead --quick --target TARGET           # test suite
    python -m benchmarks.capture_overhead --device cuda --logs LOGDIR         # H200 (gpu_all.py)
    python -m benchmarks.capture_overhead --device cuda --tiny-only --replicas 3   # process spread
    python -m benchmarks.capture_overhead --from-json results/capture_overhead.json   # render only
"""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path

from benchmarks import _common as c
from benchmarks import configs
from harness import engine_run

NAME = "capture_overhead"
CONFIGS = ("none", "stock", "plugin")
PHASES = ("prefill", "decode")
WORKER = [sys.executable, "-m", "benchmarks._capture_worker"]
"""The worker's command, without its job (run from the repository root)."""
WIDE = dict(  # DeepSeek-V3's widths are DeepseekV3Config's defaults; a few layers and experts here
    num_hidden_layers=4, first_k_dense_replace=1, n_routed_experts=16, num_experts_per_tok=8, n_group=1,
    topk_group=1, topk_method="noaux_tc", scoring_func="sigmoid", architectures=["DeepseekV3ForCausalLM"],
    moe_layer_freq=1,  # read by SGLang (deepseek_v2.py _is_layer_sparse), absent from DeepseekV3Config
)  # fmt: skip


def arguments():
    p = c.parser(__doc__)
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument(
        "--target", type=Path, help="target folder (default: the tiny target of the device's pair)"
    )
    p.add_argument(
        "--ids", type=int, nargs=3, metavar=("M1", "A", "B"), help="default: -1 2 4 (CPU), -1 4 10 (GPU)"
    )
    p.add_argument("--batch", type=int, help="requests per forward, default 4 (CPU) / 16 (GPU)")
    p.add_argument("--seq", type=int, help="prompt tokens per request, default 64 (CPU) / 128 (GPU)")
    p.add_argument("--decode-steps", type=int, default=16, help="GPU: decode steps timed per round (median)")
    p.add_argument("--repeat", type=int, help="timed rounds, default 20 (--quick: 3)")
    p.add_argument(
        "--logs", type=Path, help="GPU: worker logs and the written wide config (default: results/logs)"
    )
    p.add_argument(
        "--startup-timeout", type=int, default=160, help="GPU: seconds for every worker to be ready"
    )
    p.add_argument(
        "--replicas", type=int, default=1, help="GPU: worker processes per capture (>1 measures the spread "
        "between processes of one capture, the noise floor of the ratios)",
    )  # fmt: skip
    p.add_argument("--tiny-only", action="store_true", help="GPU: measure the tiny target only")
    p.add_argument(
        "--from-json", type=Path, help="render the table and plot of an earlier result, measure nothing"
    )
    args = p.parse_args()
    gpu = args.device == "cuda"
    args.ids = tuple(args.ids or ((-1, 4, 10) if gpu else (-1, 2, 4)))
    if args.ids[0] != -1 or not 1 <= args.ids[1] < args.ids[2]:
        p.error(
            "--ids must be -1 A B with 1 <= A < B (stock captures layer 0's output in the embedding's place)"
        )
    args.batch = args.batch or (16 if gpu else 4)
    args.seq = args.seq or (128 if gpu else 64)
    args.repeat = args.repeat or (3 if args.quick else (10 if gpu else 20))
    if args.replicas < 1:
        p.error("--replicas must be at least 1")
    return args


def capture_indices(config: str, ids) -> list[int]:
    """SGLang ``layers_to_capture`` of each capture (index i = input of layer i; 0 = embedding output)."""
    _, a, b = ids
    return {"none": [], "stock": [1, a + 1, b + 1], "plugin": [0, a + 1, b + 1]}[config]


def stock_layer_ids(ids) -> list[int]:
    """Ids that make stock SGLang capture ``[1, a+1, b+1]``: the first is not 1, so they stay raw."""
    _, a, b = ids
    return [a + 1, b + 1, 1]


def copied_bytes(captures: int, tokens: int, hidden: int, dtype_bytes: int) -> int:
    """Bytes written into the packed aux buffer per forward (the same number is read)."""
    return captures * tokens * hidden * dtype_bytes


def summarise(target: dict, samples: dict, batch: int, seq: int, per_process: dict | None = None) -> dict:
    """One target's entry: ``target`` (name, path, ids, hidden, layers, dtype, dtype_bytes, ...) plus,
    per capture, median times and bytes copied (and, with ``per_process``, each worker process's
    median), and the plugin/stock and plugin/none ratios."""
    configs = {}
    for config in CONFIGS:
        n = len(capture_indices(config, target["ids"]))
        configs[config] = {
            **({"per_process_ms": per_process[config]} if per_process else {}),
            "capture_indices": capture_indices(config, target["ids"]),
            "prefill_ms": c.stats([1000 * s for s in samples[config]["prefill"]]),
            "decode_ms": c.stats([1000 * s for s in samples[config]["decode"]]),
            "bytes_prefill": copied_bytes(n, batch * seq, target["hidden"], target["dtype_bytes"]),
            "bytes_decode": copied_bytes(n, batch, target["hidden"], target["dtype_bytes"]),
        }
    ratio = {
        base: {p: configs["plugin"][f"{p}_ms"]["median"] / configs[base][f"{p}_ms"]["median"] for p in PHASES}
        for base in ("stock", "none")
    }
    entry = {**target, "path": str(target["path"]), "ids": list(target["ids"]), "batch": batch, "seq": seq}
    return {**entry, "configs": configs, "plugin_over": ratio}


def by_phase(runs: dict) -> dict:
    """{capture: [{"prefill": s, "decode": s}, ...]} -> {capture: {"prefill": [s...], "decode": [s...]}}"""
    return {k: {p: [r[p] for r in v] for p in PHASES} for k, v in runs.items()}


def pool_processes(runs: dict) -> tuple[dict, dict]:
    """Runs keyed ``"<capture>/<process>"`` -> (every process's samples pooled per capture, in s;
    each process's median per capture and phase, in ms)."""
    phases, pooled, per_process = by_phase(runs), {}, {}
    for key, samples in phases.items():
        config = key.split("/")[0]
        pooled.setdefault(config, {p: [] for p in PHASES})
        per_process.setdefault(config, {p: [] for p in PHASES})
        for p in PHASES:
            pooled[config][p] += samples[p]
            per_process[config][p].append(1000 * c.stats(samples[p])["median"])
    return pooled, per_process


# ---------------------------------------------------------------- CPU: SGLang's forward on the CPU


def cpu_models(target: Path, ids) -> tuple[dict, object]:
    """The three captures on SGLang's DeepSeek classes (stock twice, the plugin's once)."""
    from sglang.srt.models import deepseek_v2 as stock

    from sglang_eagle3_embed.core.capture.ids import IDS_FIELD
    from sglang_eagle3_embed.doctor import sglang_cpu
    from sglang_eagle3_embed.patch import deepseek_capture as capture
    from sglang_eagle3_embed.patch import deepseek_models as models

    arch = json.loads((target / "config.json").read_text())["architectures"][0]
    built = {}
    for config in CONFIGS:
        cls = getattr(models if config == "plugin" else stock, arch)
        built[config], hf_config = sglang_cpu.load_model(cls, target)
    built["stock"].set_eagle3_layers_to_capture(stock_layer_ids(ids))
    capture.configure(built["plugin"], None, draft_config={"eagle_config": {IDS_FIELD: list(ids)}})
    for config, model in built.items():
        got = sorted(model.model.layers_to_capture)
        if got != capture_indices(config, ids):
            raise RuntimeError(f"{config}: SGLang captures {got}, expected {capture_indices(config, ids)}")
    return built, hf_config


def cpu_forward(model, hf_config, prompts) -> dict:
    """One prefill of ``prompts [B, T]`` and one decode step of the batch, each timed alone."""
    import torch

    from sglang_eagle3_embed.doctor.sglang_cpu import CpuRuntime

    batch, length = prompts.shape
    runtime = CpuRuntime.for_batch(hf_config, batch, length + 1)
    rows = list(range(1, batch + 1))
    with torch.no_grad():
        fb = runtime.extend(rows, prompts.tolist())
        start = time.perf_counter()
        model(fb.input_ids, fb.positions, fb)
        prefill = time.perf_counter() - start
        fb = runtime.decode(rows, prompts[:, -1].tolist())
        start = time.perf_counter()
        model(fb.input_ids, fb.positions, fb)
        decode = time.perf_counter() - start
    return {"prefill": prefill, "decode": decode}


def measure_cpu(args) -> dict:
    import torch

    target = args.target
    if target is None:
        from sglang_eagle3_embed.doctor.pair import PairSpec
        from sglang_eagle3_embed.doctor.tiny_target import build_target

        target = build_target(PairSpec().target)
    models, hf_config = cpu_models(target, args.ids)
    prompts = torch.randint(
        hf_config.vocab_size, (args.batch, args.seq), generator=torch.Generator().manual_seed(0)
    )
    runs = c.interleaved(
        {config: (lambda m=model: cpu_forward(m, hf_config, prompts)) for config, model in models.items()},
        args.repeat,
    )
    about = {
        "name": "tiny CPU target", "path": target, "ids": args.ids, "hidden": hf_config.hidden_size,
        "layers": hf_config.num_hidden_layers, "dtype": "float32", "dtype_bytes": 4, "execution": "eager",
    }  # fmt: skip
    return {
        "device": "cpu",
        "repetitions": args.repeat,
        "targets": [summarise(about, by_phase(runs), args.batch, args.seq)],
    }


# ---------------------------------------------------------------- GPU: SGLang's one-batch benchmark


def write_wide_config(folder: Path, layers: int = 4) -> Path:
    """A DeepSeek-V3-width config (no weights: served with --load-format dummy)."""
    from transformers import DeepseekV3Config

    folder.mkdir(parents=True, exist_ok=True)
    config = DeepseekV3Config(**{**WIDE, "num_hidden_layers": layers})
    config.save_pretrained(folder)
    text = json.loads((folder / "config.json").read_text())
    text["torch_dtype"] = "bfloat16"
    (folder / "config.json").write_text(json.dumps(text, indent=2))
    return folder


def gpu_targets(args) -> list[dict]:
    """The GPU-sized tiny target (its trained weights) and the wide config (dummy weights)."""
    target = args.target
    if target is None:
        from sglang_eagle3_embed.doctor.tiny_target import GPU_TARGET, build_target

        target = build_target(GPU_TARGET, device="cuda")
    targets = [{"name": "tiny GPU target", "path": target, "ids": args.ids, "load_format": "auto"}]
    if not args.tiny_only:
        wide = write_wide_config(args.logs / "wide-target")
        targets.append(
            {"name": "DeepSeek-V3 width, 4 layers", "path": wide, "ids": (-1, 1, 2), "load_format": "dummy"}
        )
    return targets


def worker_job(target: dict, config: str, args) -> dict:
    """The worker's ServerArgs and shapes: the GPU tests' engine settings (triton attention, pytorch
    sampling, radix cache off), bf16, CUDA graphs up to the measured shapes. The workers (a capture
    x target x replica each) share the GPU, so the KV pool is capped in tokens, and
    ``mem_fraction_static`` is ``configs.CAPTURE_WORKERS`` (high, whatever their number: see there)."""
    server = dict(engine_run.BUNDLE)
    tokens = args.batch * (args.seq + args.decode_steps + 1)
    server.update(
        model_path=str(target["path"]),
        dtype="bfloat16",
        load_format=target["load_format"],
        skip_tokenizer_init=True,
        mem_fraction_static=configs.CAPTURE_WORKERS,
        max_total_tokens=4 * tokens,
        cuda_graph_max_bs_decode=args.batch,
        cuda_graph_max_bs_prefill=args.batch * args.seq,
        nccl_port=engine_run.free_port(),
        log_level="info",
        random_seed=0,
    )
    if config != "none":
        layer_ids = (
            capture_indices("plugin", target["ids"]) if config == "plugin" else stock_layer_ids(target["ids"])
        )
        server.update(
            enable_return_aux_hidden_states=True,
            speculative_algorithm="EAGLE3",
            return_aux_hidden_state_layer_ids=layer_ids,
        )
    if config == "plugin":
        server["model_impl"] = "sglang_eagle3_embed"
    return {
        "server": server,
        "batch": args.batch,
        "seq": args.seq,
        "decode_steps": args.decode_steps,
        "expect": {"layers_to_capture": capture_indices(config, target["ids"]), "plugin": config == "plugin"},
    }


class Worker:
    """A ``_capture_worker.py`` process: its log, and its protocol messages in a queue."""

    MARK = "@@capture-worker "

    def __init__(self, name: str, job: dict, log: Path):
        self.name, self.job, self.messages, self.ready = name, job, queue.Queue(), None
        self.log = open(log, "w")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(
            [*WORKER, json.dumps(job)],
            cwd=c.ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            bufsize=1,
        )
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.log.write(line)
            self.log.flush()
            if line.startswith(self.MARK):
                self.messages.put(json.loads(line[len(self.MARK) :]))
        self.messages.put({"exited": self.proc.wait()})

    def receive(self, timeout: float) -> dict:
        try:
            message = self.messages.get(timeout=timeout)
        except queue.Empty:
            raise RuntimeError(f"{self.name}: no answer in {timeout:.0f} s (see {self.log.name})") from None
        if "exited" in message or "error" in message:
            raise RuntimeError(f"{self.name}: {message} (see {self.log.name})")
        return message

    def run(self) -> dict:
        self.proc.stdin.write("run\n")
        self.proc.stdin.flush()
        return self.receive(timeout=300)

    def stop(self):
        self.proc.kill()
        self.proc.wait()
        self.log.close()


def check_ready(worker: Worker) -> None:
    """The worker built what it should: the plugin's classes only for the plugin, and the captures."""
    ready, expect = worker.ready, worker.job["expect"]
    plugin = ready["body"] == "Eagle3EmbedDeepseekV2Model"
    if plugin != expect["plugin"] or sorted(ready["layers_to_capture"]) != expect["layers_to_capture"]:
        raise RuntimeError(f"{worker.name}: built {ready}, expected {expect}")


def start_workers(targets: list[dict], args) -> dict:
    """Every (target, capture, process) worker, started together; returns them once all are ready
    and checked."""
    workers, started = {}, time.time()
    for t, target in enumerate(targets):
        for config in CONFIGS:
            for r in range(args.replicas):
                log = args.logs / f"capture-{t}-{config}{f'-{r}' if r else ''}.log"
                name = f"{target['name']} / {config}{f' #{r}' if r else ''}"
                workers[t, config, r] = Worker(name, worker_job(target, config, args), log)
    for worker in workers.values():
        worker.ready = worker.receive(timeout=max(1.0, started + args.startup_timeout - time.time()))
        check_ready(worker)
    return workers


def measure_gpu(args) -> dict:
    c.require_cuda("capture_overhead.py --device cuda")
    args.logs = args.logs or args.results / "logs"
    args.logs.mkdir(parents=True, exist_ok=True)
    targets, started, workers = gpu_targets(args), time.time(), {}
    try:
        workers = start_workers(targets, args)
        startup_s = time.time() - started
        out = []
        for t, target in enumerate(targets):
            calls = {f"{k}/{r}": workers[t, k, r].run for r in range(args.replicas) for k in CONFIGS}
            pooled, per_process = pool_processes(c.interleaved(calls, args.repeat, warmup=2))
            ready = {k: workers[t, k, 0].ready for k in CONFIGS}
            about = {
                **target, "hidden": ready["plugin"]["hidden"], "layers": ready["plugin"]["layers"],
                "dtype": "bfloat16", "dtype_bytes": 2, "execution": "CUDA graphs", "workers": ready,
            }  # fmt: skip
            out.append(
                summarise(about, pooled, args.batch, args.seq, per_process if args.replicas > 1 else None)
            )
    finally:
        for worker in workers.values():
            worker.stop()
    return {"device": "cuda", "repetitions": args.repeat, "decode_steps": args.decode_steps,
            "processes_per_capture": args.replicas, "startup_s": startup_s, "targets": out}  # fmt: skip


# ---------------------------------------------------------------- table and plot


def time_cell(capture: dict, phase: str) -> str:
    """One capture's median time for ``phase`` in ms, then each worker process's own when measured."""
    cell = f"{capture[f'{phase}_ms']['median']:.3f}"
    own = capture.get("per_process_ms", {}).get(phase)
    return cell + (f" ({', '.join(f'{m:.3f}' for m in own)})" if own else "")


def table(result: dict) -> str:
    """Per target: each capture's median prefill and decode time and bytes copied, then the ratios."""
    rows = []
    for t in result["targets"]:
        for config in CONFIGS:
            r = t["configs"][config]
            copied = f"{r['bytes_prefill'] / 2**20:.2f} MiB / {r['bytes_decode'] / 2**10:.1f} KiB"
            times = (time_cell(r, p) for p in PHASES)
            rows.append((t["name"], config, r["capture_indices"], *times, copied))
        for base, extra in (("stock", "0 (same number of copies)"), ("none", "")):
            ratio = t["plugin_over"][base]
            rows.append(
                (
                    t["name"],
                    f"plugin / {base}",
                    "",
                    f"{ratio['prefill']:.4f}",
                    f"{ratio['decode']:.4f}",
                    extra,
                )
            )
    header = (
        "target",
        "capture",
        "capture indices",
        "prefill ms",
        "decode ms",
        "copied per forward (prefill / decode)",
    )
    shapes = "; ".join(
        f"{t['name']}: hidden {t['hidden']}, {t['layers']} layers, {t['dtype']}, {t['execution']}, prefill "
        f"{t['batch']} x {t['seq']} tokens, decode batch {t['batch']}"
        for t in result["targets"]
    )
    processes = result.get("processes_per_capture", 1)
    pooled = (
        f" ({processes} worker processes per capture: pooled, then each process's own)"
        if processes > 1
        else ""
    )
    return (
        f"{c.markdown_table(header, rows)}\n\n{shapes}; medians of {result['repetitions']} interleaved rounds"
        f"{pooled}."
    )


def plot(result: dict, results_dir: Path):
    """Per target and phase: each capture's median time relative to stock, quartiles as whiskers,
    the goal (stock +/- 1%) shaded."""
    plt = c.pyplot()
    targets = result["targets"]
    fig, axes = plt.subplots(1, 2 * len(targets), figsize=(2.6 * 2 * len(targets), 3.2), squeeze=False)
    colors = {"none": "#999999", "stock": "#4c72b0", "plugin": "#dd8452"}
    for i, (target, phase) in enumerate((t, p) for t in targets for p in PHASES):
        ax = axes[0][i]
        base = target["configs"]["stock"][f"{phase}_ms"]["median"]
        ax.axhspan(0.99, 1.01, color="#55a868", alpha=0.2, label="stock +/- 1%")
        for x, config in enumerate(CONFIGS):
            s = {k: v / base for k, v in target["configs"][config][f"{phase}_ms"].items() if k != "n"}
            whiskers = [[s["median"] - s["q1"]], [s["q3"] - s["median"]]]
            ax.errorbar(x, s["median"], yerr=whiskers, fmt="o", color=colors[config], capsize=4, markersize=7)
            ax.annotate(f"{s['median']:.3f}", (x, s["median"]), xytext=(8, 0), textcoords="offset points",
                        va="center", fontsize=8)  # fmt: skip
        ax.set_xticks(range(len(CONFIGS)), CONFIGS)
        ax.set_xlim(-0.5, len(CONFIGS) - 0.2)
        ax.set_title(f"{target['name']}\n{phase}, stock {base:.3g} ms", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("forward time / stock capture")
    axes[0][0].legend(fontsize=7, loc="best")
    fig.suptitle(
        f"Capture overhead ({result['device']}): plugin [-1, a, b] vs stock three layers vs none", fontsize=10
    )
    return c.save_figure(fig, results_dir, NAME)


def main() -> dict:
    args = arguments()
    if args.from_json:
        return c.publish(args, NAME, json.loads(args.from_json.read_text()), plot, table, measured_on=None)
    c.apply_threads(args)
    result = measure_gpu(args) if args.device == "cuda" else measure_cpu(args)
    return c.publish(args, NAME, result, plot, table, measured_on=args.device)


if __name__ == "__main__":
    main()
