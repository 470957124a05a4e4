"""Start one SGLang Engine, generate greedily for fixed prompts, write a JSON result.

Run as a subprocess by the GPU tests (one engine per process; SGLang spawns its own workers):
    python engine_run.py RESULT.json '{"model_path": ..., ...engine kwargs}'
"""

import json
import sys
import time
import traceback

PROMPTS = [[(7 * i + j) % 2000 + 5 for j in range(16)] for i in range(8)]
SAMPLING = {"temperature": 0, "max_new_tokens": 32, "ignore_eos": True}
COMMON = dict(  # required by the GPU bundle (shared/gpu/README.md)
    skip_tokenizer_init=True, attention_backend="triton", sampling_backend="pytorch",
    disable_radix_cache=True, mem_fraction_static=0.4, cuda_graph_max_bs_decode=8, log_level="info",
)  # fmt: skip


def main(result_path: str, engine_kwargs: dict) -> None:
    result = {"kwargs": engine_kwargs}
    started = time.time()
    try:
        import sglang as sgl

        engine = sgl.Engine(**COMMON, **engine_kwargs)
        result["startup_s"] = round(time.time() - started, 1)
        outputs = engine.generate(input_ids=PROMPTS, sampling_params=SAMPLING)
        result["outputs"] = [o["output_ids"] for o in outputs]
        accept = [o["meta_info"].get("spec_accept_length") for o in outputs]
        result["accept_length"] = accept
        engine.shutdown()
        result["ok"] = True
    except BaseException as err:
        result.update(
            ok=False, error=f"{type(err).__name__}: {err}", traceback=traceback.format_exc()[-4000:]
        )
    with open(result_path, "w") as f:
        json.dump(result, f)


if __name__ == "__main__":
    main(sys.argv[1], json.loads(sys.argv[2]))
