"""Every stopping rule head to head: the task and the aggregation of the ``headtohead`` suite.

For one partition of one problem (the training / test split of the Soto et al.
(2016) suite, with the same random forest of ``T`` trees), each rule's
parameter is swept and the test rows are halted on the forest's vote matrix;
the record keeps, per rule and parameter, the mean number of trees queried and
the number of test rows whose label differs from the full forest's hard
majority.  The rules:

=============  ============================================  =====================
name           rule                                          parameter swept
=============  ============================================  =====================
``FS``         fixed size (:class:`~ensvote.FixedRule`)      members ``n``
``infinite``   :class:`~ensvote.InfiniteRule`                threshold π
``urn``        :class:`~ensvote.UrnRule`, uniform prior      threshold α
``HYPER``      :class:`~ensvote.UrnRule`, out-of-bag prior   threshold α
``opt-unif``   :class:`~ensvote.OptimalRule`, uniform prior  budget δ
``opt-oob``    :class:`~ensvote.OptimalRule`, out-of-bag     budget δ
               (``OptimalRule.from_oob_votes``: deconvolved
               prior with ``uniform_rows`` of uniform
               mass, budget cross-validated with the
               held-out scoring ``heldout``)
``margin``     :class:`~ensvote.MarginRule`                  lead ``k``
=============  ============================================  =====================

Under the prior (no test rows): HYPER's expected members and disagreement at a
few α, and the optimum at HYPER's own expected disagreement.

:func:`ensvote.experiments.run` (suite ``headtohead``) seeds, runs and stores
the tasks; :func:`tables` makes the tables the chapters *How far from optimal
are the threshold rules?* and *A disagreement budget* render.  The ``book`` profile runs five problems
(``book_datasets``).
"""

import warnings

import numpy as np
import pandas as pd
from scipy import stats
from statsmodels.stats.multitest import multipletests
from sklearn.ensemble import RandomForestClassifier

from .._cache import BoundedCache
from .._validation import check_positive_int, check_probability
from ..classifier import HaltingClassifier
from ..engine import halt
from ..optimal import UNIFORM_ROWS, OptimalRule, policy_value
from ..rules import FixedRule, MarginRule, UrnRule, make_rule
from . import soto2016
from .store import keys, need, number, numbers
from .suite import SYNTHETIC, Suite, profile_params

__all__ = ["SUITE", "MarginRule", "RULES", "task", "check", "tables", "curves", "at_disagreement", "under_prior",
           "budget", "against_reference"]

#: Rule names in the order the chapter shows them.
RULES = ("FS", "infinite", "urn", "HYPER", "opt-unif", "opt-oob", "margin")
#: The rules swept over a grid of their strength: name in the records -> (name in
#: :data:`ensvote.rules.REGISTRY`, prior, the profile's grid).  ``"oob"``: the forest's out-of-bag prior.
SWEEPS = {"FS": ("fixed", None, "fs_grid"), "infinite": ("infinite", None, "alpha_grid"),
          "urn": ("urn", "uniform", "alpha_grid"), "HYPER": ("urn", "oob", "alpha_grid"),
          "margin": ("margin", None, "margin_grid")}


#: The optimal rules under the uniform prior, the same for every task of a profile.
_UNIFORM_OPTIMAL = BoundedCache("head-to-head optimal rules, uniform prior", 64)


def _uniform_optimal(T, l, delta):
    hit = _UNIFORM_OPTIMAL.get((T, l, delta))
    if hit is None:
        hit = _UNIFORM_OPTIMAL[(T, l, delta)] = OptimalRule(T, delta, n_classes=l)
    return hit


