"""The report helpers of the chapters: numbers glued into the text, our tables beside the published ones (and
the style of the chapters' tables), and lists, counts and ranges written as prose."""

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .._utils import significant

__all__ = ["compare_with_published", "listing", "glue", "coloured_marks", "GLUE_DIGITS", "half_unit", "span",
           "count_phrase", "problem_list", "capitalise", "TableStyler", "TABLE_STYLES"]

#: Significant digits of every float a chapter glues into its text; no sentence shows more
#: (tests/test_glue.py checks every ``{glue:text}`` format against it).
GLUE_DIGITS = 6


def glue(name, variable, display=True):
    """:func:`myst_nb.glue`, with a float glued at :data:`GLUE_DIGITS` significant digits.

    What nbval compares is then what a reader can see: the last bits of a
    float, which follow the CPU (numpy's and OpenBLAS's SIMD kernels, numba's
    target), are not in the notebook, while a change in any digit the text
    shows still is.  A numpy scalar is glued as the Python number (or bool,
    or str) it holds, so that a format such as ``{glue:text}`name:.3f``` reads
    a plain number; other values (ints, strings, tables, figures) are glued
    unchanged.

    Parameters
    ----------
    name : str
        The key the text refers to (``{glue:text}`name:.2f```).
    variable : object
        The value; a numpy scalar becomes the Python value it holds, and a
        float is rounded.
    display : bool, default True
        Also display the value in the notebook (as :func:`myst_nb.glue` does).

    Examples
    --------
    >>> from ensvote.experiments.report import glue
    >>> glue("slope", -0.9988971678980845, display=False)  # stored as -0.998897
    >>> glue("problems", np.int64(21), display=False)  # stored as 21, not np.int64(21)
    """
    from myst_nb import glue as myst_glue  # the book's dependency, not the package's

    if isinstance(variable, np.generic):
        variable = variable.item()
    if isinstance(variable, float):
        variable = significant(variable, GLUE_DIGITS)
    return myst_glue(name, variable, display)


#: How :func:`coloured_marks` shows the marks of :func:`compare_with_published` in HTML.
MARKS = {"✓": '<span style="color: #5b8c5a">✓</span>',  # muted green
         "✗": '<span style="color: #d32f2f; font-weight: bold">✗</span>'}  # red: the few ✗ stand out


def coloured_marks(cell: str) -> str:
    """``cell`` (a table cell's text) with each ✓ in muted green and each ✗ in bold red, as HTML.

    For a styled comparison table: ``styler.format(lambda v: coloured_marks(v) if isinstance(v, str) else v)``, as
    :meth:`TableStyler.comparison` does.

    Parameters
    ----------
    cell : str

    Returns
    -------
    str

    Examples
    --------
    >>> from ensvote.experiments.report import coloured_marks
    >>> coloured_marks("8.02±0.58 ✗")
    '8.02±0.58 <span style="color: #d32f2f; font-weight: bold">✗</span>'
    """
    for mark, html in MARKS.items():
        cell = cell.replace(mark, html)
    return cell


#: The style of the chapters' tables (:class:`TableStyler`): small type and unwrapped cells, so that a wide
#: table fits the page's column, and lightly shaded alternate rows.
TABLE_STYLES = [
    {"selector": "td, th", "props": "white-space: nowrap; font-size: 0.85em; padding: 0.2em 0.4em"},
    {"selector": "thead th", "props": "white-space: normal"},
    {"selector": "thead tr:last-child th", "props": "border-bottom: 1px solid #888"},
    {"selector": "tbody tr:nth-child(odd)", "props": "background: rgba(127, 127, 127, 0.08)"}]


