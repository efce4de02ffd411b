"""The book builds strictly, and every built page works in a real browser, offline.

The book is built ONCE per test run (module-scoped fixture ``book``; with
``--dist loadscope`` this module runs on one xdist worker).  That one build is
used by

* ``test_book_builds_strictly``: warnings are errors (``-W -n``), so a broken
  reference, citation or toc entry fails;
* ``test_page_in_browser[<page>]``: one test per page of the book, listed from
  ``_toc.yml``.  The built HTML is served on 127.0.0.1 and opened in headless
  Chromium (Debian's ``chromium`` package, driven by Playwright), with every
  request to another host blocked and recorded.  On each page it asserts: all
  math typeset by MathJax (no raw TeX left in the text, no MathJax error), no
  request leaves 127.0.0.1, every image loads, no display equation, table,
  figure or other element runs past the article column (at 1,400 px and at
  800 px) unless it scrolls inside its own container, no console error, none of
  the workshop's jargon in the text, sidebar, captions or alt texts, and every
  internal link and #anchor resolves.  The failure message names the page and
  each offending element or text.

Without Chromium the browser tests skip and say what to install.
"""

import functools
import html.parser
import http.server
import os
import re
import subprocess
import threading
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path(os.environ.get("ENSVOTE_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]
WIDTHS = (1400, 800)
#: Search buttons a reader can see (the theme puts one in the header and one in the sidebar).
_JS_SEARCH_BOXES = """() => Array.from(document.querySelectorAll('button.search-button__button'))
    .filter(e => e.offsetParent !== null && e.getBoundingClientRect().width > 0).length"""
HOST = "127.0.0.1"

# Words from the workshop the book was made in; a reader must never see them.
JARGON = [
    re.compile(r"\bseed\s+00[0-4]\b", re.I),
    re.compile(r"\bseed\s+documents?\b", re.I),
    re.compile(r"\bjudge?ment\s+calls?\b", re.I),
    re.compile(r"\bJ(?:1[01]|[1-9])\b"),
    re.compile(r"the block engine it replaces", re.I),
    re.compile(r"(?<!International )\bworkshops?\b", re.I),  # not a cited "International Workshop"
]

# ---------------------------------------------------------------------------------- pages


def _toc_files(entries):
    for entry in entries or []:
        if "file" in entry:
            yield entry["file"]
        yield from _toc_files(entry.get("sections"))
        yield from _toc_files(entry.get("chapters"))


def toc_pages():
    """Every HTML page of the built book, from _toc.yml (plus Sphinx's own pages)."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    docs = [toc["root"], *_toc_files(toc.get("chapters")), *_toc_files(toc.get("parts"))]
    return [f"{d}.html" for d in docs] + ["index.html", "genindex.html", "search.html"]


PAGES = toc_pages()


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


# ---------------------------------------------------------------------------------- build


class Build:
    def __init__(self, returncode, log, html):
        self.returncode, self.log, self.html = returncode, log, html
        self.pdf, self.pdf_error = None, None


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    """One strict build of the book, shared by every test in this module.

    ENSVOTE_BOOK_HTML=<dir> reuses an existing build's HTML directory instead
    (for working on the browser checks; the strict-build test then skips).
    """
    reuse = os.environ.get("ENSVOTE_BOOK_HTML")
    if reuse:
        return Build(None, f"reused {reuse}", Path(reuse))
    exe = _book_pdf().jupyter_book()
    assert exe, "jupyter-book is not installed in this environment"
    out = tmp_path_factory.mktemp("book")
    proc = subprocess.run(
        [exe, "build", str(ROOT), "--path-output", str(out), "-W", "-n", "--keep-going"],
        capture_output=True, text=True, cwd=ROOT,
    )
    log = proc.stdout[-6000:] + proc.stderr[-6000:]
    build = Build(proc.returncode, log, out / "_build" / "html")
    if proc.returncode == 0 and CHROMIUM.exists():  # the PDF the introduction links to, as `dev.py book` makes it
        try:
            build.pdf = _book_pdf().build_pdf(html_dir=build.html, work=out / "pdf")
        except Exception as exc:  # reported by test_pdf_of_the_whole_book
            build.pdf_error = f"{type(exc).__name__}: {exc}"
    return build


def _book_pdf():
    import importlib.util

    spec = importlib.util.spec_from_file_location("book_pdf", ROOT / "tools" / "book_pdf.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_book_builds_strictly(book):
    if book.returncode is None:
        pytest.skip(f"ENSVOTE_BOOK_HTML is set: {book.log}, not built here")
    assert book.returncode == 0, book.log
    assert (book.html / "index.html").exists()


def test_paper_equations_are_numbered_and_linked_like_the_books_own(book):
    # (HL n) and (SSM n) are set as Sphinx sets (3.2): a span.eqno in the text's font, with a permalink
    if not (book.html / "index.html").exists():
        pytest.fail(f"the book did not build:\n{book.log}")
    found = {}
    for page in sorted((book.html / "book").glob("*.html")):
        text = page.read_text()
        assert not re.search(r"\\tag\{(?:HL|SSM) ", text), f"{page.name}: a paper equation's number is left to MathJax"
        for label, anchor in re.findall(r'<span class="eqno">\(((?:HL|SSM) \d+)\)<a class="headerlink" '
                                        r'href="#([^"]+)" title="Link to this equation">#</a></span>', text):
            assert f'id="{anchor}"' in text, f"{page.name}: ({label}) links to #{anchor}, which is not on the page"
            found[label] = (page.name, anchor)
    assert {f"HL {n}" for n in range(1, 10)} | {f"SSM {n}" for n in range(1, 9)} <= set(found), sorted(found)
    assert found["HL 7"] == ("infinite.html", "hl-eq-7") and found["SSM 3"] == ("urn.html", "ssm-eq-3")


def test_pdf_of_the_whole_book(book):
    if book.returncode is None:
        pytest.skip(f"ENSVOTE_BOOK_HTML is set: {book.log}, not built here")
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: the PDF is printed by Debian's chromium package")
    assert book.pdf_error is None, book.pdf_error
    data = book.pdf.read_bytes()
    assert data.startswith(b"%PDF-") and book.pdf == book.html / "ensvote.pdf"
    pages = len(re.findall(rb"/Type\s*/Page(?![a-z])", data))
    assert pages > 100, f"the PDF has {pages} pages: not the whole book"
    intro = (book.html / "book" / "intro.html").read_text()
    assert 'href="../ensvote.pdf"' in intro  # the introduction links to it (the browser test resolves the link)


_EXTERNAL_ASSET = re.compile(
    r'<(?:script|link|img|iframe|source|video|audio)\b[^>]*\b(?:src|href)="((?:https?:)?//[^"]*)"', re.I
)


def test_book_is_self_contained(book):
    """MathJax comes from the built book, and no page names a remote script, style or image."""
    assert (book.html / "_static" / "mathjax" / "tex-chtml.js").is_file(), book.log
    intro = (book.html / "book" / "intro.html").read_text(encoding="utf-8")
    assert "_static/mathjax/tex-chtml.js" in intro
    remote = {
        name: sorted(set(_EXTERNAL_ASSET.findall((book.html / name).read_text(encoding="utf-8"))))
        for name in PAGES
        if (book.html / name).is_file()
    }
    remote = {name: urls for name, urls in remote.items() if urls}
    assert not remote, f"pages that load assets from the network: {remote}"


def test_every_built_page_is_checked(book):
    built = {
        p.relative_to(book.html).as_posix()
        for p in book.html.rglob("*.html")
        if p.relative_to(book.html).parts[0] not in ("_static", "_sources", "_images")
    }
    assert built, book.log
    assert built == set(PAGES), (
        f"pages built but not browser-checked: {sorted(built - set(PAGES))}; "
        f"listed but not built: {sorted(set(PAGES) - built)}"
    )


# ---------------------------------------------------------------------------------- browser


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


class _Ids(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.ids = set()

    def handle_starttag(self, tag, attrs):
        for key, value in attrs:
            if key == "id" or (key == "name" and tag == "a"):
                self.ids.add(value)


# Raw TeX left in text (outside MathJax output and code): delimiters, environments,
# control words, and $...$ that MathJax does not process.
_RAW_TEX = re.compile(
    r"\$\$|\\\(|\\\)|\\\[|\\\]|\\(?:begin|end)\{|\\[A-Za-z]{2,}|\$[^\s$\d][^$\n]{0,200}?\$"
)

_REDIRECT = re.compile(r'<meta\s+http-equiv="refresh"\s+content="\d+;\s*url=([^"]+)"', re.I)

_JS_DESCRIBE = r"""
function describe(el) {
  let s = el.tagName.toLowerCase();
  if (el.id) s += '#' + el.id;
  const cls = (typeof el.className === 'string' ? el.className : '').trim().split(/\s+/)
      .filter(c => c).slice(0, 3);
  if (cls.length) s += '.' + cls.join('.');
  const holder = el.closest('[id]');
  if (holder && holder !== el) s += ' in #' + holder.id;
  return s;
}
function snippet(text, n) {
  text = (text || '').replace(/\s+/g, ' ').trim();
  return text.length > n ? text.slice(0, n) + '…' : text;
}
function texOf(container) {
  try {
    for (const item of MathJax.startup.document.math) {
      if (item.typesetRoot === container) return item.math;
    }
  } catch (e) {}
  return container.textContent;
}
"""

_JS_MATHJAX_DONE = """
async () => {
  await document.fonts.ready;
  const hasMath = document.querySelector('.math') !== null;
  if (!window.MathJax) return hasMath ? 'MathJax is not loaded on a page with math' : '';
  if (!MathJax.startup || !MathJax.startup.promise)
    return hasMath ? 'MathJax did not start (its script did not load)' : '';
  const timeout = new Promise(r => setTimeout(() => r('timeout'), 60000));
  const done = await Promise.race([MathJax.startup.promise.then(() => 'done'), timeout]);
  await document.fonts.ready;
  return done === 'done' ? '' : 'MathJax did not finish typesetting within 60 s';
}
"""

_JS_MATH = "() => {" + _JS_DESCRIBE + r"""
return (() => {
  const out = [];
  for (const el of document.querySelectorAll('.math')) {
    if (!el.querySelector('mjx-container'))
      out.push(`untypeset math ${describe(el)}: "${snippet(el.textContent, 100)}"`);
  }
  // TeX errors (merror) and undefined macros (shown as red text by MathJax's noundefined)
  const items = (window.MathJax && MathJax.startup && MathJax.startup.document)
      ? Array.from(MathJax.startup.document.math) : [];
  for (const item of items) {
    let mml = '';
    try { mml = MathJax.startup.toMML(item.root); } catch (e) { continue; }
    const err = /<merror[^>]*data-mjx-error="([^"]*)"/.exec(mml)
             || /<mtext[^>]*mathcolor="red"[^>]*>([^<]*)</.exec(mml);
    if (err) {
      const where = item.typesetRoot ? describe(item.typesetRoot.parentElement) : 'the page';
      out.push(`MathJax error "${err[1]}" in ${where}: "${snippet(item.math, 100)}"`);
    }
  }
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  const skip = 'script,style,noscript,pre,code,textarea,kbd,samp,mjx-container,.highlight';
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const p = n.parentElement;
    if (!p || p.closest(skip)) continue;
    if (/[$\\]/.test(n.nodeValue)) texts.push([describe(p), n.nodeValue]);
  }
  return {problems: out, texts: texts};
})();
}
"""

_JS_IMAGES = r"""
async () => {
  const imgs = Array.from(document.images);
  for (const img of imgs) img.loading = 'eager';
  await Promise.all(imgs.map(img => img.decode().catch(() => null)));
  return imgs.filter(img => !(img.complete && img.naturalWidth > 0))
             .map(img => `image did not load: ${img.getAttribute('src')} (alt "${img.alt}")`);
}
"""

_JS_IMAGE_SHAPES = r"""
() => {
  // every image keeps its proportions at this width; plots have at least 1.5 image pixels per CSS pixel
  const out = [];
  for (const img of document.querySelectorAll('article.bd-article img')) {
    const r = img.getBoundingClientRect();
    if (!img.naturalWidth || !img.naturalHeight || r.width === 0 || r.height === 0) continue;
    const shown = r.width / r.height, natural = img.naturalWidth / img.naturalHeight;
    const what = `${img.getAttribute('src')} (alt "${(img.alt || '').slice(0, 60)}")`;
    if (Math.abs(shown / natural - 1) > 0.02)
      out.push(`${what} is distorted: shown ${Math.round(r.width)}×${Math.round(r.height)}px, `
               + `drawn ${img.naturalWidth}×${img.naturalHeight}px`);
    if (img.closest('div.cell_output') && img.naturalWidth < 1.5 * r.width)
      out.push(`${what} is blurry on high-density screens: ${img.naturalWidth}px drawn for `
               + `${Math.round(r.width)}px shown`);
  }
  return out;
}
"""

_JS_OVERFLOW = "() => {" + _JS_DESCRIBE + r"""
return (() => {
  const out = [];
  const tol = 1;
  const art = document.querySelector('article.bd-article')
           || document.querySelector('.bd-article-container');   // search.html has no article
  if (!art) return ['no article column (article.bd-article) on the page'];
  const col = art.getBoundingClientRect();
  const doc = document.documentElement;
  if (doc.scrollWidth > doc.clientWidth + tol)
    out.push(`the page scrolls sideways: ${doc.scrollWidth}px of content in a ${doc.clientWidth}px window`);
  const fits = r => r.left >= col.left - tol && r.right <= col.right + tol;
  const reported = [];
  for (const el of art.querySelectorAll('*')) {
    if (el.tagName !== 'MJX-CONTAINER' && el.closest('mjx-container')) continue;
    if (reported.some(r => r.contains(el))) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0 || fits(r)) continue;
    // the nearest ancestor inside the column that scrolls or clips sideways
    let box = null, a = el.parentElement;
    for (; a && a !== art; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (ox !== 'visible') { box = [a, ox]; break; }
    }
    let what = describe(el);
    if (el.tagName === 'MJX-CONTAINER') what += ` (math "${snippet(texOf(el), 90)}")`;
    else what += ` ("${snippet(el.textContent, 60)}")`;
    const size = `${Math.round(r.width)}px wide, spans ${Math.round(r.left)}–${Math.round(r.right)}px`
               + ` vs the column ${Math.round(col.left)}–${Math.round(col.right)}px`;
    if (box && (box[1] === 'auto' || box[1] === 'scroll')) {
      if (fits(box[0].getBoundingClientRect())) continue;   // scrolls in its own container
      out.push(`${what} overflows the column: its scroll container ${describe(box[0])}`
               + ` is itself too wide (${size})`);
    } else if (box) {
      out.push(`${what} is cut off by ${describe(box[0])} (overflow-x: ${box[1]}; ${size})`);
    } else {
      out.push(`${what} runs past the column (${size})`);
    }
    reported.push(el);
  }
  return out;
})();
}
"""

_JS_TEXT = r"""
(() => {
  const parts = [document.title];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const p = n.parentElement;
    if (p && !p.closest('script,style,noscript,mjx-container')) parts.push(n.nodeValue);
  }
  for (const el of document.querySelectorAll('[alt],[title],[aria-label]')) {
    for (const a of ['alt', 'title', 'aria-label']) if (el.hasAttribute(a)) parts.push(el.getAttribute(a));
  }
  return parts.join('\n');
})()
"""

_JS_LINKS = r"""
Array.from(document.querySelectorAll('a[href]')).map(a => [a.href, a.getAttribute('href'),
    (a.textContent || a.getAttribute('title') || '').replace(/\s+/g, ' ').trim().slice(0, 60)])
