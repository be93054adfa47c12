"""Profiles, paths, device choice, seeding and small validation helpers.

Everything that depends on the environment is read here, once:

* ``COMPANION_PROFILE``: ``quick`` (CPU, minutes; what CI runs) or ``full``
  (the paper's sizes, meant for a GPU).
* ``COMPANION_DATA_DIR``: a folder holding third-party data laid out as
  ``tinyshakespeare/input.txt``, ``gsm8k/test.jsonl``, ... (CI points it at
  ``../shared/data``).
* ``COMPANION_PAPERS_DIR``: the papers' plain-text sources (default: ``papers/`` beside
  ``$COMPANION_DATA_DIR``, else ``../shared/papers``); only tests read them.
* ``COMPANION_CACHE_DIR``: where trained runs, downloads and recorded claims
  are cached (default: ``<repository>/.cache/companion``, git-ignored).
* ``COMPANION_DEVICE``: ``cpu``, ``cuda``, ``cuda:1``, ... (default: ``cuda``
  when available, else ``cpu``).
* ``COMPANION_SAMPLER``: how training batches are drawn, ``numpy`` (default: the
  numpy generators, the book's recorded numbers) or ``counter`` (the
  counter-based samplers of issue 54, to compare the claims under both).
* ``COMPANION_SEED``: the book's seed (default 0), the seed of every trained run's
  configuration that does not set its own (:func:`book_seed`): the same chapters under
  other seeds (issue 54's seed sweep of the rows near their bars).
* ``COMPANION_CHECKS``: ``assert`` (default: a claim check that fails raises)
  or ``record`` (it is recorded as failing and the chapter goes on, so that a
  build under another sampler judges every row: issue 54's flip list).

>>> get_profile("quick")
'quick'
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
from pathlib import Path
from typing import Iterable

import numpy as np

PROFILES = ("quick", "full")
REPO_ROOT = Path(__file__).resolve().parent.parent
PACKAGE_DIR = Path(__file__).resolve().parent


def get_profile(profile: str | None = None) -> str:
    """Return the active profile: the argument, else ``$COMPANION_PROFILE``, else quick.

    Raises:
        ValueError: the profile is not one of ``quick`` or ``full``.
    """
    value = profile if profile is not None else os.environ.get("COMPANION_PROFILE", "quick")
    value = value.strip().lower()
    if value not in PROFILES:
        raise ValueError(f"unknown profile {value!r}: allowed profiles are {', '.join(PROFILES)}")
    return value


def get_device(device: str | None = None):
    """Pick the torch device once: the argument, ``$COMPANION_DEVICE``, else cuda if present.

    >>> get_device("cpu")
    device(type='cpu')
    >>> get_device("gpu")
    Traceback (most recent call last):
    ...
    ValueError: device 'gpu' is not a torch device: allowed 'cpu', 'cuda' or 'cuda:N'

    Raises:
        ValueError: not a device name, or a CUDA device this machine does not have.
    """
    import torch

    name = device or os.environ.get("COMPANION_DEVICE")
    if not name:
        name = "cuda" if torch.cuda.is_available() else "cpu"
    try:
        dev = torch.device(name)
    except (RuntimeError, TypeError):
        raise ValueError(
            f"device {name!r} is not a torch device: allowed 'cpu', 'cuda' or 'cuda:N'"
        ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested but CUDA is not available; use 'cpu'")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        n = torch.cuda.device_count()
        raise ValueError(
            f"device {name!r}: this machine has {n} CUDA devices, allowed 'cuda:0' to 'cuda:{n - 1}'"
        )
    return dev


def device_name(device=None) -> str:
    """A readable name of the device: the GPU model, or the CPU model and thread count."""
    import platform

    import torch

    device = get_device(device) if not hasattr(device, "type") else device
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"CPU {cpu}, {torch.get_num_threads()} threads"


def environment() -> dict[str, str]:
    """What this build ran with: profile, device, the sampler of training batches and the book's seed, versions
    and the package hash (the status page).

    >>> [k for k in environment()][:4]
    ['profile', 'device', 'sampler', 'seed']
    """
    import platform

    import matplotlib
    import torch

    device = get_device()
    return {
        "profile": get_profile(),
        "device": f"{device} ({device_name(device)})",
        "sampler": sampler_label(),
        "seed": str(book_seed()),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "numpy": np.__version__,
        "matplotlib": matplotlib.__version__,
        "package hash": package_hash(),
    }


def device_facts(device=None) -> dict:
    """What a run's speed and rounding depend on besides the code and the device's name: torch's version, the
    GPU's number of streaming multiprocessors (None on a CPU) and torch's CPU threads.

    >>> sorted(device_facts("cpu"))
    ['sm_count', 'threads', 'torch']
    >>> device_facts("cpu")["sm_count"] is None
    True
    """
    import torch

    device = get_device(device) if not hasattr(device, "type") else device
    sm = torch.cuda.get_device_properties(device).multi_processor_count if device.type == "cuda" else None
    return {"torch": torch.__version__, "sm_count": sm, "threads": torch.get_num_threads()}


# How float32 matrix products are computed: "fp32" (IEEE float32, torch's default) or "tf32" (TF32 tensor cores
# on CUDA: inputs rounded to a 10-bit mantissa, float32 accumulation; no effect on a CPU). The book runs fp32; TF32
# may become the full profile's setting only after a recorded comparison shows that the claims do not move.
PRECISIONS = ("fp32", "tf32")


@contextlib.contextmanager
def precision(name: str = "fp32"):
    """Float32 matrix products (and cuDNN's) in ``name`` (:data:`PRECISIONS`) inside the block, as before after.

    >>> with precision("tf32"):
    ...     current_precision()
    'tf32'
    >>> current_precision()
    'fp32'
    """
    check_choice("precision", name, PRECISIONS)
    import torch

    backends = [b for b in (torch.backends.cuda.matmul, torch.backends.cudnn) if hasattr(b, "fp32_precision")]
    before = [b.fp32_precision for b in backends]
    for b in backends:
        b.fp32_precision = "tf32" if name == "tf32" else "ieee"
    try:
        yield
    finally:
        for b, value in zip(backends, before):
            b.fp32_precision = value


def current_precision() -> str:
    """``"tf32"`` while :func:`precision` ("tf32") is in force, else ``"fp32"``."""
    import torch

    return "tf32" if getattr(torch.backends.cuda.matmul, "fp32_precision", "none") == "tf32" else "fp32"


# How training batches are drawn from a run's seed (companion.data.streams): "numpy" (a numpy Generator per stream,
# drawn in order; the book's until issue 54's switch, 2026-12-05, and the recordings in data/recorded) or "counter"
# (companion.data.counter: a batch as a function of (seed, stream, step), on the run's device; the book's since, and
# the recordings in data/recorded/counter).
SAMPLERS = ("numpy", "counter")
DEFAULT_SAMPLER = "counter"
# the version a recording stores ("sampler"); a file written before the field was drawn by the numpy generators
SAMPLER_VERSIONS = {"numpy": 1, "counter": 2}
_SAMPLER_OVERRIDE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "companion_sampler", default=None
)


def sampler(name: str | None = None) -> str:
    """The sampler in force: ``name``, else the one :func:`using_sampler` sets, else ``$COMPANION_SAMPLER``, else
    :data:`DEFAULT_SAMPLER`.

    Raises:
        ValueError: a name that is not one of :data:`SAMPLERS`.
    """
    if name is None:
        name = _SAMPLER_OVERRIDE.get() or os.environ.get("COMPANION_SAMPLER", DEFAULT_SAMPLER)
    value = name.strip().lower()
    check_choice("sampler", value, SAMPLERS)
    return value


def sampler_version(name: str | None = None) -> int:
    """The version of :func:`sampler` ``(name)`` that a recording stores (:data:`SAMPLER_VERSIONS`).

    >>> sampler_version("counter")
    2
    """
    return SAMPLER_VERSIONS[sampler(name)]


def sampler_label(name: str | None = None) -> str:
    """The sampler in force and its version, as a build's environment and a book run's chapters state it.

    >>> sampler_label("counter")
    'counter (version 2)'
    """
    return f"{sampler(name)} (version {sampler_version(name)})"


def sampler_of_version(version: int) -> str:
    """The sampler that a recording's ``version`` names.

    Raises:
        ValueError: a version that is not one of :data:`SAMPLER_VERSIONS`.

    >>> sampler_of_version(1)
    'numpy'
    """
    names = {v: k for k, v in SAMPLER_VERSIONS.items()}
    if version not in names:
        raise ValueError(f"sampler version {version!r}: allowed {sorted(names)} ({SAMPLER_VERSIONS})")
    return names[version]


@contextlib.contextmanager
def using_sampler(name: str):
    """Within the block, :func:`sampler` gives ``name`` whatever ``$COMPANION_SAMPLER`` says: a recording's first
    batch recomputed with the sampler that drew it.

    Raises:
        ValueError: a name that is not one of :data:`SAMPLERS` (before the block runs).
    """
    token = _SAMPLER_OVERRIDE.set(sampler(name))
    try:
        yield
    finally:
        _SAMPLER_OVERRIDE.reset(token)


CHECK_MODES = ("assert", "record")


def checks_assert() -> bool:
    """False when ``$COMPANION_CHECKS`` is ``record`` (a failing claim check is recorded, not raised), else True.

    Raises:
        ValueError: a value that is not one of :data:`CHECK_MODES`.
    """
    value = os.environ.get("COMPANION_CHECKS", "assert").strip().lower()
    check_choice("COMPANION_CHECKS", value, CHECK_MODES)
    return value == "assert"


def cache_dir() -> Path:
    """The cache folder (created on demand)."""
    path = Path(os.environ.get("COMPANION_CACHE_DIR", REPO_ROOT / ".cache" / "companion"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def data_dirs() -> list[Path]:
    """Folders searched for third-party data, in order: ``$COMPANION_DATA_DIR``, the cache."""
    dirs = []
    env = os.environ.get("COMPANION_DATA_DIR")
    if env:
        dirs.append(Path(env))
    dirs.append(cache_dir() / "downloads")
    return dirs


def papers_dir() -> Path:
    """The papers' plain-text sources (``$COMPANION_PAPERS_DIR``; else ``papers/`` beside ``$COMPANION_DATA_DIR``,
    else ``../shared/papers``). Third-party text, never committed; the folder may be absent."""
    env = os.environ.get("COMPANION_PAPERS_DIR")
    if env:
        return Path(env)
    data = os.environ.get("COMPANION_DATA_DIR")
    return Path(data).parent / "papers" if data else REPO_ROOT.parent / "shared" / "papers"


def committed_data_dir() -> Path:
    """The repository's ``data/`` folder (small derived data committed with the code)."""
    return REPO_ROOT / "data"


