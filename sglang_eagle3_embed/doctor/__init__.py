"""The wiring doctor: which tensors a draft was trained on, measured offline.

``tiny_target`` and ``tiny_draft`` train a small DeepSeek-V3 target and its EAGLE-3 draft,
``pair`` caches them, ``chain`` simulates greedy chain speculation, ``wirings`` lists the ways a
server could feed a draft, ``probe`` scores them (HF, SGLang on the CPU through ``sglang_cpu``, or
an SGLang engine), ``demo`` tells the story on the tiny pair. Used by the command line and the
tests; a server process never imports it (``tests/unit/test_layout.py``).
"""
