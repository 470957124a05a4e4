"""Load and faults against one ``launch_server`` process: the scenario of
``tests/gpu/test_load_faults.py``, whose result ``benchmarks/load.py`` renders.

Per server, alone on the GPU (a file lock; the ``ready`` barrier waits until every server of the
run has started, and again until every one has finished, so that no other server's start or stop
moves the GPU memory read here):

1. a fixed set of prompts, greedy, all at once (the reference);
2. load, two rounds: SGLang's own client (``sglang.benchmark.serving``, run in this process by
   ``server_run.run_client``) with ``random-ids`` prompts of 16-64 tokens and outputs of 16-64 (EOS
   ignored), at each concurrency of ``CONCURRENCY``, streaming and not; after each phase the
   server's load (``/v1/loads``) once idle and the GPU's free memory;
3. faults (``FAULTS``), each followed by the server's load once idle;
4. the fixed prompts again.

``requests(c)`` requests per phase: 2816 per server over the two rounds.
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SERVERS = {
    "faults-plugin": "plugin",
    "faults-stock-hand-written": "stock SGLang, hand-written indices",
    "faults-plugin-planted-leak": "plugin, planted leak",
}
"""The servers of a run (job name: label), as ``test_load_faults.py`` starts them and
``benchmarks/load.py`` shows them."""
PLUGIN, STOCK, LEAK = SERVERS
CONCURRENCY = (1, 16, 64, 256)
CONTEXT = 256  # the GPU pair's max_position_embeddings
GREEDY = {"temperature": 0, "max_new_tokens": 40, "ignore_eos": True}
LONG = {**GREEDY, "max_new_tokens": CONTEXT - 16}  # with an 8-token prompt and 4 draft slots: fits
BURST = 512
INVALID = {
    "temperature": {"temperature": -1},
    "top_p": {"top_p": 2.0},
    "max_new_tokens": {"max_new_tokens": -1},
}
FAULTS = ("disconnect", "abort", "over-context", *(f"invalid-{k}" for k in INVALID), "burst")
LOAD_KEYS = (
    "completed", "output_throughput", "median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms",
    "median_e2e_latency_ms", "p99_e2e_latency_ms",
)  # fmt: skip


def requests(concurrency: int) -> int:
    return max(2 * concurrency, 32)


def load_command(port: int, target, concurrency: int, stream: bool, out: Path) -> list[str]:
    """SGLang's client's arguments: ``random-ids`` prompts of 16-64 tokens (sent as text), outputs
    of 16-64 tokens, greedy, ``concurrency`` requests in flight."""
    return [
        "--backend", "sglang", "--host", "127.0.0.1", "--port", str(port), "--dataset-name", "random-ids",
        "--tokenizer", str(target), "--num-prompts", str(requests(concurrency)), "--random-input-len", "64",
        "--random-output-len", "64", "--random-range-ratio", "0.25", "--max-concurrency", str(concurrency),
        "--request-rate", "inf", "--temperature", "0", "--warmup-requests", "1", "--output-file", str(out),
        "--seed", str(concurrency), "--disable-tqdm", *([] if stream else ["--disable-stream"]),
    ]  # fmt: skip


def free_mb() -> float:
    """Free GPU memory in MiB, as the driver reports it (every process on the GPU counted)."""
    import torch

    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0] / 2**20


def settle(server, timeout: float = 60) -> dict:
    """The server's load once nothing runs or waits (or after ``timeout``)."""
    deadline = time.time() + timeout
    while True:
        load = server.loads()
        if (load["num_running_reqs"] == 0 and load["num_waiting_reqs"] == 0) or time.time() > deadline:
            return load
        time.sleep(0.5)


def load_phase(server, target, concurrency: int, stream: bool, logs: Path) -> dict:
    from harness.server_run import client_record, run_client

    out = logs / f"{server.name}-load-{concurrency}-{'stream' if stream else 'whole'}.jsonl"
    command = load_command(server.port, target, concurrency, stream, out)
    try:
        run_client(command, out.with_suffix(".log"))
    except Exception as err:  # reported per phase; the tests decide
        return {"error": f"{type(err).__name__}: {str(err)[-1500:]}"}
    return client_record(out, LOAD_KEYS)


def disconnect(server, prompts) -> dict:
    """A client that reads 3 events of a long stream and closes the connection."""
    events = server.stream({"input_ids": prompts[0], "sampling_params": LONG}, events=3)
    return {"events_read": len(events)}


