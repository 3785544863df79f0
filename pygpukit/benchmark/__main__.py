"""``python -m pygpukit.benchmark``: see pygpukit/benchmark/cli.py."""

import sys

from pygpukit.benchmark.cli import main

sys.exit(main())
