#!/usr/bin/env bash
# Installs what is missing, builds, and starts the workbench on its embedded defaults.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
workbench="$root/build/app/workbench/lazyscope"
if [ -x "$workbench" ] && { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ] || [ -n "${QT_QPA_PLATFORM:-}" ]; }; then
  exec "$workbench" "$@"
fi
if [ -x "$workbench" ]; then
  echo "run: no display (DISPLAY/WAYLAND_DISPLAY unset): showing the terminal cache demo instead." >&2
  echo "run: on a desktop, this command opens the workbench ($workbench)." >&2
else
  echo "run: the workbench was not built (Qt 6 missing?); running the terminal cache demo instead" >&2
fi
exec "$root/build/app/lazyscope-cli" cache-demo