"""


class BookBrowser:
    """One Chromium page that visits the served book page by page."""

    def __init__(self, page, base, html):
        self.page, self.base, self.html = page, base, html
        self.current = None
        self.events = {}
        self._ids = {}
        page.on("console", self._on_console)
        page.on("pageerror", lambda exc: self._note("console", f"uncaught JavaScript error: {exc}"))
        page.on("response", self._on_response)
        page.on("requestfailed", self._on_failed)

    def _note(self, kind, text):
        if self.current is not None:
            self.events.setdefault(self.current, {}).setdefault(kind, []).append(text)

    def _on_console(self, msg):
        if msg.type != "error":
            return
        url = (msg.location or {}).get("url", "")
        if msg.text.startswith("Failed to load resource"):
            return  # reported with its URL as an external request or a missing resource
        self._note("console", f"console error: {msg.text} ({url or 'inline'})")

    def _on_response(self, response):
        if response.status >= 400:
            self._note("missing", f"{response.status} for {response.url}")

    def _on_failed(self, request):
        if urlsplit(request.url).hostname == HOST:
            self._note("missing", f"{request.failure} for {request.url}")

    def route(self, route):
        url = route.request.url
        if urlsplit(url).hostname == HOST or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            self._note("external", f"{route.request.resource_type} request to {url} (blocked)")
            route.abort()

    def ids_of(self, path):
        if path not in self._ids:
            parser = _Ids()
            parser.feed(path.read_text(encoding="utf-8", errors="replace"))
            self._ids[path] = parser.ids
        return self._ids[path]

    def inspect(self, name):
        """All problems found on one page, as (check, message) pairs, each reported once."""
        self.current = name
        try:
            return list(dict.fromkeys(self._inspect(name)))
        finally:
            self.current = None

    def _inspect(self, name):
        problems = []
        page = self.page
        source = (self.html / name).read_text(encoding="utf-8", errors="replace")
        redirect = _REDIRECT.search(source)
        if redirect:  # index.html only sends the reader to the first page
            target = ((self.html / name).parent / unquote(redirect.group(1).split("#")[0])).resolve()
            if not target.is_file():
                problems.append(("link", f"redirects to {redirect.group(1)}: no such page"))
            return problems
        page.set_viewport_size({"width": WIDTHS[0], "height": 1000})
        response = page.goto(f"{self.base}/{name}", wait_until="load", timeout=120_000)
        if response is not None and response.status >= 400:
            return [("page", f"HTTP {response.status}")]

        state = page.evaluate(_JS_MATHJAX_DONE)
        if state:
            problems.append(("math", state))
        math = page.evaluate(_JS_MATH)
        problems += [("math", p) for p in math["problems"]]
        for where, text in math["texts"]:
            for m in _RAW_TEX.finditer(text):
                lo, hi = max(0, m.start() - 40), min(len(text), m.end() + 40)
                context = " ".join(text[lo:hi].split())
                problems.append(("raw TeX", f'"{m.group(0)}" in {where}: "…{context}…"'))
                break  # one report per text node

        problems += [("image", p) for p in page.evaluate(_JS_IMAGES)]

        for width in WIDTHS:
            page.set_viewport_size({"width": width, "height": 1000})
            page.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")
            problems += [(f"overflow at {width}px", p) for p in page.evaluate(_JS_OVERFLOW)]
            problems += [(f"image at {width}px", p) for p in page.evaluate(_JS_IMAGE_SHAPES)]
            boxes = page.evaluate(_JS_SEARCH_BOXES)
            if boxes != 1:
                problems.append((f"search at {width}px", f"{boxes} search boxes visible, not one"))

        text = page.evaluate(_JS_TEXT)
        for rx in JARGON:
            for m in rx.finditer(text):
                lo, hi = max(0, m.start() - 50), min(len(text), m.end() + 50)
                problems.append(("jargon", f'"{m.group(0)}" in "…{" ".join(text[lo:hi].split())}…"'))

        seen = set()
        for absolute, href, label in page.evaluate(_JS_LINKS):
            parts = urlsplit(absolute)
            if parts.scheme not in ("http", "https") or parts.hostname != HOST or absolute in seen:
                continue
            seen.add(absolute)
            rel = unquote(parts.path).lstrip("/")
            target = self.html / rel
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                problems.append(("link", f'link "{label}" -> {href}: no such page'))
                continue
            anchor = unquote(parts.fragment)
            if anchor and anchor != "top" and target.suffix == ".html" and anchor not in self.ids_of(target):
                problems.append(("link", f'link "{label}" -> {href}: no anchor #{anchor} in {rel}'))

        for kind, label in (("external", "external request"), ("missing", "missing resource"),
                            ("console", "console")):
            problems += [(label, e) for e in self.events.get(name, {}).get(kind, [])]
        return problems


@pytest.fixture(scope="module")
def browser(book):
    if not CHROMIUM.exists():
        pytest.skip(
            f"no Chromium at {CHROMIUM}: the real-browser test needs Debian's chromium package "
            "(`apt-get install chromium`; .ci/run installs it when it runs as root), "
            "or set ENSVOTE_CHROMIUM to a Chromium binary"
        )
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is missing: pip install -r requirements.txt"
    )
    if not (book.html / "index.html").exists():
        pytest.fail(f"the book did not build:\n{book.log}")
    handler = functools.partial(_Quiet, directory=str(book.html))
    server = http.server.ThreadingHTTPServer((HOST, 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://{HOST}:{server.server_address[1]}"
    try:
        with sync_api.sync_playwright() as pw:
            chromium = pw.chromium.launch(
                executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True
            )
            context = chromium.new_context(service_workers="block")
            page = context.new_page()
            inspector = BookBrowser(page, base, book.html)
            context.route("**/*", inspector.route)
            yield inspector
            context.close()
            chromium.close()
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("name", PAGES)
def test_page_in_browser(browser, name):
    problems = browser.inspect(name)
    report = "\n".join(f"  [{kind}] {text}" for kind, text in problems)
    assert not problems, f"{name}: {len(problems)} problem(s) in headless Chromium:\n{report}"


# ---------------------------------------------------------------------------------- results at a glance

GLANCE = "book/glance.html"
# a row of the table for each of these rules, and a link to each chapter its guide cites
GLANCE_RULES = ("budget mode", "HYPER", "SIBA", "optimal, uniform prior", "infinite ensemble", "margin rule",
                "fixed size", "exact rule")
GLANCE_CHAPTERS = ("soto2016_experiments", "optimal", "speed", "budget", "many_classes", "urn")

_JS_GLANCE = r"""
() => {
  const art = document.querySelector('article.bd-article');
  const tables = Array.from(art.querySelectorAll('table'));
  const rows = tables.length === 1 ? Array.from(tables[0].querySelectorAll('tbody tr')).map(
      tr => Array.from(tr.children).map(c => c.textContent.trim())) : [];
  const links = Array.from(art.querySelectorAll('a[href]')).map(
      a => [a.href, a.getAttribute('href'), (a.textContent || '').replace(/\s+/g, ' ').trim().slice(0, 60)]);
  return {tables: tables.length, rows: rows, links: links};
}
"""


def test_glance_page_shows_its_table_and_its_links_resolve(browser):
    """The page of results at a glance: one table, a row of numbers for every rule, every link resolving."""
    assert GLANCE in PAGES, "book/glance is not in _toc.yml"
    page = browser.page
    page.set_viewport_size({"width": WIDTHS[0], "height": 1000})
    response = page.goto(f"{browser.base}/{GLANCE}", wait_until="load", timeout=120_000)
    assert response is not None and response.status == 200, f"{GLANCE}: no such page"
    got = page.evaluate(_JS_GLANCE)
    assert got["tables"] == 1, f"{GLANCE} shows {got['tables']} tables, not one"
    rows = {r[0]: r[1:] for r in got["rows"]}
    number = re.compile(r"\d+\.\d+")
    for rule in GLANCE_RULES:
        found = [name for name in rows if name.startswith(rule)]
        assert len(found) == 1, f"{GLANCE}: no row (or several) for {rule!r} in {sorted(rows)}"
        cells = rows[found[0]]
        assert len(cells) == 6 and number.match(cells[0]) and number.match(cells[1]), (
            f"{GLANCE}: the row of {rule!r} does not start with its trees at 1 % and 0.1 %: {cells}")
    assert sum(bool(number.fullmatch(c.split("\u00a0")[0].rstrip("†"))) for r in rows.values() for c in r) >= 30
    chapters, csv = set(), []
    for absolute, href, label in got["links"]:
        parts = urlsplit(absolute)
        if parts.scheme not in ("http", "https") or parts.hostname != HOST:
            continue
        rel = unquote(parts.path).lstrip("/")
        target = browser.html / rel
        assert target.is_file(), f'{GLANCE}: link "{label}" -> {href}: no such page'
        anchor = unquote(parts.fragment)
        if anchor and anchor != "top" and target.suffix == ".html":
            assert anchor in browser.ids_of(target), f'{GLANCE}: link "{label}" -> {href}: no anchor #{anchor}'
        chapters.add(Path(rel).stem if rel.startswith("book/") else None)
        if rel.endswith("glance.csv"):
            csv.append(target)
    missing = sorted(set(GLANCE_CHAPTERS) - chapters)
    assert not missing, f"{GLANCE} does not link to {missing}"
    assert csv and csv[0].read_text(encoding="utf-8").startswith("rule,"), f"{GLANCE}: no link to its CSV"
    intro = (browser.html / "book" / "intro.html").read_text(encoding="utf-8")
    assert 'href="glance.html"' in intro, "the introduction does not link to the page of results at a glance"
