"""The chapters' own figures, one module per chapter (named after it), or per family where the study module is
shared (``khop``, ``noisy_recall``). They stand above the computations: no experiment, theory or LLM module
imports them (``lint-imports`` keeps it so), so editing a figure re-keys no cached run. The house helpers
every chapter uses are :mod:`companion.plotting`'s."""
