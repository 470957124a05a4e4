"""A CPU stand-in for a server's speculation: a trained pair served under a chosen wiring, its
per-request statistics computed as the probe computes them (the target's greedy continuation, the
draft's chain over the visited verify steps). The canary's tests serve it through
:func:`~tests.support.stand_in_server.serving` (``speculate=``) and through a fake
tokenizer manager for the startup self-check: a server that feeds the draft the trained tensors,
SGLang's default layers, or a neighbour, without a GPU."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import torch

from sglang_eagle3_embed.doctor.backends import make_backend
from sglang_eagle3_embed.doctor.chain import simulate
from sglang_eagle3_embed.doctor.eagle3_draft import load_draft

__all__ = ["Speculation"]


class Speculation:
    """``Speculation(target, draft, indices, steps)(prompts, max_new_tokens)``: one ``meta_info``
    update (``completion_tokens``, ``spec_verify_ct``, ``spec_accept_length``) per prompt, for a
    server feeding the draft the capture ``indices``."""

    def __init__(self, target: Path, draft: Path, indices, steps: int, backend: str = "hf"):
        self.pair = (str(target), str(draft), backend)
        self.indices, self.steps = tuple(indices), steps

    def __call__(self, prompts, max_new_tokens: int) -> list[dict]:
        backend, draft, token_map = _loaded(*self.pair)
        tokens, states = _served(*self.pair, tuple(map(tuple, prompts)), max_new_tokens + self.steps)
        aux = torch.cat([states[i] for i in self.indices], dim=-1)
        first = len(prompts[0]) - 1
        runs, _ = simulate(
            draft, backend.embedding, tokens, aux, self.steps, first, max_new_tokens - 1, token_map
        )
        out = []
        for run in runs:
            completion, verify = int((run + 1).sum()), run.numel()
            out.append(
                {
                    "completion_tokens": completion,
                    "spec_verify_ct": verify,
                    "spec_accept_length": completion / verify,
                }
            )
        return out


@lru_cache(maxsize=4)
def _loaded(target: str, draft: str, backend: str):
    """The target's backend and the draft, loaded once per pair (the tests serve one pair many ways)."""
    return make_backend(backend, Path(target), "cpu"), *load_draft(Path(draft), "cpu")


@lru_cache(maxsize=8)
def _served(target: str, draft: str, backend: str, prompts: tuple, length: int):
    """The target's greedy continuation of ``prompts`` and every hidden state it holds."""
    model = _loaded(target, draft, backend)[0]
    tokens = model.generate(torch.tensor(prompts), length)
    return tokens, model.states(tokens, list(range(model.num_layers + 1)))
