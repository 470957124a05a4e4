"""Start one SGLang Engine, generate greedily, write a JSON result.

Run as a subprocess by the GPU tests (one engine per process; SGLang spawns its own workers):
    python -m tests.gpu.engine_run RESULT.json '{"engine": {...Engine kwargs}, "prompts": [[ids]], "modes": [...]}'
(without "prompts": the fixed PROMPTS; without "modes": "all").

Modes: "all" (one generate call with every prompt), "batches-of-N" (one call per N prompts),
"one-by-one" (batch size 1), "concurrent" (every prompt its own async request, all in flight at
once). Each mode records its outputs, the per-request ``spec_accept_length``, and output tokens
per second. With ``"top_logprobs": 2`` in the job, one more (untimed) pass over every prompt records
each position's margin (top-1 minus top-2 logprob), which tells a near-tie from a real difference.
The result file is rewritten after every mode, so a run that hangs shows where.

Each engine gets its own free ``port`` (unless the job sets one): under DP attention SGLang derives
its TCP ports from it (``srt/server_args.py:817-845``), and the default 30000 collides with any
other DP-attention engine on the host, or with what one stopped by a time limit left behind.

``margins``, ``divergences``, ``unexplained``, ``failure`` and ``missing_result`` are pure
(unit-tested on the CPU, ``tests/unit/gpu/test_engine_run.py``).
"""

import asyncio
import json
import random
import re
import socket
import sys
import time
import traceback

# Margins in nats. On the GPU tests' prompts (test_acceptance.py) the served bf16 target's median
# margin is 1.9 and 23% are below 1.0. Plain decoding (no speculation) on the H200 changed its own
# greedy pick at margins up to 0.06 between batch sizes, and up to 0.78 between one GPU, TP 2 and DP
# attention (docs/benchmarks.md, "Third pass"). The target is a MoE (top-2 of 4 experts per token):
# a near-tied router choice turns last-bit noise into a large logit change, so a few flips go further
# still; those are explained by plain decoding itself producing the same output (``unexplained``).
# A speculation bug (a wrong token accepted, a corrupted cache) shows where the target is sure, and
# in many prompts.
NEAR_TIE = 1.0

PROMPTS = [[(7 * i + j) % 2000 + 5 for j in range(16)] for i in range(8)]
COMMON = dict(  # required by the GPU bundle (shared/gpu/README.md)
    skip_tokenizer_init=True, attention_backend="triton", sampling_backend="pytorch",
    disable_radix_cache=True, mem_fraction_static=0.4, cuda_graph_max_bs_decode=8, log_level="info",
)  # fmt: skip


def margins(meta_info: dict) -> list[float] | None:
    """Top-1 minus top-2 logprob at each output position; None without top logprobs.

    SGLang returns each position's top logprobs as ``(logprob, token_id, text)`` entries, or None
    for a position it has none for (``srt/managers/tokenizer_manager.py:3118-3136``): its margin is
    None, which the lossless check treats as unknown, not as a near-tie."""
    tops = meta_info.get("output_top_logprobs")
    if not tops:
        return None
    gaps = []
    for entries in tops:
        if not entries:
            gaps.append(None)
            continue
        values = sorted((float(e[0]) for e in entries), reverse=True)
        if len(values) < 2:
            raise ValueError("margins need top_logprobs_num >= 2")
        gaps.append(values[0] - values[1])
    return gaps


def divergences(outputs, expected, gaps) -> list[tuple[int, int, float | None]]:
    """``(prompt, position, margin there)`` for each output that differs from ``expected``, at its
    first differing token (margin None when ``gaps`` does not reach that position)."""
    if len(outputs) != len(expected) or len(gaps) != len(expected):
        raise ValueError(f"{len(outputs)} outputs, {len(expected)} expected, {len(gaps)} margin lists")
    found = []
    for prompt, (got, want, gap) in enumerate(zip(outputs, expected, gaps)):
        if got == want:
            continue
        position = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        found.append((prompt, position, gap[position] if position < len(gap) else None))
    return found


def unexplained(outputs, expected, gaps, others=()) -> list[tuple[int, int, float | None]]:
    """The ``divergences`` from ``expected`` that nothing but a bug explains. An output that differs
    is explained if it leaves ``expected`` where the margin is below ``NEAR_TIE``, or if it is that
    prompt's output in one of ``others`` (plain decoding in another batching or layout: the same
    model giving the same tokens without speculation)."""
    return [
        (prompt, position, gap)
        for prompt, position, gap in divergences(outputs, expected, gaps)
        if (gap is None or gap >= NEAR_TIE) and not any(other[prompt] == outputs[prompt] for other in others)
    ]


# SGLang under DP attention talks over TCP on ports derived from ``port``: port + 233 and the seven
# after it (``ZMQ_TCP_PORT_DELTA``, ``srt/server_args.py:728,817-845``)
DERIVED_PORTS = range(233, 233 + 8)
# launch failures that say nothing about the model or the plugin: the host, not the code under test
LAUNCH_ENVIRONMENT = re.compile(
    r"\w*port at \d+ is not available|Port is already in use|Address already in use"
)
FRAME_LINE = re.compile(r'^\s*File "(?:[^"]*/)?([^"/]+)", line \d+, in (\S+)')
EXCEPTION_LINE = re.compile(r"^(?:\[[^\]]*\]:?\s*)*((?:[A-Za-z_][\w.]*)?(?:Error|Exception)\b.*)$")


