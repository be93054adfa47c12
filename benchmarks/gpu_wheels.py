"""The Python packages a book run on the lent GPU machine needs and its image lacks, fetched as CPython 3.12 wheels
(issue 56: ``scripts/book_run.py`` executes the chapters under nbval there).

The roots are what executing a chapter takes beyond the package's own needs: nbval and jupytext (the chapters are
MyST files), ipykernel (the kernel) and myst-nb (the chapters glue their numbers). Their dependencies are read from
this environment's installed metadata (the versions the book is tested with), with the markers evaluated for
CPython 3.12 on Linux x86-64, and every package the GPU machine's image already holds is left out
(``IMAGE``: the device tool's list, read on such a machine on 2026-11-17).

    python benchmarks/gpu_wheels.py --list          # what would travel, name==version
    python benchmarks/gpu_wheels.py --dest .whl     # fetch the wheels (pip download; .whl is ignored by git)

On the GPU machine, ``benchmarks/gpu_session.sh`` (BOOK=1) installs them with pip from the carried folder.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOTS = ("nbval", "jupytext", "ipykernel", "myst-nb")
IMAGE = frozenset(
    """absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
    certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
    cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
    flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx humanize
    huggingface-hub hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib
    jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml
    markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
    multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas
    nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile
    nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13
    nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless
    optax opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip
    pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
    pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist
    python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core
    scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson
    six sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
    tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics torchvision
    tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug
    wheel wrapt xarray xxhash yarl zipp""".split()
)
TARGET = {  # the markers' environment of the GPU machine's python3
    "python_version": "3.12",
    "python_full_version": "3.12.3",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
}
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
)


def canonical(name: str) -> str:
    """A distribution's name as pip compares it (PEP 503).

    >>> canonical("Jupyter_Client")
    'jupyter-client'
    """
    return re.sub(r"[-_.]+", "-", name).lower()


def needed(roots=ROOTS, image=IMAGE) -> dict[str, str]:
    """{name: installed version} of ``roots`` and everything they require on the target, less ``image``.

    Raises:
        ValueError: a package required on the target is not installed here (its version is unknown).
    """
    from packaging.markers import Marker
    from packaging.requirements import Requirement

    out, todo = {}, [canonical(r) for r in roots]
    while todo:
        name = todo.pop()
        if name in out or name in image:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise ValueError(
                f"{name} is required on the GPU machine but not installed here: install it"
            ) from None
        out[name] = dist.version
        for line in dist.requires or []:
            req = Requirement(line)
            if req.marker is None or Marker(str(req.marker)).evaluate(TARGET | {"extra": ""}):
                todo.append(canonical(req.name))
    return dict(sorted(out.items()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=Path(".whl"), help="the folder of wheels (default .whl)")
    parser.add_argument("--list", action="store_true", help="print name==version and fetch nothing")
    args = parser.parse_args(argv)
    pins = [f"{n}=={v}" for n, v in needed().items()]
    if args.list:
        print("\n".join(pins))
        return 0
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(args.dest)]
    cmd += ["--python-version", "3.12", "--implementation", "cp", *(f"--platform={p}" for p in PLATFORMS)]
    subprocess.run([*cmd, *pins], check=True)
    print(f"{len(pins)} wheels in {args.dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
