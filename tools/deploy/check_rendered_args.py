#!/usr/bin/env python3
"""Checks that the flags the chart renders are flags the binaries accept.

  check_rendered_args.py BIN_DIR RENDERED.yaml

For every container of RENDERED.yaml whose command is /usr/local/bin/pagellm-router or
/usr/local/bin/pagellm-worker, runs BIN_DIR/<that binary> with the rendered args plus --help:
absl parses every flag (name and value type) before it handles --help, so an unknown flag or a
bad value prints "ERROR: ..." (and --help alone exits 1 too, so the exit status says nothing).
Prints one line per container; exit status 1 if any was refused.
"""
import os
import subprocess
import sys

import yaml


def containers(doc):
    spec = (doc.get("spec") or {}).get("template", {}).get("spec") or {}
    return spec.get("containers") or []


def main():
    bin_dir, rendered = sys.argv[1], sys.argv[2]
    failed = 0
    with open(rendered) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    for doc in docs:
        for c in containers(doc):
            cmd = c.get("command") or []
            if not cmd or not cmd[0].startswith("/usr/local/bin/pagellm-"):
                continue
            binary = os.path.join(bin_dir, os.path.basename(cmd[0]))
            argv = [binary] + cmd[1:] + (c.get("args") or []) + ["--help"]
            p = subprocess.run(argv, capture_output=True, text=True, timeout=30)
            errors = [l for l in (p.stdout + p.stderr).splitlines() if l.startswith("ERROR")]
            where = f"{doc['kind']}/{doc['metadata']['name']} {os.path.basename(binary)}"
            if errors:
                failed += 1
                print(f"FLAGS REFUSED {where}: {'; '.join(errors)}")
            else:
                print(f"flags ok {where} ({len(argv) - 2} args)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
