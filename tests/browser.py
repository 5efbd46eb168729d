"""A headless-Chromium check of rendered pages, with no dependency beyond Debian's ``chromium``.

The page under test is loaded in an ``<iframe>`` of a small harness page served from the same local HTTP
server, so the harness's script can inspect it once MathJax has finished: typeset math, raw TeX left over,
images that failed to load, the Colab link. Chromium's ``--dump-dom`` prints the harness's verdict, and its
console log (``--enable-logging=stderr``) gives the page's console errors.
"""

from __future__ import annotations

import functools
import http.server
import json
import re
import shutil
import subprocess
import tempfile
import threading
from contextlib import contextmanager
from pathlib import Path

HARNESS = """<!doctype html><html><head><meta charset="utf-8"><title>harness</title></head><body>
<pre id="verdict">pending</pre>
<iframe id="page" src="PAGE" style="width:1280px;height:2000px"></iframe>
<script>
const frame = document.getElementById('page');
function report(obj) { document.getElementById('verdict').textContent = 'VERDICT ' + JSON.stringify(obj); }
function inspect() {
  const doc = frame.contentDocument, win = frame.contentWindow;
  const walker = doc.createTreeWalker(doc.body, NodeFilter.SHOW_TEXT, {acceptNode(n) {
    const p = n.parentElement;
    if (!p || p.closest('script, style, mjx-container, mjx-assistive-mml, .highlight, pre, code, textarea'))
      return NodeFilter.FILTER_REJECT;
    return NodeFilter.FILTER_ACCEPT; }});
  const raw = [];
  while (walker.nextNode()) {
    const t = walker.currentNode.textContent;
    // TeX delimiters, or TeX commands such as \\frac, left in the text: math that MathJax did not typeset.
    if (/\\\\\\(|\\\\\\[|\\$\\$|\\\\[a-zA-Z]{2,}/.test(t)) raw.push(t.trim().slice(0, 80));
  }
  const imgs = Array.from(doc.images).filter(i => !i.closest('.navbar-brand, .theme-switch-button'));
  report({
    mathjax: !!(win.MathJax && win.MathJax.startup),
    typeset: doc.querySelectorAll('mjx-container').length,
    raw_tex: raw.slice(0, 5),
    images: imgs.length,
    broken_images: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.getAttribute('src')),
    images_without_alt: imgs.filter(i => !i.getAttribute('alt')).map(i => i.getAttribute('src')),
    colab: Array.from(doc.querySelectorAll('a[href*="colab.research.google.com"]')).map(a => a.href),
    // Display equations wider than the column they sit in: clipped or behind a scroll bar for the reader.
    wide_math: Array.from(doc.querySelectorAll('mjx-container[display="true"]')).filter(c => {
      const box = c.parentElement.getBoundingClientRect().width;
      return c.firstElementChild && c.firstElementChild.getBoundingClientRect().width > box + 1;
    }).map(c => (c.querySelector('mjx-assistive-mml') || c).textContent.trim().slice(0, 60)),
  });
}
frame.addEventListener('load', () => {
  const win = frame.contentWindow;
  const ready = win.MathJax && win.MathJax.startup && win.MathJax.startup.promise;
  (ready ? win.MathJax.startup.promise : Promise.resolve()).then(() => setTimeout(inspect, 200));
});
</script></body></html>"""

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--enable-logging=stderr",
    "--v=0",
]


class BrowserMissing(RuntimeError):
    pass


def find_chromium() -> str:
    """Path of Debian's chromium; a one-line error naming the fix when it is missing."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    raise BrowserMissing(
        "headless Chromium is missing: run `sudo apt-get install chromium` (make test does it when run as root)"
    )


class _Handler(http.server.SimpleHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (http.server's naming)
        if self.path.startswith("/__harness__.html?page="):
            page = self.path.split("=", 1)[1]
            body = HARNESS.replace("PAGE", page).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        super().do_GET()

    def log_message(self, *args):  # keep the test output quiet
        pass


@contextmanager
def serve(directory: Path):
    """Serve ``directory`` on a free localhost port; yields the base URL."""
    handler = functools.partial(_Handler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def inspect_page(base_url: str, page: str, timeout: float = 90) -> dict:
    """Load ``page`` (a path under ``base_url``) in headless Chromium; return the harness's verdict.

    The verdict has keys ``mathjax``, ``typeset``, ``raw_tex``, ``images``, ``broken_images``,
    ``images_without_alt``, ``colab``, ``wide_math`` (display equations wider than their column) and
    ``console_errors``.
    """
    chromium = find_chromium()
    with tempfile.TemporaryDirectory() as profile:
        result = subprocess.run(
            [
                chromium,
                *CHROMIUM_FLAGS,
                f"--user-data-dir={profile}",
                "--virtual-time-budget=15000",
                "--window-size=1280,2000",
                "--dump-dom",
                f"{base_url}/__harness__.html?page=/{page}",
            ],
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    match = re.search(r"VERDICT (\{.*?\})</pre>", result.stdout, re.S)
    if not match:
        raise AssertionError(
            f"the harness gave no verdict for {page}:\n{result.stdout[-1500:]}\n{result.stderr[-1500:]}"
        )
    verdict = json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    # Console messages of level error, e.g. `Uncaught ...` or `Failed to load resource: ... 404`.
    verdict["console_errors"] = [
        line
        for line in result.stderr.splitlines()
        if ":CONSOLE" in line
        and ("Uncaught" in line or "Failed to load" in line or "ERROR:CONSOLE" in line)
    ]
    return verdict
