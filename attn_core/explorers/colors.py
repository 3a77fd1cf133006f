"""The colours of the explorers' HTML: readable in JupyterLab's light and dark themes."""

# Colours readable in JupyterLab's light and dark themes (contrast >= 4.5:1, checked by
# tests/test_theme_contrast.py against the installed themes): text and backgrounds use the
# theme's CSS variables (fallbacks: the light theme's values, for pages without them); a
# highlighted or error cell has a fixed light background, so its text colour is fixed too.
TEXT_COLOR = "var(--jp-content-font-color1, rgba(0, 0, 0, 0.87))"
MUTED_COLOR = "var(--jp-content-font-color2, rgba(0, 0, 0, 0.54))"
PAGE_COLOR = "var(--jp-layout-color0, #ffffff)"
HIGHLIGHT_BACKGROUND, HIGHLIGHT_TEXT = "#F5C97A", "#000000"
ERROR_BACKGROUND, ERROR_TEXT = "#FDEDE4", "#1A1A1A"
#: (text, background) of every colour pair the explorers' HTML uses.
COLOR_PAIRS = {"table": (TEXT_COLOR, PAGE_COLOR), "header": (MUTED_COLOR, PAGE_COLOR),
               "highlight": (HIGHLIGHT_TEXT, HIGHLIGHT_BACKGROUND),
               "error": (ERROR_TEXT, ERROR_BACKGROUND)}

_TABLE_CSS = (
    "border-collapse:collapse;font-family:monospace;font-size:12px;margin:2px 10px 2px 0;"
    f"color:{TEXT_COLOR};background:{PAGE_COLOR}"
)
_CELL_CSS = ("padding:1px 6px;text-align:right;"
             "border:1px solid var(--jp-border-color2, #dddddd)")
_HEAD_CSS = f"padding:1px 6px;text-align:right;color:{MUTED_COLOR};font-weight:normal"
_HIGHLIGHT_CSS = (f"background:{HIGHLIGHT_BACKGROUND};color:{HIGHLIGHT_TEXT};"
                  "outline:2px solid #D55E00")
_ERROR_CSS = (
    f"border:2px solid #D55E00;background:{ERROR_BACKGROUND};color:{ERROR_TEXT};"
    "padding:6px 10px;font-family:monospace;white-space:pre-wrap"
)

# --- the figure in JupyterLab's dark theme ----------------------------------------------------
#: The dark theme's page (--jp-layout-color0 of @jupyterlab/theme-dark-extension) and the
#: ink its figures' black text becomes (contrast 14:1 on it; tests/test_theme_contrast.py).
DARK_PAGE = (17, 17, 17)
DARK_INK = (230, 230, 230)
#: A pixel whose channels differ by at most this much is a grey (paper, ink, a grey line):
#: its lightness is inverted for the dark theme. Coloured pixels (bars, lines, colour bars)
#: and everything inside an image (a heatmap's cells and their numbers) are kept.
GREY_CHROMA = 24
#: Shows the light or the dark frame of every explorer, by the theme JupyterLab has set on
#: <body> (no attribute, as outside JupyterLab: the light one).
THEME_CSS = (
    '<style>body:not([data-jp-theme-light="false"]) .attn-dark{display:none !important}'
    'body[data-jp-theme-light="false"] .attn-light{display:none !important}'
    # an HTML read-out marked attn-fill is as wide as the explorer, never its content: a wide
    # table in it scrolls instead of widening the read-out past the output's edge
    '.attn-fill{margin-left:0 !important;margin-right:0 !important}'
    '.attn-fill > .widget-html-content{flex:1 1 0;min-width:0;max-width:100%}</style>')
