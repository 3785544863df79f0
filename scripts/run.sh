#!/usr/bin/env bash
# Sets up .venv if needed, then runs `python -m pygpukit <args>` (default: chat).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
if [ $# -eq 0 ]; then set -- chat; fi
exec .venv/bin/python -m pygpukit "$@"
