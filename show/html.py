"""A self-contained HTML page around SVG pictures: the SVG inline, the page's CSS and
JavaScript inline (page.css, page.js), and a Content-Security-Policy that forbids every
fetch, so the page works offline and cannot reach the network.

To put pictures into another page (the conformance report), include `assets()` once in
its <head> and `script()` once at the end of its <body>, and each picture as `view(svg)`."""
from __future__ import annotations
from functools import lru_cache
from importlib.resources import files
from xml.sax.saxutils import escape

CSP = "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:"
LEGEND = ("sources above their users; src[k] positions on the edges; hover a box for its derived properties and errors; "
          "red: invalid; blue: highlighted; green: new since the previous stage; thick grey: a collapsed chain; "
          "dashed: left out (--limit)")


@lru_cache(maxsize=None)
def _asset(name: str) -> str:
  return files("tinyspec.show").joinpath(name).read_text(encoding="utf-8")


def assets() -> str:
  """The <style> element the pictures need (once per page)."""
  return f"<style>\n{_asset('page.css')}</style>"


def script() -> str:
  """The <script> element that gives every .tinyspec-view pan, zoom, tooltips and find
  (once per page, after the views)."""
  return f"<script>\n{_asset('page.js')}</script>"


def view(svg: str, full: bool = False) -> str:
  """One picture with its tool bar: fit, zoom, find node N."""
  return (f'<div class="tinyspec-view {"full" if full else "embedded"}">'
          '<div class="tinyspec-bar"><button class="fit" type="button">fit</button>'
          '<button class="zin" type="button">+</button><button class="zout" type="button">&#8722;</button>'
          '<input class="find" type="text" inputmode="numeric" placeholder="find node #" aria-label="find node">'
          '<span class="said"></span><span>drag to pan, wheel to zoom</span></div>'
          f"{svg}</div>")


def page(svg: str, title: str, subtitle: str = "") -> str:
  """A whole page showing one SVG (which may hold several panels side by side)."""
  return "\n".join([
    "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
    f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
    '<meta name="viewport" content="width=device-width, initial-scale=1">',
    f"<title>{escape(title)}</title>", assets(), '</head><body class="tinyspec-page">',
    f'<div class="tinyspec-page-head"><h1>{escape(title)}</h1>'
    + (f"<div>{escape(subtitle)}</div>" if subtitle else "") + f'<div class="legend">{escape(LEGEND)}</div></div>',
    view(svg, full=True), script(), "</body></html>", ""])
