"""The book builds with warnings as errors: a broken reference, citation or toc entry fails."""

import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_every_notebook_is_in_the_toc():
    toc = (ROOT / "_toc.yml").read_text()
    for nb in sorted((ROOT / "book").rglob("*.ipynb")):
        if ".ipynb_checkpoints" in nb.parts:
            continue
        assert str(nb.relative_to(ROOT).with_suffix("")) in toc, f"{nb} is not listed in _toc.yml"


def test_config_renders_committed_outputs():
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert cfg["execute"]["execute_notebooks"] == "off"
    assert cfg["only_build_toc_files"] is True


def test_book_builds_strictly(tmp_path):
    jb = Path(sys.executable).parent / "jupyter-book"
    exe = str(jb) if jb.exists() else shutil.which("jupyter-book")
    assert exe, "jupyter-book is not installed in this environment"
    proc = subprocess.run(
        [exe, "build", str(ROOT), "--path-output", str(tmp_path), "-W", "-n", "--keep-going"],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-6000:]
    assert (tmp_path / "_build" / "html" / "index.html").exists()
