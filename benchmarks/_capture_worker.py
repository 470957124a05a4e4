"""One SGLang target with one capture, timed on request by SGLang's own one-batch benchmark (GPU).

Started by ``capture_overhead.py --device cuda``, several at once on one GPU:

    python -m benchmarks._capture_worker JOB_JSON     # {"server": {ServerArgs...}, "batch", "seq", "decode_steps"}

``sglang.benchmark.one_batch`` (0.5.23's ``bench_one_batch``) resolves the arguments and builds a
ModelRunner in this process, no scheduler (its ``main``, ``load_model``: memory pool, attention
backends with the aux capture configured, then CUDA graphs); one round is its
``latency_test_run_once``: one prefill of ``batch x seq`` random tokens and ``decode_steps`` decode
steps, synchronised and timed one by one (prefill latency, median decode latency). Two things of
that tool are replaced for this use: its work function (``latency_test``, which would run a fixed
sweep; replaced by the loop below after the same set-up) and its tokenizer loading (the targets have
no tokenizer; one_batch only uses it for text prompts).

Protocol: lines on stdout that start with MARK, everything else is SGLang's log.
    -> MARK {"ready": true, "body": ..., "layers_to_capture": [...], ...}   after the model is built
    stdin "run"  -> MARK {"prefill": seconds, "decode": seconds (median of the steps)}
    stdin "quit" or end of input: the process ends.
"""

from __future__ import annotations

import functools
import json
import sys
import traceback

MARK = "@@capture-worker "


def say(**message) -> None:
    print(MARK + json.dumps(message), flush=True)


def serve(job, server_args, port_args, bench_args, gpu_id, tp_rank):
    """one_batch's ``latency_test`` set-up (sglang/benchmark/one_batch.py:894-922), then rounds on request."""
    import numpy as np
    import torch
    from sglang.benchmark import one_batch as ob
    from sglang.srt.runtime_context import SpawnRanks, publish, spawn_world_rank
    from sglang.srt.utils import configure_logger

    publish(
        server_args,
        role="scheduler",
        ranks=SpawnRanks(world_rank=spawn_world_rank(server_args, tp_rank=tp_rank, pp_rank=0), gpu_id=gpu_id),
    )
    ob._init_process_global_configs()
    configure_logger(server_args, prefix=f" TP{tp_rank}")
    runner, _ = ob.load_model(server_args, port_args, gpu_id, tp_rank)
    model = runner.torch_runner.model
    config = runner.torch_runner.model_config.hf_text_config
    say(
        ready=True,
        model=type(model).__name__,
        body=type(model.model).__name__,
        layers_to_capture=[int(i) for i in model.model.layers_to_capture],
        capture=bool(getattr(model, "capture_aux_hidden_states", False)),
        hidden=config.hidden_size,
        layers=config.num_hidden_layers,
        max_total_num_tokens=runner.torch_runner.max_total_num_tokens,
        gpu=torch.cuda.get_device_name(0),
    )
    batch, seq, steps = job["batch"], job["seq"], job["decode_steps"]
    vocab = runner.torch_runner.model_config.vocab_size
    rng = np.random.default_rng(0)
    for line in sys.stdin:
        if line.strip() != "run":
            break
        ids = rng.integers(0, vocab, (batch, seq)).tolist()
        reqs = ob.prepare_synthetic_inputs_for_latency_test(batch, seq, custom_inputs=ids)
        r = ob.latency_test_run_once(
            "capture",
            runner,
            lambda *a, **k: None,
            reqs,
            batch,
            seq,
            steps + 1,
            log_decode_step=0,
            profile=False,
            profile_record_shapes=False,
            profile_activities=("GPU",),
            profile_prefix="",
            profile_stage="all",
            tp_rank=tp_rank,
        )
        if r is None:
            raise RuntimeError(f"one_batch skipped batch {batch} x {seq}: the token pool is too small")
        say(prefill=r["prefill_latency"], decode=r["median_decode_latency"])


def main(job: dict) -> None:
    from sglang.srt.plugins import load_plugins

    load_plugins()  # the plugin's hooks, as sglang.Engine and launch_server load them
    from sglang.benchmark import one_batch as ob
    from sglang.srt.server_args import ServerArgs

    ob.get_tokenizer = lambda *args, **kwargs: None
    ob.latency_test = functools.partial(serve, job)
    bench_args = ob.BenchArgs(
        batch_size=(job["batch"],),
        input_len=(job["seq"],),
        output_len=(job["decode_steps"] + 1,),
        result_filename="",
    )
    ob.main(ServerArgs(**job["server"]), bench_args)


if __name__ == "__main__":
    try:
        main(json.loads(sys.argv[1]))
    except BaseException as err:
        say(error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc()[-3000:])
        raise
