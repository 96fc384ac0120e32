"""MkDocs hook: pages whose source lives outside ``docs/`` join the site unchanged.

The README is the overview page, ``ARCHITECTURE.md`` the architecture page and every
``rfcs/*.md`` an RFC page, so each text has one copy: the file people read on the
repository is the page on the site. Links written for the repository (``docs/cli.md``)
are rewritten to the site's paths.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

# The repository: the folder of the mkdocs.yml being built (set by on_config).
ROOT = Path(__file__).resolve().parents[2]

# Repository path -> site path.
OUTSIDE = {"README.md": "index.md", "ARCHITECTURE.md": "architecture.md"}


def rfc_files() -> list[Path]:
    return sorted((ROOT / "rfcs").glob("*.md"))


def rfc_title(rfc: Path) -> str:
    """``0008-flow-control.md`` -> ``0008 Flow control``."""
    number, _, words = rfc.stem.partition("-")
    return f"{number} {words.replace('-', ' ').capitalize()}"


def on_config(config: MkDocsConfig, **_: Any) -> MkDocsConfig:
    """Lists every RFC in the navigation, in number order."""
    global ROOT
    ROOT = Path(config.config_file_path).resolve().parent
    assert config.nav is not None, "mkdocs.yml lists the pages in nav"
    config.nav.append({"RFCs": [{rfc_title(rfc): f"rfcs/{rfc.name}"} for rfc in rfc_files()]})
    return config


def on_files(files: Files, config: MkDocsConfig, **_: Any) -> Files:
    """Adds the README, ARCHITECTURE.md and the RFCs to the site's files."""
    sources = dict(OUTSIDE)
    sources.update({f"rfcs/{rfc.name}": f"rfcs/{rfc.name}" for rfc in rfc_files()})
    for source, page in sorted(sources.items()):
        files.append(File.generated(config, page, abs_src_path=str(ROOT / source)))
    return files


def on_page_markdown(markdown: str, page: Page, **_: Any) -> str:
    """Rewrites the README's repository links to the site's pages."""
    if page.file.src_uri != "index.md":
        return markdown
    markdown = re.sub(r"\]\(docs/", "](", markdown)
    return markdown.replace("](ARCHITECTURE.md)", "](architecture.md)")
