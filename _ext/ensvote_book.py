"""Small Sphinx extension for the ensvote book (loaded through ``_config.yml``).

It does three things the stock Jupyter Book 1.x stack does not:

1. **Author-year bibliography.**  A pybtex label style ``ensvote_author_year``
   labels every entry "Breiman, 1996a" / "Freund and Schapire, 1997" /
   "Hernández-Lobato et al., 2011" (letters only where author and year
   collide), a formatting style of the same name uses it, and a referencing
   style of the same name prints the same year (with its letter) in the text,
   "Breiman (1996a)" / "(Breiman, 1996a)", so a citation and its bibliography
   entry read alike.
2. **Paper equation numbers like the book's own.**  A display that carries a
   ``\\tag{...}`` (the book's paper equations, e.g. ``\\tag{HL 7}``) shows
   its tag as Sphinx shows a labelled equation's number: ``(HL 7)`` in the
   text's font with a permalink to the display's anchor, not set by MathJax
   (which also rejected ``\\tag`` inside Sphinx's ``split``).  The anchor of
   such an unlabelled display moves to an empty target just before it, so that
   Sphinx's per-chapter numbering counts only the book's own labelled
   equations.
3. **No duplicated inline scripts.**  Sphinx 7.4 re-adds inline scripts that
   extensions register after the builder starts (``filename=None`` vs ``''``),
   so sphinx-thebe's ``const THEBE_JS_URL`` appeared twice on every page
   ("Identifier 'THEBE_JS_URL' has already been declared").  Each page's
   script list is de-duplicated before rendering.
"""

from collections import Counter
from dataclasses import dataclass, field
import html
import re

from docutils import nodes
from sphinx.transforms import SphinxTransform
from pybtex.plugin import register_plugin as register_pybtex_plugin
from pybtex.richtext import Text
from pybtex.style.formatting.plain import Style as PlainStyle
from pybtex.style.labels import BaseLabelStyle
from pybtex.style.template import node
from sphinxcontrib.bibtex.plugin import register_plugin as register_bibtex_plugin
from sphinxcontrib.bibtex.style.referencing import BracketStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
from sphinxcontrib.bibtex.style.referencing.basic_author_year import (
    BasicAuthorYearParentheticalReferenceStyle,
    BasicAuthorYearTextualReferenceStyle,
)
from sphinxcontrib.bibtex.style.referencing.extra_year import ExtraYearReferenceStyle
from sphinxcontrib.bibtex.style.template import join, join2, post_text, pre_text, reference

STYLE = "ensvote_author_year"

# --------------------------------------------------------------------------- bibliography


def _plain(latex):
    """BibTeX (LaTeX-escaped) text -> plain unicode, e.g. Hern{\\'a}ndez -> Hernández."""
    return Text.from_latex(latex).render_as("text")


def _names_and_year(entry):
    persons = entry.persons.get("author") or entry.persons.get("editor") or []
    last = [_plain(" ".join(p.prelast_names + p.last_names)) for p in persons]
    if not last:
        names = _plain(entry.fields.get("title", entry.key))
    elif len(last) == 1:
        names = last[0]
    elif len(last) == 2:
        names = f"{last[0]} and {last[1]}"
    else:
        names = f"{last[0]} et al."
    return names, entry.fields.get("year", "n.d.")


class AuthorYearLabelStyle(BaseLabelStyle):
    """Labels "Author, Year" with a, b, ... when author and year repeat."""

    def format_labels(self, sorted_entries):
        entries = list(sorted_entries)
        keys = [_names_and_year(e) for e in entries]
        total, seen = Counter(keys), Counter()
        for names, year in keys:
            suffix = ""
            if total[names, year] > 1:
                suffix = "abcdefghijklmnopqrstuvwxyz"[seen[names, year]]
                seen[names, year] += 1
            yield f"{names}, {year}{suffix}"


class AuthorYearStyle(PlainStyle):
    """pybtex's plain style (sorted by author, year, title) with author-year labels."""

    default_label_style = STYLE


@node
def label_year(children, data):
    """The year as the bibliography label shows it (with its a/b letter), or "n.d."."""
    assert not children
    return Text(data["formatted_entry"].label.rsplit(", ", 1)[-1])


@dataclass
class _Parenthetical(BasicAuthorYearParentheticalReferenceStyle):
    def inner(self, role_name):
        return join2(sep1=self.pre_text_sep, sep2=self.post_text_sep)[
            pre_text,
            reference[
                join(sep=self.author_year_sep)[
                    self.person.author_or_editor_or_title(full="s" in role_name),
                    label_year,
                ]
            ],
            post_text,
        ]


@dataclass
class _Textual(BasicAuthorYearTextualReferenceStyle):
    def inner(self, role_name):
        return join(sep=self.text_reference_sep)[
            self.person.author_or_editor_or_title(full="s" in role_name),
            join[
                self.bracket.left,
                join2(sep1=self.pre_text_sep, sep2=self.post_text_sep)[
                    pre_text, reference[label_year], post_text
                ],
                self.bracket.right,
            ],
        ]


@dataclass
class _Year(ExtraYearReferenceStyle):
    def inner(self, role_name):
        return reference[label_year]


_REPLACE = {
    BasicAuthorYearParentheticalReferenceStyle: _Parenthetical,
    BasicAuthorYearTextualReferenceStyle: _Textual,
    ExtraYearReferenceStyle: _Year,
}


