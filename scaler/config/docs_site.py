"""The documentation site the package renders from the pages it ships (`scaler --docs --open`, `--serve PORT`).

Every page of `installed_docs` becomes an HTML page (`guide/bursting.md` -> `guide/bursting.html`), with the
navigation of docs/index.md's toctrees beside it, heading anchors as GitHub and MyST make them (the pages link to
them), links between pages and pictures kept, and the settings' defaults filled in as `scaler --docs NAME` fills them.
The site is rendered once per version and content into the user's cache folder, by the standard library alone: no
documentation toolchain is needed, on the machine that built the wheel or on this one (docs/dependencies.md says
why). `make docs` in a clone builds the fuller Sphinx site (search, pdoc's API reference).
"""

from __future__ import annotations

import functools
import hashlib
import html
import http.server
import os
import re
import shutil
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from scaler.config.installed_docs import docs_root, find_page, page_names, page_text, page_title
from scaler.config.markdown_blocks import Block, BlockKind, Item, blocks, slug
from scaler.version import __version__

#: What the site's pages look like: plain, readable, and wide tables scroll.
STYLE = """
body { margin: 0; font: 16px/1.5 system-ui, sans-serif; color: #1d1d1f; display: flex; }
nav { width: 17rem; flex: none; padding: 1rem; background: #f5f5f7; height: 100vh; overflow-y: auto;
      position: sticky; top: 0; box-sizing: border-box; font-size: 14px; }
nav h2 { font-size: 13px; text-transform: uppercase; color: #555; margin: 1rem 0 .3rem; }
nav ul { list-style: none; padding: 0; margin: 0; } nav li { margin: .15rem 0; }
nav a.here { font-weight: 600; }
main { max-width: 52rem; padding: 1rem 2rem 4rem; min-width: 0; }
pre { background: #f5f5f7; padding: .8rem; overflow-x: auto; font-size: 14px; }
code { font-size: 90%; } table { border-collapse: collapse; display: block; overflow-x: auto; font-size: 14px; }
td, th { border: 1px solid #ddd; padding: .3rem .5rem; vertical-align: top; text-align: left; }
img { max-width: 100%; } a { color: #0a58ca; }
"""

#: The folder of the page "Try it in your browser" (docs/try/), whose files the site copies as they are: the page
#: runs only when served (`serve`, with what it loads: scaler.browser.served_page).
TRY_FOLDER = "try"
#: The name of that page for `--open` and `--serve`.
TRY_PAGE = "try"


_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]*)\)")
_CODE = re.compile(r"`([^`]+)`")
_RAW_TAG = re.compile(r"&lt;(/?(?:a|code|b|i|em|strong|br)\b.*?)&gt;")


def site_folder() -> Path:
    """Where the site of these pages is (rendered there first if it is not yet): the user's cache folder, by
    version and a digest of the pages (an install in development mode changes them)."""
    digest = hashlib.sha256()
    for name in page_names():
        digest.update(name.encode() + b"\0" + page_text(name).encode())
    for name, data in _try_files():
        digest.update(name.encode() + b"\0" + data)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = cache / "scaler" / "docs" / f"{__version__}-{digest.hexdigest()[:12]}"
    if not (folder / "index.html").is_file():
        render_site(folder)
    return folder


