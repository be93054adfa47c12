"""companion: executable companion to "Distributional associations vs in-context reasoning".

Modules: :mod:`companion.config` (profiles, seeds, paths), :mod:`companion.data`
(tasks and corpora), :mod:`companion.models` (the transformer of Eq. (1)),
:mod:`companion.train` (one training loop), :mod:`companion.truncation` (LASER),
:mod:`companion.probes` (measurements), :mod:`companion.claims` (checked claims),
:mod:`companion.plotting` (house figure helpers), :mod:`companion.experiments` (the
paper's experiments as cached runs), :mod:`companion.figures` (each chapter's own
figures, imported by no computation).
"""

import warnings as _warnings

__version__ = "0.1.0"

# The progress bars are tqdm.auto's: widgets where ipywidgets is installed, text bars elsewhere. In a Jupyter kernel
# without ipywidgets (the book's environment) tqdm warns "IProgress not found" in the first cell that imports it, a
# cell of the built book (book/status printed it with the path of the build's site-packages); the text bars it falls
# back to are the ones wanted.
_warnings.filterwarnings("ignore", message="IProgress not found")
