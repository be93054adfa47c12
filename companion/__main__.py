"""``python -m companion``: the command line (:mod:`companion.cli`)."""

import os
import sys

NATIVE_THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def cap_native_threads(argv: list[str], environ=os.environ) -> str | None:
    """``--threads N`` also caps numpy's BLAS (OpenBLAS or MKL) and OpenMP, which read their thread counts once,
    when first loaded: so it is set here, before anything imports numpy (``torch.set_num_threads`` in the command
    caps torch's own threads). Without it a "one-thread" recording of numpy Monte Carlo ran on every core. The
    value is checked by the command itself; one that is not a positive integer is left to that check.

    >>> env = {}
    >>> cap_native_threads(["record", "x", "--threads", "1"], env), env["OPENBLAS_NUM_THREADS"]
    ('1', '1')
    >>> cap_native_threads(["record", "x", "--threads=0"], {}) is None
    True
    """
    value = None
    for i, arg in enumerate(argv):
        if arg == "--threads" and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith("--threads="):
            value = arg.split("=", 1)[1]
    if value is None or not value.isdigit() or int(value) < 1:
        return None
    for name in NATIVE_THREAD_VARIABLES:
        environ[name] = value
    return value


if __name__ == "__main__":
    cap_native_threads(sys.argv[1:])

    from companion.cli import main

    sys.exit(main())
