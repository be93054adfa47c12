"""One load-or-compute helper for every cached result of the book.

A result is keyed by its settings (a dataclass or a dict) and a hash of the
source of the package modules that compute it, *with every ``companion``
module they import, transitively* (read from their ``import`` statements).
So changing a training loop retrains what uses it, while rewording a claim
(``data/claims.toml``), a plot or a chapter retrains nothing. Writes are
atomic: a reader never sees a half-written result.

>>> mods = import_closure("companion.theory.noise_logit")
>>> "companion.config" in mods, "companion.claims" in mods
(True, False)
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import pickle
from functools import lru_cache
from pathlib import Path
from typing import Callable, TypeVar

from companion import config
from companion.io import atomic_torch_save, atomic_write_bytes, atomic_write_text

T = TypeVar("T")
FORMATS = ("json", "pickle", "torch")


def _module_file(name: str) -> Path | None:
    """The source file of a ``companion`` module, or None if ``name`` is not one (e.g. a function name)."""
    parts = name.split(".")[1:]
    if not parts:
        return config.PACKAGE_DIR / "__init__.py"
    rel = Path(*parts)
    for cand in (config.PACKAGE_DIR / rel.with_suffix(".py"), config.PACKAGE_DIR / rel / "__init__.py"):
        if cand.is_file():
            return cand
    return None


def _imports(name: str, path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            found.add(base)
            found |= {f"{base}.{a.name}" for a in node.names}  # `from companion import config` names a module
    return {m for m in found if m.startswith("companion.")}  # the top-level __init__ holds only docs


@lru_cache(maxsize=None)
def import_closure(*modules: str) -> tuple[str, ...]:
    """The named modules and every ``companion`` module they import, transitively (sorted)."""
    seen: set[str] = set()
    todo = list(modules)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(name)
        if path is None:
            if name in modules:
                raise ValueError(f"{name!r} is not a module of the companion package")
            continue
        seen.add(name)
        todo += sorted(_imports(name, path) - seen)
    return tuple(sorted(seen))


def source_hash(*modules: str) -> str:
    """A short hash of the source of ``modules`` and their ``companion`` imports."""
    h = hashlib.sha256()
    for name in import_closure(*modules):
        h.update(name.encode())
        h.update(_module_file(name).read_bytes())
    return h.hexdigest()[:16]


def key(settings, modules: tuple[str, ...] | list[str], length: int = 20) -> str:
    """Cache key of a result: its settings, the source hash of the modules that compute it, the precision of
    matrix products in force unless fp32 (:func:`companion.config.precision`) and the sampler unless numpy
    (:func:`companion.config.sampler`; the keys of results computed before either setting existed stay as they
    were)."""
    blob = settings if isinstance(settings, dict) else dataclasses.asdict(settings)
    text = json.dumps(blob, sort_keys=True, default=repr) + source_hash(*modules)
    if config.current_precision() != "fp32":  # fp32 keys stay as they were
        text += f"|precision={config.current_precision()}"
    if config.sampler() != "numpy":  # numpy keys stay as they were
        text += f"|sampler={config.sampler()}"
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def path_for(kind: str, settings, modules, fmt: str = "pickle") -> Path:
    """Where :func:`load_or_compute` keeps a result."""
    config.check_choice("cache format", fmt, FORMATS)
    ext = {"json": "json", "pickle": "pkl", "torch": "pt"}[fmt]
    return config.cache_dir() / "runs" / f"{kind}-{key(settings, modules)}.{ext}"


def load_or_compute(
    kind: str, settings, compute: Callable[[], T], modules, fmt: str = "pickle", use_cache: bool = True
) -> T:
    """Return the cached result of ``compute()`` for these settings and modules, computing it once.

    Args:
        kind: a name for the file (e.g. ``"noisy_recall"``).
        settings: what determines the result (a dataclass or a JSON-able dict).
        compute: called without arguments when nothing is cached.
        modules: the ``companion`` modules whose code computes the result
            (their imports are followed).
        fmt: ``"json"`` (plain data), ``"pickle"`` (numpy arrays) or ``"torch"`` (tensors).
        use_cache: False recomputes (and overwrites the cached copy).
    """
    path = path_for(kind, settings, modules, fmt)
    if use_cache and path.is_file():
        if fmt == "json":
            return json.loads(path.read_text())
        if fmt == "pickle":
            return pickle.loads(path.read_bytes())
        import torch

        return torch.load(path, map_location="cpu", weights_only=False)
    result = compute()
    if fmt == "json":
        atomic_write_text(path, json.dumps(result, indent=1))
    elif fmt == "pickle":
        atomic_write_bytes(path, pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL))
    else:
        atomic_torch_save(path, result)
    return result