def free_port(rng=random) -> int:
    """A port that is free, with every port SGLang derives from it under DP attention."""
    for _ in range(200):
        port = rng.randrange(20000, 60000 - DERIVED_PORTS[-1])
        if all(_bindable(p) for p in (port, *(port + d for d in DERIVED_PORTS))):
            return port
    raise RuntimeError("no free port range found for the engine")


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def failure(result: dict) -> str:
    """What stopped a failed engine: the last exception line of its log (its ``error`` if the log
    has none), prefixed with the file and function that raised it when the traceback names them,
    numbers in the message masked: two engines failing alike compare equal, and two raising the
    same exception type in different places do not."""
    where, found = "", []
    for line in result.get("log", "").splitlines():
        if frame := FRAME_LINE.match(line):
            where = f"{frame.group(1)} in {frame.group(2)}: "
        elif match := EXCEPTION_LINE.match(line):
            found.append((where, match.group(1)))
            where = ""
    where, message = found[-1] if found else ("", result.get("error", ""))
    return where + re.sub(r"\d+", "N", message.strip())


def missing_result(name: str, returncode: int, timeout: int | None, modes_done: list) -> str:
    """The ``error`` of an engine process that wrote no final result: killed at the time limit
    (``timeout`` given), or ended on its own, as when SGLang's ``kill_process_tree`` takes the
    whole process down after a worker failed (its log then holds the worker's traceback)."""
    if timeout is not None:
        return f"{name}: killed after {timeout} s without a result (modes finished: {modes_done})"
    return f"{name}: the engine process ended with code {returncode} without a result (modes finished: {modes_done})"


def launch_environment(result: dict) -> str | None:
    """The error line if the engine could not start because of the host (a port in use), else None."""
    text = f"{result.get('error', '')}\n{result.get('log', '')}"
    found = LAUNCH_ENVIRONMENT.search(text)
    return None if found is None else text[found.start() :].splitlines()[0][:300]


def summarize(outputs, seconds):
    tokens = sum(len(o["output_ids"]) for o in outputs)
    return {
        "outputs": [o["output_ids"] for o in outputs],
        "accept_length": [o["meta_info"].get("spec_accept_length") for o in outputs],
        "verify_ct": [o["meta_info"].get("spec_verify_ct") for o in outputs],
        "tokens_per_s": round(tokens / seconds, 1),
    }


def run_mode(engine, mode, prompts, sampling):
    started = time.time()
    if mode == "all":
        outputs = engine.generate(input_ids=prompts, sampling_params=sampling)
    elif mode.startswith("batches-of-"):
        size, outputs = int(mode.removeprefix("batches-of-")), []
        for start in range(0, len(prompts), size):
            outputs += engine.generate(input_ids=prompts[start : start + size], sampling_params=sampling)
    elif mode == "one-by-one":
        outputs = [engine.generate(input_ids=[p], sampling_params=sampling)[0] for p in prompts]
    elif mode == "concurrent":

        async def many():
            calls = [engine.async_generate(input_ids=p, sampling_params=sampling) for p in prompts]
            return await asyncio.gather(*calls)

        # on the Engine's own loop: its tokenizer manager receives results there (a new loop from
        # asyncio.run would wait forever for them)
        outputs = engine.loop.run_until_complete(many())
    else:
        raise ValueError(mode)
    return summarize(outputs, time.time() - started)


def main(result_path: str, job: dict) -> None:
    result = {"kwargs": job["engine"]}
    prompts = job.get("prompts") or PROMPTS
    sampling = {"temperature": 0, "max_new_tokens": job.get("max_new_tokens", 32), "ignore_eos": True}
    started = time.time()
    try:
        import sglang as sgl
        import torch

        result["gpu"] = torch.cuda.get_device_name(0)
        result["sglang"] = sgl.__version__
        engine = sgl.Engine(**{**COMMON, "port": free_port(), **job["engine"]})
        result["startup_s"] = round(time.time() - started, 1)
        # warm-up with the real shapes: the first pass on a fresh machine pays triton JIT compilation
        engine.generate(input_ids=prompts, sampling_params=sampling)
        result["modes"] = modes = {}
        for mode in job.get("modes", ["all"]):
            modes[mode] = run_mode(engine, mode, prompts, sampling)
            _write(result_path, result)
        if job.get("top_logprobs"):
            scored = engine.generate(
                input_ids=prompts, sampling_params=sampling, return_logprob=True,
                top_logprobs_num=job["top_logprobs"],
            )  # fmt: skip
            result["margins"] = [margins(o["meta_info"]) for o in scored]
            result["margins_outputs"] = [o["output_ids"] for o in scored]
        first = next(iter(modes.values()))
        result["outputs"], result["accept_length"] = first["outputs"], first["accept_length"]
        engine.shutdown()
        result["ok"] = True
    except BaseException as err:
        result.update(
            ok=False, error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc()[-4000:]
        )
    _write(result_path, result)


def _write(result_path: str, result: dict) -> None:
    with open(result_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
