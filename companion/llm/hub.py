"""Loading pretrained models and tokenizers, and the Pythia checkpoint schedule.

Models are loaded with ``transformers.AutoModelForCausalLM`` and
``AutoTokenizer`` exactly as published (raw weights: no folding of layer
norms, no centring), at a ``revision`` (a branch, tag or commit; Pythia's
training checkpoints are the branches ``step0, step1, step2, step4, ...,
step512, step1000, step2000, ..., step143000``, ``step143000`` being the
final model). ``name`` may also be a local directory written by
``save_pretrained``, which is how the tests and the offline stand-ins pass
models in.

>>> pythia_checkpoints()[:12]
['step0', 'step1', 'step2', 'step4', 'step8', 'step16', 'step32', 'step64', 'step128', 'step256', 'step512', 'step1000']
>>> len(pythia_checkpoints()), pythia_checkpoints()[-1]
(154, 'step143000')
>>> check_revision("EleutherAI/pythia-1b", "step1500")
Traceback (most recent call last):
...
ValueError: revision 'step1500' is not a Pythia checkpoint: allowed step0, step1, step2, step4, ..., step512 and step1000 to step143000 every 1000 (nearest: step1000, step2000), or 'main'
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from companion.config import check_choice

DTYPES = ("float32", "float16", "bfloat16")
PYTHIA_FINAL = 143000


def pythia_steps() -> list[int]:
    """Training steps with a published Pythia checkpoint: 0, powers of two to 512, then every 1000."""
    return [0] + [2**i for i in range(10)] + list(range(1000, PYTHIA_FINAL + 1, 1000))


def pythia_checkpoints() -> list[str]:
    """The revision names ``step{N}`` of :func:`pythia_steps`."""
    return [f"step{s}" for s in pythia_steps()]


def is_pythia(name: str) -> bool:
    return "pythia" in str(name).lower()


def check_revision(name: str, revision: str | None) -> None:
    """For Pythia models, ``revision`` must be a checkpoint of the schedule (or None / 'main').

    Raises:
        ValueError: naming the revision and the nearest checkpoints.
    """
    if revision in (None, "main") or not is_pythia(name):
        return
    if revision in pythia_checkpoints():
        return
    msg = (
        f"revision {revision!r} is not a Pythia checkpoint: allowed step0, step1, step2, step4, ..., step512 "
        f"and step1000 to step{PYTHIA_FINAL} every 1000"
    )
    try:
        step = int(str(revision).removeprefix("step"))
    except ValueError:
        raise ValueError(msg + ", or 'main'") from None
    steps = pythia_steps()
    below = max((s for s in steps if s <= step), default=steps[0])
    above = min((s for s in steps if s >= step), default=steps[-1])
    raise ValueError(msg + f" (nearest: step{below}, step{above}), or 'main'")


class ModelUnavailable(RuntimeError):
    """A model or tokenizer could not be loaded (offline and not cached, or a bad name/revision)."""


@dataclass
class Loaded:
    """A loaded model with its tokenizer and where it came from."""

    model: object
    tokenizer: object
    name: str
    revision: str | None
    dtype: str
    device: str
    local: bool = False  # ``name`` is a folder written by ``save_pretrained`` (the tests', the stand-in's)

    @property
    def family(self) -> str:
        return self.model.config.model_type

    @property
    def label(self) -> str:
        """Where the weights came from, for a printed line: the hub name at its revision, or ``local folder`` and
        the folder's last two parts (the machine's own path left out: the stand-in's is a cache folder, a
        temporary one in CI's build of the book).

        >>> Loaded(None, None, "EleutherAI/pythia-1b", "step143000", "float32", "cpu").label
        'EleutherAI/pythia-1b at step143000'
        >>> Loaded(None, None, "/tmp/b/.cache/companion/llm/standin-gpt2-f7f3/step256", None, "float32", "cpu",
        ...        local=True).label
        'local folder standin-gpt2-f7f3/step256'
        """
        if self.local:
            return f"local folder {Path(*Path(self.name).parts[-2:])}"
        return self.name + (f" at {self.revision}" if self.revision else "")


def unavailable_message(name: str, revision: str | None, err: BaseException) -> str:
    rev = revision or "main"
    return (
        f"could not load {name!r} at revision {rev!r}: {type(err).__name__}: {str(err).splitlines()[0][:300]}\n"
        f"The Hugging Face Hub may be unreachable and no cached copy was found. To make it available:\n"
        f'  * on a machine with network access run once: python -c "from transformers import '
        f"AutoModelForCausalLM as M, AutoTokenizer as T; M.from_pretrained('{name}', revision='{rev}'); "
        f"T.from_pretrained('{name}', revision='{rev}')\"\n"
        f"    and copy the cache folder ($HF_HOME, default ~/.cache/huggingface) to this machine;\n"
        f"  * or pass a local directory written by save_pretrained() instead of the name;\n"
        f"  * set HF_HUB_OFFLINE=1 to use only the cache without network attempts "
        f"(now: HF_HUB_OFFLINE={os.environ.get('HF_HUB_OFFLINE', 'unset')}, "
        f"HF_HOME={os.environ.get('HF_HOME', 'unset')})."
    )


def checkpoint_source(source: str, revision: str | None) -> tuple[str, str | None]:
    """(name, revision) to load: a local folder ``source/revision`` if it exists, else as given (a Hub name at
    its revision, or a folder whose revision :func:`load` refuses)."""
    if revision is None:
        return source, None
    local = Path(source) / revision
    return (str(local), None) if local.is_dir() else (source, revision)


@contextlib.contextmanager
def quiet_loading(quiet: bool = True) -> Iterator[None]:
    """transformers' own progress bars ("Loading weights": reading a checkpoint that is already on disk) off inside
    the block when ``quiet``; huggingface_hub's download bars stay as they were (a download is minutes of real work,
    shown as the book's other long runs are, and only the first time). Both back to what they were after the block,
    whatever it raises.

    >>> from huggingface_hub.utils import are_progress_bars_disabled
    >>> from transformers.utils import logging as hf_logging
    >>> with quiet_loading():
    ...     hf_logging.is_progress_bar_enabled(), are_progress_bars_disabled()
    (False, False)
    >>> hf_logging.is_progress_bar_enabled(), are_progress_bars_disabled()
    (True, False)
    >>> hf_logging.disable_progress_bar()  # transformers' switch turns the hub's off too
    >>> with quiet_loading(False):
    ...     pass
    >>> hf_logging.is_progress_bar_enabled(), are_progress_bars_disabled()  # off before, so off after
    (False, True)
    >>> hf_logging.enable_progress_bar()
    """
    import huggingface_hub.utils as hub_utils
    from transformers.utils import logging as hf_logging

    was, hub_was = hf_logging.is_progress_bar_enabled(), not hub_utils.are_progress_bars_disabled()

    def restore_hub() -> None:  # transformers' switch sets the hub's as well
        (hub_utils.enable_progress_bars if hub_was else hub_utils.disable_progress_bars)()

    if quiet:
        hf_logging.disable_progress_bar()
        restore_hub()
    try:
        yield
    finally:
        (hf_logging.enable_progress_bar if was else hf_logging.disable_progress_bar)()
        restore_hub()


def load(
    name: str,
    revision: str | None = None,
    dtype: str = "float32",
    device=None,
    tokenizer_name: str | None = None,
) -> Loaded:
    """Load a causal LM and its tokenizer with transformers' Auto classes.

    A download shows huggingface_hub's progress bars (minutes, the first time); reading the weights from disk shows
    none (:func:`quiet_loading`: transformers' "Loading weights" bar, one per load, would stand in every built
    chapter that loads a model, a hub model's as a local folder's).

    ``tokenizer_name`` overrides where the tokenizer comes from (default: the
    model's own, at ``revision`` for hub names; Pythia checkpoints share one
    tokenizer, so the final one is used).

    A local folder's revisions are its subfolders (``<name>/step143000``, as a folder of checkpoints is laid out):
    ``revision`` loads that subfolder, never the folder itself in its place.

    Raises:
        ValueError: bad dtype or Pythia revision (before any download).
        ModelUnavailable: the model or tokenizer cannot be loaded (a local folder without the revision's
            subfolder included); the message says which and how to make it available.
    """
    check_choice("dtype", dtype, DTYPES)
    check_revision(name, revision)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from companion import config

    device = config.get_device(device)
    name, revision = checkpoint_source(name, revision)
    local = Path(name).is_dir()
    if local and revision not in (None, "main"):
        raise ModelUnavailable(
            f"could not load {name!r} at revision {revision!r}: a local folder's revisions are its "
            f"subfolders, and it has no {revision!r} (allowed: "
            f"{', '.join(sorted(d.name for d in Path(name).iterdir() if d.is_dir())) or 'none'})"
        )
    with quiet_loading():
        try:
            model = AutoModelForCausalLM.from_pretrained(
                name, revision=None if local else revision, dtype=getattr(torch, dtype)
            )
        # hub errors derive from OSError (offline, missing revision, 404)
        except (OSError, ValueError) as err:
            raise ModelUnavailable(unavailable_message(name, revision, err)) from err
        tok_source = tokenizer_name or name
        try:
            tokenizer = AutoTokenizer.from_pretrained(
                tok_source, revision=None if (local or tokenizer_name or is_pythia(name)) else revision
            )
        except (OSError, ValueError) as err:
            raise ModelUnavailable(unavailable_message(tok_source, None, err)) from err
    model.to(device).eval()
    return Loaded(model, tokenizer, str(name), revision, dtype, config.device_name(device), local)


def fingerprint(model, max_tensors: int = 4) -> str:
    """A short hash of the weights of the first and last parameters (to spot duplicated checkpoints)."""
    params = list(model.state_dict().values())
    picked = params[: max_tensors // 2] + params[-(max_tensors - max_tensors // 2) :]
    h = hashlib.sha256()
    for p in picked:
        h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def duplicated_checkpoints(fingerprints: dict[str, str]) -> list[str]:
    """Revisions whose weights equal those of the previous revision in the given order.

    Some Pythia branches on the Hub hold the same weights as a neighbour (a known
    problem with the uploads); results at such revisions are flagged, not trusted.

    >>> duplicated_checkpoints({"step1": "a", "step2": "b", "step4": "b", "step8": "c"})
    ['step4']
    """
    revs = list(fingerprints)
    return [r for prev, r in zip(revs, revs[1:]) if fingerprints[r] == fingerprints[prev]]
