"""Start one SGLang Engine, generate greedily, write a JSON result.

Run as a subprocess by the GPU tests and benchmarks (one engine per process; SGLang spawns its own
workers):
    python -m harness.engine_run RESULT.json '{"engine": {...Engine kwargs}, "prompts": [[ids]], ...}'

Job keys: ``prompts`` (token-id lists, any lengths; default :data:`PROMPTS`), ``max_new_tokens``,
``modes`` (default ``["all"]``), ``env`` (variables set before the engine starts; SGLang's processes
inherit them), ``warmup`` (default true: one untimed pass over the prompts first), ``timing`` (below).

Modes: "all" (one generate call with every prompt), "batches-of-N" (one call per N prompts),
"one-by-one" (batch size 1), "concurrent" (every prompt its own async request, all in flight at
once). Each mode records its outputs, the per-request ``spec_accept_length``, and output tokens per
second. The result file is rewritten after every mode, so a run that hangs shows where.

``timing``: ``{"barrier": DIR, "engines": N, "modes": [...], "rounds": R, "prompts": [...]}``. Engines that share a GPU
run their correctness modes side by side, then time in turn: each marks ``DIR/<name>.done``, waits
until N engines are done (or gone: the pool marks an engine that exited ``.gone``), then times the
modes R times holding ``DIR/timing.lock``, so that no other engine uses the GPU meanwhile.

Each engine gets its own free ``port`` (unless the job sets one): under DP attention SGLang derives
its TCP ports from it (``srt/server_args.py:817-845``), and the default 30000 collides with any
other DP-attention engine on the host, or with what one stopped by a time limit left behind.

``differences``, ``regime``, ``failure``, ``missing_result``, ``launch_environment``, ``finished``,
``outcome``, ``alike``, ``accept_mean`` and ``free_port`` are pure
(unit-tested on the CPU, ``tests/unit/harness/test_engine_run.py``).
"""

import asyncio
import fcntl
import json
import os
import random
import re
import socket
import sys
import time
import traceback
from pathlib import Path

PROMPTS = [[(7 * i + j) % 2000 + 5 for j in range(16)] for i in range(8)]
BUNDLE = dict(attention_backend="triton", sampling_backend="pytorch", disable_radix_cache=True)
"""What the GPU bundle requires of every engine and server (shared/gpu/README.md)."""
COMMON = dict(
    **BUNDLE, skip_tokenizer_init=True, mem_fraction_static=0.4, cuda_graph_max_bs_decode=8, log_level="info"
)


DET = {"enable_deterministic_inference": True}


def spec(steps: int, topk: int = 1, tokens: int | None = None) -> dict:
    """EAGLE-3 at ``steps`` draft steps, top-k ``topk``, ``tokens`` draft tokens (a chain's
    ``steps + 1`` by default)."""
    return dict(
        speculative_algorithm="EAGLE3", speculative_num_steps=steps, speculative_eagle_topk=topk,
        speculative_num_draft_tokens=tokens or steps + 1,
    )  # fmt: skip


def language_prompts(pair, count: int, length: int) -> list[list[int]]:
    """``count`` prompts of ``length`` tokens in the tiny pair's language, the same in every test
    (seed 2026)."""
    import torch

    return pair.language.sample(count, length, torch.Generator().manual_seed(2026)).tolist()


TILE = 32
"""Keys per tile of SGLang's triton decode kernel (``kernels/ops/attention/decode_attention.py:818``).
Under deterministic inference plain decoding and the speculative verify pass (the unified extend
kernel, tiles of 64) give bit-equal logits while a request attends at most this many keys."""


def regime(prompts) -> list[int]:
    """Per prompt, how many output tokens have logits that attended at most :data:`TILE` keys (token
    ``i`` attends ``len(prompt) + i`` keys; the first comes from the prefill, which uses the same
    kernel in both paths, so it is always in)."""
    return [max(1, TILE - len(p) + 1) for p in prompts]


def differences(outputs, expected, limit=None) -> list[tuple[int, int, int | None, int | None]]:
    """``(prompt, position, token, expected token)`` at the first differing token of each output
    that differs from ``expected`` (None where one output is shorter). ``limit``: compare only the
    first ``limit[prompt]`` tokens of each output."""
    if len(outputs) != len(expected):
        raise ValueError(f"{len(outputs)} outputs against {len(expected)} expected")
    found = []
    for prompt, (got, want) in enumerate(zip(outputs, expected)):
        if limit is not None:
            got, want = got[: limit[prompt]], want[: limit[prompt]]
        if got == want:
            continue
        position = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        found.append((prompt, position, _token(got, position), _token(want, position)))
    return found


def _token(sequence, position):
    return sequence[position] if position < len(sequence) else None


