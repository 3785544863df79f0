#!/usr/bin/env bash
# Sets up .venv if needed, then runs the whole test suite: the Rust crates, then pytest.
# GPU tests (marker `gpu`) skip cleanly without a GPU. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
(cd rust && cargo test -p pygpukit-core --quiet)
.venv/bin/python -m pytest "$@"
