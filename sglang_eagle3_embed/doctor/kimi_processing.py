"""The processor of the tiny Kimi-K2.5 checkpoint (``doctor/kimi.py`` copies this file into it as
remote code, named by ``processor_config.json``'s ``auto_map``; it imports only transformers).

It gives SGLang's Kimi-K2.5 processor what it reads from the real one: ``tokenizer`` (the pair's
word-level tokenizer), ``image_processor`` and ``media_processor.media_proc_cfg``. Text only: an
image is refused with a clear error.
"""

import json
import os

from transformers import PreTrainedTokenizerFast
from transformers.image_processing_utils import BaseImageProcessor

TEXT_ONLY = "this tiny Kimi-K2.5 test checkpoint serves text only: its vision tower is random"


class TinyKimiMediaProcessor(BaseImageProcessor):
    def __init__(self, media_proc_cfg=None, **kwargs):
        super().__init__(**kwargs)
        self.media_proc_cfg = dict(media_proc_cfg or {})

    def preprocess(self, *args, **kwargs):
        raise ValueError(TEXT_ONLY)


class TinyKimiK25Processor:
    def __init__(self, tokenizer, media_proc_cfg):
        self.tokenizer = tokenizer
        self.media_processor = TinyKimiMediaProcessor(media_proc_cfg)
        self.image_processor = self.media_processor

    @classmethod
    def register_for_auto_class(cls, auto_class="AutoProcessor"):
        cls._auto_class = auto_class  # what transformers asks of a remote-code processor class

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        with open(os.path.join(path, "processor_config.json")) as f:
            media_proc_cfg = json.load(f)["media_proc_cfg"]
        return cls(PreTrainedTokenizerFast.from_pretrained(path), media_proc_cfg)

    def __call__(self, text=None, images=None, videos=None, **kwargs):
        if images or videos or kwargs.get("medias"):
            raise ValueError(TEXT_ONLY)
        return self.tokenizer(text, **kwargs)

    def decode(self, *args, **kwargs):
        return self.tokenizer.decode(*args, **kwargs)

    def batch_decode(self, *args, **kwargs):
        return self.tokenizer.batch_decode(*args, **kwargs)
