"""environment.yml and pyproject.toml carry the same pins; the package imports cleanly."""

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def pyproject_pins() -> dict[str, str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())
    specs = list(data["project"]["dependencies"])
    for extra in data["project"]["optional-dependencies"].values():
        specs += extra
    return dict(_split(s) for s in specs)


def environment_pins() -> dict[str, str]:
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(d["pip"] for d in env["dependencies"] if isinstance(d, dict) and "pip" in d)
    return dict(_split(s) for s in pip)


def _split(spec: str) -> tuple[str, str]:
    m = re.fullmatch(r"([A-Za-z0-9_.\-]+)==([^\s;]+)", spec.strip())
    assert m, f"not an exact pin: {spec!r}"
    return m.group(1).lower(), m.group(2)


def test_pins_agree():
    a, b = pyproject_pins(), environment_pins()
    assert a == b, (
        f"pins differ: pyproject only {set(a.items()) - set(b.items())}, "
        f"environment.yml only {set(b.items()) - set(a.items())}"
    )


def test_python_version_agrees():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert "python=3.11" in env["dependencies"]
    assert ">=3.11,<3.12" in (ROOT / "pyproject.toml").read_text()


def test_cli_help_and_validation(capsys):
    import pytest

    from companion.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    assert "recall" in capsys.readouterr().out
    with pytest.raises(ValueError, match="alpha=2.0 is out of range"):
        main(["recall", "--alpha", "2"])