class TableStyler:
    """Styles a chapter's tables in the style :data:`TABLE_STYLES`, each with an HTML id of its own.

    The tables are numbered in the order they are styled: the n-th gets the id
    ``f"{prefix}{n}"``, so that the same code gives the same page (pandas would
    draw a random id), and two tables of one page never share an id.

    Parameters
    ----------
    prefix : str
        The chapter's prefix of the ids (``"hl-t"``); unique in the book.

    Attributes
    ----------
    count : int
        How many tables have been styled.

    Examples
    --------
    >>> from ensvote.experiments.report import TableStyler
    >>> styler = TableStyler("t")
    >>> styler.table(pd.DataFrame({"a": [1]})).uuid, styler.table(pd.DataFrame({"a": [2]})).uuid
    ('t1', 't2')
    """

    def __init__(self, prefix):
        self.prefix = prefix
        self.count = 0

    def table(self, table):
        """``table`` as a :class:`pandas.io.formats.style.Styler` with the next id and :data:`TABLE_STYLES`.

        Parameters
        ----------
        table : pandas.DataFrame

        Returns
        -------
        pandas.io.formats.style.Styler

        Examples
        --------
        >>> from ensvote.experiments.report import TableStyler
        >>> TableStyler("ch-t").table(pd.DataFrame({"a": [1.5]})).uuid
        'ch-t1'
        """
        self.count += 1
        return table.style.set_uuid(f"{self.prefix}{self.count}").set_table_styles(TABLE_STYLES)

    def comparison(self, table):
        """A table of :func:`compare_with_published`, styled as by :meth:`table`, and shorter.

        The columns "published" read "paper", the index has no name, a cell
        without a result of ours or without a published value ("not run",
        "not in our copy") reads "—", and the marks ✓ / ✗
        are in colour (:func:`coloured_marks`).

        Parameters
        ----------
        table : pandas.DataFrame
            The first value :func:`compare_with_published` returns, or some of
            its columns.

        Returns
        -------
        pandas.io.formats.style.Styler

        Examples
        --------
        >>> from ensvote.experiments.report import TableStyler, compare_with_published
        >>> ours = pd.DataFrame({"err_mean": [1.04], "err_std": [0.1], "n_realizations": [10]}, index=["a"])
        >>> pub = pd.DataFrame({"err_mean": ["1.0"], "err_std": ["0.2"]}, index=["a"])
        >>> shown = TableStyler("ch-t").comparison(compare_with_published(ours, pub, {"err": "error %"})[0])
        >>> shown.data.columns.tolist()
        [('error %', 'ours'), ('error %', 'paper'), ('error %', 'Δ')]
        """
        table = table.rename(columns={"published": "paper"}, level=1)
        table = table.replace({"not run": "—", "not in our copy": "—"})
        table.index.name = None
        return self.table(table).format(lambda v: coloured_marks(v) if isinstance(v, str) else v)


def listing(items, conj="and"):
    """The items as an English list: ``"a"``, ``"a and b"``, ``"a, b and c"``.

    Parameters
    ----------
    items : iterable
        Each item is written with :func:`str`.
    conj : str, default "and"
        The word before the last item (``"or"``: ``"a, b or c"``).

    Returns
    -------
    str

    Raises
    ------
    ValueError
        No items: there is nothing to write.

    Examples
    --------
    >>> from ensvote.experiments.report import listing
    >>> listing(["sonar"]), listing(["sonar", "votes"]), listing([0.9, 0.99, 0.999], "or")
    ('sonar', 'sonar and votes', '0.9, 0.99 or 0.999')
    """
    items = [str(x) for x in items]
    if not items:
        raise ValueError("listing: no items to write")
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + f" {conj} " + items[-1]


def problem_list(names, conj="and"):
    """Problem names as the chapters write them in prose: in italics, in lower case, as an English list.

    Parameters
    ----------
    names : iterable of str
        Problem names, as in a table's index (``"Tic-tac-toe"`` is written ``*tic-tac-toe*``).
    conj : str, default "and"
        The word before the last name (see :func:`listing`).

    Returns
    -------
    str
        Markdown; ``""`` for no names, so that a sentence can test for it.

    Examples
    --------
    >>> from ensvote.experiments.report import problem_list
    >>> problem_list(["Sonar", "Tic-tac-toe", "votes"])
    '*sonar*, *tic-tac-toe* and *votes*'
    >>> problem_list([])
    ''
    """
    names = [f"*{str(name).lower()}*" for name in names]
    return listing(names, conj) if names else ""