def render_site(folder: Path) -> None:
    """Every page as HTML in `folder`, with the pictures the pages show (written beside, then moved in place: a
    reader never sees half a site)."""
    staging = folder.with_name(f"{folder.name}.{os.getpid()}.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    navigation = _navigation()
    for name in page_names():
        target = staging / f"{name}.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page_html(name, navigation), encoding="utf-8")
    _api_reference(staging / "api")
    for pictures in ("images", "guide"):
        source = docs_root() / pictures
        if source.is_dir():
            for entry in source.iterdir():
                if entry.name.endswith((".svg", ".png")):
                    (staging / pictures).mkdir(parents=True, exist_ok=True)
                    (staging / pictures / entry.name).write_bytes(entry.read_bytes())
    for name, data in _try_files():
        (staging / TRY_FOLDER).mkdir(parents=True, exist_ok=True)
        (staging / TRY_FOLDER / name).write_bytes(data)
    shutil.rmtree(folder, ignore_errors=True)
    os.replace(staging, folder)


def _try_files() -> list[tuple[str, bytes]]:
    source = docs_root() / TRY_FOLDER
    if not source.is_dir():
        return []
    files = [entry for entry in source.iterdir() if entry.name.endswith((".html", ".js"))]
    return sorted((entry.name, entry.read_bytes()) for entry in files)


#: The modules of the API reference (the API page links to their pages), as the Sphinx site's pdoc reference has.
API_MODULES = ("scaler", "scaler.errors")


def _api_reference(folder: Path) -> None:
    """pydoc's page of each of API_MODULES (`api/scaler.html`, `api/scaler/errors.html`), its links to other
    modules' pages, which the site does not have, left as text (`python -m pydoc NAME` shows them)."""
    import importlib
    import pydoc

    pages = {f"{module}.html" for module in API_MODULES}
    for module_name in API_MODULES:
        module = importlib.import_module(module_name)
        text = pydoc.html.page(pydoc.describe(module), pydoc.html.document(module, module_name))
        text = re.sub(r'<a href="(?:file:[^"]*|\.|([\w.]+\.html)(#[^"]*)?)"[^>]*>(.*?)</a>',
                      functools.partial(_api_link, "../" * module_name.count("."), pages), text)  # fmt: skip
        target = folder / _api_path(f"{module_name}.html")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")


def _api_link(up: str, pages: set[str], match: re.Match[str]) -> str:
    """A link of pydoc's page: to another page of the reference, as the site's path; else its text."""
    page = match.group(1)
    if page not in pages:
        return match.group(3)
    return match.group(0).replace(f'href="{page}', f'href="{up}{_api_path(page)}')


def _api_path(page: str) -> str:
    """`scaler.errors.html` as the site's path under api/: `scaler/errors.html`."""
    return page[: -len(".html")].replace(".", "/") + ".html"


def _navigation() -> list[tuple[str, list[str]]]:
    """The toctrees of the index: (caption, pages)."""
    trees = [block for block in blocks(page_text("index")) if block.kind is BlockKind.TOCTREE]
    return [(tree.options.get("caption", "Pages"), list(tree.entries)) for tree in trees]


def page_html(name: str, navigation: list[tuple[str, list[str]]]) -> str:
    """The HTML page of page `name`."""
    up = "../" * name.count("/")
    body = _body(name, blocks(page_text(name)))
    title = html.escape(page_title(name))
    links = [f'<p><a href="{up}index.html">scaler {html.escape(__version__)}</a></p>']
    for caption, pages in navigation:
        links.append(f"<h2>{html.escape(caption)}</h2><ul>")
        for page in pages:
            here = ' class="here"' if page == name else ""
            links.append(f'<li><a{here} href="{up}{page}.html">{html.escape(page_title(page))}</a></li>')
        links.append("</ul>")
    return (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{title} - scaler</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{STYLE}</style></head>\n'
        f"<body><nav>{''.join(links)}</nav>\n<main>\n{body}\n</main></body></html>\n"
    )


def _body(name: str, page: list[Block]) -> str:
    taken: dict[str, int] = {}
    parts = []
    for block in page:
        if block.kind is BlockKind.HEADING:
            anchor = slug(block.text, taken)
            parts.append(f'<h{block.level} id="{anchor}">{inline_html(name, block.text)}</h{block.level}>')
        elif block.kind is BlockKind.PARAGRAPH:
            parts.append(f"<p>{inline_html(name, block.text)}</p>")
        elif block.kind is BlockKind.HTML:
            parts.append(block.text)
        elif block.kind is BlockKind.LIST:
            parts.append(_list_html(name, list(block.items)))
        elif block.kind is BlockKind.TABLE:
            parts.append(_table_html(name, block.rows))
        elif block.kind is BlockKind.TOCTREE:
            folder = name.rpartition("/")[0]
            pages = [f"{folder}/{entry}" if folder else entry for entry in block.entries]
            items = "".join(f'<li><a href="{entry}.html">{html.escape(page_title(page))}</a></li>'
                            for entry, page in zip(block.entries, pages, strict=True))  # fmt: skip
            caption = html.escape(block.options.get("caption", ""))
            parts.append(f"<p><strong>{caption}</strong></p><ul>{items}</ul>" if caption else f"<ul>{items}</ul>")
        else:
            language = f' class="language-{html.escape(block.info)}"' if block.info else ""
            parts.append(f"<pre><code{language}>{html.escape(block.text)}</code></pre>")
    return "\n".join(parts)


def _list_html(name: str, items: list[Item]) -> str:
    out: list[str] = []
    open_tags: list[str] = []
    for item in items:
        while len(open_tags) > item.depth + 1:
            out.append(f"</li></{open_tags.pop()}>")
        if len(open_tags) == item.depth + 1:
            out.append("</li>")
        while len(open_tags) < item.depth + 1:
            tag = "ol" if item.numbered else "ul"
            open_tags.append(tag)
            out.append(f"<{tag}>")
        out.append(f"<li>{inline_html(name, item.text)}")
    while open_tags:
        out.append(f"</li></{open_tags.pop()}>")
    return "".join(out)


def _table_html(name: str, rows: tuple[tuple[str, ...], ...]) -> str:
    if not rows:
        return ""
    head = "".join(f"<th>{inline_html(name, cell)}</th>" for cell in rows[0])
    cells = ("".join(f"<td>{inline_html(name, cell)}</td>" for cell in row) for row in rows[1:])
    body = "".join(f"<tr>{row}</tr>" for row in cells)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def inline_html(name: str, text: str) -> str:
    """A line's Markdown as HTML: code, links (a page's `.md` as its `.html`), pictures, emphasis; the few HTML tags
    the pages write themselves (`<a>`, `<code>`) kept."""
    codes: list[str] = []

    def keep_code(match: re.Match[str]) -> str:
        codes.append(f"<code>{html.escape(match.group(1))}</code>")
        return f"\0{len(codes) - 1}\0"

    text = html.escape(_CODE.sub(keep_code, text), quote=False)
    text = _RAW_TAG.sub(lambda match: "<" + html.unescape(match.group(1)) + ">", text)

    def link(match: re.Match[str]) -> str:
        picture, label, target = match.groups()
        address = html.escape(_site_address(target))
        if picture:
            return f'<img src="{address}" alt="{label}">'
        return f'<a href="{address}">{label}</a>'

    text = _LINK.sub(link, text)
    text = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", text)
    text = re.sub(r"(?<![\w*])\*([^*\s][^*]*?)\*(?![\w*])", r"<em>\1</em>", text)
    return re.sub("\0(\\d+)\0", lambda match: codes[int(match.group(1))], text)


def _site_address(target: str) -> str:
    path, hash_mark, anchor = target.partition("#")
    if path.endswith(".md") and "://" not in path:
        path = path[:-3] + ".html"
    return path + hash_mark + anchor


def site_page(name: str) -> str:
    """The path in the site of page `name` without `.html`: the index for "", the try page for "try"."""
    if not name:
        return "index"
    return f"{TRY_FOLDER}/index" if name.strip() == TRY_PAGE else find_page(name)


def page_address(name: str) -> str:
    """The file address of page `name` of the site (the index for ""), rendered first if need be."""
    return (site_folder() / f"{site_page(name)}.html").as_uri()


def serve(port: int, name: str, on_ready: Callable[[str], None], files: Mapping[str, Path] | None = None) -> None:
    """Serve the site on 127.0.0.1:`port` (0: a free one) until KeyboardInterrupt; `on_ready(url)` once it listens,
    with the address of page `name`. `files`: more to serve, by their path in the site (the try page's wheels and
    Pyodide, which are not the site's own)."""
    folder = site_folder()
    page = site_page(name)
    handler = functools.partial(_QuietHandler, directory=str(folder), files=dict(files or {}))
    with _QuietServer(("127.0.0.1", port), handler) as server:
        on_ready(f"http://127.0.0.1:{server.server_address[1]}/{page}.html")
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


class _QuietServer(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A browser that drops a connection mid-answer is no error of the site's: nothing printed."""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *args: Any, files: dict[str, Path], **kwargs: Any) -> None:
        self.files = files
        super().__init__(*args, **kwargs)

    def translate_path(self, path: str) -> str:
        served = self.files.get(urllib.parse.unquote(urllib.parse.urlsplit(path).path).lstrip("/"))
        return str(served) if served is not None else super().translate_path(path)

    def end_headers(self) -> None:
        """Every answer asked for again (a 304 when unchanged): a server started again may serve other files."""
        self.send_header("Cache-Control", "no-cache")
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass
