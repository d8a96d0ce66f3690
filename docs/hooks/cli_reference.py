"""MkDocs hook: the page ``cli-reference.md``, generated from the CLI's own argument parser.

Every verb in :data:`optsched.cli.VERBS` gets a section with its ``--help`` text, so the reference
cannot drift from the code; ``cli.md`` keeps the worked examples.
"""

from __future__ import annotations

import os

from mkdocs.structure.files import File

from optsched.cli import VERBS, build_parser

PAGE = "cli-reference.md"


def render() -> str:
    """The reference page's Markdown."""
    os.environ.setdefault("COLUMNS", "100")  # argparse wraps help text at the terminal width
    parser = build_parser()
    subparsers = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")  # noqa: SLF001
    out = [
        "# Command-line reference",
        "",
        "Generated from the argument parser at build time (`optsched VERB --help` prints the same).",
        "Worked examples and exit codes: [Command line](cli.md).",
        "",
    ]
    for verb, (_module, summary) in VERBS.items():
        out += [f"## `optsched {verb}`", "", summary, "", "```text", subparsers.choices[verb].format_help().rstrip(), "```", ""]
    return "\n".join(out)


def on_files(files, config):
    files.append(File.generated(config, PAGE, content=render()))
    return files
