"""The chained-draft simulation: its mask, its equality with step-by-step decoding, its statistics."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from sglang_eagle3_embed.doctor.chain import accept_runs, chain_mask, draft_chain, score, step1_hits, walk
from sglang_eagle3_embed.doctor.eagle3_draft import Eagle3Draft
from sglang_eagle3_embed.doctor.tiny_draft import draft_config_dict


@given(n=st.integers(1, 6), blocks=st.integers(1, 4))
def test_chain_mask_sees_prefix_and_own_steps_only(n, blocks):
    mask = chain_mask(n, blocks)
    for q in range(n * blocks):
        qb, qt = divmod(q, n)
        for k in range(n * blocks):
            kb, kt = divmod(k, n)
            expected = kt <= qt if kb == 0 else (kt == qt and 1 <= kb <= qb)
            assert bool(mask[q, k]) == expected


def random_draft(seed=0, width=3):
    torch.manual_seed(seed)
    draft = Eagle3Draft(draft_config_dict(32, 40, 4, list(range(width)), 32)).eval()
    with torch.no_grad():
        for name, p in draft.named_parameters():
            p.normal_(1.0, 0.05) if "norm" in name else p.normal_(0.0, 0.3)
    return draft


def stepwise(draft, embedding, tokens, aux, start, steps):
    """Independent reference: SGLang's draft loop for one start, one causal forward per step."""
    embeds = embedding(tokens[None, 1 : start + 2])
    residual = draft.residual_in(aux[None, : start + 1])
    out = []
    for _ in range(steps):
        logits, pre_norm = draft.run(embeds, residual)  # plain causal attention
        y = logits[0, -1].argmax()
        out.append(int(y))
        embeds = torch.cat([embeds, embedding(y)[None, None]], dim=1)
        residual = torch.cat([residual, pre_norm[:, -1:]], dim=1)
    return out


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 1000), length=st.integers(4, 10), steps=st.integers(1, 4))
def test_chain_equals_step_by_step_decoding(seed, length, steps):
    draft = random_draft(seed)
    embedding = torch.nn.Embedding(40, 32)
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(40, (2, length), generator=gen)
    aux = torch.randn(2, length, 96, generator=gen)
    with torch.no_grad():
        chain = torch.stack([lg.argmax(-1) for lg in draft_chain(draft, embedding, tokens, aux, steps)])
        for b in range(2):
            for start in range(length - 1):
                reference = stepwise(draft, embedding, tokens[b], aux[b], start, steps)
                assert chain[:, b, start].tolist() == reference


def test_accept_runs_counts_leading_matches():
    tokens = torch.tensor([[0, 1, 2, 3, 4, 5, 6]])
    drafted = torch.full((2, 1, 6), 9)
    drafted[0, 0, 0], drafted[1, 0, 0] = 2, 3  # start 0: both right -> 2
    drafted[0, 0, 1], drafted[1, 0, 1] = 3, 9  # start 1: first right -> 1
    drafted[0, 0, 2], drafted[1, 0, 2] = 9, 5  # start 2: first wrong -> 0 (the second cannot count)
    assert accept_runs(drafted, tokens).tolist() == [[2, 1, 0, 0]]
    assert accept_runs(drafted, tokens, first=1).tolist() == [[1, 0, 0]]
    assert step1_hits(drafted, tokens).tolist() == [[True, True, False, False, False]]


def test_score_is_conditional_acceptance():
    runs = torch.tensor([0, 1, 2, 2])
    s = score(runs, torch.tensor([False, True, True, True]), 2)
    assert s.acceptance == (0.75, 2 / 3)
    assert s.accept_length == 1 + 5 / 4
    assert s.agreement == 0.75


def test_walk_jumps_past_each_verify_step():
    runs = torch.tensor([[2, 0, 0, 1, 5, 0, 3], [0, 0, 0, 0, 0, 0, 0]])
    visited = walk(runs)
    assert visited[0].tolist() == [2, 1, 0, 3]  # starts 0, 3, 5, 6
    assert visited[1].tolist() == [0] * 7  # every start when nothing is accepted
