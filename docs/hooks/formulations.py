"""MkDocs hook: publish ``formulations/*.md`` (kept beside the code, outside ``docs/``) in the site.

Each file becomes the page ``formulations/<name>.md`` at build time (nothing is copied into
``docs/``), and the nav's "Formulations" section lists every one of them, titled by its first
heading, so a new formulation document appears without editing ``mkdocs.yml``.
"""

from __future__ import annotations

from pathlib import Path

from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
FORMULATIONS = ROOT / "formulations"


def _documents() -> list[Path]:
    return sorted(FORMULATIONS.glob("*.md"), key=lambda p: (p.stem != "integrated", p.stem))


def _title(path: Path) -> str:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem


def on_config(config):
    section = [{_title(p): f"formulations/{p.name}"} for p in _documents()]
    for entry in config["nav"] or []:
        if isinstance(entry, dict) and "Formulations" in entry:
            entry["Formulations"] = section
    return config


def on_files(files, config):
    for p in _documents():
        files.append(File.generated(config, f"formulations/{p.name}", abs_src_path=str(p)))
    return files