def capitalise(text):
    """``text`` with its first letter in upper case, also behind the ``*`` of an italic start.

    For a sentence that starts with a list of problems (:func:`problem_list`).

    Parameters
    ----------
    text : str

    Returns
    -------
    str

    Examples
    --------
    >>> from ensvote.experiments.report import capitalise
    >>> capitalise("*waveform* is binary"), capitalise("the urn rule")
    ('*Waveform* is binary', 'The urn rule')
    """
    if text.startswith("*"):
        return text[:1] + text[1:2].upper() + text[2:]
    return text[:1].upper() + text[1:]


def span(lo, hi, fmt=".1f", sep="–"):
    """The range from ``lo`` to ``hi`` as printed, or one number when both ends print alike.

    Parameters
    ----------
    lo, hi : number
        The ends of the range.
    fmt : str, default ".1f"
        Their format specification (as for :func:`format`: ``".2f"``, ``",.0f"``, ``"d"``).
    sep : str, default "–"
        What stands between the two ends (an en dash; ``" to "`` in a sentence).

    Returns
    -------
    str

    Examples
    --------
    >>> from ensvote.experiments.report import span
    >>> span(2.14, 2.71), span(14.21, 14.24), span(0.5, 3, ".2f", " to "), span(10, 20, "d")
    ('2.1–2.7', '14.2', '0.50 to 3.00', '10–20')
    """
    a, b = format(lo, fmt), format(hi, fmt)
    return a if a == b else f"{a}{sep}{b}"


def count_phrase(k, n, noun="", *, the=True):
    """``k`` of ``n`` in words: "all 21 problems", "both problems", "none of the 21", "7 of the 21 problems".

    Parameters
    ----------
    k, n : int
        How many of how many; ``0 <= k <= n`` and ``n >= 1``.
    noun : str, default ""
        What is counted, in the plural (``"problems"``); nothing if empty.
    the : bool, default True
        ``"7 of the 21"``; False gives ``"7 of 21"`` (and ``"none of 21"``).

    Returns
    -------
    str
        ``"all {n}"`` if ``k == n`` (``"both"`` for two, ``"the one"`` for one),
        ``"none of the {n}"`` if ``k == 0``, ``"{k} of the {n}"`` otherwise;
        the noun follows the number.

    Raises
    ------
    ValueError
        If ``n < 1`` or ``k`` is not between 0 and ``n``.

    Examples
    --------
    >>> from ensvote.experiments.report import count_phrase
    >>> count_phrase(21, 21, "problems"), count_phrase(7, 21), count_phrase(0, 21, the=False)
    ('all 21 problems', '7 of the 21', 'none of 21')
    >>> count_phrase(2, 2, "cases"), count_phrase(1, 1, "problems")
    ('both cases', 'the one of the problems')
    """
    if n < 1 or not 0 <= k <= n:
        raise ValueError(f"count_phrase: need 0 <= k <= n and n >= 1, got k={k!r}, n={n!r}")
    tail = f" {noun}" if noun else ""
    of = " of the " if the else " of "
    if k == n:
        if n > 2:
            return f"all {n}{tail}"
        return f"both{tail}" if n == 2 else "the one" + (f" of the {noun}" if noun else "")
    return f"{'none' if k == 0 else k}{of}{n}{tail}"


def half_unit(printed):
    """Half a unit of the last digit of a value as printed: the rounding that the printed digits hide.

    A value printed as ``"2.5"`` stands for any value in [2.45, 2.55], so half
    a unit is 0.05; ``"12"`` gives 0.5 and ``"1.5e-3"`` gives 0.05 (the digits
    of the mantissa count). :func:`compare_with_published` allows for it when it
    flags a difference with a published mean ± std.

    Parameters
    ----------
    printed : str or pandas.Series
        A value as printed, or a Series of them (read with ``dtype=str``, so
        that ``"0.50"`` keeps its last digit).

    Returns
    -------
    float or pandas.Series
        Half a unit of the last printed digit, a float Series for a Series;
        NaN where nothing is printed (``""``, ``"nan"``, ``"None"``, ``"<NA>"``).

    Examples
    --------
    >>> from ensvote.experiments.report import half_unit
    >>> half_unit("2.5"), half_unit("12"), half_unit("0.50")
    (0.05, 0.5, 0.005)
    >>> half_unit(pd.Series(["1.5e-3", ""])).tolist()
    [0.05, nan]
    """
    def one(text):
        text = str(text).strip()
        if text in ("", "nan", "None", "<NA>"):
            return np.nan
        mantissa = text.lower().split("e")[0]
        return 0.5 * 10.0 ** -(len(mantissa.split(".")[1]) if "." in mantissa else 0)
    if isinstance(printed, pd.Series):
        return printed.map(one).astype(float)
    return one(printed)


