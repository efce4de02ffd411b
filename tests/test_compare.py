"""experiments.compare_with_published: the "ours beside published" tables of the experiment chapters."""

import numpy as np
import pandas as pd
import pytest

from ensvote import experiments


def _ours():
    # a: 10 runs, within one std; b: one run (no std), outside; c, d: not run;
    # e: run but missing from the published table
    return pd.DataFrame({"err_mean": [1.04, 3.0, np.nan, np.nan, 5.0],
                         "err_std": [0.1, np.nan, np.nan, np.nan, 0.5],
                         "trees_hyper_mean": [8.0, 9.25, np.nan, np.nan, 7.0],
                         "trees_hyper_std": [1.0, 0.5, np.nan, np.nan, 0.25],
                         "p": [0.01, 0.2, np.nan, np.nan, 0.03],
                         "n_realizations": [10, 1, 0, 0, 4]},
                        index=pd.Index(["a", "b", "c", "d", "e"], name="problem"))


def _pub():
    return pd.DataFrame({"err_mean": ["1.0", "2.5", "4.0", "6.0"], "err_std": ["0.2", "0.30", "1.0", "1.5"],
                         "trees_hyper_mean": ["8.5", "9.0", "9.0", "9.0"], "trees_hyper_std": ["0.5", "0.1", "1", "1"]},
                        index=["a", "b", "c", "d"])


def test_every_kind_of_cell():
    table, _, _ = experiments.compare_with_published(_ours(), _pub(), {"err": "error %"},
                                                not_in_published="no row")
    assert list(table.columns) == [("error %", "ours"), ("error %", "published"), ("error %", "Δ")]
    assert table.index.equals(_ours().index)
    assert table.loc["a"].tolist() == ["1.04±0.10", "1.0±0.2", "+0.04 ✓"]
    assert table.loc["b"].tolist() == ["3.00±–", "2.5±0.30", "+0.50 ✗"]  # no std of ours; published as printed
    assert table.loc["c"].tolist() == ["not run", "4.0±1.0", "—"]
    assert table.loc["d"].tolist() == ["not run", "6.0±1.5", "—"]
    assert table.loc["e"].tolist() == ["5.00±0.50", "no row", "—"]
    default, _, _ = experiments.compare_with_published(_ours(), _pub(), ["err"])
    assert default.loc["e", ("err", "published")] == "not in our copy" and default.loc["d", ("err", "ours")] == "not run"


def test_flags_and_deltas():
    ours = _ours()
    ours.loc["a", "trees_hyper_mean"] = 8.0  # exactly one published std (0.5) below 8.5: within
    _, within, delta = experiments.compare_with_published(ours, _pub(), ["err", "trees_hyper"])
    assert list(within.columns) == list(delta.columns) == ["err", "trees_hyper"]
    assert str(within["err"].dtype) == "boolean"
    assert within["err"].tolist() == [True, False, pd.NA, pd.NA, pd.NA]
    assert within["trees_hyper"].tolist() == [True, False, pd.NA, pd.NA, pd.NA]
    np.testing.assert_allclose(delta["err"].to_numpy(), [0.04, 0.5, np.nan, np.nan, np.nan])
    np.testing.assert_allclose(delta["trees_hyper"].to_numpy(), [-0.5, 0.25, np.nan, np.nan, np.nan])


def test_significance_star_from_pvalue_column_or_mapping():
    every, _, _ = experiments.compare_with_published(_ours(), _pub(), ["err", "trees_hyper"], pvalue="p")
    assert every.loc["a", ("err", "ours")] == "1.04±0.10*" and every.loc["a", ("trees_hyper", "ours")] == "8.00±1.00*"
    assert every.loc["b", ("err", "ours")] == "3.00±–"  # p = 0.2
    assert every.loc["c", ("err", "ours")] == "not run"  # p is NaN
    some, _, _ = experiments.compare_with_published(_ours(), _pub(), ["err", "trees_hyper"], pvalue={"trees_hyper": "p"})
    assert some.loc["a", ("err", "ours")] == "1.04±0.10" and some.loc["e", ("trees_hyper", "ours")] == "7.00±0.25*"


def test_decimals_and_n_column():
    table, _, _ = experiments.compare_with_published(_ours(), _pub(), {"trees_hyper": "HYPER"}, decimals=1, show_n=True)
    assert table.loc["b"].tolist() == ["9.2±0.5", "9.0±0.1", "+0.2 ✗", 1]  # 9.25 rounds half to even
    assert table[("N", "")].tolist() == [10, 1, 0, 0, 4]


def test_missing_columns_are_named():
    with pytest.raises(ValueError, match=r"ours lacks the columns \['err_std', 'n_realizations'\]"):
        experiments.compare_with_published(_ours().drop(columns=["err_std", "n_realizations"]), _pub(), ["err"])
    with pytest.raises(ValueError, match=r"published lacks the columns \['trees_hyper_mean'\]"):
        experiments.compare_with_published(_ours(), _pub().drop(columns="trees_hyper_mean"), ["err", "trees_hyper"])
    with pytest.raises(ValueError, match=r"ours lacks the columns \['pvalue_x'\]"):
        experiments.compare_with_published(_ours(), _pub(), ["err"], pvalue="pvalue_x")


