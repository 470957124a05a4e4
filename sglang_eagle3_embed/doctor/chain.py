"""The scoring core of the wiring doctor: greedy EAGLE-3 chain speculation, simulated offline (torch).

SGLang's EAGLE-3 worker with top-k 1 runs, after each verified token ``x_{t+1}``, a chain of
``num_steps`` draft steps: step 1 reads the target's aux hidden states at position ``t`` and the
embedding of ``x_{t+1}``; step ``j > 1`` reads the embedding of the step ``j-1`` token and the draft's
own pre-norm hidden state from step ``j-1``, attending to the draft's KV cache of the verified prefix
and of the earlier steps. The target accepts the longest prefix of draft tokens equal to its greedy
tokens, plus one token of its own, so one verify step emits ``1 + run`` tokens.

:func:`draft_chain` computes every step for every start position of a batch at once: the sequence is
``steps`` copies of the positions (block 0 = the verified prefix, block ``s`` = chain step ``s+1``)
under an attention mask that lets block ``s`` at start ``t`` see the prefix up to ``t`` and its own
earlier steps at ``t`` (the "training-time test" mask of EAGLE-3). :func:`score` turns the chain's
tokens into acceptance statistics.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

__all__ = [
    "ChainScore",
    "accept_runs",
    "chain_mask",
    "draft_chain",
    "score",
    "simulate",
    "step1_hits",
    "walk",
]


def chain_mask(n: int, blocks: int, device=None) -> torch.Tensor:
    """Boolean ``[blocks*n, blocks*n]`` mask: block 0 is causal; block ``s >= 1`` at start ``t``
    attends to block 0 up to ``t`` and to blocks ``1..s`` at ``t``."""
    block = torch.arange(blocks, device=device).repeat_interleave(n)
    start = torch.arange(n, device=device).repeat(blocks)
    qb, kb = block[:, None], block[None, :]
    qt, kt = start[:, None], start[None, :]
    prefix = (kb == 0) & (kt <= qt)
    own = (kb >= 1) & (kb <= qb) & (kt == qt)
    return prefix | own


def draft_chain(draft, embedding, tokens, aux, steps: int, feed=None, token_map=None):
    """Run ``steps`` chained draft steps from every start position.

    ``tokens [B, T]``, ``aux [B, T, K*Ht]`` (the target's capture at each position). Start ``t`` in
    ``0..T-2`` reads ``aux_t`` and ``embedding(tokens[t+1])``. Step ``j > 1`` embeds ``feed[j-2]``
    (``[B, T-1]`` tokens; training feeds the true tokens) or, when ``feed`` is None, the draft's own
    step ``j-1`` greedy token. Returns the logits of each step, ``[B, T-1, V]`` each; step ``j`` at
    start ``t`` predicts ``tokens[t+1+j]``. ``token_map`` maps draft vocabulary indices to target
    token ids (SGLang's ``d2t``) for drafts with a reduced vocabulary.
    """
    n = tokens.shape[1] - 1
    embeds = embedding(tokens[:, 1:])
    residual = draft.residual_in(aux[:, :-1])
    base = torch.arange(n, device=tokens.device)
    positions = base
    out = []
    for j in range(1, steps + 1):
        logits, pre_norm = draft.run(embeds, residual, positions, chain_mask(n, j, tokens.device))
        logits, pre_norm = logits[:, -n:], pre_norm[:, -n:]
        out.append(logits)
        if j == steps:
            break
        if feed is not None:
            following = feed[j - 1]
        else:
            following = logits.argmax(-1)
            following = following if token_map is None else token_map[following]
        embeds = torch.cat([embeds, embedding(following)], dim=1)
        residual = torch.cat([residual, pre_norm], dim=1)
        positions = torch.cat([positions, base + j])
    return out


def accept_runs(drafted: torch.Tensor, tokens: torch.Tensor, first: int = 0) -> torch.Tensor:
    """``drafted [steps, B, T-1]`` (step ``j`` token at start ``t``) against the greedy sequence
    ``tokens [B, T]``: how many leading draft tokens the target accepts at each start ``t >= first``
    whose whole chain lies inside the sequence (``[B, T-1-steps-first]``). With a prompt of ``P``
    tokens the first draft after prefill starts at ``first = P - 1``."""
    steps, _, n = drafted.shape
    last = n - steps  # exclusive: start t needs tokens[t + 1 + steps]
    if last <= first:
        raise ValueError(f"a chain of {steps} steps after start {first} needs more than {n + 1} tokens")
    hits = [
        drafted[j - 1, :, first:last] == tokens[:, first + 1 + j : last + 1 + j] for j in range(1, steps + 1)
    ]
    return torch.stack(hits).long().cumprod(0).sum(0)


def walk(runs: torch.Tensor) -> list[torch.Tensor]:
    """The verify steps a server actually makes: from the first start, each step emits ``run + 1``
    tokens and the next chain starts after them. Returns, per sequence, the runs of the visited starts.

    Averaging over *every* start instead overstates the accept length: the draft's misses cluster,
    so the start right after a miss is harder than an average one (docs/probe.md)."""
    out = []
    for row in runs.tolist():
        visited, t = [], 0
        while t < len(row):
            visited.append(row[t])
            t += row[t] + 1
        out.append(torch.tensor(visited, dtype=torch.long))
    return out


def step1_hits(drafted: torch.Tensor, tokens: torch.Tensor, first: int = 0) -> torch.Tensor:
    """Draft step 1 against the target's next greedy token at every start ``t >= first``."""
    return drafted[0, :, first:-1] == tokens[:, first + 2 :]


@dataclass(frozen=True)
class ChainScore:
    """Acceptance of one draft wiring over a set of greedy sequences."""

    agreement: float
    """Top-1 agreement of draft step 1 with the target's next greedy token (every generated position)."""
    acceptance: tuple[float, ...]
    """``acceptance[j-1]`` = P(step j accepted | steps 1..j-1 accepted), over the visited steps."""
    accept_length: float
    """Predicted mean tokens per verify step: 1 + mean accepted run (SGLang's ``spec_accept_length``)."""
    starts: int
    """Verify steps simulated."""

    def as_dict(self) -> dict:
        return {
            "agreement": self.agreement,
            "acceptance": list(self.acceptance),
            "accept_length": self.accept_length,
            "starts": self.starts,
        }


def score(runs: torch.Tensor, step1_hits: torch.Tensor, steps: int) -> ChainScore:
    """Statistics from the runs of the visited verify steps (:func:`walk`) and step-1 hits at every
    start (bool, any shape)."""
    runs = runs.flatten().double()
    acceptance = []
    for j in range(1, steps + 1):
        reached = (runs >= j - 1).sum().item()
        acceptance.append((runs >= j).sum().item() / reached if reached else 0.0)
    return ChainScore(
        agreement=step1_hits.float().mean().item(),
        acceptance=tuple(acceptance),
        accept_length=1.0 + runs.mean().item(),
        starts=runs.numel(),
    )


def simulate(draft, embedding, tokens, aux, steps: int, first: int, window: int, token_map=None):
    """Speculate over greedy sequences: ``(visited runs per sequence, step-1 hits)`` for the starts
    ``first .. first + window - 1`` (``tokens`` must reach ``steps`` past the window)."""
    with torch.no_grad():
        logits = draft_chain(draft, embedding, tokens, aux, steps, token_map=token_map)
    drafted = torch.stack([lg.argmax(-1) for lg in logits])
    if token_map is not None:
        drafted = token_map[drafted]
    runs = walk(accept_runs(drafted, tokens, first)[:, :window].cpu())
    return runs, step1_hits(drafted, tokens, first)[:, :window].flatten().cpu()