def compare_with_published(ours, published, quantities, *, pvalue=None, decimals=2,
                           not_in_published="not in our copy", show_n=False, delta=True):
    """Side-by-side table of our mean ± std and the published value as printed, with a within-one-std flag.

    For every problem (row of `ours`) and quantity ``q``, our ``q_mean ± q_std`` is
    set beside the published ``q_mean ± q_std``. Δ = ours − published (means) is
    flagged ✓ if ``|Δ|`` is at most one published std, allowing for the rounding
    of the printed values: the printed mean and std each stand for any value
    within half a unit of their last digit, so the flag is ✓ when
    ``|Δ| <= std + u(mean) + u(std)`` (u = half a unit of the last printed
    digit, :func:`half_unit`, plus a floating-point tolerance of 1e-9), ✗ otherwise. A published
    ``51.0±0.0`` therefore accepts 51.01, which the printed std cannot tell
    from a true std of 0.04. Δ is shown with at least as many decimals as the
    published mean, so a Δ that reads as zero is always ✓.

    Parameters
    ----------
    ours : pandas.DataFrame
        Our aggregated results, one row per problem (as written by
        :func:`aggregate`), with columns ``<q>_mean`` and ``<q>_std`` for every
        quantity and ``n_realizations``.
    published : pandas.DataFrame
        The published values, indexed by problem, with columns ``<q>_mean`` and
        ``<q>_std``. Read it with ``dtype=str`` so that the values are shown
        exactly as printed (``"0.50"`` stays ``"0.50"``).
    quantities : mapping or sequence of str
        ``{quantity: column title}``; a sequence of quantities uses the
        quantities themselves as titles.
    pvalue : str or mapping, optional
        Column of `ours` holding a p-value; our value gets a ``*`` where it is
        below 0.05. A str applies to every quantity, a mapping
        ``{quantity: column}`` only to the quantities it names.
    decimals : int, default 2
        Decimals of our values and of Δ.
    not_in_published : str, default "not in our copy"
        Text of the published cell of a problem that `published` lacks.
    show_n : bool, default False
        Append the column ``("N", "")`` with ``n_realizations``.
    delta : bool, default True
        Show the column Δ (with the flag). If False, there is no Δ column and
        the flag ✓ / ✗ is appended to our cell instead (narrower tables).

    Returns
    -------
    table : pandas.DataFrame
        Strings, index ``ours.index``, columns ``(title, "ours" | "published" |
        "Δ")`` per quantity (no "Δ" if `delta` is False; and ``("N", "")``).
        Our std reads "–" when it is undefined (one realization); "—" marks a
        cell that cannot be compared.
    within : pandas.DataFrame
        ``boolean`` dtype, index ``ours.index``, one column per quantity: whether
        ``|Δ|`` is within one published std (as above); ``<NA>`` where not comparable (no
        results of ours, or no published value).
    deltas : pandas.DataFrame
        Δ as floats, same shape as `within`; NaN where not comparable.

    Raises
    ------
    TypeError
        If `ours` or `published` is not a DataFrame, or `delta` is not a bool.
    ValueError
        If `quantities` is empty, a required column is missing (the message
        names them), `pvalue` names a quantity not compared, an index has
        duplicate problems, or `decimals` is negative.

    Examples
    --------
    >>> ours = pd.DataFrame({"err_mean": [1.04, 3.0], "err_std": [0.1, np.nan], "n_realizations": [10, 1]},
    ...                     index=["a", "b"])
    >>> pub = pd.DataFrame({"err_mean": ["1.0", "2.5"], "err_std": ["0.2", "0.3"]}, index=["a", "b"])
    >>> table, within, delta = compare_with_published(ours, pub, {"err": "error %"})
    >>> table.loc["b"].tolist()
    ['3.00±–', '2.5±0.3', '+0.50 ✗']
    >>> within["err"].tolist()
    [True, False]
    >>> compare_with_published(ours, pub, {"err": "error %"}, delta=False)[0].loc["a"].tolist()
    ['1.04±0.10 ✓', '1.0±0.2']
    """
    if not isinstance(ours, pd.DataFrame) or not isinstance(published, pd.DataFrame):
        raise TypeError("ours and published must be pandas DataFrames")
    titles = dict(quantities) if isinstance(quantities, Mapping) else {q: q for q in quantities}
    if not titles:
        raise ValueError("no quantities to compare")
    if not isinstance(decimals, (int, np.integer)) or decimals < 0:
        raise ValueError(f"decimals must be a non-negative integer, got {decimals!r}")
    if not isinstance(delta, (bool, np.bool_)):
        raise TypeError(f"delta must be True or False, got {delta!r}")
    pcols = dict.fromkeys(titles, pvalue) if pvalue is None or isinstance(pvalue, str) else dict(pvalue)
    if unknown := sorted(set(pcols) - set(titles)):
        raise ValueError(f"pvalue names quantities that are not compared: {unknown}")
    stats_cols = [f"{q}_{s}" for q in titles for s in ("mean", "std")]
    need = stats_cols + ["n_realizations"] + sorted({c for c in pcols.values() if c is not None})
    for name, df, cols in (("ours", ours, need), ("published", published, stats_cols)):
        if missing := [c for c in cols if c not in df.columns]:
            raise ValueError(f"{name} lacks the columns {missing}")
        if df.index.has_duplicates:
            raise ValueError(f"{name} has duplicate problems: {sorted(set(df.index[df.index.duplicated()]))}")

    n = ours["n_realizations"].fillna(0).astype(int)
    run = n > 0
    pub = published.reindex(ours.index)
    in_pub = ours.index.isin(published.index)
    out, within, deltas = {}, {}, {}
    for q, title in titles.items():
        om, os_ = ours[f"{q}_mean"].astype(float), ours[f"{q}_std"].astype(float)
        pm_txt, ps_txt = pub[f"{q}_mean"], pub[f"{q}_std"]
        pm, ps = pd.to_numeric(pm_txt), pd.to_numeric(ps_txt)
        has_pub = pm.notna() & ps.notna()
        ok_ours = run & om.notna()
        comparable = ok_ours & has_pub
        star = ours[pcols[q]].lt(0.05) if pcols.get(q) else pd.Series(False, index=ours.index)
        txt_o = [f"{m:.{decimals}f}±" + (f"{s:.{decimals}f}" if pd.notna(s) else "–") + ("*" if st else "")
                 for m, s, st in zip(om, os_, star)]
        d = (om - pm).where(comparable)
        tol = half_unit(pm_txt) + half_unit(ps_txt)
        ok = (d.abs() <= ps + tol + 1e-9).astype("boolean").mask(~comparable)
        marks = [" ✓" if k else " ✗" for k in ok.fillna(False)]
        if not delta:
            txt_o = [t + (mk if c else "") for t, mk, c in zip(txt_o, marks, comparable)]
        out[(title, "ours")] = np.where(ok_ours, txt_o, np.where(run, "—", "not run"))
        out[(title, "published")] = np.where(has_pub, pm_txt.astype(str) + "±" + ps_txt.astype(str),
                                             np.where(in_pub, "—", not_in_published))
        if delta:
            # at least the published mean's decimals, so that a Δ reading as zero is within the rounding (✓)
            digits = [max(decimals, int(round(-np.log10(2 * u)))) if np.isfinite(u) else decimals
                      for u in half_unit(pm_txt)]
            out[(title, "Δ")] = np.where(comparable, [f"{x:+.{k}f}{mk}" for x, k, mk in zip(d.fillna(0), digits, marks)],
                                         "—")
        within[q], deltas[q] = ok, d
    table = pd.DataFrame(out, index=ours.index)
    if show_n:
        table[("N", "")] = n
    return table, pd.DataFrame(within, index=ours.index), pd.DataFrame(deltas, index=ours.index)
