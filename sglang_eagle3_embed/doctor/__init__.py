"""The wiring doctor: which tensors a draft was trained on, measured offline.

``tiny_target`` and ``tiny_draft`` train a small DeepSeek-V3 target and its EAGLE-3 draft,
``pair`` caches them, ``kimi`` wraps a tiny target as Kimi-K2.5 (its remote-code processor is
package data, ``data/kimi_processing.py.txt``); ``eagle3_draft`` is the twin of SGLang's EAGLE-3
draft, ``chain`` simulates greedy chain speculation, ``wirings`` lists the ways a server could feed
a draft; ``probe`` scores them from a typed ``request``, with the target run by one of the
``backends`` (HF, SGLang on the CPU through ``sglang_cpu``, or an SGLang engine), into a
``report``; ``demo`` tells the story on the tiny pair; ``check`` runs the startup rules on a launch
command line. Used by the command line and the tests; a
server process never imports it (``tests/unit/test_layout.py``).
"""
