"""ensvote.experiments.report: the chapters' prose helpers (ranges, counts, problem lists), their table style and
glue. compare_with_published and half_unit are tested in tests/test_compare.py."""

import json

import numpy as np
import pandas as pd
import pytest

from ensvote.experiments import report
from ensvote.experiments.report import (TABLE_STYLES, TableStyler, capitalise, count_phrase, problem_list,
                                        span)


@pytest.mark.parametrize("args, text", [
    ((2.14, 2.71), "2.1–2.7"),
    ((14.21, 14.24), "14.2"),  # both ends print alike: one number
    ((np.float64(0.709), np.float64(1.0), ".2f"), "0.71–1.00"),
    ((1234.5, 56789.0, ",.0f"), "1,234–56,789"),
    ((0.5, 3, ".2f", " to "), "0.50 to 3.00"),
    ((10, 20, "d"), "10–20"),
    ((7, 7, "d"), "7"),
])
def test_span(args, text):
    assert span(*args) == text


@pytest.mark.parametrize("args, kwargs, text", [
    ((21, 21), {}, "all 21"),
    ((21, 21, "problems"), {}, "all 21 problems"),
    ((7, 21), {}, "7 of the 21"),
    ((7, 21, "problems"), {}, "7 of the 21 problems"),
    ((0, 21, "problems"), {}, "none of the 21 problems"),
    ((2, 2, "cases"), {}, "both cases"),
    ((1, 1, "problems"), {}, "the one of the problems"),
    ((1, 1), {}, "the one"),
    ((18, 21), {"the": False}, "18 of 21"),
    ((0, 21), {"the": False}, "none of 21"),
    ((17, 17), {"the": False}, "all 17"),
    ((np.int64(3), 5, "rows"), {}, "3 of the 5 rows"),
])
def test_count_phrase(args, kwargs, text):
    assert count_phrase(*args, **kwargs) == text


@pytest.mark.parametrize("k, n", [(-1, 3), (4, 3), (0, 0)])
def test_count_phrase_refuses_impossible_counts(k, n):
    with pytest.raises(ValueError, match="count_phrase"):
        count_phrase(k, n)


def test_problem_list():
    assert problem_list(["Tic-tac-toe"]) == "*tic-tac-toe*"
    assert problem_list(["Sonar", "votes"]) == "*sonar* and *votes*"
    assert problem_list(iter(["a", "B", "c"]), "or") == "*a*, *b* or *c*"
    assert problem_list([]) == ""  # nothing, so that a sentence can test for it


@pytest.mark.parametrize("text, capital", [
    ("*waveform* and *pima* are", "*Waveform* and *pima* are"),
    ("the urn rule needs", "The urn rule needs"),
    ("HYPER", "HYPER"),
    ("", ""),
    ("*", "*"),
])
def test_capitalise(text, capital):
    assert capitalise(text) == capital


def _comparison():
    ours = pd.DataFrame({"err_mean": [1.04, 3.0, np.nan, 5.0], "err_std": [0.1, 0.2, np.nan, 0.5],
                         "n_realizations": [10, 10, 0, 10]}, index=pd.Index(list("abcd"), name="problem"))
    pub = pd.DataFrame({"err_mean": ["1.0", "2.5", "4.0"], "err_std": ["0.2", "0.3", "1.0"]}, index=list("abc"))
    return report.compare_with_published(ours, pub, {"err": "error %"})[0]


def test_table_styler_numbers_the_tables_of_a_chapter():
    styler, other = TableStyler("ch-t"), TableStyler("x-")
    df = pd.DataFrame({"a": [1, 2]})
    assert [styler.table(df).uuid for _ in range(3)] == ["ch-t1", "ch-t2", "ch-t3"]
    assert styler.comparison(_comparison()).uuid == "ch-t4" and styler.count == 4
    assert other.table(df).uuid == "x-1"  # each chapter counts its own
    assert [t["selector"] for t in styler.table(df).table_styles] == [t["selector"] for t in TABLE_STYLES]


def test_table_styler_comparison():
    table = _comparison()
    shown = TableStyler("ch-t").comparison(table)
    assert shown.data.index.name is None and table.index.name == "problem"  # the caller's table is left alone
    assert shown.data.columns.tolist() == [("error %", "ours"), ("error %", "paper"), ("error %", "Δ")]
    assert shown.data.loc["c"].tolist() == ["—", "4.0±1.0", "—"]  # not run
    assert shown.data.loc["d"].tolist() == ["5.00±0.50", "—", "—"]  # not in our copy
    html = shown.to_html()
    assert 'id="T_ch-t1"' in html and "nowrap" in html
    assert '<span style="color: #5b8c5a">✓</span>' in html and "font-weight: bold\">✗</span>" in html


def _stored(monkeypatch, value):
    seen = {}
    monkeypatch.setattr("myst_nb.glue", lambda name, variable, display=True: seen.setdefault(name, variable))
    report.glue("x", value, display=False)
    return seen["x"]


@pytest.mark.parametrize("value, stored", [
    (np.int64(21), 21), (np.bool_(True), True), (np.str_("sonar"), "sonar"),
    (np.float64(0.12345678), 0.123457), (-0.9988971678980845, -0.998897), (np.float32(0.1), 0.1),
    (7, 7), ("7 of the 21", "7 of the 21"),
])
def test_glue_stores_plain_python_values(monkeypatch, value, stored):
    out = _stored(monkeypatch, value)
    assert out == stored and type(out) is type(stored)
    assert json.loads(json.dumps(out)) == stored  # what the notebook stores reads back as a plain value