def test_pvalue_for_a_quantity_not_compared():
    with pytest.raises(ValueError, match=r"not compared: \['trees_hyper'\]"):
        experiments.compare_with_published(_ours(), _pub(), ["err"], pvalue={"trees_hyper": "p"})


def test_no_quantities():
    with pytest.raises(ValueError, match="no quantities"):
        experiments.compare_with_published(_ours(), _pub(), {})


def test_duplicate_problems():
    pub = pd.concat([_pub(), _pub().iloc[:1]])
    with pytest.raises(ValueError, match=r"published has duplicate problems: \['a'\]"):
        experiments.compare_with_published(_ours(), pub, ["err"])


def test_negative_decimals():
    with pytest.raises(ValueError, match="decimals"):
        experiments.compare_with_published(_ours(), _pub(), ["err"], decimals=-1)


def test_not_dataframes():
    with pytest.raises(TypeError, match="DataFrames"):
        experiments.compare_with_published(_ours().to_dict(), _pub(), ["err"])


def _one(mean, std, pub_mean, pub_std, n=100):
    ours = pd.DataFrame({"x_mean": [mean], "x_std": [std], "n_realizations": [n]}, index=["p"])
    pub = pd.DataFrame({"x_mean": [pub_mean], "x_std": [pub_std]}, index=["p"])
    return ours, pub


def test_the_rounding_of_the_printed_values_is_allowed_for():
    # printed 51.0±0.0: the true mean and std are only known to ±0.05 each, so 51.01 is within one std
    table, within, delta = experiments.compare_with_published(*_one(51.01, 0.1, "51.0", "0.0"), ["x"], decimals=1)
    assert table.loc["p", ("x", "Δ")] == "+0.0 ✓" and bool(within.loc["p", "x"])
    np.testing.assert_allclose(delta.loc["p", "x"], 0.01)
    # the tolerance is half a unit of each printed value's last digit: 0.05 + 0.05 here, 0.005 + 0.005 below
    assert bool(experiments.compare_with_published(*_one(51.1, 0.1, "51.0", "0.0"), ["x"])[1].loc["p", "x"])
    assert not experiments.compare_with_published(*_one(51.11, 0.1, "51.0", "0.0"), ["x"])[1].loc["p", "x"]
    assert not experiments.compare_with_published(*_one(1.061, 0.1, "1.05", "0.00"), ["x"])[1].loc["p", "x"]
    assert experiments.compare_with_published(*_one(2.6, 0.1, "2", "0.1"), ["x"])[1].loc["p", "x"]  # integer: ±0.5


def test_delta_has_at_least_the_published_decimals_so_no_zero_is_flagged():
    # decimals=1 would print +0.0 for a Δ of 0.04 that is outside a printed std of 0.00
    table, within, _ = experiments.compare_with_published(*_one(1.09, 0.1, "1.05", "0.00"), ["x"], decimals=1)
    assert table.loc["p", ("x", "Δ")] == "+0.04 ✗" and not within.loc["p", "x"]
    for mean in np.linspace(0.9, 1.2, 61):  # no Δ that reads as zero carries ✗, whatever the decimals
        for dec in (0, 1, 2):
            cell = experiments.compare_with_published(*_one(mean, 0.1, "1.05", "0.00"), ["x"], decimals=dec)[0].loc["p", ("x", "Δ")]
            assert not (float(cell.split()[0]) == 0 and cell.endswith("✗")), (mean, dec, cell)


def test_without_delta_the_flag_goes_on_our_cell():
    table, within, _ = experiments.compare_with_published(_ours(), _pub(), {"err": "error %"}, pvalue="p",
                                                     delta=False, show_n=True)
    assert list(table.columns) == [("error %", "ours"), ("error %", "published"), ("N", "")]
    assert table.loc["a"].tolist() == ["1.04±0.10* ✓", "1.0±0.2", 10]
    assert table.loc["b"].tolist() == ["3.00±– ✗", "2.5±0.30", 1]
    assert table.loc["d"].tolist() == ["not run", "6.0±1.5", 0]
    assert table.loc["e"].tolist() == ["5.00±0.50*", "not in our copy", 4]  # nothing to compare with: no flag
    assert within["err"].tolist() == [True, False, pd.NA, pd.NA, pd.NA]


def test_delta_must_be_a_bool():
    with pytest.raises(TypeError, match="delta"):
        experiments.compare_with_published(_ours(), _pub(), ["err"], delta="no")


def test_half_unit_of_a_printed_value_and_of_a_column_of_them():
    from ensvote.experiments.report import half_unit

    assert half_unit("51.0") == 0.05 and half_unit("2") == 0.5 and half_unit(" 0.50 ") == 0.005
    assert half_unit("1.5e-3") == 0.05 and half_unit("1E2") == 0.5  # the mantissa's digits count
    assert np.isnan(half_unit("")) and np.isnan(half_unit("nan"))
    col = half_unit(pd.Series(["8.5", "9", None, "<NA>"], index=list("abcd")))
    assert col.index.tolist() == list("abcd") and col.dtype == float
    np.testing.assert_allclose(col.to_numpy(), [0.05, 0.5, np.nan, np.nan])
