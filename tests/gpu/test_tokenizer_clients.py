"""The tiny pairs' tokenizer on the real server: a GPU-pair-sized target served by ``python -m
sglang.launch_server`` without ``--skip-tokenizer-init`` passes SGLang's own start-up warm-up
(English text) and answers every client: ``/generate`` with text, the OpenAI ``/v1/completions``
API, and SGLang's serving client through that API. The target's weights are dummy (``--load-format
dummy``): what is tested is the tokenizer's path through the server, not the tokens.
"""

import re

import pytest
import torch

from harness.server_run import Server, client_record, run_client, write_custom_dataset
from sglang_eagle3_embed.doctor.tiny_target import GPU_TARGET, target_config
from sglang_eagle3_embed.doctor.tokenizer import text_of, write_tokenizer

pytestmark = pytest.mark.gpu

WORDS = re.compile(r"^(w\d+)( w\d+)*$")


@pytest.fixture(scope="module")
def served(tmp_path_factory, gpu_logs):
    folder = tmp_path_factory.mktemp("tokenizer-target")
    target_config(GPU_TARGET).save_pretrained(folder)
    write_tokenizer(folder, GPU_TARGET.vocab)
    server_args = {"model_path": str(folder), "load_format": "dummy", "dtype": "bfloat16",
                   "mem_fraction_static": 0.3, "max_total_tokens": 16384, "cuda_graph_max_bs_prefill": 256}  # fmt: skip
    with Server("tokenizer-clients", server_args, gpu_logs) as server:
        server.wait_ready(300)
        yield server, folder


def test_sglangs_start_up_warm_up_passes_with_english_text(served):
    server, _ = served
    assert "warmup error" not in server.log
    status, body = server.request("/generate", {"text": "The capital city of France is",
                                                "sampling_params": {"max_new_tokens": 4, "temperature": 0}})  # fmt: skip
    assert status == 200 and body["meta_info"]["prompt_tokens"] == 6, body


def test_generate_takes_and_returns_the_languages_text(served):
    server, _ = served
    sampling = {"max_new_tokens": 12, "temperature": 0, "ignore_eos": True}
    status, body = server.request("/generate", {"text": text_of([5, 9, 17, 3]), "sampling_params": sampling})
    assert status == 200, body
    assert body["meta_info"]["prompt_tokens"] == 4 and len(body["output_ids"]) == 12
    assert WORDS.match(body["text"].strip()) and body["text"].split() == text_of(body["output_ids"]).split()


def test_openai_completions_answer_with_the_languages_text(served):
    server, folder = served
    request = {"model": str(folder), "prompt": text_of([7, 8, 9]), "max_tokens": 10, "temperature": 0,
               "ignore_eos": True}  # fmt: skip
    status, body = server.request("/v1/completions", request)
    assert status == 200, body
    assert body["usage"]["prompt_tokens"] == 3 and body["usage"]["completion_tokens"] == 10, body
    assert WORDS.match(body["choices"][0]["text"].strip()), body


def test_sglangs_serving_client_runs_through_the_openai_api(served, gpu_logs, tmp_path):
    server, folder = served
    rows = torch.randint(GPU_TARGET.vocab, (16, 24), generator=torch.Generator().manual_seed(0)).tolist()
    dataset = write_custom_dataset(rows, 8, tmp_path / "language.jsonl")
    out = gpu_logs / "tokenizer-clients-oai.jsonl"
    command = [
        "--backend", "sglang-oai", "--host", "127.0.0.1", "--port", str(server.port), "--dataset-name", "custom",
        "--dataset-path", str(dataset), "--tokenizer", str(folder), "--num-prompts", "16",
        "--sharegpt-output-len", "16", "--max-concurrency", "4", "--request-rate", "inf", "--temperature", "0",
        "--output-file", str(out), "--disable-tqdm",
    ]  # fmt: skip
    run_client(command, gpu_logs / "tokenizer-clients-oai.log")
    record = client_record(out, ("completed", "total_output_tokens"))
    assert record == {"completed": 16, "total_output_tokens": 16 * 16}, record
