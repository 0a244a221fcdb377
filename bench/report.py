"""Plain-text tables and ratios, as every benchmark here prints them."""

import sys


def ratio(a, b, digits=1):
    """a / b as "1.5x", or "-" when either is missing."""
    return "-" if a is None or not b else "%.*fx" % (digits, a / b)


def table(title, header, rows, note=None):
    """Prints a table: first column left-aligned, the others right-aligned; note is a line or
    a list of lines printed under it."""
    cells = [[str(c) for c in header]] + [[str(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]

    def line(r):
        return "  ".join(c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])
                         for i, c in enumerate(r)).rstrip()
    print()
    print(title)
    print(line(cells[0]))
    print("  ".join("-" * w for w in widths))
    for r in cells[1:]:
        print(line(r))
    for n in (note if isinstance(note, list) else [note] if note else []):
        print("  " + n)
    sys.stdout.flush()
