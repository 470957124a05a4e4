"""The pure core: what the plugin decides, as plain Python (no torch, no sglang).

``ids`` (id conventions), ``draft_config`` (a draft config becomes a capture plan),
``model_folder`` (the one reader of a model folder), ``deployment`` (a launch as data), the startup
rules (``rule_registry`` with the ``@rule`` decorator; ``rules_flags``, ``rules_draft``,
``rules_modes``; ``rules`` runs them), ``findings``, ``errors`` (with the refusal messages they
carry) and ``releases`` (the supported SGLang releases and what differs between them).
``tests/unit/test_layout.py`` keeps it pure.
"""
