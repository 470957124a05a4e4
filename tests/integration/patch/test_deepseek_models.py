"""The SGLang glue in sglang_eagle3_embed.patch.deepseek_capture and .deepseek_models, on real SGLang 0.5.23 objects."""

from types import SimpleNamespace

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from sglang_eagle3_embed.core.capture.ids import IDS_FIELD, stock_capture_indices
from sglang_eagle3_embed.core.errors import DraftConfigError, UnsupportedModeError
from sglang_eagle3_embed.patch import deepseek_capture as capture
from sglang_eagle3_embed.patch import deepseek_models as models

pytestmark = pytest.mark.releases


@pytest.fixture(scope="module")
def tiny(sglang_cpu):
    spec = sglang_cpu.TinySpec(num_layers=4)
    config = sglang_cpu.hf_config(spec)
    return sglang_cpu, config, sglang_cpu.hf_model(config)


def test_stock_replica_equals_sglang_method(sglang_cpu):
    """ids.stock_capture_indices reproduces DeepseekV2ForCausalLM.set_eagle3_layers_to_capture."""
    from sglang.srt.models.deepseek_v2 import DeepseekV2ForCausalLM

    @given(
        st.one_of(st.none(), st.lists(st.integers(-3, 80), max_size=5).filter(bool)),
        st.integers(1, 100),
    )
    def check(ids, num_layers):
        fake = DeepseekV2ForCausalLM.__new__(DeepseekV2ForCausalLM)
        torch.nn.Module.__init__(fake)
        fake.pp_group = SimpleNamespace(is_last_rank=True)
        fake.config = SimpleNamespace(num_hidden_layers=num_layers)
        fake.model = SimpleNamespace(layers_to_capture=[])
        DeepseekV2ForCausalLM.set_eagle3_layers_to_capture(fake, ids)
        assert fake.model.layers_to_capture == stock_capture_indices(ids, num_layers)

    check()


def test_plugin_classes_keep_upstream_names_and_bases(sglang_cpu):
    from sglang.srt.models import deepseek_v2, kimi_k25

    for stock_cls in (
        deepseek_v2.DeepseekV2ForCausalLM,
        deepseek_v2.DeepseekV3ForCausalLM,
        deepseek_v2.DeepseekV32ForCausalLM,
        kimi_k25.KimiK25ForConditionalGeneration,
    ):
        plugin_cls = models.plugin_class_for(stock_cls)
        assert plugin_cls is not stock_cls
        assert plugin_cls.__name__ == stock_cls.__name__
        assert issubclass(plugin_cls, stock_cls)
        assert models.plugin_class_for(plugin_cls) is plugin_cls


def test_rule_table_names_the_served_family(sglang_cpu):
    from sglang_eagle3_embed import FAMILY

    assert sorted(c.__name__ for c in models._PLUGIN_CLASSES) == sorted(FAMILY)


def test_other_architectures_are_refused_clearly(sglang_cpu):
    from sglang.srt.models.llama import LlamaForCausalLM

    with pytest.raises(UnsupportedModeError, match="resolves to LlamaForCausalLM"):
        models.plugin_class_for(LlamaForCausalLM)


def test_body_forward_keeps_sglangs_signature(sglang_cpu):
    """The prefill CUDA-graph runner binds input_embeds / pp_proxy_tensors by parameter name."""
    import inspect

    from sglang.srt.models.deepseek_v2 import DeepseekV2Model

    ours = inspect.signature(capture.Eagle3EmbedDeepseekV2Model.forward).parameters
    assert list(ours) == list(inspect.signature(DeepseekV2Model.forward).parameters)


def test_width_check_refuses_misshapen_captures(tiny):
    harness, config, hf = tiny
    model = harness.sglang_model(models.DeepseekV3ForCausalLM, config, hf)
    model.model.layers_to_capture = [0, 2]
    with pytest.raises(RuntimeError, match=r"width 96, expected 2 x hidden 64 = 128"):
        capture.arrange_captures(torch.zeros(3, 96), model.model)
    blocks = torch.arange(2 * 64, dtype=torch.float32).reshape(1, 128)
    model.model.eagle3_embed_block_order = (1, 0)
    swapped = capture.arrange_captures(blocks, model.model)
    assert torch.equal(swapped[:, :64], blocks[:, 64:]) and torch.equal(swapped[:, 64:], blocks[:, :64])