def package_hash() -> str:
    """A short hash of every ``.py`` file of the package (recorded with claims and results files).

    Cached runs are keyed more narrowly, by the modules they use (:mod:`companion.cache`).
    """
    h = hashlib.sha256()
    for path in sorted(PACKAGE_DIR.rglob("*.py")):
        h.update(str(path.relative_to(PACKAGE_DIR)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def book_seed() -> int:
    """``$COMPANION_SEED`` (default 0): the default seed of every trained run's configuration (a field
    ``seed: int = field(default_factory=book_seed)``); a configuration given its own seed, and a study of named
    seeds, keep theirs. The seed is a field of the configuration, so it keys the cache.

    Raises:
        ValueError: a value that is not an integer at least 0.
    """
    text = os.environ.get("COMPANION_SEED", "0").strip()
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"COMPANION_SEED={text!r} is not an integer: allowed [0, inf)") from None
    check_int("COMPANION_SEED", value, low=0)
    return value


def stream_key(name: str) -> int:
    """A named stream's 32-bit key: the first 4 bytes of the name's sha256 (little-endian), which
    :func:`seed_streams` seeds the numpy stream with and the counter sampler keys its draws by."""
    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "little")


def seed_streams(seed: int, names: Iterable[str]) -> dict[str, np.random.SeedSequence]:
    """Independent, named random streams derived from one seed.

    The same seed and name always give the same stream, whatever other names
    are requested.

    >>> a = seed_streams(0, ["data"])["data"].generate_state(1)[0]
    >>> b = seed_streams(0, ["init", "data"])["data"].generate_state(1)[0]
    >>> bool(a == b)
    True
    """
    check_int("seed", seed, low=0)
    out = {}
    for name in names:
        out[name] = np.random.SeedSequence([seed, stream_key(name)])
    return out