# SGLang under DP attention talks over TCP on ports derived from ``port``: port + 233 and the seven
# after it (``ZMQ_TCP_PORT_DELTA``, ``srt/server_args.py:728,817-845``)
DERIVED_PORTS = range(233, 233 + 8)
# launch failures that say nothing about the model or the plugin: the host, not the code under test
LAUNCH_ENVIRONMENT = re.compile(
    r"\w*port at \d+ is not available|Port is already in use|Address already in use"
)
FRAME_LINE = re.compile(r'^\s*File "(?:[^"]*/)?([^"/]+)", line \d+, in (\S+)')
EXCEPTION_LINE = re.compile(r"^(?:\[[^\]]*\]:?\s*)*((?:[A-Za-z_][\w.]*)?(?:Error|Exception)\b.*)$")


def ephemeral_floor(path="/proc/sys/net/ipv4/ip_local_port_range") -> int:
    """The lowest port the kernel hands out to connections (gloo's and NCCL's among them)."""
    try:
        return int(Path(path).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def free_port(rng=random, taken=(), floor=None) -> int:
    """A port that is free, with every port SGLang derives from it under DP attention, below the
    kernel's ephemeral range (a derived port there can be handed to another process's connection
    between this check and SGLang's bind) and clear of the ranges of the ports in ``taken``."""
    high = (floor or ephemeral_floor()) - DERIVED_PORTS[-1] - 1
    span = DERIVED_PORTS[-1]
    for _ in range(200):
        port = rng.randrange(10000, high)
        if any(abs(port - other) <= span for other in taken):
            continue
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


def finished(results: dict, *names: str) -> list[dict]:
    """The named results, asserting that each engine or server finished (else its error and the
    tail of its log)."""
    for name in names:
        result = results[name]
        assert result["ok"], (
            f"{name}: {result.get('error')}\n{result.get('traceback') or result['log'][-3000:]}"
        )
    return [results[n] for n in names]


def outcome(result: dict) -> str:
    """How a run ended, in one line: ``finished``, or its error and where it raised."""
    return "finished" if result.get("ok") else f"{result.get('error')}; raised {failure(result)}"


def started(results: dict, *names: str) -> list[dict]:
    """The named results, failing the test when one could not start because of the host (then
    nothing was compared)."""
    import pytest

    for name in names:
        if not results[name]["ok"] and (cause := launch_environment(results[name])):
            pytest.fail(f"{name} could not start on this host ({cause}); nothing was compared")
    return [results[n] for n in names]


def alike(plugin: dict, stock: dict) -> None:
    """The plugin's run and stock SGLang's both finished with the same tokens, or both failed with
    the same exception in the same place (:func:`failure`), not just any failure."""
    assert plugin["ok"] == stock["ok"], (plugin.get("error"), stock.get("error"))
    if plugin["ok"]:
        assert plugin["outputs"] == stock["outputs"]
    else:
        assert failure(plugin) == failure(stock), (plugin["error"], stock["error"])


def accept_mean(values) -> float:
    """The mean of the per-request ``spec_accept_length`` values a run reported (None skipped)."""
    values = [v for v in values if v is not None]
    assert values, "the server reported no spec_accept_length"
    return sum(values) / len(values)


def launch_environment(result: dict) -> str | None:
    """The error line if the engine could not start because of the host (a port in use), else None."""
    text = f"{result.get('error', '')}\n{result.get('log', '')}"
    found = LAUNCH_ENVIRONMENT.search(text)
    return None if found is None else text[found.start() :].splitlines()[0][:300]


# an engine that crashes would first spend a minute on crash diagnostics (py-spy and CUDA core dumps,
# then SGLang's 60 s wait: srt/managers/tokenizer_manager.py:3395-3397,3481-3501) before exiting; the harness reads
# the log instead. Set either variable to 1 to get them back.
CRASH_DIAGNOSTICS_OFF = {"SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0", "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "0"}
HOME = Path(__file__).resolve().parents[1]
"""The repository root the harness was imported from: an engine process started there imports the
same copy of the harness and of the package."""


def launch(name: str, job: dict, logs: Path):
    """Start ``python -m harness.engine_run`` for ``job`` in its own session (so
    that it can be killed with every process SGLang spawns); its log and result go to
    ``logs/<name>.*``."""
    import subprocess

    result_path = logs / f"{name}.json"
    result_path.unlink(missing_ok=True)
    with open(logs / f"{name}.log", "w") as log:
        return subprocess.Popen(
            [sys.executable, "-m", __spec__.name, str(result_path), json.dumps(job)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=HOME,
            env={**CRASH_DIAGNOSTICS_OFF, **os.environ},
        )  # fmt: skip


def collect(name: str, proc, logs: Path, deadline: float) -> dict:
    """Wait for an engine until ``deadline`` (time.time()), kill it with its session past it, and
    return its result with its log (``ok`` False and the reason when it wrote none)."""
    import signal
    import subprocess

    killed_at = None
    try:
        returncode = proc.wait(timeout=max(0.0, deadline - time.time()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        returncode, killed_at = proc.wait(), round(deadline - proc.started_at)
    result_path = logs / f"{name}.json"
    result = json.loads(result_path.read_text()) if result_path.exists() else {}
    if "ok" not in result:
        result.update(
            ok=False, error=missing_result(name, returncode, killed_at, list(result.get("modes", {})))
        )
    result["returncode"] = returncode
    result["log"] = (logs / f"{name}.log").read_text()
    return result


def run_pool(jobs: dict[str, dict], logs: Path, timeout: int, stagger_s: float = 2.0) -> dict[str, dict]:
    """Run several engines side by side on one GPU (each job's ``engine`` kwargs should cap its KV
    pool with ``max_total_tokens``: SGLang sizes the pool from the memory free at its start). An
    engine that ends without finishing is marked ``.gone`` in its ``timing`` barrier, so that the
    others do not wait for it. Returns each engine's result by name."""
    procs, ports = {}, []
    for name, job in jobs.items():
        # ports chosen here, apart from each other: engines that choose their own can collide
        ports.append(job["engine"].get("port") or free_port(taken=ports))
        job = {**job, "engine": {**job["engine"], "port": ports[-1]}}
        procs[name] = launch(name, job, logs)
        procs[name].started_at = time.time()
        time.sleep(stagger_s)  # SGLang measures free memory at start: do not start all at once
    barriers = {Path(job["timing"]["barrier"]) for job in jobs.values() if job.get("timing")}
    deadline, results, pending = time.time() + timeout, {}, dict(procs)
    while pending:
        for name, proc in list(pending.items()):
            if proc.poll() is None and time.time() < deadline:
                continue
            results[name] = collect(name, proc, logs, deadline)
            for barrier in barriers:  # every engine counts, timed or not
                if not (barrier / f"{name}.done").exists():
                    (barrier / f"{name}.gone").touch()
            del pending[name]
        time.sleep(0.5)
    return results


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
    name = Path(result_path).stem
    result = {"kwargs": job["engine"], "env": job.get("env", {})}
    prompts = job.get("prompts") or PROMPTS
    sampling = {"temperature": 0, "max_new_tokens": job.get("max_new_tokens", 32), "ignore_eos": True}
    os.environ.update(job.get("env", {}))
    started = time.time()
    try:
        import sglang as sgl
        import torch

        result["gpu"] = torch.cuda.get_device_name(0)
        result["sglang"] = sgl.__version__
        engine = sgl.Engine(**{**COMMON, **job["engine"], "port": job["engine"].get("port") or free_port()})
        result["startup_s"] = round(time.time() - started, 1)
        if job.get("warmup", True):  # the real shapes: a fresh machine's first pass pays triton's JIT
            engine.generate(input_ids=prompts, sampling_params=sampling)
        result["modes"] = modes = {}
        for mode in job.get("modes", ["all"]):
            modes[mode] = run_mode(engine, mode, prompts, sampling)
            _write(result_path, result)
        first = next(iter(modes.values()))
        result["outputs"], result["accept_length"] = first["outputs"], first["accept_length"]
        if job.get("timing"):
            result["timing"] = timed(
                engine, name, job["timing"], job["timing"].get("prompts", prompts), sampling
            )
        engine.shutdown()
        result["ok"] = True
    except BaseException as err:
        result.update(
            ok=False, error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc()[-4000:]
        )
    _write(result_path, result)


def timed(engine, name: str, timing: dict, prompts, sampling) -> dict:
    """Time ``timing["modes"]`` alone on the GPU, after every engine of the pool finished its
    correctness modes (see the module docstring)."""
    barrier = Path(timing["barrier"])
    (barrier / f"{name}.done").touch()
    deadline = time.time() + timing.get("wait_s", 600)
    while time.time() < deadline:
        finished = {p.stem for p in barrier.glob("*.done")} | {p.stem for p in barrier.glob("*.gone")}
        if len(finished) >= timing["engines"]:
            break
        time.sleep(0.5)
    out = {}
    with open(barrier / "timing.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for mode in timing["modes"]:
                run_mode(engine, mode, prompts, sampling)  # warm: this shape, right before timing
                runs = [run_mode(engine, mode, prompts, sampling) for _ in range(timing.get("rounds", 2))]
                out[mode] = {
                    "tokens_per_s": [r["tokens_per_s"] for r in runs],
                    "accept_length": runs[-1]["accept_length"],
                }
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return out


def _write(result_path: str, result: dict) -> None:
    with open(result_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
