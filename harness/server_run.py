"""Serve with ``python -m sglang.launch_server``, as operators do, and talk to it over HTTP.

Used by the GPU tests and benchmarks that must go through the real server (the Kimi-K2.5 tests,
the serving benchmarks). Each :class:`Server` is its own process session (stopped with every
process SGLang spawned); several can share a GPU when each caps its KV pool. ``run_servers`` runs
jobs side by side, one thread each: start, wait for ``/health``, an untimed warm-up pass, then
the modes of ``engine_run`` ("all" is one batched ``/generate``, "one-by-one", "concurrent"), with
the same result layout as ``engine_run`` so that the same comparisons apply.

``run_client`` runs SGLang's own serving client (``python -m sglang.benchmark.serving``) in this
process against such a server; ``client_record`` reads what it wrote.

``write_custom_dataset`` and ``write_dataset`` write token rows (the pair's language) as the
client's ``custom`` dataset; ``bench_command`` is the client's command line for one speed run of
``benchmarks/speedup.py``.

``cli_args`` is pure (unit-tested on the CPU, ``tests/unit/harness/test_server_run.py``);
the HTTP side and the client runs are tested against ``tests/support/stand_in_server.py``.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import types
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from harness.engine_run import BUNDLE, CRASH_DIAGNOSTICS_OFF, free_port, summarize
from sglang_eagle3_embed.core.errors import flag


def cli_args(kwargs: dict) -> list[str]:
    """``launch_server`` arguments from Engine-style keyword arguments: ``True`` is a bare flag,
    ``False`` and ``None`` are left out, a list gives one value each, a dict is JSON."""
    out = []
    for key, value in kwargs.items():
        name = flag(key)
        if value is None or value is False:
            continue
        if value is True:
            out.append(name)
        elif isinstance(value, (list, tuple)):
            out += [name, *map(str, value)]
        elif isinstance(value, dict):
            out += [name, json.dumps(value)]
        else:
            out += [name, str(value)]
    return out


class Server:
    def __init__(self, name: str, kwargs: dict, logs: Path, env: dict | None = None, ports=()):
        self.name, self.logs = name, Path(logs)
        self.port = kwargs.get("port") or free_port(taken=ports)
        self.kwargs = {**BUNDLE, "log_level": "info", **kwargs, "port": self.port, "host": "127.0.0.1"}
        self.env = {**CRASH_DIAGNOSTICS_OFF, **os.environ, **(env or {})}
        self.proc = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        path = self.logs / f"{self.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def start(self) -> Server:
        command = [sys.executable, "-m", "sglang.launch_server", *cli_args(self.kwargs)]
        with open(self.logs / f"{self.name}.log", "w") as log:
            self.proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, env=self.env
            )
        self.started_at = time.time()
        return self

    def wait_ready(self, timeout: float) -> float:
        """Seconds until ``/health`` answered 200; raises with the reason when the process ended
        first or ``timeout`` passed."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"{self.name}: the server exited with code {self.proc.returncode} while starting"
                )
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as response:
                    if response.status == 200:
                        return round(time.time() - self.started_at, 1)
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(1)
        raise TimeoutError(f"{self.name}: not healthy after {timeout} s")

    def request(self, path: str, payload: dict | None = None, timeout: float = 600):
        data = None if payload is None else json.dumps(payload).encode()
        req = urllib.request.Request(self.url + path, data=data, headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as response:
                return response.status, json.loads(response.read() or b"null")
        except urllib.error.HTTPError as err:
            return err.code, err.read().decode(errors="replace")

    def stream(
        self, payload: dict, events: int | None = None, timeout: float = 600, on_event=None
    ) -> list[dict]:
        """``/generate`` with ``stream`` on: the server-sent events until ``[DONE]``, or only the
        first ``events`` of them, after which the connection is closed (a client that goes away
        mid-stream). ``on_event`` is called with each event as it arrives."""
        data = json.dumps({**payload, "stream": True}).encode()
        req = urllib.request.Request(
            self.url + "/generate", data=data, headers={"Content-Type": "application/json"}
        )
        out = []
        with urllib.request.urlopen(req, timeout=timeout) as response:
            for raw in response:
                line = raw.decode(errors="replace").strip()
                if not line.startswith("data:"):
                    continue
                body = line.removeprefix("data:").strip()
                if body == "[DONE]":
                    break
                out.append(json.loads(body))
                if on_event is not None:
                    on_event(out[-1])
                if events is not None and len(out) >= events:
                    break
        return out

    def loads(self) -> dict:
        """KV tokens in use and requests running or waiting, summed over the DP ranks
        (``/v1/loads``)."""
        status, body = self.request("/v1/loads?include=core", timeout=30)
        if status != 200:
            raise RuntimeError(f"{self.name}: /v1/loads answered {status}: {str(body)[:300]}")
        keys = ("num_used_tokens", "num_running_reqs", "num_waiting_reqs")
        return {k: sum(load.get(k, 0) for load in body["loads"]) for k in keys}

    def abort(self, rid: str) -> int:
        return self.request("/abort_request", {"rid": rid}, timeout=30)[0]

    def generate(self, prompts, sampling: dict, mode: str = "all") -> dict:
        def one(prompt):
            status, body = self.request("/generate", {"input_ids": prompt, "sampling_params": sampling})
            if status != 200:
                raise RuntimeError(f"{self.name}: /generate answered {status}: {str(body)[:500]}")
            return body

        started = time.time()
        if mode == "all":
            outputs = one(prompts)  # every prompt in one batched request
        elif mode == "one-by-one":
            outputs = [one(p) for p in prompts]
        elif mode == "concurrent":
            with ThreadPoolExecutor(len(prompts)) as pool:
                outputs = list(pool.map(one, prompts))
        else:
            raise ValueError(mode)
        return summarize(outputs, time.time() - started)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


DATASETS_ABSENT = "the datasets library is not installed on this machine; use a local dataset"


def datasets_stand_in() -> types.ModuleType:
    """A ``datasets`` module whose ``load_dataset`` refuses with :data:`DATASETS_ABSENT`: SGLang's
    serving client imports the library for hub datasets, the ``custom`` and ``random-ids``
    datasets never call it."""
    module = types.ModuleType("datasets", "Stand-in for the datasets library, absent here.")
    # a spec, so that importlib.util.find_spec("datasets") answers instead of raising
    module.__spec__ = importlib.machinery.ModuleSpec("datasets", None)

    def load_dataset(*args, **kwargs):
        raise RuntimeError(DATASETS_ABSENT)

    module.load_dataset = load_dataset
    return module


_CLIENT = threading.Lock()


def serving_client():
    """SGLang's serving client, ``sglang.benchmark.serving``. Where the ``datasets`` library is
    absent (the offline GPU bundle), :func:`datasets_stand_in` is registered as ``datasets``
    first: the client's dataset registry imports the library."""
    try:
        import datasets  # noqa: F401
    except ImportError:
        sys.modules["datasets"] = datasets_stand_in()
    import sglang.benchmark.serving as client

    return client


def client_command(argv) -> str:
    """The shell command an operator types for the same client run."""
    return shlex.join(["python", "-m", "sglang.benchmark.serving", *map(str, argv)])


def run_client(argv, log: Path) -> None:
    """``python -m sglang.benchmark.serving ARGV``, run through the client's own command line
    (``cli_main``) in this process, so that its import (seconds) is paid once, not once per run.
    One run at a time (the client keeps its arguments in a module global). ``log`` gets the
    equivalent shell command, then the client's output. A run that exits with an error raises with
    the end of that output."""
    client = serving_client()
    with _CLIENT:
        saved, sys.argv = sys.argv, ["sglang.benchmark.serving", *map(str, argv)]
        try:
            with open(log, "w") as out, contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                print(client_command(argv), flush=True)
                client.cli_main()
        except SystemExit as exit_:
            if exit_.code not in (None, 0):
                tail = Path(log).read_text(errors="replace")[-1500:]
                raise RuntimeError(f"SGLang's serving client exited with {exit_.code}:\n{tail}") from None
        finally:
            sys.argv = saved


def client_record(out_file: Path, keys) -> dict:
    """``keys`` of the last record SGLang's serving client appended to its ``--output-file``."""
    record = json.loads(Path(out_file).read_text().strip().splitlines()[-1])
    return {k: record.get(k) for k in keys}


def write_dataset(
    pair, path: Path, num_prompts: int, prompt_len: int, output_len: int, seed: int = 2026
) -> Path:
    """The pair's language as SGLang's ``custom`` dataset (:func:`write_custom_dataset`)."""
    import torch

    rows = pair.language.sample(num_prompts, prompt_len + output_len, torch.Generator().manual_seed(seed))
    return write_custom_dataset(rows.tolist(), prompt_len, path)


def write_custom_dataset(rows, prompt_len: int, path: Path) -> Path:
    """Token-id ``rows`` as SGLang's ``custom`` dataset: one JSON line per row, a user turn (its
    first ``prompt_len`` ids as text) and an assistant turn (the rest, whose length the client
    takes as the output length)."""
    from sglang_eagle3_embed.doctor.tokenizer import text_of

    with open(path, "w") as f:
        for row in rows:
            turns = [{"content": text_of(row[:prompt_len])}, {"content": text_of(row[prompt_len:])}]
            f.write(json.dumps({"conversations": turns}) + "\n")
    return path


def bench_command(port: int, dataset: Path, tokenizer: str, concurrency: int, num_prompts: int,
                  output_len: int, out_file: Path, seed: int) -> list[str]:  # fmt: skip
    """SGLang's client's arguments against the server on ``port``, on a ``custom`` dataset: greedy,
    a fixed output length (EOS ignored, the client's default), ``concurrency`` requests in flight,
    warm-up requests first."""
    return [
        "--backend", "sglang", "--host", "127.0.0.1",
        "--port", str(port), "--dataset-name", "custom", "--dataset-path", str(dataset),
        "--tokenizer", tokenizer, "--num-prompts", str(num_prompts), "--sharegpt-output-len", str(output_len),
        "--max-concurrency", str(concurrency), "--request-rate", "inf", "--warmup-requests", str(concurrency),
        "--temperature", "0", "--output-file", str(out_file),
        "--seed", str(seed), "--disable-tqdm",
    ]  # fmt: skip


def run_job(server: Server, job: dict, timeout: float) -> dict:
    """One server: start, wait, warm up, run ``job["modes"]`` over ``job["prompts"]``, then
    ``job["after"](server)``; the result has ``ok``, ``startup_s``, per-mode results and the first
    mode's ``outputs``/``accept_length`` (as ``engine_run``'s), ``error`` and the log tail when it
    failed (after calling ``job["on_error"]()``, if given)."""
    name, logs = server.name, server.logs
    sampling = {"temperature": 0, "max_new_tokens": job.get("max_new_tokens", 32), "ignore_eos": True}
    result = {"kwargs": server.kwargs, "modes": {}}
    try:
        with server:
            result["startup_s"] = server.wait_ready(timeout)
            if job.get("warmup", True):
                server.generate(job["prompts"], sampling, "all")
            for mode in job.get("modes", ["all"]):
                result["modes"][mode] = server.generate(job["prompts"], sampling, mode)
            if job.get("after"):
                result["after"] = job["after"](server)
        first = next(iter(result["modes"].values()), {})
        result.update(ok=True, outputs=first.get("outputs"), accept_length=first.get("accept_length"))
    except Exception as err:  # the harness reports; the tests decide
        result.update(ok=False, error=f"{type(err).__name__}: {err}")
        if job.get("on_error"):
            job["on_error"]()
    result["log"] = server.log
    (logs / f"{name}.json").write_text(
        json.dumps({k: v for k, v in result.items() if k != "log"}, default=str)
    )
    return result


def run_servers(jobs: dict[str, dict], logs: Path, timeout: float = 420, stagger_s: float = 3.0) -> dict:
    """Run the jobs side by side (their servers should cap their KV pools: each sizes its pool from
    the memory free when it starts); returns each job's result by name."""
    logs.mkdir(parents=True, exist_ok=True)
    made, futures = {}, {}
    for name, job in jobs.items():  # ports chosen here, apart from each other
        made[name] = Server(name, job["server"], logs, job.get("env"), ports=[s.port for s in made.values()])
    with ThreadPoolExecutor(max(1, len(jobs))) as pool:
        for name, job in jobs.items():
            futures[name] = pool.submit(run_job, made[name], job, timeout)
            time.sleep(stagger_s)
        return {name: future.result() for name, future in futures.items()}
