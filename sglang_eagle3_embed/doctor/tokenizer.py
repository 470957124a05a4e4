"""A real tokenizer for the tiny pairs' synthetic language (the ``tokenizers`` library).

Token id ``i`` is the word ``w<i>``; text is words separated by spaces, so every prompt of the
language can be written as text and every SGLang client (``/generate`` with text,
``/v1/completions``, ``bench_serving``) works against a tiny target served without
``--skip-tokenizer-init``. The language's text always encodes back to its ids. Any other word
reads as ``w0``, the unknown token, as a real tokenizer reads every text: SGLang's server sends
English (``The capital city of France is``) in its own start-up warm-up, which a tokenizer that
refused it would fail, and the server with it.
"""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["TOKENIZER_FILES", "text_of", "write_tokenizer"]

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


UNKNOWN = "w0"


def word(token_id: int) -> str:
    return f"w{token_id}"


def text_of(token_ids) -> str:
    """The text of a sequence of token ids (what the tokenizer encodes back to them)."""
    return " ".join(word(int(t)) for t in token_ids)


def write_tokenizer(folder: Path, vocab: int) -> None:
    """Write a word-level ``tokenizer.json`` over ``vocab`` ids, and the files that
    ``transformers.AutoTokenizer`` reads with it, into ``folder``. No special tokens: the language
    has no begin, end or padding token, so none of its ids is taken away from it."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    # the unknown token is the model's (tokenizer.json), not a special token of transformers', so
    # that decoding, which skips special tokens, never drops the language's w0
    tokenizer = Tokenizer(models.WordLevel({word(i): i for i in range(vocab)}, unk_token=UNKNOWN))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    folder = Path(folder)
    tokenizer.save(str(folder / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 1 << 20,
        "clean_up_tokenization_spaces": False,
        "add_bos_token": False,
        "add_eos_token": False,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (folder / "special_tokens_map.json").write_text("{}")