def torch_generator(seq: np.random.SeedSequence):
    """A CPU ``torch.Generator`` seeded from a numpy SeedSequence."""
    import torch

    g = torch.Generator()
    g.manual_seed(int(seq.generate_state(1, dtype=np.uint64)[0] & ((1 << 63) - 1)))
    return g


class Profiled:
    """Mixin for an experiment's configuration with ``quick()`` and ``full()`` constructors.

    The defaults only set ``profile``; a configuration whose sizes differ between the profiles overrides them.
    """

    @classmethod
    def quick(cls, **overrides):
        return cls(**{"profile": "quick", **overrides})

    @classmethod
    def full(cls, **overrides):
        return cls(**{"profile": "full", **overrides})

    def sizes(self) -> dict:
        """The configuration's fields other than ``profile`` (what a chapter prints of it)."""
        import dataclasses

        return {k: v for k, v in dataclasses.asdict(self).items() if k != "profile"}

    @classmethod
    def for_profile(cls, profile: str | None = None, **overrides):
        """The ``quick`` or ``full`` configuration (default: the active profile), with ``overrides``."""
        return cls.quick(**overrides) if get_profile(profile) == "quick" else cls.full(**overrides)


def check_run(exp) -> None:
    """The checks every trained run shares: its profile, d, T, batch and steps at least 1 (T at least 4), and its
    seed (if it has one) at least 0."""
    get_profile(exp.profile)
    if hasattr(exp, "seed"):
        check_int("seed", exp.seed, low=0)
    check_int("d", exp.d, low=1)
    check_int("seq_len (T)", exp.seq_len, low=4)
    check_int("batch", exp.batch, low=1)
    check_int("steps", exp.steps, low=1)


