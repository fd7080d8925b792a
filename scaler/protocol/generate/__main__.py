"""`python -m scaler.protocol.generate [--check]`."""

from __future__ import annotations

import argparse
import sys

from scaler.protocol.generate import render


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m scaler.protocol.generate", description=__doc__)
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a generated file is stale")
    options = parser.parse_args()
    stale = []
    for path, text in render().items():
        if path.exists() and path.read_text() == text:
            continue
        stale.append(path.name)
        if not options.check:
            path.write_text(text)
    if stale:
        print(f"{'stale' if options.check else 'written'}: {', '.join(stale)}")
    return 1 if options.check and stale else 0


if __name__ == "__main__":
    sys.exit(main())