def test_pipeline_parallel_is_refused_at_load(monkeypatch, sglang_cpu):
    import sglang.srt.runtime_context as rc

    monkeypatch.setattr(rc, "get_parallel", lambda: SimpleNamespace(pp_size=2))
    with pytest.raises(UnsupportedModeError, match="--pp-size 2") as err:
        capture.refuse_unsupported_modes()
    assert "--tp-size" in str(err.value)


def test_two_batch_overlap_is_refused_at_load(tiny):
    from sglang.srt.runtime_context import get_context

    harness, config, hf = tiny
    override = get_context().override_server_args(enable_two_batch_overlap=True)
    override.install()
    try:
        with pytest.raises(UnsupportedModeError, match="Fix: drop --enable-two-batch-overlap"):
            harness.sglang_model(models.DeepseekV3ForCausalLM, config, hf)
    finally:
        override.restore()


def test_without_an_eagle3_draft_stock_behaviour_is_kept(tiny):
    """Capture-only mode (--enable-return-aux-hidden-states) passes explicit ids and no draft."""
    harness, config, hf = tiny
    model = harness.sglang_model(models.DeepseekV3ForCausalLM, config, hf)
    assert capture.configure(model, [1, 2]) is None
    assert model.model.layers_to_capture == [2, 3]
    assert model.model.eagle3_embed_block_order is None


@pytest.mark.parametrize("where", ["nested", "top"])
def test_set_eagle3_layers_reads_the_draft_like_a_server(tmp_path, tiny, where, caplog, monkeypatch):
    """Through SGLang's own ModelConfig for the draft: top-level ids are honoured, not replaced.
    The capture is installed once, by the constructor, not again by the setter."""
    harness, config, hf = tiny
    ids = [2, -1, 1]
    fields = {"eagle_config": {IDS_FIELD: ids}} if where == "nested" else {IDS_FIELD: ids}
    installed = []
    monkeypatch.setattr(capture, "install", lambda lm, install=capture.install: installed.append(install(lm)))
    model = harness.sglang_model(models.DeepseekV3ForCausalLM, config, hf)
    with harness.published_eagle3_launch(harness.write_draft(tmp_path, fields)), caplog.at_level("INFO"):
        model.set_eagle3_layers_to_capture(ids if where == "nested" else None)
    assert len(installed) == 1
    assert model.model.layers_to_capture == [0, 2, 3]
    assert model.model.eagle3_embed_block_order == (2, 0, 1)
    assert "[output of layer 2, embedding output, output of layer 1]" in caplog.text

    got = harness.run_batches(model, config, [[5, 6, 7]], [8], [[9]], rows=[1])[0]
    hs = harness.hf_hidden_states(hf, [5, 6, 7, 8, 9])
    assert torch.allclose(got, torch.cat([hs[3], hs[0], hs[2]], dim=-1), atol=1e-4)


def test_a_plan_needs_the_capture_installed_by_the_constructor():
    plan = capture.resolve_capture_plan({"eagle_config": {IDS_FIELD: [-1, 1]}, "num_aux_hidden_states": 2}, 4)
    stock = SimpleNamespace(model=SimpleNamespace(layers_to_capture=[]))
    with pytest.raises(
        TypeError, match=r"build it with a class of sglang_eagle3_embed\.patch\.deepseek_models"
    ):
        capture.apply_plan(stock, plan)


def test_bad_draft_config_stops_the_load_with_the_fix(tmp_path, tiny):
    harness, config, hf = tiny
    model = harness.sglang_model(models.DeepseekV3ForCausalLM, config, hf)
    draft = harness.write_draft(tmp_path, {"eagle_config": {IDS_FIELD: [-1, 2, 3]}})
    with harness.published_eagle3_launch(draft), pytest.raises(DraftConfigError, match=r"allowed: -1\.\.2"):
        model.set_eagle3_layers_to_capture([-1, 2, 3])
