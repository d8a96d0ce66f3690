"""The documentation site builds offline with ``mkdocs build --strict`` (no broken links, no docstring warnings)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path):
    site = tmp_path / "site"
    # no --quiet: it hides the warnings, and --strict then has none to count (a broken link passed)
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"), "-d", str(site)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "WARNING" not in r.stderr, r.stderr[-3000:]
    # every formulation document is published (by docs/hooks/formulations.py) and in the nav
    home = (site / "index.html").read_text()
    for f in sorted((ROOT / "formulations").glob("*.md")):
        assert (site / "formulations" / f.stem / "index.html").exists(), f.name
        assert f"formulations/{f.stem}/" in home, f.name
    # the API reference is rendered from docstrings
    api = (site / "api" / "index.html").read_text()
    for name in ("solve_round", "check_schedule", "Instance", "create_app", "SolvePool"):
        assert name in api, name
    # the CLI reference is generated from the parser: every verb and one of its options appear
    from optsched.cli import VERBS

    ref = (site / "cli-reference" / "index.html").read_text()
    for verb in VERBS:
        assert f"optsched {verb}" in ref, verb
    assert "--lp-bound" in ref and "--max-time-limit" in ref
