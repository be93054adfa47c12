"""companion: executable companion to "Distributional associations vs in-context reasoning".

Modules: :mod:`companion.config` (profiles, seeds, paths), :mod:`companion.data`
(tasks and corpora), :mod:`companion.models` (the transformer of Eq. (1)),
:mod:`companion.train` (one training loop), :mod:`companion.truncation` (LASER),
:mod:`companion.probes` (measurements), :mod:`companion.claims` (checked claims),
:mod:`companion.plotting` (house figure helpers), :mod:`companion.experiments` (the
paper's experiments as cached runs), :mod:`companion.figures` (each chapter's own
figures, imported by no computation).
"""

__version__ = "0.1.0"
