"""`import ensvote` stays light: the core loads none of the experiments' heavy dependencies."""

import json
import subprocess
import sys

HEAVY = ("pandas", "dask", "distributed", "tqdm", "matplotlib", "sklearn", "joblib")


def _loaded_after(statement):
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(m.split('.')[0] for m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(json.loads(out))


def test_import_ensvote_loads_no_heavy_dependency():
    loaded = _loaded_after("import ensvote")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_the_classifier_and_the_experiments_load_theirs_on_demand():
    assert {"sklearn", "pandas"} <= _loaded_after("import ensvote; ensvote.HaltingClassifier")
    assert "pandas" in _loaded_after("import ensvote.experiments")
    assert "HaltingClassifier" in dir(__import__("ensvote"))


def test_datasets_and_experiments_are_attributes_loaded_on_first_use():
    assert "pandas" in _loaded_after("import ensvote; ensvote.datasets.load('pima')")
    assert "pandas" not in _loaded_after("import ensvote; dir(ensvote)")
    assert {"datasets", "experiments"} <= set(dir(__import__("ensvote")))
    out = subprocess.run([sys.executable, "-c", "import ensvote; ensvote.nosuch"], capture_output=True, text=True)
    assert "AttributeError: module 'ensvote' has no attribute 'nosuch'" in out.stderr


def _scipy_after(statement):
    code = (f"import sys\n{statement}\n"
            "print(' '.join(sorted(m for m in sys.modules if m in ('scipy.stats', 'scipy.integrate'))))")
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


def test_scipy_stats_and_integrate_load_on_first_use():
    # a third of `import ensvote` went to them; the functions that need them import them
    assert _scipy_after("import ensvote") == []
    assert "scipy.stats" in _scipy_after("import ensvote; ensvote.finite_confidence([3, 1], 11)")
    assert _scipy_after("import ensvote; ensvote.infinite_confidence_exact([3, 1, 1])") == [
        "scipy.integrate", "scipy.stats"]
