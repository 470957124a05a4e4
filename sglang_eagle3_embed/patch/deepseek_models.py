"""The plugin's model classes: SGLang's DeepSeek family with the draft's captures (docs/patches.md §4).

They keep the upstream class names, because SGLang keys on ``type(model).__name__``
(``srt/models/registry.py:134-148``, ``srt/model_loader/auto_loader.py:206``). They are returned
by SGLang's ``get_model_architecture`` only for a target launched with
``--model-impl sglang_eagle3_embed`` (:mod:`sglang_eagle3_embed.patch.model_architecture`).
"""

from __future__ import annotations

from sglang.srt.models import deepseek_v2 as _deepseek
from sglang.srt.models import kimi_k25 as _kimi

from sglang_eagle3_embed.core.errors import UnsupportedModeError
from sglang_eagle3_embed.patch import deepseek_capture as capture

__all__ = [
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "KimiK25ForConditionalGeneration",
    "plugin_class_for",
]


class _Eagle3EmbedCausalLM:
    """Mixin for ``DeepseekV2ForCausalLM`` and its subclasses."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        capture.install(self)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        capture.configure(self, layer_ids)


class DeepseekV2ForCausalLM(_Eagle3EmbedCausalLM, _deepseek.DeepseekV2ForCausalLM):
    """``DeepseekV2ForCausalLM`` capturing exactly what the EAGLE-3 draft was trained on."""


class DeepseekV3ForCausalLM(_Eagle3EmbedCausalLM, _deepseek.DeepseekV3ForCausalLM):
    """``DeepseekV3ForCausalLM`` capturing exactly what the EAGLE-3 draft was trained on."""


class DeepseekV32ForCausalLM(_Eagle3EmbedCausalLM, _deepseek.DeepseekV32ForCausalLM):
    """``DeepseekV32ForCausalLM`` capturing exactly what the EAGLE-3 draft was trained on."""


class KimiK25ForConditionalGeneration(_kimi.KimiK25ForConditionalGeneration):
    """Kimi-K2.5: its text model is a stock ``DeepseekV3ForCausalLM`` built from a module global
    (``srt/models/kimi_k25.py:693``), so the capture is installed on it after construction."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.language_model is not None:
            capture.install(self.language_model)

    def set_eagle3_layers_to_capture(self, layer_ids=None):
        if self.language_model is None:
            raise AttributeError("language_model does not support EAGLE3 speculative decoding.")
        capture.configure(self.language_model, layer_ids)


_PLUGIN_CLASSES = {
    _deepseek.DeepseekV2ForCausalLM: DeepseekV2ForCausalLM,
    _deepseek.DeepseekV3ForCausalLM: DeepseekV3ForCausalLM,
    _deepseek.DeepseekV32ForCausalLM: DeepseekV32ForCausalLM,
    _kimi.KimiK25ForConditionalGeneration: KimiK25ForConditionalGeneration,
}


def plugin_class_for(stock_cls: type) -> type:
    """The plugin class replacing ``stock_cls``; a clear error for architectures it does not serve."""
    if stock_cls in _PLUGIN_CLASSES.values():
        return stock_cls
    try:
        return _PLUGIN_CLASSES[stock_cls]
    except KeyError:
        # the model of stock SGLang words the refusal; a served target never needs it
        from sglang_eagle3_embed.core.capture.stock_sglang import reading_of

        name = stock_cls.__name__
        raise UnsupportedModeError.not_deepseek(name, reading_of(name)) from None