# --- validation helpers: every message names the value and the allowed range ---


def check_int(name: str, value, low: int | None = None, high: int | None = None) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name}={value!r} is out of range: allowed {_range(low, high, True, True)}")


def check_sizes(name: str, values, low: int, at_least: int = 2) -> None:
    """``values``: an increasing tuple of at least ``at_least`` integers, each at least ``low``.

    >>> check_sizes("Ns", (20, 10), low=3)
    Traceback (most recent call last):
    ...
    ValueError: Ns=(20, 10) must be an increasing tuple of at least 2 sizes
    """
    if not isinstance(values, tuple) or len(values) < at_least or list(values) != sorted(set(values)):
        raise ValueError(f"{name}={values!r} must be an increasing tuple of at least {at_least} sizes")
    for v in values:
        check_int(name, v, low=low)


def check_float(
    name: str,
    value,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    high_open: bool = False,
) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    v = float(value)
    bad = v != v
    if low is not None:
        bad |= v <= low if low_open else v < low
    if high is not None:
        bad |= v >= high if high_open else v > high
    if bad:
        raise ValueError(
            f"{name}={value!r} is out of range: allowed {_range(low, high, not low_open, not high_open)}"
        )


def check_choice(name: str, value, allowed: Iterable) -> None:
    allowed = tuple(allowed)
    if value not in allowed:
        raise ValueError(f"unknown {name} {value!r}: allowed values are {', '.join(map(repr, allowed))}")


def _range(low, high, low_closed: bool, high_closed: bool) -> str:
    lo = "-inf" if low is None else repr(low)
    hi = "inf" if high is None else repr(high)
    return f"{'[' if low_closed and low is not None else '('}{lo}, {hi}{']' if high_closed and high is not None else ')'}"
