"""docs/upstream/reproduce_eagle3_embedding_output.py, the part that runs without a GPU: ``write``
trains (a few steps here) and writes a target and three drafts that transformers loads, one draft's
weights written three ways; stock SGLang 0.5.23 reads the drafts' ids as the script's table says;
the script's first draft step is SGLang's draft read through transformers; and its table gives no
verdict unless the control row is separated from the reference."""

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file

SCRIPT = Path(__file__).resolve().parents[3] / "docs" / "upstream" / "reproduce_eagle3_embedding_output.py"

# The names SGLang's LlamaForCausalLMEagle3.load_weights maps onto its parameters
# (srt/models/llama_eagle3.py:325-378: midlayer -> layers.0, q/k/v -> qkv_proj, gate/up -> gate_up_proj)
DRAFT_TENSORS = {
    "fc.weight", "norm.weight", "lm_head.weight",
    "midlayer.input_layernorm.weight", "midlayer.hidden_norm.weight",
    "midlayer.post_attention_layernorm.weight",
    "midlayer.self_attn.q_proj.weight", "midlayer.self_attn.k_proj.weight",
    "midlayer.self_attn.v_proj.weight", "midlayer.self_attn.o_proj.weight",
    "midlayer.mlp.gate_proj.weight", "midlayer.mlp.up_proj.weight", "midlayer.mlp.down_proj.weight",
}  # fmt: skip


def _script():
    spec = importlib.util.spec_from_file_location("reproduce_eagle3_embedding_output", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    out = tmp_path_factory.mktemp("repro")
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "write", str(out), "--steps", "5", "--device", "cpu"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return out


def test_the_script_imports_only_sglang_torch_transformers_and_the_standard_library():
    import ast

    roots = set()
    for node in ast.walk(ast.parse(SCRIPT.read_text())):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            roots.add(node.module.split(".")[0])
    assert roots - set(sys.stdlib_module_names) <= {"sglang", "torch", "transformers"}, roots


def test_transformers_loads_the_target_with_a_hidden_state_per_capture_point(written):
    from transformers import AutoModelForCausalLM

    repro = _script()
    target = AutoModelForCausalLM.from_pretrained(written / "target").eval()
    assert type(target).__name__ == "DeepseekV3ForCausalLM"
    with torch.no_grad():
        out = target(torch.tensor(repro.prompts()[:2]), output_hidden_states=True)
    assert out.logits.shape == (2, repro.PROMPT_LEN, repro.VOCAB)
    assert len(out.hidden_states) == repro.LAYERS + 1  # embedding output, then each layer's


def test_one_draft_written_three_ways(written):
    repro = _script()
    tensors = {}
    for name, ids_fields in repro.DRAFTS.items():
        config = json.loads((written / name / "config.json").read_text())
        assert config["architectures"] == ["LlamaForCausalLMEagle3"]
        for key, value in ids_fields.items():
            assert config[key] == value
        tensors[name] = load_file(str(written / name / "model.safetensors"))
        assert set(tensors[name]) == DRAFT_TENSORS
        assert tensors[name]["fc.weight"].shape == (repro.HIDDEN, 3 * repro.HIDDEN)
        assert tensors[name]["midlayer.self_attn.q_proj.weight"].shape == (repro.HIDDEN, 2 * repro.HIDDEN)
        draft = repro.draft_class().from_pretrained(written / name)
        assert torch.equal(draft.fc.weight, tensors[name]["fc.weight"])
    first = tensors["draft-ids-nested"]
    for name in repro.DRAFTS:
        assert all(torch.equal(first[k], tensors[name][k]) for k in DRAFT_TENSORS), name


@pytest.mark.releases
def test_stock_sglang_reads_the_ids_as_the_table_says():
    """0.5.23's DeepSeek setter keeps [-1, 2, 5] as capture indices (-1 is never captured: the
    startup failure) and reads the hand-written [0, 3, 6] as the same tensors the ids name."""
    from sglang.srt.models.deepseek_v2 import DeepseekV3ForCausalLM

    repro = _script()

    def capture(ids):
        fake = SimpleNamespace(
            pp_group=SimpleNamespace(is_last_rank=True),
            config=SimpleNamespace(num_hidden_layers=repro.LAYERS),
            model=SimpleNamespace(layers_to_capture=[]),
            capture_aux_hidden_states=False,
        )
        DeepseekV3ForCausalLM.set_eagle3_layers_to_capture(fake, ids)
        return fake.model.layers_to_capture

    assert repro.INDICES == [0, 3, 6]
    assert capture(repro.INDICES) == [0, 3, 6]
    assert capture(repro.IDS) == [-1, 2, 5]
    assert [i for i in range(repro.LAYERS) if i in capture(repro.IDS)] == [2, 5]  # 2 of 3
    assert capture(None) == [2, 4, 5]  # the top-level control's defaults


def rows(control_accept: float, differ: int, patched_equal: int | None = None):
    repro = _script()
    n = repro.PROMPTS
    equal = n if patched_equal is None else patched_equal
    return [
        {"run": "stock, ids nested", "started": False},
        {"run": repro.REFERENCE, "started": True, "accept_mean": 2.5, "accepts_equal": n, "accepts_differ": 0},
        {"run": "stock, ids at the top level", "started": True, "accept_mean": control_accept,
         "accepts_equal": n - differ, "accepts_differ": differ},
        {"run": "patched, ids nested", "started": True, "accept_mean": 2.5, "tokens_equal": n, "accepts_equal": equal},
        {"run": "patched, ids at the top level", "started": True, "accept_mean": 2.5, "tokens_equal": n,
         "accepts_equal": n},
    ]  # fmt: skip


def test_no_verdict_unless_the_control_row_is_separated():
    repro = _script()
    n = repro.PROMPTS
    assert repro.verdict(rows(2.4, n))[0].startswith("NO VERDICT")  # accept lengths too close
    assert repro.verdict(rows(1.2, n // 4))[0].startswith("NO VERDICT")  # too few requests differ
    lines = repro.verdict(rows(1.2, n))
    assert lines[0].startswith("control separated")
    assert "patched, ids nested: PASS" in lines[1] and "top level: PASS" in lines[2]
    assert "fails at startup as expected" in lines[3]
    assert "patched, ids nested: FAIL" in repro.verdict(rows(1.2, n, patched_equal=n - 1))[1]


def test_the_script_draft_computes_what_the_projects_draft_computes(written):
    """The script trains its draft with its own forward; the project's Eagle3Draft (checked against
    SGLang's LlamaForCausalLMEagle3 elsewhere) gives the same logits on the written folder."""
    from sglang_eagle3_embed.doctor.eagle3_draft import load_draft

    repro = _script()
    script_draft = repro.draft_class().from_pretrained(written / "draft-ids-nested").eval()
    ours, _ = load_draft(written / "draft-ids-nested")
    gen = torch.Generator().manual_seed(0)
    embeds = torch.randn(2, 7, repro.HIDDEN, generator=gen)
    aux = torch.randn(2, 7, 3 * repro.HIDDEN, generator=gen)
    with torch.no_grad():
        assert torch.allclose(script_draft(embeds, aux), ours(embeds, aux), atol=1e-5)
