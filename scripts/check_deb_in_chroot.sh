#!/usr/bin/env bash
# Installs the .deb from scripts/build_deb.sh into a fresh Debian 12 chroot (debootstrap
# --variant=minbase: nothing but the base system) with apt, which must pull in every dependency
# the package names, then runs both programs there: lazyscope-cli makes the tiny model, generates
# with lazy and materialized and searches the installed sample corpus; the workbench starts on
# its defaults (the generated model, the sample corpus, offscreen) and saves a screenshot.
# Usage (as root, network to a Debian mirror): scripts/check_deb_in_chroot.sh [DEB] [CHROOT_DIR]
#   DEB defaults to build-deb/lazyscope_*.deb; CHROOT_DIR to a new temporary folder (an existing
#   debootstrapped folder is reused: the package is purged first). The screenshot is copied to
#   CHROOT_DIR/../lazyscope-chroot-screenshot.png.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
deb="${1:-$(ls "$root"/build-deb/lazyscope_*.deb 2>/dev/null | head -1)}"
dir="${2:-$(mktemp -d "${TMPDIR:-/tmp}/lazyscope-deb12.XXXXXX")}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
[ -n "$deb" ] && [ -f "$deb" ] || { echo "check_deb_in_chroot: no .deb (build one with scripts/build_deb.sh)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "check_deb_in_chroot: needs root (debootstrap, chroot)" >&2; exit 2; }
command -v debootstrap >/dev/null || { echo "check_deb_in_chroot: needs debootstrap (apt install debootstrap)" >&2; exit 2; }

if [ ! -x "$dir/usr/bin/apt-get" ]; then
  echo "== debootstrap bookworm (minbase) into $dir"
  debootstrap --variant=minbase bookworm "$dir" "$mirror" >"$dir.debootstrap.log" 2>&1 ||
    { tail -20 "$dir.debootstrap.log"; exit 1; }
fi
mounted=()
cleanup() { for m in "${mounted[@]}"; do umount "$m" 2>/dev/null || true; done; }
trap cleanup EXIT
mount -t proc proc "$dir/proc" && mounted+=("$dir/proc")
cp /etc/resolv.conf "$dir/etc/resolv.conf"
in_root() { chroot "$dir" env -i HOME=/root PATH=/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 "$@"; }

echo "== apt install ./$(basename "$deb") in the chroot"
in_root dpkg --purge lazyscope >/dev/null 2>&1 || true
cp "$deb" "$dir/tmp/lazyscope.deb"
in_root apt-get update -qq
in_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/lazyscope.deb \
  >"$dir/tmp/apt.log" 2>&1 || { tail -30 "$dir/tmp/apt.log"; exit 1; }
grep -E "^(Setting up|Unpacking) lazyscope" "$dir/tmp/apt.log" | head -2
echo "packages in the chroot: $(in_root dpkg-query -f '.\n' -W | wc -l)"

failures=0
check() {  # check NAME TEXT COMMAND...: runs COMMAND in the chroot as a fresh user, expects TEXT
  local name="$1" text="$2"
  shift 2
  if in_root env HOME=/tmp/home QT_QPA_PLATFORM=offscreen "$@" >"$dir/tmp/check.log" 2>&1 &&
    grep -qF -- "$text" "$dir/tmp/check.log"; then
    echo "ok   $name"
  else
    echo "FAIL $name"
    sed 's/^/     /' "$dir/tmp/check.log" | tail -15
    failures=$((failures + 1))
  fi
}
rm -rf "$dir/tmp/home" && mkdir -p "$dir/tmp/home"
cat >"$dir/tmp/request.json" <<'JSON'
{"prefix": "Answer briefly.", "documents": ["The bell of Pellworth rings at noon.", "Marra Voss built it."],
 "order": [1, 0], "query": "Who built the bell?", "max_new_tokens": 3}
JSON
check "lazyscope-cli --version names /usr/share/lazyscope" "/usr/share/lazyscope" lazyscope-cli --version
check "make-model on the installed tokenizer text" "wrote tiny checkpoint" \
  lazyscope-cli make-model --preset tiny --seed 3 --out /tmp/home/tiny
check "generate, lazy vs materialized" "identical" \
  lazyscope-cli generate --model /tmp/home/tiny --request /tmp/request.json --compare lazy,materialized --backend cpu
check "corpus search in the installed sample" "p015" lazyscope-cli corpus search "tidal lantern" -k 1
check "man page" "lazyscope-cli" sh -c 'zcat /usr/share/man/man1/lazyscope-cli.1.gz 2>/dev/null || cat /usr/share/man/man1/lazyscope-cli.1'
check "menu entry and AppStream file" "org.lazyscope.LazyScope" \
  sh -c 'ls /usr/share/applications /usr/share/metainfo'
rm -f "$dir/tmp/home/start.png"
check "the workbench starts on its defaults and saves a screenshot" "saved screenshot" \
  timeout 300 lazyscope --screenshot /tmp/home/start.png
if [ -s "$dir/tmp/home/start.png" ]; then
  cp "$dir/tmp/home/start.png" "$(dirname "$dir")/lazyscope-chroot-screenshot.png"
  echo "note screenshot: $(dirname "$dir")/lazyscope-chroot-screenshot.png"
fi
if ((failures)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all chroot checks passed (Debian $(cat "$dir/etc/debian_version"), $(basename "$deb"))"
