"""Generate ``docs/validation.md`` from the registered rules (``core.rules.RULES``; run: ``python -m tools.validation_docs``).

Each rule's example is run through SGLang's real argument resolution (``validation.run_check``), so
the documented messages are the ones users see.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from unittest import mock

from sglang_eagle3_embed.core import model_folder
from sglang_eagle3_embed.core.rules import RULES
from sglang_eagle3_embed.testing.rule_examples import DELETE, EXAMPLES, Scenario, materialize

__all__ = ["findings_for", "render"]

DOC = Path(__file__).resolve().parent.parent / "docs" / "validation.md"
HEADER = """# Validation rules

Generated from `sglang_eagle3_embed/core/rules.py` by `python -m tools.validation_docs`;
do not edit by hand (`tests/integration/tools/test_validation_docs.py` fails when this file is stale).

The rules run at launch for `--model-impl sglang_eagle3_embed` (in the launcher, around SGLang's
`handle_speculative_decoding` resolution step, before any subprocess or GPU work), and for any
launch command line with `sglang-eagle3-embed check <launch_server arguments>` (no GPU; configs
and the weights' safetensors headers, no tensor; exit 0 clean, 1 errors, 2 bad invocation or a
model path that names nothing here). An error stops the launch; a warning is logged
once. `pre` rules read the flags as passed; `post` rules compare them with what SGLang resolved.
For a PD-disaggregated deployment, `sglang-eagle3-embed check <one side's arguments> --pd-peer <the
other side's arguments>` checks both command lines and compares them ([pd.md](pd.md)).

Each example below was run through SGLang 0.5.23's own argument resolution. `TARGET` is a tiny
8-layer DeepseekV3 folder (its `model.safetensors` holds layers 0-7) and `DRAFT` an EAGLE-3 draft
config with ids `[-1, 2, 4]`, changed as shown. The configs are read as SGLang builds them
(`--json-model-override-args` applied to both) from the folder SGLang loads: a local folder, or a
hub id's snapshot in the local Hugging Face cache (`--revision`, `--download-dir`, `HF_HOME`). Checked and not a rule: `--enable-single-batch-overlap` only overlaps MoE work inside a
layer (`srt/models/deepseek_v2.py:3353`) and leaves the capture loop (3175-3197) intact.

| rule | severity | stage | title |
|---|---|---|---|
"""


def findings_for(scenario: Scenario, root: Path):
    """Run ``check`` on the scenario; messages use TARGET / DRAFT instead of the folders."""
    from sglang_eagle3_embed.doctor.check import run_check

    argv = materialize(scenario, root)
    with mock.patch.dict(os.environ, scenario.env):
        findings = run_check(argv)
    return [
        f.__class__(
            f.rule,
            f.severity,
            f.message.replace(str(root / "target"), "TARGET").replace(str(root / "draft"), "DRAFT"),
        )
        for f in findings
    ]


def _changes(scenario: Scenario) -> str:
    parts = [
        f"draft config.json = `{v}`"
        if k == "__raw__"
        else f"draft `{k}` = `{'(removed)' if v is DELETE else v}`"
        for k, v in scenario.draft.items()
    ]
    parts += [f"target `{k}` = `{'(removed)' if v is DELETE else v}`" for k, v in scenario.target.items()]
    if scenario.fc_in_features is not None:
        parts.append(f"draft `fc.weight` reads {scenario.fc_in_features} features")
    if scenario.weights is not None:
        parts.append(f"draft `model.safetensors` holds {len(scenario.weights)} bytes (damaged)")
    if scenario.target_weights != Scenario().target_weights:
        layers = model_folder.decoder_layers(scenario.target_weights)
        parts.append(f"target `model.safetensors` holds {model_folder.describe_layers(layers)}")
    parts += [f"`{k}={v}`" for k, v in scenario.env.items()]
    return "; ".join(parts) or "none"


def render() -> str:
    lines = [HEADER.rstrip("\n")]
    for r in RULES.values():
        lines.append(f"| [`{r.id}`](#{r.id}) | {r.severity.value} | {r.stage} | {r.title} |")
    with tempfile.TemporaryDirectory() as tmp:
        for i, r in enumerate(RULES.values()):
            fires, _ = EXAMPLES[r.id]
            found = [f for f in findings_for(fires, Path(tmp) / str(i)) if f.rule == r.id]
            lines += [
                "",
                f"## {r.id}",
                "",
                f"**{r.title}.** Severity: {r.severity.value}; stage: {r.stage}.",
                "",
                f"Without the rule, SGLang 0.5.23 {r.silent}.",
                "",
                "Example: `" + " ".join(fires.flags) + "`; changes: " + _changes(fires) + ".",
                "",
                *(f"> {f.message}" for f in found),
            ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    text = render()
    if "--check" in sys.argv:
        sys.exit(0 if DOC.read_text() == text else 1)
    DOC.write_text(text)
    print(f"wrote {DOC}")