def abort(server, prompts) -> dict:
    """A long streamed request aborted through ``/abort_request`` as soon as it streams."""
    events, started = [], threading.Event()
    payload = {"input_ids": prompts[1], "sampling_params": LONG, "rid": "abort-me"}

    def read():
        events.extend(server.stream(payload, on_event=lambda e: started.set()))

    reader = threading.Thread(target=read)
    reader.start()
    started.wait(timeout=120)
    status = server.abort("abort-me")
    reader.join(timeout=120)
    last = events[-1] if events else {}
    finish = (last.get("meta_info") or {}).get("finish_reason") or {}
    return {"status": status, "finish": finish.get("type"), "tokens": len(last.get("output_ids") or [])}


def over_context(server, prompts) -> dict:
    status, body = server.request("/generate", {"input_ids": [1] * (CONTEXT + 8), "sampling_params": GREEDY})
    return {"status": status, "message": str(body)[:300]}


def invalid(name: str):
    def send(server, prompts) -> dict:
        sampling = {**GREEDY, **INVALID[name]}
        status, body = server.request("/generate", {"input_ids": prompts[0], "sampling_params": sampling})
        return {"status": status, "message": str(body)[:300]}

    return send


def burst(server, prompts) -> dict:
    """``BURST`` requests at once, each from its own connection, far above
    ``--max-running-requests``: how many came back whole."""

    def one(k):
        return server.request(
            "/generate", {"input_ids": prompts[k % len(prompts)], "sampling_params": GREEDY}
        )

    with ThreadPoolExecutor(BURST) as pool:
        answers = list(pool.map(one, range(BURST)))
    whole = sum(
        status == 200 and len(body["output_ids"]) == GREEDY["max_new_tokens"] for status, body in answers
    )
    return {"sent": BURST, "whole": whole, "statuses": sorted({status for status, _ in answers})}


CASES = {
    "disconnect": disconnect, "abort": abort, "over-context": over_context,
    **{f"invalid-{k}": invalid(k) for k in INVALID}, "burst": burst,
}  # fmt: skip


def scenario(logs: Path, lock: Path, target, prompts, ready: threading.Barrier, faults: bool = True,
             memory=free_mb):  # fmt: skip
    """The job's ``after`` for ``server_run.run_servers``: the scenario above, on one server
    (``memory``: what reads the GPU's free memory)."""

    def reading(server) -> dict:
        """The KV pool settled (:func:`settle`) and the GPU's free memory: the leak figures."""
        return {**settle(server), "free_mb": memory()}

    def run(server) -> dict:
        # a server that failed to start breaks the barrier: the others still run, its test reports it
        with contextlib.suppress(threading.BrokenBarrierError):
            ready.wait(timeout=600)
        with open(lock, "w") as held:
            fcntl.flock(held, fcntl.LOCK_EX)
            result = {"idle": reading(server), "phases": []}
            result["before"] = server.generate(prompts, GREEDY, "all")
            for round_ in (1, 2):  # round 1 sees every shape: the allocator keeps what it reserved
                for concurrency in CONCURRENCY:
                    for stream in (True, False):
                        figures = load_phase(server, target, concurrency, stream, logs)
                        result["phases"].append(
                            {"round": round_, "concurrency": concurrency, "stream": stream, **figures,
                             **reading(server)}
                        )  # fmt: skip
            if faults:
                result["faults"] = {name: {**case(server, prompts), "after": settle(server)}
                                    for name, case in CASES.items()}  # fmt: skip
            result["after"] = server.generate(prompts, GREEDY, "all")
            result["end"] = reading(server)
            fcntl.flock(held, fcntl.LOCK_UN)
        # no server stops (freeing its memory) while another one still measures
        with contextlib.suppress(threading.BrokenBarrierError):
            ready.wait(timeout=900)
        return result

    return run


def summary(results: dict) -> dict:
    """What ``benchmarks/load.py`` renders: per server, its scenario or its error."""
    out = {}
    for name, result in results.items():
        after = result.get("after")
        if not after:
            out[name] = {"error": result.get("error")}
            continue
        out[name] = {
            **{k: after[k] for k in ("idle", "phases", "end") if k in after},
            "faults": after.get("faults"),
            "accept_length": {k: after[k]["accept_length"] for k in ("before", "after")},
            "same_outputs": after["before"]["outputs"] == after["after"]["outputs"],
        }
    return out