def task(dataset, realization, p):
    """One partition of one problem: every rule's sweep on the test rows (a JSON-serialisable dict)."""
    # the soto2016 suite's split and forest seed: the same forest as its task
    s_fit, _ = soto2016.seeds(dataset, realization)
    Xtr, ytr, Xte, yte = soto2016.split(dataset, realization, p["n_test_synthetic"])
    T = p["T"]
    rf = RandomForestClassifier(n_estimators=T, random_state=s_fit, n_jobs=1)
    clf = HaltingClassifier(rf, rule="urn", prior="oob").fit(Xtr, ytr)
    prior = clf.prior_
    votes = clf.member_votes(Xte)
    l = len(clf.classes_)
    full = halt(votes, FixedRule(T), n_classes=l).labels
    n_test = len(yte)

    def sweep(make, params):
        members, disagree = [], []
        for v in params:
            res = halt(votes, make(v), n_classes=l)
            members.append(float(res.n_queried.mean()))
            disagree.append(int(np.sum(res.labels != full)))
        return {"param": list(params), "members": members, "disagree": disagree}

    rules = {name: sweep(lambda v, r=r, pr=pr: make_rule(r, n_members=T, strength=v, n_classes=l,
                                                         prior=prior if pr == "oob" else pr), p[grid])
             for name, (r, pr, grid) in SWEEPS.items()}
    opt = {"opt-unif": [_uniform_optimal(T, l, d) for d in p["delta_grid"]],
           "opt-oob": [OptimalRule.from_oob_votes(clf.oob_votes_, T, d, heldout=p["heldout"],
                                                  uniform_rows=p["uniform_rows"]) for d in p["delta_grid"]]}
    for name, built in opt.items():
        rec = sweep(lambda d, b=dict(zip(p["delta_grid"], built)): b[d], p["delta_grid"])
        rec["expected_members"] = [r.expected_members for r in built]
        rec["expected_disagreement"] = [r.expected_disagreement for r in built]
        rec["optimum_members"] = [r.optimum_members for r in built]
        rules[name] = rec
    # under the out-of-bag prior: HYPER against the optimum at HYPER's own expected disagreement
    under = []
    for a in p["prior_alphas"]:
        n_u, d_u = policy_value(UrnRule(T, a, prior=prior), prior)
        o = OptimalRule(T, d_u, prior=prior) if d_u > 0 else None
        under.append({"alpha": a, "hyper_members": n_u, "hyper_disagreement": d_u,
                      "optimum_members": None if o is None else o.optimum_members,
                      "table_members": None if o is None else o.expected_members})
    return {"n_train": int(len(ytr)), "n_test": int(n_test), "n_classes": int(l),
            "error_full": 100.0 * float(np.mean(clf.classes_[full] != yte)),
            "rules": rules, "under_prior": under}


def check(res, p):
    """The schema of a result of :func:`task` (ValueError saying what is wrong)."""
    T = p["T"]
    keys(res, {"n_train", "n_test", "n_classes", "error_full", "rules", "under_prior"}, "result")
    number(res["n_train"], "result.n_train", 1, float("inf"), integer=True)
    n_test = number(res["n_test"], "result.n_test", 1, float("inf"), integer=True)
    number(res["n_classes"], "result.n_classes", 2, 3, integer=True)
    number(res["error_full"], "result.error_full", 0, 100)
    keys(res["rules"], set(RULES), "result.rules")
    grids = {"FS": "fs_grid", "infinite": "alpha_grid", "urn": "alpha_grid", "HYPER": "alpha_grid",
             "opt-unif": "delta_grid", "opt-oob": "delta_grid", "margin": "margin_grid"}
    for rule, grid in grids.items():
        r, w, n = res["rules"][rule], f"result.rules.{rule}", len(p[grid])
        extra = {"expected_members", "expected_disagreement", "optimum_members"} if rule.startswith("opt") else set()
        keys(r, {"param", "members", "disagree"} | extra, w)
        need(r["param"] == list(p[grid]), f"{w}.param", f"must be the profile's {grid}")
        numbers(r["members"], f"{w}.members", n, 1, T)
        numbers(r["disagree"], f"{w}.disagree", n, 0, n_test, integer=True)
        if extra:
            numbers(r["expected_members"], f"{w}.expected_members", n, 1, T)
            numbers(r["optimum_members"], f"{w}.optimum_members", n, 1, T)
            d = numbers(r["expected_disagreement"], f"{w}.expected_disagreement", n, 0, 0.5)
            need(all(x <= b * (1 + 1e-9) for x, b in zip(d, p[grid])), f"{w}.expected_disagreement",
                  "must not exceed the budget")
    under = res["under_prior"]
    need(isinstance(under, list) and len(under) == len(p["prior_alphas"]), "result.under_prior",
          f"must be a list of {len(p['prior_alphas'])} objects")
    for i, (u, a) in enumerate(zip(under, p["prior_alphas"])):
        w = f"result.under_prior[{i}]"
        keys(u, {"alpha", "hyper_members", "hyper_disagreement", "optimum_members", "table_members"}, w)
        need(u["alpha"] == a, f"{w}.alpha", f"must be {a}")
        number(u["hyper_members"], f"{w}.hyper_members", 1, T)
        number(u["hyper_disagreement"], f"{w}.hyper_disagreement", 0, 1)
        for k in ("optimum_members", "table_members"):
            if u[k] is not None:
                number(u[k], f"{w}.{k}", 1, T)


