"""``tests/gpu/replay_lossless.py``: the GPU lossless checks judged again on recorded engine results."""

import json

import pytest

from tests.gpu.replay_lossless import replay

PROMPTS = 40


def record(folder, name, outputs, margins=None):
    result = {"ok": True, "outputs": outputs, "accept_length": [3.0] * PROMPTS}
    result["modes"] = {"all": {"outputs": outputs}, "one-by-one": {"outputs": outputs}}
    if margins is not None:
        result.update(margins=margins, margins_outputs=outputs)
    (folder / f"{name}.json").write_text(json.dumps(result))


@pytest.mark.parametrize(("margin", "verdict"), [(0.1, "PASS"), (3.0, "FAIL: all: outputs differ")])
def test_a_recorded_difference_is_judged_by_its_margin(tmp_path, margin, verdict):
    plain = [[p, p + 1, p + 2] for p in range(PROMPTS)]
    margins = [[3.0, 3.0, 3.0] for _ in plain]
    margins[7][2] = margin
    spec = [list(o) for o in plain]
    spec[7][2] = 99  # prompt 7 leaves plain decoding at its last token
    record(tmp_path, "no-spec", plain, margins)
    record(tmp_path, "plugin-lossless-graph", spec)
    record(tmp_path, "plugin-lossless-eager", plain)
    verdicts = replay(tmp_path)
    assert verdicts["lossless, one GPU"].startswith(verdict)
    assert verdicts["tp2"] == "skipped: no plugin-tp2.json"
