"""`python -m bench`: the bench CLI (bench/cli.py)."""
import sys

from bench.cli import main

sys.exit(main())
