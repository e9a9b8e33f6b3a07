"""How the page writes numbers and untrusted text: the one formatting leaf that story, viz and the page share.

Numbers: bytes in binary units, token counts, milliseconds, ratios, each written one way everywhere.
Text from a file or a link is shown as text: escaped here for the two renderers of the page. Streamlit renders
labels, badges, captions and info boxes as markdown (links, emphasis, `:icons:`, `$math$`), and plotly renders a
subset of HTML in titles, labels and hover text (`<a href>`, `<b>`). A GPU name like
"[click me](https://evil.example)" or "<a href=…>" from an uploaded results file must be shown as it is written,
never followed or styled: escape it with `markdown_text` where Streamlit shows it and with `plotly_text` where a
figure does.

Plain Python, no imports beyond the standard library: a leaf like the cost model.
"""
from __future__ import annotations

import html
import re
import string

THEMES = ("light", "dark")  # the charts' two looks (viz/theme.py draws them; the URL names them)

_MARKDOWN_SPECIAL = frozenset(string.punctuation)  # CommonMark lets a backslash escape any ASCII punctuation
# GitHub-flavoured markdown turns bare "https://…", "www.…" and "a@b.c" into links even when every character
# is escaped (it looks at the text, after escapes): an invisible word joiner (U+2060) inside each breaks them.
_AUTOLINK = re.compile(r"(?<=:)(?=//)|(?<=www)(?=\.)|(?=@)", re.IGNORECASE)


def markdown_text(text: object, keep: str = "") -> str:
    """`text` for Streamlit's markdown: every ASCII punctuation character backslash-escaped (no link, emphasis,
    icon, colour, math or HTML can start), bare web and mail addresses broken by an invisible word joiner (no
    autolink), line breaks as spaces (no new paragraph, list or heading).
    `keep`: characters the receiving element escapes itself (st.badge escapes "[" and "]")."""
    flat = _AUTOLINK.sub("\u2060", " ".join(str(text).splitlines()))
    return "".join("\\" + ch if ch in _MARKDOWN_SPECIAL and ch not in keep else ch for ch in flat)


def plotly_text(text: object) -> str:
    """`text` for a plotly title, label or hover text: &, < and > as entities, so no tag is drawn."""
    return html.escape(" ".join(str(text).splitlines()), quote=False)


_BINARY_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def bytes_after(text: str, words: str) -> int | None:
    """The size written in binary units right after `words` in a message, read back to bytes (fmt_bytes' inverse):
    bytes_after("… Tried to allocate 32.00 GiB. …", "Tried to allocate") → 34359738368; None where it is not there.
    PyTorch's out-of-memory messages write sizes so."""
    units = "|".join(_BINARY_UNITS)
    match = re.search(rf"{re.escape(words)} ([\d.]+) ({units})\b", text)
    return int(float(match[1]) * 1024 ** _BINARY_UNITS.index(match[2])) if match else None


def fmt_bytes(n: float, digits: int = 1) -> str:
    """Bytes in binary units (1 KiB = 1024 B): 34359738368 → "32.0 GiB", 512 → "512 B"."""
    if n < 0:
        return "-" + fmt_bytes(-n, digits)
    value, unit_index = float(n), 0
    while value >= 1024 and unit_index < len(_BINARY_UNITS) - 1:
        value /= 1024
        unit_index += 1
    if unit_index == 0:
        return f"{int(value)} B"
    return f"{value:.{digits}f} {_BINARY_UNITS[unit_index]}"


def fmt_tokens(n: int) -> str:
    """A token count in binary thousands, as sequence lengths are quoted: 131072 → "128K", 1536 → "1.5K"."""
    for size, suffix in ((1024**2, "M"), (1024, "K")):
        if n >= size:
            return f"{n / size:.1f}".removesuffix(".0") + suffix
    return str(n)


def fmt_ms(ms: float | None) -> str:
    """Milliseconds as the page says them everywhere: 0.123 ms, 7.23 ms, 2,412 ms (never 2.4e+03); None: "—"."""
    if ms is None:
        return "—"
    return f"{ms:,.0f} ms" if ms >= 100 else f"{ms:.3g} ms"


def fmt_ratio(ratio: float) -> str:
    """A ratio as the page says it everywhere: "3.2×" below 10, "97×" above."""
    return f"{ratio:.1f}×" if ratio < 10 else f"{ratio:,.0f}×"
