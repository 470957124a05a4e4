"""What ``canary`` reads of a server's settings: a server's own ``/server_info``, and a PD router's
answer, which holds each side's (the decode side decides the accept length)."""

from sglang_eagle3_embed.doctor.canary import settings_of

SERVER = {
    "speculative_algorithm": "EAGLE3",
    "speculative_num_steps": 3,
    "model_impl": "sglang_eagle3_embed",
    "disaggregation_mode": "decode",
    "tp_size": 1,
}


def test_a_server_answers_its_own_settings():
    assert settings_of(SERVER) == {k: v for k, v in SERVER.items() if k != "tp_size"}


def test_a_pd_router_answers_with_its_decode_sides_settings():
    prefill = {**SERVER, "disaggregation_mode": "prefill", "speculative_num_steps": 7}
    answer = {"internal_states": [{}], "prefill": [prefill], "decode": [SERVER]}
    assert settings_of(answer)["speculative_num_steps"] == 3
    assert settings_of(answer)["disaggregation_mode"] == "decode"


def test_an_answer_without_settings_gives_none():
    assert settings_of({"decode": []}) == {}
    assert settings_of({"version": "0.5.23"}) == {}