# --------------------------------------------------------------------------
# aggregation
# --------------------------------------------------------------------------
def curves(records):
    """Per problem, rule and parameter: mean members and realized disagreement over the partitions.

    ``disagree_pct`` pools the test rows of every partition (disagreements /
    rows, in %); ``members_mean`` / ``members_std`` are over partitions.
    """
    rows = []
    for dataset, recs in records.items():
        n = np.array([r["n_test"] for r in recs], dtype=float)
        for rule in RULES:
            parts = [r["rules"][rule] for r in recs]
            members = np.array([x["members"] for x in parts])
            wrong = np.array([x["disagree"] for x in parts], dtype=float)
            for j, v in enumerate(parts[0]["param"]):
                row = {"problem": dataset, "rule": rule, "param": v,
                       "members_mean": float(members[:, j].mean()),
                       "members_std": float(members[:, j].std(ddof=1)) if len(recs) > 1 else np.nan,
                       "disagree_pct": 100.0 * float(wrong[:, j].sum() / n.sum()),
                       "n_realizations": len(recs)}
                if "expected_members" in parts[0]:
                    row["expected_members"] = float(np.mean([x["expected_members"][j] for x in parts]))
                    row["expected_disagree_pct"] = 100.0 * float(np.mean(
                        [x["expected_disagreement"][j] for x in parts]))
                rows.append(row)
    return pd.DataFrame(rows)


def at_disagreement(records, target_pct, reference="opt-oob"):
    """Each rule's members at a realized disagreement of ``target_pct`` %, with paired tests.

    For each problem and rule the parameter is interpolated (linearly, between
    the two grid values that bracket the target, in the order of increasing
    members) so that the disagreement pooled over the partitions equals the
    target; each partition's members are interpolated with the same weights.
    The paired t-test across partitions compares every rule with
    ``reference``.  Rules whose sweep does not bracket the target get NaN.
    """
    out = []
    for dataset, recs in records.items():
        n = np.array([r["n_test"] for r in recs], dtype=float)
        per = {}
        for rule in RULES:
            parts = [r["rules"][rule] for r in recs]
            members = np.array([x["members"] for x in parts])  # (partitions, params)
            pooled = 100.0 * np.array([x["disagree"] for x in parts], dtype=float).sum(0) / n.sum()
            order = np.argsort(members.mean(0), kind="stable")
            m, d = members[:, order], pooled[order]
            per[rule] = None
            for j in range(len(order) - 1):
                if d[j] > target_pct >= d[j + 1]:
                    w = (d[j] - target_pct) / (d[j] - d[j + 1])
                    per[rule] = (1 - w) * m[:, j] + w * m[:, j + 1]
                    break
        ref = per.get(reference)
        for rule in RULES:
            v = per[rule]
            row = {"problem": dataset, "rule": rule, "target_pct": target_pct, "n_realizations": len(recs)}
            if v is None:
                row.update(members=np.nan, speedup=np.nan, ratio_to_reference=np.nan, pvalue=np.nan)
            else:
                row.update(members=float(v.mean()), speedup=float(recs[0]["params"]["T"] / v.mean())
                           if "params" in recs[0] else np.nan)
                if ref is not None and rule != reference:
                    row["ratio_to_reference"] = float(v.mean() / ref.mean())
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", RuntimeWarning)
                        row["pvalue"] = (float(stats.ttest_rel(v, ref).pvalue)
                                         if len(v) > 1 and np.any(v != ref) else np.nan)
                else:
                    row.update(ratio_to_reference=1.0 if rule == reference else np.nan, pvalue=np.nan)
            out.append(row)
    return pd.DataFrame(out)


