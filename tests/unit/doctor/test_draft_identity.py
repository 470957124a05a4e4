"""The draft is identified once (issue #41): its architecture names are the constants of
``core/capture/draft_config.py``, and its fc width is :func:`fc_width` of the captures it reads, which the
twin takes from the config as SGLang counts them, or from the weights when it loads a checkpoint.

The names are read with ``ast``: a string literal equal to one of them anywhere else in the
package, the benchmarks or the tools is a second spelling that can drift (docstrings and messages
that mention a name among other words are prose, not spellings). Tests and fixtures may keep theirs.
"""

from __future__ import annotations

import ast
import json

import pytest
from safetensors.torch import save_file

from sglang_eagle3_embed.core.capture.draft_config import DRAFT_ARCHS, fc_captures, fc_width
from sglang_eagle3_embed.doctor.eagle3_draft import Eagle3Draft, load_draft
from sglang_eagle3_embed.doctor.tiny_draft import draft_config_dict
from tests.support import python_sources

HOME = "sglang_eagle3_embed/core/capture/draft_config.py"


def sources() -> dict[str, str]:
    """Every module of the package, the harness, the benchmarks and the tools, by its path in the
    repository."""
    return python_sources("sglang_eagle3_embed", "harness", "benchmarks", "tools")


def spellings(texts: dict[str, str]) -> list[str]:
    """``path:line`` of every string literal equal to a draft architecture name."""
    return [
        f"{path}:{node.lineno}"
        for path, text in texts.items()
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in DRAFT_ARCHS
    ]


def test_every_draft_architecture_is_written_once_in_draft_config():
    found = spellings(sources())
    assert len(found) == len(DRAFT_ARCHS) and all(w.startswith(f"{HOME}:") for w in found), found


@pytest.mark.parametrize(
    ("module", "planted"),
    [
        ("sglang_eagle3_embed/doctor/tiny_draft.py", 'ARCH = ["LlamaForCausalLMEagle3"]\n'),
        ("benchmarks/probe_throughput.py", 'MLA = {"architectures": ["Eagle3DeepseekV2ForCausalLM"]}\n'),
    ],
)
def test_a_planted_second_spelling_is_caught(module, planted):
    texts = sources()
    texts[module] += "\n\n" + planted
    assert [w for w in spellings(texts) if not w.startswith(f"{HOME}:")] == [
        f"{module}:{texts[module].count(chr(10))}"
    ]


def test_the_fc_width_is_whole_captures_of_the_target_hidden_size():
    assert fc_width(3, 64) == 192 and fc_captures(192, 64) == 3 and fc_captures(200, 64) is None


def test_the_twin_sizes_its_fc_from_the_captures_sglang_counts(tmp_path):
    """From the config as SGLang's draft counts them (``num_aux_hidden_states``, else the ids); from
    the weights when a checkpoint loads, whatever its ids say (the probe scores what it was trained on)."""
    config = draft_config_dict(hidden=16, vocab=32, heads=2, ids=[-1, 2, 4], target_hidden=8)
    assert Eagle3Draft(config).fc.in_features == fc_width(3, 8)
    assert Eagle3Draft({**config, "num_aux_hidden_states": 4}).fc.in_features == fc_width(4, 8)
    folder = tmp_path / "draft"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    save_file(Eagle3Draft(config, captures=2).checkpoint(), str(folder / "model.safetensors"))
    draft, _ = load_draft(folder)
    assert (draft.captures, draft.fc.in_features) == (2, fc_width(2, 8))
