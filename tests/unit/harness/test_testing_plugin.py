"""The GPU tests' test-only SGLang plugin (tests/gpu/testing_plugin), without a GPU: the planted
verify defect flips the first row's pick, the chain-mask hook restores the mask it removed, and
nothing is registered unless a test switches it on."""

from types import SimpleNamespace

import pytest
import torch

from tests.gpu.testing_plugin import eagle3_embed_gpu_testing as testing


def test_the_planted_defect_makes_the_first_row_prefer_its_second_best_token():
    logits = torch.tensor([[0.1, 3.0, 2.0], [5.0, 1.0, 0.0]])
    seen = []
    testing._perturbed_verify(lambda v, b, out: seen.append(out.next_token_logits.argmax(-1).tolist()),
                              None, None, SimpleNamespace(next_token_logits=logits))  # fmt: skip
    assert seen == [[2, 0]]  # row 0 now picks token 2; the other rows are untouched


def test_the_chain_mask_is_dropped_for_a_top_k_1_verify_only_and_restored():
    mask = object()
    backend = SimpleNamespace(topk=1, forward_metadata=SimpleNamespace(custom_mask=mask))
    seen = []

    def original(self, q, o, layer, batch):
        seen.append(self.forward_metadata.custom_mask)
        return o

    verify = SimpleNamespace(forward_mode=SimpleNamespace(is_target_verify=lambda: True))
    extend = SimpleNamespace(forward_mode=SimpleNamespace(is_target_verify=lambda: False))
    testing._verify_without_chain_mask(original, backend, None, "o", None, verify)
    testing._verify_without_chain_mask(original, backend, None, "o", None, extend)
    backend.topk = 4
    testing._verify_without_chain_mask(original, backend, None, "o", None, verify)
    assert seen == [None, mask, mask] and backend.forward_metadata.custom_mask is mask


def test_nothing_is_registered_without_the_switch_and_unknown_switches_are_refused(monkeypatch):
    monkeypatch.delenv(testing.SWITCH, raising=False)
    testing.register()  # no sglang import, no hook
    monkeypatch.setenv(testing.SWITCH, "align-attention,typo")
    with pytest.raises(ValueError, match="typo"):
        testing.register()


def test_the_planted_leak_keeps_a_copy_and_a_block_every_verify_pass(monkeypatch):
    monkeypatch.setattr(testing, "_KEPT", [])
    out = SimpleNamespace(hidden_states=torch.ones(2, 3), next_token_logits=torch.zeros(2, 4))
    for _ in range(3):
        assert testing._kept_aux(lambda v, b, o: "accepted", None, None, out) == "accepted"
    assert len(testing._KEPT) == 3
    hidden, block = testing._KEPT[0]
    assert torch.equal(hidden, out.hidden_states) and hidden is not out.hidden_states
    assert block.numel() == 1 << 20
