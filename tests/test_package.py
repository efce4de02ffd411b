"""The package as a practitioner installs it: a wheel with the package alone and its lean dependencies.

The wheel is built from this checkout and installed into a fresh virtual
environment (dependencies at the versions requirements.txt pins); there the
README's example runs and prints what the README says it prints, nothing of
the experiments' dependencies is installed, and what needs them says which
extra to install.
"""

import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def readme_block(lang, after):
    """The first ```lang block of the README after the text ``after``."""
    m = re.search(rf"```{lang}\n(.*?)```", README[README.index(after):], re.S)
    return m.group(1)


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "--disable-pip-version-check",
                    "-q", "-w", str(tmp / "dist")], check=True, capture_output=True)
    (wheel,) = (tmp / "dist").glob("ensvote-*.whl")
    pins = [line for line in (ROOT / "requirements.txt").read_text().splitlines()
            if line.strip() and not line.startswith(("#", "-e"))]
    (tmp / "constraints.txt").write_text("\n".join(pins) + "\n")
    venv.EnvBuilder(with_pip=True).create(tmp / "venv")
    py = tmp / "venv" / "bin" / "python"
    subprocess.run([py, "-m", "pip", "install", "--disable-pip-version-check", "-q", "-c", tmp / "constraints.txt",
                    wheel], check=True, capture_output=True)
    return wheel, py, tmp


def test_the_wheel_holds_the_package_alone(installed):
    wheel, _, _ = installed
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"ensvote", wheel.name.split("-py3")[0] + ".dist-info"}
    assert "ensvote/py.typed" in names and any(n.endswith("licenses/LICENSE") for n in names)
    assert "ensvote/data/pima.csv.gz" in names and "ensvote/experiments/store.py" in names
    meta = zipfile.ZipFile(wheel).read(next(n for n in names if n.endswith("METADATA"))).decode()
    required = sorted(re.findall(r"^Requires-Dist: ([A-Za-z0-9_-]+)[^;\n]*$", meta, re.M))
    assert required == ["numba", "numpy", "scikit-learn", "scipy"]
    assert "License-Expression: BSD-3-Clause" in meta


def test_readme_example_prints_what_the_readme_says(installed):
    _, py, tmp = installed
    code = readme_block("python", "A forest of 101 trees on scikit-learn's handwritten digits")
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=tmp)
    assert out.returncode == 0, out.stderr
    assert out.stdout == readme_block("text", "prints (`tests/test_package.py`")


def test_without_the_extra_what_needs_it_names_it(installed):
    _, py, tmp = installed
    lean = subprocess.run([py, "-c", "import importlib.util as u; print([m for m in ('pandas', 'tqdm', 'dask') "
                           "if u.find_spec(m)])"], capture_output=True, text=True, cwd=tmp)
    assert lean.stdout.strip() == "[]"
    cli = subprocess.run([py, "-m", "ensvote", "run", "soto2016", "--profile", "smoke"], capture_output=True,
                         text=True, cwd=tmp)
    assert cli.returncode == 1 and cli.stdout == ""
    assert cli.stderr.strip().count("\n") == 0 and "pip install 'ensvote[experiments]'" in cli.stderr
    lazy = subprocess.run([py, "-c", "import ensvote; ensvote.datasets"], capture_output=True, text=True, cwd=tmp)
    assert "ModuleNotFoundError: ensvote.datasets needs pandas" in lazy.stderr
    assert "pip install 'ensvote[experiments]'" in lazy.stderr


def test_one_version_everywhere():
    import tomllib

    import ensvote

    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert ensvote.__version__ == version
    assert f'version: "{version}"' in (ROOT / "CITATION.cff").read_text()
    intro = (ROOT / "book" / "intro.md").read_text()
    assert f"version      = {{{version}}}" in intro and f"version {version}}}" in intro
    assert f"## {version} " in (ROOT / "CHANGELOG.md").read_text()


def _untyped(name, f):
    import inspect

    try:
        sig = inspect.signature(f)
    except (TypeError, ValueError):
        return []
    out = [f"{name}({p.name})" for p in sig.parameters.values()
           if p.name not in ("self", "cls") and p.annotation is inspect.Parameter.empty]
    if sig.return_annotation is inspect.Signature.empty and not name.endswith("__init__"):
        out.append(f"{name} -> ?")
    return out


def test_public_api_is_typed():
    """py.typed promises hints: every public function, and every public method of a public class, has them."""
    import inspect

    import ensvote

    missing = []
    for n in ensvote.__all__:
        obj = getattr(ensvote, n)
        if inspect.isclass(obj):
            for m, f in vars(obj).items():
                if m.startswith("_") and m != "__init__":
                    continue
                f = f.__func__ if isinstance(f, (staticmethod, classmethod)) else f
                f = f.fget if isinstance(f, property) else f
                if callable(f):
                    missing += _untyped(f"{n}.{m}", f)
        elif callable(obj):
            missing += _untyped(n, obj)
    assert not missing, missing
