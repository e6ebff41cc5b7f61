#!/usr/bin/env bash
# Installs what is missing, builds, and starts the workbench on its embedded defaults.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
if [ -x "$root/build/app/workbench/lazyscope" ]; then
  exec "$root/build/app/workbench/lazyscope" "$@"
fi
echo "run: the workbench was not built (Qt 6 missing?); running the CLI demo instead" >&2
exec "$root/build/app/lazyscope-cli" cache-demo "$@"
