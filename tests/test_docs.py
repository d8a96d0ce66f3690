"""The documentation site builds offline with ``mkdocs build --strict`` (no broken links, no docstring warnings),
and the example outputs it shows are what the code prints."""

from __future__ import annotations

import json
import os
import re
import shlex
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
    for name in ("solve_round", "check_schedule", "Instance", "create_app", "SolvePool", "RoundSolver"):
        assert name in api, name
    # the CLI reference is generated from the parser: every verb and one of its options appear
    from optsched.cli import VERBS

    ref = (site / "cli-reference" / "index.html").read_text()
    for verb in VERBS:
        assert f"optsched {verb}" in ref, verb
    assert "--lp-bound" in ref and "--max-time-limit" in ref


# --- example outputs shown in the docs are what the code prints -------------------------------

_TIME = re.compile(r"\btime=[0-9.]+s")


def _blocks(path: Path, lang: str) -> list[str]:
    """The fenced code blocks of one language in a Markdown file."""
    return re.findall(rf"^```{lang}\n(.*?)^```$", path.read_text(), flags=re.S | re.M)


def _console(path: Path) -> dict[str, list[str]]:
    """Each ``$ optsched ...`` command of the ``console`` blocks and the output lines shown under it."""
    shown: dict[str, list[str]] = {}
    for block in _blocks(path, "console"):
        cmd = None
        for line in block.splitlines():
            if line.startswith("$ "):
                cmd = line[2:]
                shown[cmd] = []
            elif cmd is not None:
                shown[cmd].append(line)
    return shown


def _cli(args: str, cwd: Path, capsys) -> tuple[int, list[str]]:
    """Run ``optsched ARGS`` in-process in ``cwd``; its exit code and its stdout and stderr lines."""
    from optsched.cli import main

    capsys.readouterr()
    old = os.getcwd()
    os.chdir(cwd)
    try:
        rc = main(shlex.split(args))
    finally:
        os.chdir(old)
    out = capsys.readouterr()
    return rc, (out.out + out.err).splitlines()


def test_readme_python_example_prints_what_the_readme_shows(tmp_path):
    code = _blocks(ROOT / "README.md", "python")[0]
    shown = _blocks(ROOT / "README.md", "text")[0].strip()
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert _TIME.sub("time=", r.stdout.strip()) == _TIME.sub("time=", shown)


def test_api_round_chain_example_runs_a_cold_then_a_reused_round():
    code = next(b for b in _blocks(ROOT / "docs" / "api.md", "python") if "RoundSolver" in b)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr[-3000:]
    assert [line.split()[0] for line in r.stdout.splitlines()] == ["cold", "reused"]


#: the figures of a capacity violation ("17 GPUs used, 8 available")
_USAGE = re.compile(r"\d+(\.\d+)? (GPUs|CPU cores|GB of memory) used")


def test_cli_examples_print_what_docs_cli_shows(tmp_path, capsys):
    shown = _console(ROOT / "docs" / "cli.md")
    (tmp_path / "instances").symlink_to(ROOT / "instances")
    # the deterministic examples, compared line for line
    for cmd in ("gen --nodes 8 --jobs 32 --seed 1 -o round.json", "gen --class small --count 2 --gz -o lib/small",
                "gen --nodes 4 --jobs 5 --gpu-types V100,Volta", "methods",
                "methods --options --family learned"):
        rc, lines = _cli(cmd, tmp_path, capsys)
        assert lines == shown[f"optsched {cmd}"], cmd
    # solve (its time varies), then check the schedule it wrote and the documented broken copy of it
    solve = "solve instances/small/s-4n-12j-01.json --solver cpsat -o s.json"
    rc, lines = _cli(solve, tmp_path, capsys)
    assert rc == 0 and [_TIME.sub("time=", x) for x in lines] == [_TIME.sub("time=", x) for x in shown[f"optsched {solve}"]]
    bad = json.loads((tmp_path / "s.json").read_text())
    bad["jobs"]["j0"]["nodes"] = {"n0": 9}  # "bad.json is s.json with job j0 moved to n0 at 9 GPUs"
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    for sched, code in (("s.json", 0), ("bad.json", 1)):
        cmd = f"check instances/small/s-4n-12j-01.json {sched}"
        rc, lines = _cli(cmd, tmp_path, capsys)
        # the round has several optimal schedules (CP-SAT's two workers may return any): which
        # other jobs share n0 changes the usage figures, not which rules break where
        assert rc == code and [_USAGE.sub("N", x) for x in lines] == [_USAGE.sub("N", x) for x in shown[f"optsched {cmd}"]], cmd
