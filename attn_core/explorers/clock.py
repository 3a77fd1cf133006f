"""Clock readings in an explorer's read-outs: marked, so that a page built ahead of time shows
what a kernel would measure instead of the build machine's time.

A measured time (a forward pass, an attention call) is this machine's, now: a live explorer
may show it, but the static edition, built once on another machine, must not store it as if
it were the reader's (``tools/static_explorers.py`` calls :func:`without_clock` on every
read-out it records).
"""

import html
import re

__all__ = ["CLOCK_ATTR", "clocked", "without_clock"]

#: The attribute of a read-out element whose text is a clock reading (a measured time): its
#: value is what a page without a kernel shows instead (:func:`clocked`, :func:`without_clock`).
CLOCK_ATTR = "data-clock"
_CLOCKED = re.compile(rf'(<(\w+)\b[^>]*\b{CLOCK_ATTR}="([^"]*)"[^>]*>).*?(</\2>)', re.S)


def clocked(tag, text, instead, style=""):
    """The HTML element ``<tag>`` holding ``text``, a clock reading of this machine now, marked
    so that a page built ahead of time (the static edition) shows ``instead``."""
    extra = f' style="{style}"' if style else ""
    return (f'<{tag}{extra} {CLOCK_ATTR}="{html.escape(instead, quote=True)}">'
            f"{text}</{tag}>")


def without_clock(markup):
    """``markup`` with every clock reading replaced by its ``instead`` text: what a page built
    on another machine, at another time, may show."""
    return _CLOCKED.sub(lambda m: f"{m[1]}{m[3]}{m[4]}", markup)
