"""Judge recorded GPU results again, without a GPU: the lossless and multi-GPU tests' own checks on
the engine results a run left in ``$EAGLE3_EMBED_GPU_LOGS`` (``<name>.json``, one per engine).

    python -m tests.gpu.replay_lossless /tmp/logs/s0     # prints each case: PASS or FAIL and why

Use it before spending device time on a changed rule (``engine_run.NEAR_TIE``, ``unexplained``,
``test_acceptance.assert_lossless``): a case whose engines are missing from the folder is skipped."""

import json
import sys
from functools import partial
from pathlib import Path

from tests.gpu import test_acceptance as acceptance

CASES = {"lossless, one GPU": acceptance.test_greedy_outputs_are_lossless}
CASES.update(
    (name, partial(acceptance.test_multi_gpu, name=name, needs=needs, kwargs=kwargs, refused=refused))
    for name, needs, kwargs, refused in acceptance.MULTI_GPU
    if refused is None  # a refused launch leaves no outputs to judge
)


def replay(folder: Path) -> dict[str, str]:
    """Each case's verdict: "PASS", "FAIL: <assertion>", or "skipped: no <engine>.json"."""

    def serve(name, **_):
        path = folder / f"{name}.json"
        if not path.exists():
            raise FileNotFoundError(path.name)
        return {"log": "", **json.loads(path.read_text())}

    drafts = {"nested": "nested", "top-level": "top-level", "hand-written": "hand-written"}
    cuda, device_count = acceptance.torch.cuda, acceptance.torch.cuda.device_count
    cuda.device_count = lambda: 2  # the recorded run had the GPUs
    verdicts = {}
    try:
        for case, check in CASES.items():
            try:
                check(serve, drafts)
                verdicts[case] = "PASS"
            except FileNotFoundError as missing:
                verdicts[case] = f"skipped: no {missing}"
            except AssertionError as failure:
                verdicts[case] = f"FAIL: {str(failure).splitlines()[0][:300]}"
    finally:
        cuda.device_count = device_count
    return verdicts


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    for case, verdict in replay(Path(sys.argv[1])).items():
        print(f"{case}: {verdict}")
