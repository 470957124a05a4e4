"""sglang-eagle3-embed: EAGLE-3 drafts that read the embedding output, served correctly by SGLang.

Selected per launch with ``--model-impl sglang_eagle3_embed``; with any other value the plugin
changes nothing. Importing this package imports neither torch nor sglang.

Layout (``CONTRIBUTING.md`` has the table): ``core`` is the pure core, ``patch`` the SGLang glue a
server process loads through :mod:`sglang_eagle3_embed.plugin`, ``doctor`` the wiring doctor and
``cli`` the command line; a server imports neither of the last two.
"""

from __future__ import annotations

__version__ = "0.1.0"

MODEL_IMPL = "sglang_eagle3_embed"
"""The ``--model-impl`` value that selects the plugin's model classes."""

WARMUP = "eagle3_embed_canary"
"""The ``--warmups`` name of the plugin's startup self-check (``patch/canary_warmup.py``)."""

FAMILY = (
    "DeepseekV2ForCausalLM",
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "KimiK25ForConditionalGeneration",
)
"""Target architectures the plugin serves (``patch/deepseek_models.py`` maps each to its subclass)."""

__all__ = ["FAMILY", "MODEL_IMPL", "WARMUP", "__version__"]
