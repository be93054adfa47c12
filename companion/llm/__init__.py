"""Probes of pretrained language models (main paper Sections 2.2, 4; Appendices C, I).

* :mod:`~companion.llm.hub`: loading through transformers' own classes, with
  revisions (Pythia checkpoints ``step{N}``), and one clear error when the Hub
  is unreachable and nothing is cached.
* :mod:`~companion.llm.laser`: LASER on Hugging Face modules, named in the
  paper's vocabulary (layer, "mlp_in" / "mlp_out" / ...), mapped per
  architecture (GPT-2, GPT-NeoX/Pythia, Llama, Phi-3).
* :mod:`~companion.llm.prompts`: the IOI, factual-recall and preposition
  prompt sets.
* :mod:`~companion.llm.measure`: batched next-token probabilities, candidate
  sets, top-k tables, ranks.
* :mod:`~companion.llm.gsm8k`: the GSM8K few-shot chain-of-thought harness.
* :mod:`~companion.llm.studies`: the chapters' pipelines and results files.

``transformers`` is imported lazily, so the rest of the package does not need it.
"""
