"""``python -m pygpukit <command>``.

Exit codes: 0 success, 1 the command failed (one line on stderr naming what is wrong), 2 a usage
error (argparse's message). ``--debug`` or ``PYGPUKIT_DEBUG=1`` shows the Python traceback of a
failure instead of the one line.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    from pygpukit.cli import bench, chat, info, kernels, routes, sched, transcribe

    parser = argparse.ArgumentParser(prog="python -m pygpukit", description=__doc__)
    parser.add_argument(
        "--debug", action="store_true", help="show Python tracebacks (also PYGPUKIT_DEBUG=1)"
    )
    sub = parser.add_subparsers(dest="command", required=True)
    info.add_parser(sub)
    routes.add_parser(sub)
    kernels.add_parser(sub)
    chat.add_parser(sub)
    bench.add_parser(sub)
    sched.add_parser(sub)
    transcribe.add_parser(sub)
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`... | head`): stop quietly, as other command-line tools do, and
        # keep Python from reporting the failed flush of stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except Exception as exc:
        if args.debug or os.environ.get("PYGPUKIT_DEBUG") == "1":
            raise
        # An expected failure (no GPU, a bad ROUTE, a bad model file) is the user's to fix, so
        # it is one line; --debug keeps the traceback for the failures that are ours.
        text = " ".join(str(exc).split()) or type(exc).__name__
        print(f"error: {type(exc).__name__}: {text} (--debug shows the traceback)", file=sys.stderr)
        return 1
    return code