def under_prior(records):
    """HYPER and the optimum under each problem's out-of-bag prior, averaged over partitions."""
    rows = []
    for dataset, recs in records.items():
        alphas = [u["alpha"] for u in recs[0]["under_prior"]]
        for k, a in enumerate(alphas):
            us = [r["under_prior"][k] for r in recs]
            rows.append({"problem": dataset, "alpha": a,
                         "hyper_members": float(np.mean([u["hyper_members"] for u in us])),
                         "hyper_disagree_pct": 100.0 * float(np.mean([u["hyper_disagreement"] for u in us])),
                         "optimum_members": float(np.mean([u["optimum_members"] for u in us])),
                         "table_members": float(np.mean([u["table_members"] for u in us])),
                         "n_realizations": len(recs)})
    return pd.DataFrame(rows)


def _clopper_pearson(k, n, level):
    """The exact (Clopper–Pearson) interval of a rate, for a real-valued count ``k`` of ``n``."""
    a = 1.0 - level
    low = 0.0 if k <= 0 else float(stats.beta.ppf(a / 2, k, n - k + 1))
    high = 1.0 if k >= n else float(stats.beta.ppf(1 - a / 2, k + 1, n - k))
    return low, high


def _binom_tail(k, n, p, side):
    """P(X >= k) (``side="greater"``) or P(X <= k) (``"less"``) for X ~ Binomial(n, p), for real ``k`` too."""
    if side == "greater":
        return 1.0 if k <= 0 else float(stats.beta.cdf(p, k, n - k + 1))
    return 1.0 if k >= n else float(stats.beta.sf(p, k + 1, n - k))


