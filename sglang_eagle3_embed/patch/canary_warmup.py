"""The startup self-check, in SGLang's custom warmup registry: ``--warmups eagle3_embed_canary``.

``warmup(NAME)`` (``srt/entrypoints/warmup.py:20-25``) is SGLang's public registry of functions run
in the HTTP server's lifespan after every scheduler is up and its CUDA graphs are captured, before
the server listens (``srt/entrypoints/http_server.py:418-424``). The plugin registers
:func:`self_check` there; the user opts in with ``--warmups eagle3_embed_canary`` and names the
expectations file (written by ``probe --expectations``) in ``SGLANG_EAGLE3_EMBED_CANARY``;
``SGLANG_EAGLE3_EMBED_CANARY_MODE`` is ``log`` (the default: the verdict is logged) or ``raise``
(a failed check stops the server). Registering imports nothing else: every process registers the
warmup, and the check's code (:mod:`sglang_eagle3_embed.patch.canary_check`) loads when it runs.
"""

from __future__ import annotations

from sglang_eagle3_embed import WARMUP

__all__ = ["WHAT", "register", "self_check"]

WHAT = "sglang.srt.entrypoints.warmup.warmup"


def register() -> None:
    from sglang.srt.entrypoints.warmup import warmup

    warmup(WARMUP)(self_check)


async def self_check(disaggregation_mode: str, tokenizer_manager) -> bool:
    """The registered warmup: True when the server feeds the draft what it was trained on."""
    from sglang_eagle3_embed.patch.canary_check import run

    return await run(disaggregation_mode, tokenizer_manager)
