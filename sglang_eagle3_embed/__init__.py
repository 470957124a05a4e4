"""sglang-eagle3-embed: EAGLE-3 drafts that read the embedding output, served correctly by SGLang.

Selected per launch with ``--model-impl sglang_eagle3_embed``; with any other value the plugin
changes nothing. Importing this package imports neither torch nor sglang.
"""

from __future__ import annotations

__version__ = "0.1.0"

MODEL_IMPL = "sglang_eagle3_embed"
"""The ``--model-impl`` value that selects the plugin's model classes."""

SUPPORTED_SGLANG_VERSION = "0.5.23"
"""The only SGLang release whose internals the plugin hooks."""

__all__ = ["MODEL_IMPL", "SUPPORTED_SGLANG_VERSION", "__version__"]
