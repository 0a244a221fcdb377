#!/usr/bin/python3
"""ec2sim: a local EC2 Query API endpoint for Kiyot's tests. See README.md in this directory
and `ec2sim.py --help`."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ec2simlib.main import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
