"""HTML brigade made (a page's section, escaped as every page is) as a tree of elements, for
the viewer's page script to build with `createElement` and `textContent`.

The browser never parses a fragment the page asks for as HTML: every string of it, an
answer or a grader's detail included, reaches the page as a text node or an attribute
value. A node is a string (text) or a list `[tag, {attribute: value}, child, ...]`.
Whatever no page of brigade writes is left out here (a script, a style or frame element,
an `on...` attribute, a link to anything but a path of the viewer or an anchor), and
the page script leaves it out again.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

# elements that have no end tag
VOID = frozenset({"br", "hr", "img", "input", "meta", "wbr", "col", "area", "source"})
# elements no fragment may hold, with everything inside them
DROPPED = frozenset(
    {"script", "style", "iframe", "frame", "frameset", "object", "embed", "template", "base",
     "link", "meta", "form", "noscript", "foreignobject"}
)  # fmt: skip
# attributes whose value is a URL: only a relative path or an anchor is kept
URL_ATTRIBUTES = frozenset({"href", "src", "action", "xlink:href", "formaction"})
# SVG attributes whose case the HTML parser folds (the DOM's names are case-sensitive)
SVG_CASE = {"viewbox": "viewBox", "preserveaspectratio": "preserveAspectRatio"}
# a URL with a scheme (javascript:, data:, http:), or one the browser reads as a host (//)
_SCHEME = re.compile(r"^[\s\x00-\x1f]*([a-z][a-z0-9+.\-]*:|[/\\]{2})", re.I)


def safe_attribute(name: str, value: str) -> bool:
    """Whether an attribute may be kept: no handler, no URL that leaves the viewer."""
    if name.startswith("on") or name == "srcdoc":
        return False
    if name in URL_ATTRIBUTES:
        return not _SCHEME.match(value)
    return True


class _Builder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root: list[Any] = ["#root", {}]
        self.stack: list[list[Any]] = [self.root]
        self.dropping = 0  # elements open inside a dropped one (it counted)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.dropping or tag in DROPPED:
            if tag not in VOID:
                self.dropping += 1
            return
        kept = {}
        for name, value in attrs:
            value = value or ""
            if safe_attribute(name, value):
                kept[SVG_CASE.get(name, name)] = value
        node: list[Any] = [tag, kept]
        self.stack[-1].append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self.dropping or tag in DROPPED:
            return
        self.handle_starttag(tag, attrs)
        if tag not in VOID:
            self.stack.pop()

    def handle_endtag(self, tag: str) -> None:
        if self.dropping:
            self.dropping -= 1  # (unbalanced markup inside drops more, never less)
            return
        for depth in range(len(self.stack) - 1, 0, -1):
            if self.stack[depth][0] == tag:
                del self.stack[depth:]
                return
        # an end tag of no open element: nothing to close

    def handle_data(self, data: str) -> None:
        if self.dropping or not data:
            return
        parent = self.stack[-1]
        if len(parent) > 2 and isinstance(parent[-1], str):
            parent[-1] += data
        else:
            parent.append(data)


def tree(html_text: str) -> list[Any]:
    """The nodes of an HTML fragment (a list of top-level nodes)."""
    builder = _Builder()
    builder.feed(html_text)
    builder.close()
    return builder.root[2:]


# the page script's half: build the nodes with createElement / createTextNode, checking
# tags and attributes again (what the server sends is data, never markup)
BUILD_SCRIPT = (
    """
  var SVG_NS = "http://www.w3.org/2000/svg";
  var DROPPED = /^("""
    + "|".join(sorted(DROPPED))
    + r""")$/i;
  var SCHEME = /^[\s\x00-\x1f]*([a-z][a-z0-9+.\-]*:|[\/\\]{2})/i;
  var URLS = /^(href|src|action|xlink:href)$/i;
  function build(node, svg) {
    if (typeof node === "string") { return document.createTextNode(node); }
    var tag = String(node[0]), attrs = node[1] || {};
    if (DROPPED.test(tag) || !/^[a-z][a-z0-9-]*$/i.test(tag)) {
      return document.createTextNode("");
    }
    var inSvg = svg || tag === "svg";
    var el = inSvg ? document.createElementNS(SVG_NS, tag) : document.createElement(tag);
    Object.keys(attrs).forEach(function (name) {
      var value = String(attrs[name]);
      if (/^on/i.test(name) || name === "xmlns" || name === "srcdoc" ||
          !/^[a-z][a-z0-9_:.-]*$/i.test(name) || (URLS.test(name) && SCHEME.test(value))) {
        return;
      }
      el.setAttribute(name, value);
    });
    for (var i = 2; i < node.length; i++) { el.appendChild(build(node[i], inSvg)); }
    return el;
  }
  function fill(box, nodes) {
    var fresh = document.createDocumentFragment();
    nodes.forEach(function (node) { fresh.appendChild(build(node, false)); });
    box.replaceChildren(fresh);
  }
"""
)