@dataclass
class AuthorYearReferences(AuthorYearReferenceStyle):
    """sphinxcontrib-bibtex's author_year with round brackets, "Breiman (1996a)" and
    "(Breiman, 1996a)", and the year (with its letter) taken from the label."""

    bracket_textual: BracketStyle = field(default_factory=lambda: BracketStyle("(", ")"))
    # several works in one parenthesis are separated by semicolons: "(Cao, n.d.; Riddle, n.d.)"
    bracket_parenthetical: BracketStyle = field(default_factory=lambda: BracketStyle("(", ")", sep="; "))
    bracket_year: BracketStyle = field(default_factory=lambda: BracketStyle("(", ")"))

    def __post_init__(self):
        super().__post_init__()
        styles = []
        for style in self.styles:
            new = _REPLACE.get(type(style))
            if new is not None:
                style = new(**{k: getattr(style, k) for k in style.__dataclass_fields__})
            styles.append(style)
        self.styles[:] = styles
        # role -> style map was built by GroupReferenceStyle.__post_init__
        self.role_style = {name: s for s in self.styles for name in s.role_names()}


# --------------------------------------------------------------------------- paper equations


class AnchorUnnumberedMath(SphinxTransform):
    """Move a MyST target's anchor off an unlabelled display onto a span before it.

    ``(hl-eq-7)=`` followed by ``$$ ... \\tag{HL 7} $$`` gives the display the id
    ``hl-eq-7``; Sphinx's numfig then counts it as a numbered equation although
    it shows no number, and the book's own equations skip numbers: (3.1), (3.2),
    (3.5).  With the id on an empty target just before the display, {ref} links
    land at the same place and only labelled equations are counted.
    """

    default_priority = 500  # after docutils' PropagateTargets (260)

    def apply(self, **kwargs):
        for math in list(self.document.findall(nodes.math_block)):
            if math.get("label") or not math["ids"]:
                continue
            anchor = nodes.target("", "", ids=list(math["ids"]))
            for id_ in math["ids"]:
                self.document.ids[id_] = anchor
            math["ids"] = []
            math.parent.insert(math.parent.index(math), anchor)


# --------------------------------------------------------------------------- \tag in displays

_TAG = re.compile(r"\\tag\*?\{[^{}]*\}")


def _anchor_of(math):
    """The id a link to this display should use: the target just before it, or its container's."""
    parent = math.parent
    i = parent.index(math)
    if i and isinstance(parent[i - 1], nodes.target) and parent[i - 1]["ids"]:
        return parent[i - 1]["ids"][0]
    if isinstance(parent, nodes.container) and parent["ids"]:
        return parent["ids"][0]
    return None


def paper_equation_numbers(app, doctree, docname):
    """Set a display's ``\\tag{...}`` as the book's own numbers are set: ``(HL 7)`` in the text's font, with a permalink.

    The tag leaves the LaTeX and becomes ``<span class="eqno">(HL 7)<a class="headerlink" ...>#</a></span>``,
    the markup Sphinx gives a labelled equation, linking to the display's anchor (the MyST target before it).
    A multi-line display is wrapped in ``split`` (``aligned`` for blank-line separated parts) as Sphinx would.
    """
    if app.builder.format != "html":
        return
    prefix, suffix = app.config.mathjax_display
    for math in list(doctree.findall(nodes.math_block)):
        text = math.astext()
        if math.get("nowrap") or math.get("number"):
            continue
        tags = _TAG.findall(text)
        if len(tags) != 1:
            continue  # none, or several (MathJax reports "Multiple \tag"; leave it visible)
        body = _TAG.sub("", text).strip()
        parts = [p for p in body.split("\n\n") if p.strip()]
        if len(parts) > 1:
            inner = r"\begin{aligned}" + r"\\".join(parts) + r"\end{aligned}"
        elif r"\\" in body:
            inner = r"\begin{split}" + body + r"\end{split}"
        else:
            inner = body
        label = html.escape(re.fullmatch(r"\\tag\*?\{([^{}]*)\}", tags[0]).group(1))
        anchor = _anchor_of(math)
        link = (f'<a class="headerlink" href="#{html.escape(anchor)}" title="Link to this equation">#</a>'
                if anchor else "")
        markup = (f'<div class="math notranslate nohighlight"><span class="eqno">({label}){link}</span>'
                  f"{html.escape(prefix + inner + suffix, quote=False)}</div>")
        math.replace_self(nodes.raw("", markup, format="html"))


# --------------------------------------------------------------------------- scripts


def dedupe_scripts(app, pagename, templatename, context, doctree):
    files = context.get("script_files")
    if not files:
        return
    seen, unique = set(), []
    for js in files:
        attrs = getattr(js, "attributes", {})
        key = (getattr(js, "filename", str(js)) or "", tuple(sorted(attrs.items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    files[:] = unique


def setup(app):
    register_pybtex_plugin("pybtex.style.labels", STYLE, AuthorYearLabelStyle, force=True)
    register_pybtex_plugin("pybtex.style.formatting", STYLE, AuthorYearStyle, force=True)
    register_bibtex_plugin(
        "sphinxcontrib.bibtex.style.referencing", STYLE, AuthorYearReferences, force=True
    )
    app.add_transform(AnchorUnnumberedMath)
    app.connect("doctree-resolved", paper_equation_numbers)
    app.connect("html-page-context", dedupe_scripts)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