def budget(records, deltas, level=0.95, fresh_rows=SYNTHETIC):
    """The budget mode against its budget: realized disagreement at each δ, with exact binomial tests.

    For each problem and budget ``δ`` in ``deltas`` this sets the optimal
    rule with the out-of-bag votes (``opt-oob``, the budget mode of
    :class:`~ensvote.HaltingClassifier`) beside HYPER at ``α = 1 − δ``.  The
    realized disagreement pools the test rows of every partition.

    **The pass criterion**: per problem and δ, the exact one-sided binomial
    test of "the realized rate is at most δ" on the pooled test rows
    (``opt_pvalue_over``), with Holm's step-down correction across the
    problems of one δ (``opt_pvalue_holm``); the budget is missed
    significantly when the corrected p-value is below ``1 − level``.  Pooled
    rows of one partition share a forest, and a cross-validated problem tests
    each row once per repetition; both make these p-values smaller than
    with independent rows, so the test leans towards failing a problem.

    The intervals and HYPER's test treat disagreements as Bernoulli trials on
    ``n_effective`` rows.  Problems in ``fresh_rows`` draw new test rows
    for every partition, and every pooled row counts.  The other problems
    are cross-validated, so repetitions test the same rows again; there a
    row counts once (``n_effective`` is the size of the data set, and the
    count of disagreements is scaled by ``n_effective / n_test``), which
    treats a row's disagreement as the same in every repetition and makes
    the intervals wider than they would be with independent rows.  (The rows
    of one partition also share a forest; that is not modelled.)  For a
    real-valued count ``k`` of ``n`` the exact binomial formulas are used in
    their beta-function form, which equals the binomial ones for whole
    numbers.

    Parameters
    ----------
    records : dict
        ``{problem: [result, ...]}``, each result a :func:`task` dict with
        its profile's ``params`` added (as :func:`tables` builds it).
    deltas : sequence of float
        Budgets in (0, 0.5); each must be in the profile's ``delta_grid``
        and ``1 − δ`` in its ``alpha_grid``.
    level : float, default 0.95
        Confidence level of the Clopper–Pearson intervals; the one-sided
        tests below are read at ``1 − level`` (for the budget mode, the
        family-wise level of the problems of one δ).
    fresh_rows : collection of str, default ``ensvote.experiments.SYNTHETIC``
        The problems whose partitions draw fresh test rows.

    Returns
    -------
    pandas.DataFrame
        One row per problem and ``delta_pct``, with the pooled ``n_test``
        and ``n_effective``; for ``opt`` and ``hyper``: ``*_members`` (mean
        over partitions), ``*_disagree`` (pooled rows), ``*_pct`` and the
        interval ``*_ci_low`` / ``*_ci_high`` (in %); ``opt_pvalue_over``,
        the exact one-sided p-value of "the rate is at most δ" on the pooled
        rows, and ``opt_pvalue_holm``, the same after Holm's correction
        across the problems of its δ; ``hyper_pvalue_below``, that of
        "HYPER's rate is at least δ"; ``members_pvalue``, a paired t-test of
        the members across partitions; and the verdicts ``above_budget``
        (more disagreeing rows than ``n_test δ``), ``significantly_over``
        (``opt_pvalue_holm`` below ``1 − level``),
        ``hyper_well_below`` (``hyper_pvalue_below`` below ``1 − level``)
        and ``fewer_than_hyper``.

    Raises
    ------
    ValueError
        A budget outside (0, 0.5) or missing from the sweeps, or a ``level``
        outside (0, 1).
    TypeError
        A ``level`` that is not a real number.

    Examples
    --------
    >>> from ensvote.experiments.headtohead import budget
    >>> rule = {"param": [0.01], "members": [5.0], "disagree": [3]}
    >>> hyper = {"param": [0.99], "members": [6.0], "disagree": [0]}
    >>> rec = {"n_train": 300, "n_test": 1000, "rules": {"opt-oob": rule, "HYPER": hyper}, "params": {}}
    >>> b = budget({"toy": [rec]}, [0.01], fresh_rows={"toy"}).iloc[0]
    >>> float(b.opt_pct), bool(b.above_budget), bool(b.hyper_well_below), bool(b.fewer_than_hyper)
    (0.3, False, True, True)
    """
    level = check_probability(level, name="level")
    alpha = round(1.0 - level, 12)
    out = []
    for dataset, recs in records.items():
        n = int(sum(r["n_test"] for r in recs))
        n_eff = n if dataset in fresh_rows else min(n, int(recs[0]["n_train"] + recs[0]["n_test"]))
        for delta in deltas:
            if not 0.0 < delta < 0.5:
                raise ValueError(f"budget: delta must be in (0, 0.5), got {delta!r}")
            row = {"problem": dataset, "delta_pct": 100.0 * delta, "n_realizations": len(recs), "n_test": n,
                   "n_effective": n_eff}
            members, k_eff = {}, {}
            for name, rule, value in (("opt", "opt-oob", delta), ("hyper", "HYPER", 1.0 - delta)):
                grid = np.asarray(recs[0]["rules"][rule]["param"], dtype=float)
                hit = np.flatnonzero(np.isclose(grid, value, rtol=0, atol=1e-12))
                if len(hit) != 1:
                    raise ValueError(f"budget: {rule} has no parameter {value:g} in its sweep {grid.tolist()}")
                j = int(hit[0])
                k = int(sum(r["rules"][rule]["disagree"][j] for r in recs))
                k_eff[name] = k * n_eff / n
                members[name] = np.array([r["rules"][rule]["members"][j] for r in recs], dtype=float)
                low, high = _clopper_pearson(k_eff[name], n_eff, level)
                row.update({f"{name}_members": float(members[name].mean()), f"{name}_disagree": k,
                            f"{name}_pct": 100.0 * k / n, f"{name}_ci_low": 100.0 * low,
                            f"{name}_ci_high": 100.0 * high})
            row["opt_pvalue_over"] = _binom_tail(row["opt_disagree"], n, delta, "greater")
            row["hyper_pvalue_below"] = _binom_tail(k_eff["hyper"], n_eff, delta, "less")
            differ = len(recs) > 1 and np.any(members["opt"] != members["hyper"])
            with warnings.catch_warnings():  # members that differ by a constant: no variance, NaN
                warnings.simplefilter("ignore", RuntimeWarning)
                row["members_pvalue"] = float(stats.ttest_rel(members["opt"], members["hyper"]).pvalue) \
                    if differ else np.nan
            row["above_budget"] = bool(row["opt_disagree"] > delta * n * (1 + 1e-12))
            row["hyper_well_below"] = bool(row["hyper_pvalue_below"] < alpha)
            row["fewer_than_hyper"] = bool(row["opt_members"] < row["hyper_members"])
            out.append(row)
    table = pd.DataFrame(out)
    if len(table):
        table.insert(table.columns.get_loc("opt_pvalue_over") + 1, "opt_pvalue_holm", table.groupby(
            "delta_pct").opt_pvalue_over.transform(lambda p: multipletests(p, method="holm")[1]))
        table.insert(table.columns.get_loc("above_budget") + 1, "significantly_over", table.opt_pvalue_holm < alpha)
    return table


