"""Build SGLang 0.5.23's JIT Marlin MoE kernels (INT4 routed experts) before a server needs them.

SGLang 0.5.23 compiles ``moe_wna16_marlin_gemm`` with nvcc the first time an INT4 MoE layer runs
(``sglang/kernels/ops/moe/moe_wna16_marlin.py``), one module for the gate-up GEMM and one for the
down GEMM (``fused_marlin_moe.py`` passes ``zero_inactive_output`` to the second only). Each is one
translation unit: minutes of one CPU core, inside the first prefill CUDA graph of whichever server
or probe gets there first. Building both here, in parallel, puts them in SGLang's JIT cache
(``SGLANG_JIT_CACHE_DIR``, default ``~/.cache/sglang/jit``), where every later process on the
machine finds them. SGLang has no public way to ask for a build; this calls the module loader its
own GEMM calls, with the arguments ``fused_marlin_moe`` gives it without expert parallelism. Run
under the GPU bundle, on the GPU machine:

    bash tools/gpu_bundle.sh BUNDLE_DIR python3 tools/prebuild_marlin.py
"""

import sys
import time
from concurrent.futures import ProcessPoolExecutor

MODULES = {"gate-up": False, "down": True}
"""Each module by its GEMM, with its ``zero_inactive_output``."""


def build(name: str) -> str:
    import torch
    from sglang.kernels.ops.moe.moe_wna16_marlin import _jit_moe_wna16_marlin_module

    started = time.time()
    _jit_moe_wna16_marlin_module(torch.bfloat16, False, False, True, MODULES[name], True)
    return f"{name}: built or found in {time.time() - started:.0f} s"


def main() -> int:
    with ProcessPoolExecutor(len(MODULES)) as pool:
        for line in pool.map(build, MODULES):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
