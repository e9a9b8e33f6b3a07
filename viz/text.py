"""Text from a file or a link, shown as text: the one place it is escaped for the two renderers of the page.

Streamlit renders labels, badges, captions and info boxes as markdown (links, emphasis, `:icons:`, `$math$`),
and plotly renders a subset of HTML in titles, labels and hover text (`<a href>`, `<b>`). A GPU name like
"[click me](https://evil.example)" or "<a href=…>" from an uploaded results file must be shown as it is
written, never followed or styled: escape it with `markdown_text` where Streamlit shows it and with
`plotly_text` where a figure does.
"""
from __future__ import annotations

import html
import re
import string

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
