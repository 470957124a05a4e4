"""doctor.backends.EngineBackend without a GPU: an engine stand-in records what the backend asks of
it, and in what order (the real engine's runs are in tests/gpu/test_wiring_doctor.py)."""

import torch

from sglang_eagle3_embed.doctor.backends import EngineBackend


class RecordingEngine:
    def __init__(self, calls: list, width: int):
        self.calls, self.width = calls, width

    def generate(self, input_ids, sampling_params, return_hidden_states=False):
        self.calls.append("engine")
        new = sampling_params["max_new_tokens"]
        outs = []
        for row in input_ids:
            states = torch.zeros(len(row), self.width).tolist()
            outs.append({"output_ids": [1] * new, "meta_info": {"hidden_states": [states]}})
        return outs

    def shutdown(self):
        self.calls.append("shutdown")


def test_every_engine_call_first_gives_back_what_the_draft_cached(monkeypatch):
    """The probe's draft runs in this process on the engine's GPU; the allocator keeps what the
    draft's last batch used unless it is emptied, and the engine's next batch then runs out of
    memory. Each call the backend makes of the engine comes after the cache is emptied."""
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append("empty"))
    backend = EngineBackend.__new__(EngineBackend)
    backend.engine_args, backend.device, backend.order = {}, "cpu", [0, 2]
    backend.embedding = torch.nn.Embedding(10, 4)
    backend.engine = RecordingEngine(calls, width=2 * 4)

    tokens = backend.generate(torch.ones(2, 3, dtype=torch.long), new_tokens=2)
    states = backend.states(tokens, [2])

    assert calls == ["empty", "engine", "empty", "engine"]
    assert tokens.shape == (2, 5) and states[2].shape == (2, 5, 4)


def test_an_expected_capture_starts_one_engine_for_generate_and_states(monkeypatch):
    """Each engine start loads the target (a minute at Kimi-K2.5's shape): told what ``states``
    will capture, the backend starts one engine that serves both ``generate`` and ``states``."""
    import sglang

    started = []

    def engine(**kwargs):
        started.append(kwargs["return_aux_hidden_state_layer_ids"])
        return RecordingEngine([], width=len(started[-1]) * 4)

    monkeypatch.setattr(sglang, "Engine", engine)
    backend = EngineBackend.__new__(EngineBackend)
    backend.target, backend.engine_args, backend.device = "t", {}, "cpu"
    backend.engine, backend.order = None, []
    backend.embedding = torch.nn.Embedding(10, 4)

    backend.expect([5, 2])
    tokens = backend.generate(torch.ones(2, 3, dtype=torch.long), new_tokens=2)
    states = backend.states(tokens, [2, 5])

    assert started == [[0, 2, 5]]
    assert states[5].shape == (2, 5, 4)