def against_reference(table, reference="opt-oob", level=0.95):
    """Every rule against ``reference`` over the problems of an :func:`at_disagreement` table.

    Parameters
    ----------
    table : pandas.DataFrame
        Rows of :func:`at_disagreement` (one or more ``target_pct``).
    reference : str, default ``"opt-oob"``
        The rule the ratios in ``table`` are relative to.
    level : float, default 0.95
        A paired test counts when its p-value is below ``1 − level``.

    Returns
    -------
    pandas.DataFrame
        One row per ``target_pct`` and rule: ``problems`` (those where both
        sweeps reach the target), ``median_ratio`` of the members, and
        ``more`` / ``fewer``, the problems where the rule needs
        significantly more / fewer members than ``reference``.

    Examples
    --------
    >>> import pandas as pd
    >>> from ensvote.experiments.headtohead import against_reference
    >>> t = pd.DataFrame({"problem": ["a", "b", "a", "b"], "rule": ["FS", "FS", "opt-oob", "opt-oob"],
    ...                   "target_pct": 1.0, "ratio_to_reference": [4.0, 3.0, 1.0, 1.0],
    ...                   "pvalue": [0.001, 0.2, float("nan"), float("nan")]})
    >>> against_reference(t).iloc[0].to_dict()
    {'target_pct': 1.0, 'rule': 'FS', 'problems': 2, 'median_ratio': 3.5, 'more': 1, 'fewer': 0}
    """
    level = check_probability(level, name="level")
    rows = []
    for (target, rule), g in table[table.rule != reference].groupby(["target_pct", "rule"], sort=False):
        g = g.dropna(subset=["ratio_to_reference"])
        sig = g.pvalue < round(1.0 - level, 12)  # 0.05, not 0.05000000000000004
        rows.append({"target_pct": float(target), "rule": rule, "problems": len(g),
                     "median_ratio": float(g.ratio_to_reference.median()),
                     "more": int((sig & (g.ratio_to_reference > 1)).sum()),
                     "fewer": int((sig & (g.ratio_to_reference < 1)).sum())})
    return pd.DataFrame(rows, columns=["target_pct", "rule", "problems", "median_ratio", "more", "fewer"])


def tables(records, params):
    """``curves.csv``, ``at_disagreement.csv`` (at each of the profile's ``target_pcts``), ``under_prior.csv``
    and ``budget.csv`` (:func:`budget` at every δ of the ``delta_grid`` whose ``1 − δ`` is in the ``alpha_grid``)."""
    by = {}
    for r in records:
        by.setdefault(r["dataset"], []).append({**r["result"], "params": r["params"]})
    targets = sorted({*(records[0]["params"]["target_pcts"] if records else ())}, reverse=True)
    return {"curves.csv": curves(by),
            "at_disagreement.csv": pd.concat([at_disagreement(by, t) for t in targets]) if by else pd.DataFrame(),
            "under_prior.csv": under_prior(by),
            "budget.csv": budget(by, [d for d in params["delta_grid"]
                                      if np.any(np.isclose(params["alpha_grid"], 1.0 - d, rtol=0, atol=1e-12))])}


SUITE = Suite(
    "headtohead", tuple(soto2016.PROBLEMS), {"smoke": 2, "book": 10, "paper": 100},
    profile_params({"T": 101, "n_test_synthetic": 1000, "fs_grid": tuple(range(1, 102, 2)),
                    "alpha_grid": (0.6, 0.7, 0.8, 0.9, 0.95, 0.98, 0.99, 0.995, 0.998, 0.999, 0.9995, 0.9999),
                    "delta_grid": (0.1, 0.05, 0.02, 0.01, 0.005, 0.002, 0.001, 0.0005, 0.0002, 0.0001),
                    "margin_grid": tuple(range(1, 31)) + (35, 40, 50), "prior_alphas": (0.95, 0.99, 0.999),
                    "target_pcts": (1.0, 0.1), "heldout": "deconvolved",
                    "uniform_rows": UNIFORM_ROWS},
                   n_test_synthetic=300, fs_grid=(1, 11, 51, 101), alpha_grid=(0.9, 0.99, 0.999),
                   delta_grid=(0.02, 0.01, 0.001), margin_grid=(1, 5, 15), prior_alphas=(0.99,)),
    task=task, check=check, tables=tables,
    smoke_datasets=("sonar", "votes"), book_datasets=("pima", "spam", "twonorm", "waveform", "votes"))
