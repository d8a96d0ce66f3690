"""``optsched methods``: the registered solve methods (one registry: optsched.registry)."""

from __future__ import annotations

import argparse
import json

from optsched.registry import methods


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--family", choices=["exact", "heuristic", "learned"], help="only this family")
    p.add_argument("--json", action="store_true", help="print the list as JSON")
    p.add_argument("--options", action="store_true",
                   help="also list each method's options: name, type, default and what it does (`optsched solve --option`)")
    p.add_argument("--check", action="store_true",
                   help="also import each method's class and say whether it is available here (loads its backend)")


def _available(info) -> str:
    try:
        info.load()
    except (ImportError, AttributeError) as e:
        return f"unavailable ({type(e).__name__}: {e})"
    return "available"


def run(args: argparse.Namespace) -> int:
    infos = methods(args.family)
    rows = []
    for m in infos:
        d = m.to_dict()
        if args.check:
            d["available"] = _available(m)
        rows.append(d)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    width = max((len(r["name"]) for r in rows), default=4)
    for r in rows:
        flags = ",".join(f for f, on in (("default", r["default"]), ("hint", r["takes_hint"])) if on)
        line = f"{r['name']:<{width}}  {r['family']:<9}  {flags:<12}  {r['summary']}"
        if args.check:
            line += f"  [{r['available']}]"
        print(line)
        if args.options:
            _print_options(r["options"])
    return 0


def _print_options(options: list[dict]) -> None:
    """One indented line per option: ``name  type  default  help`` (``*``: not over HTTP)."""
    if not options:
        print("    (no options)")
        return
    name_w = max(len(o["name"]) for o in options)
    type_w = max(len(o["type"]) for o in options)
    for o in options:
        default = json.dumps(o["default"])
        note = "" if o["remote"] else "  [not over HTTP]"
        print(f"    {o['name']:<{name_w}}  {o['type']:<{type_w}}  default {default}: {o['help']}{note}")
