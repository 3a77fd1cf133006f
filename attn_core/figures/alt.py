"""Alt text for the course's figures: a sentence saying what a figure shows.

A figure function may set its own description with :func:`set_alt_text`; any other figure
is described from what it draws (its titles, axis labels and captions) by
:func:`alt_text`. When :mod:`attn_core.figures` is imported inside IPython (a notebook
kernel), :func:`register` adds a display formatter for matplotlib figures that puts the
sentence into the output's metadata, ``{"image/png": {"alt": ...}}``, beside the PNG the
inline backend makes, and asks for a light background (``"needs_background": "light"``:
JupyterLab's dark theme then shows the white figure on a light panel). nbconvert's HTML
templates read both (the static edition's template writes ``<img alt="...">``).
"""

from __future__ import annotations

from matplotlib.figure import Figure

__all__ = ["alt_text", "figure_metadata", "register", "set_alt_text"]

#: The attribute a figure's own description is kept in.
ALT_ATTRIBUTE = "attn_alt_text"
_KINDS = (("images", "a heatmap"), ("patches", "a bar chart"), ("lines", "a line plot"))


def set_alt_text(fig, text):
    """Give ``fig`` its own alt text (one sentence); returns ``fig``."""
    if not isinstance(fig, Figure):
        raise TypeError(f"fig must be a matplotlib Figure, got {type(fig).__name__}")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"text must be a non-empty sentence, got {text!r}")
    setattr(fig, ALT_ATTRIBUTE, text.strip())
    return fig


def _clean(text):
    return " ".join(text.split())


def _panel(ax):
    kind = next((name for attr, name in _KINDS if getattr(ax, attr)), "a panel")
    title = _clean(ax.get_title() or ax.get_title("left") or ax.get_title("right"))
    axes = [f"{axis}: {_clean(label)}" for axis, label in
            (("x", ax.get_xlabel()), ("y", ax.get_ylabel())) if label.strip()]
    return (f"{kind}" + (f" titled “{title}”" if title else "")
            + (f" ({'; '.join(axes)})" if axes else ""))


def alt_text(fig):
    """The figure's alt text: its own (:func:`set_alt_text`) or one made from its labels.

    Examples
    --------
    >>> from matplotlib.figure import Figure
    >>> fig = Figure()
    >>> ax = fig.add_subplot()
    >>> _ = ax.bar([0, 1], [0.3, 0.7]); _ = ax.set(title="weights", xlabel="key")
    >>> alt_text(fig)
    'Figure: a bar chart titled “weights” (x: key).'
    """
    own = getattr(fig, ALT_ATTRIBUTE, None)
    if own:
        return own
    panels = [ax for ax in fig.axes if ax.get_label() != "<colorbar>" and ax.get_visible()]
    described = [_panel(ax) for ax in panels]
    described = [d for d in described if d != "a panel"] or described
    sup = fig.get_suptitle() if hasattr(fig, "get_suptitle") else ""
    captions = [_clean(t.get_text()) for t in fig.texts if t.get_visible() and t.get_text()]
    head = f"Figure “{_clean(sup)}”" if sup.strip() else "Figure"
    if len(described) > 1:
        head += f" with {len(described)} panels"
    body = "; ".join(described) if described else "no panels"
    tail = f" Caption: {' '.join(captions)}." if captions else ""
    return f"{head}: {body}.{tail}"


def figure_metadata(fig):
    """Output metadata of a displayed figure: its alt text and a light background."""
    return {"image/png": {"alt": alt_text(fig)}, "needs_background": "light"}


def _mimebundle(fig):
    # Metadata only: the inline backend's PNG formatter still makes the image itself.
    return {}, figure_metadata(fig)


def register(shell=None):
    """Add the figures' alt-text formatter to IPython (the running shell by default).

    Returns True if a shell was found. Safe to call more than once.
    """
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython is a dependency of the course
            return False
        shell = get_ipython()
    if shell is None:
        return False
    shell.display_formatter.mimebundle_formatter.for_type(Figure, _mimebundle)
    return True
