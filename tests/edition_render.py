"""Render a notebook as Jupyter shows it (nbconvert's lab template, MathJax 3) and inspect it in Chromium.

``render_html(notebook, out_html)`` renders as ``jupyter nbconvert --to html`` does (its exporter, in this
process), with a template that only adds what JupyterLab does and nbconvert does not: a code cell whose
``metadata.jupyter.source_hidden`` is true shows a collapsed input placeholder instead of its source. MathJax 3 is the site's offline copy (found in
the book build), configured like JupyterLab's (``$``/``$$`` delimiters, no book macros), so a macro the
edition failed to expand becomes a MathJax error node.

``inspect(html_path)`` opens the page in headless Chromium (Debian's, driven by playwright) and returns
what the tests look at: raw TeX left in rendered Markdown, MathJax error nodes, ``<details>`` that are
open, and visible solution text.
"""

from __future__ import annotations

import functools
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TEMPLATE = """\
{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js_mathjax -%}
<script>
window.MathJax = {
  tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']],
        processEscapes: true, processEnvironments: true,
        packages: {'[-]': ['noundefined']}},  // an undefined macro is an error node, not red text
  options: {ignoreHtmlClass: 'jp-InputArea|jp-OutputArea-output', processHtmlClass: 'jp-RenderedMarkdown'},
  startup: {pageReady: () => MathJax.startup.defaultPageReady().then(() => { window.mathjaxDone = true; })}
};
</script>
<script src="{{ resources.mathjax_url }}"></script>
{%- endblock html_head_js_mathjax -%}
{% block input_group -%}
{%- if cell.metadata.get('jupyter', {}).get('source_hidden', False) -%}
<div class="jp-Cell-inputWrapper jp-mod-collapsed icl-source-hidden" title="code hidden">
<div class="jp-Collapser jp-InputCollapser jp-Cell-inputCollapser"></div>
<div class="jp-InputPlaceholder">{{ cell.source.split('\\n')[0] | escape }} &hellip;</div>
</div>
{%- else -%}
{{ super() }}
{%- endif -%}
{%- endblock input_group %}
"""


def site_mathjax(root: Path = ROOT) -> Path | None:
    """MathJax 3's ``tex-chtml.js`` of the built site (``_build/html``), if there is one."""
    for path in sorted((root / "_build" / "html").rglob("tex-chtml.js")):
        return path
    return None


@functools.cache
def _exporter(mathjax_uri: str):
    """nbconvert's ``HTMLExporter`` with the template above, built once per process: the same HTML,
    byte for byte, as ``jupyter nbconvert --to html`` with these options, without starting a
    process (and importing nbconvert) for every notebook."""
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    tpl_parent = Path(tempfile.mkdtemp(prefix="icl-edition-template-"))
    tpl = tpl_parent / "icl_edition_tpl"
    tpl.mkdir()
    (tpl / "index.html.j2").write_text(TEMPLATE)
    (tpl / "conf.json").write_text('{"base_template": "lab", "mimetypes": {"text/html": true}}')
    config = Config()
    config.TemplateExporter.extra_template_basedirs = [str(tpl_parent)]
    config.HTMLExporter.template_name = tpl.name
    config.HTMLExporter.mathjax_url = mathjax_uri
    return HTMLExporter(config=config)


def render_html(notebook: Path, out_html: Path, mathjax: Path) -> Path:
    """``notebook`` as ``jupyter nbconvert --to html`` renders it, into ``out_html`` (see the module
    docstring)."""
    out_html = Path(out_html)
    out_html.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        # glue's records (application/papermill.record/...) have no HTML form: nbconvert drops them, as
        # the CLI does, and says so on stderr; in process that becomes a UserWarning in pytest's summary
        warnings.filterwarnings("ignore", "Your element with mimetype", UserWarning)
        body, _ = _exporter(Path(mathjax).resolve().as_uri()).from_filename(str(notebook))
    out_html.write_text(body, encoding="utf-8")
    return out_html


INSPECT_JS = r"""
() => {
  const md = [...document.querySelectorAll('.jp-MarkdownCell .jp-RenderedMarkdown')];
  const raw = [];
  for (const cell of md) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    let n;
    while ((n = walker.nextNode())) {
      if (n.parentElement.closest('mjx-container, code, pre, script, style')) continue;
      const m = n.textContent.match(/\\[A-Za-z]+|\$|\\\(|\\\[/);
      if (m) raw.push(n.textContent.trim().slice(0, 80));
    }
  }
  const visible = (el) => el.checkVisibility ? el.checkVisibility() : el.offsetParent !== null;
  const details = [...document.querySelectorAll('details')];
  const solutionText = [];
  for (const d of details) {
    for (const child of d.children) {
      if (child.tagName !== 'SUMMARY' && visible(child)) solutionText.push(child.textContent.slice(0, 60));
    }
  }
  const visibleSolutionCode = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea')]
    .filter((el) => visible(el) && el.textContent.includes('### BEGIN SOLUTION'))
    .map((el) => el.textContent.trim().slice(0, 60));
  return {
    raw_tex: raw,
    merror: document.querySelectorAll('mjx-merror').length,
    math: document.querySelectorAll('mjx-container').length,
    details: details.length,
    open_details: details.filter((d) => d.open).length,
    visible_solution_text: solutionText,
    hidden_code_cells: document.querySelectorAll('.icl-source-hidden').length,
    visible_solution_code: visibleSolutionCode,
  };
}
"""


def inspect(
    html_paths: list[Path], browser, screenshot_dir: Path | None = None
) -> dict[Path, dict]:
    """What ``browser`` (a playwright ``Browser``, e.g. the ``chromium`` fixture) shows of each page
    (see ``INSPECT_JS``); full-page screenshots if asked."""
    results = {}
    page = browser.new_page(viewport={"width": 1100, "height": 1400})
    try:
        for html in html_paths:
            page.goto(Path(html).resolve().as_uri())
            page.wait_for_function("window.mathjaxDone === true", timeout=60_000)
            results[html] = page.evaluate(INSPECT_JS)
            if screenshot_dir is not None:
                Path(screenshot_dir).mkdir(parents=True, exist_ok=True)
                page.screenshot(
                    path=str(Path(screenshot_dir) / (Path(html).stem + ".png")), full_page=True
                )
    finally:
        page.close()
    return results
