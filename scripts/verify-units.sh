#!/usr/bin/env bash
# `make verify-units`: the systemd units checked the way they are installed.
#
# `make install-files` lays out a root in a temporary directory with this build's programs (PREFIX /usr/local,
# as a default `make install`), next to what a system provides that the units name: systemd's own units (the
# targets) and /bin/kill. `systemd-analyze verify --root` then reads the system units from there, and checks that
# their ExecStart programs exist in it. It exits 0 on warnings (an unknown key, a bad value), so any output at
# all is a failure. The user unit is checked in a user manager's view (`--user` has no --root), its ExecStart
# pointed at the program in the temporary root.
#
# The installed configurations must pass --check-config and put each store where its unit lets it write; the
# path in ExecStart's --config must be the file the install wrote; the sysusers.d file must create the units'
# users and groups. The four programs must be installed in the bin directory and answer --help.
#
#   scripts/verify-units.sh BIN_DIR      (BIN_DIR: where the four programs were built)
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$1
programs=(pagesync-broker pagesyncd pagesync pagesync-load)
for program in "${programs[@]}"; do
  [ -x "$bin/$program" ] || { echo "verify-units: $bin/$program is missing: build first" >&2; exit 1; }
done
if ! command -v systemd-analyze >/dev/null; then
  echo "verify-units: systemd-analyze is missing (apt-get install systemd)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/root
failed=0
fail() {
  echo "verify-units: $*" >&2
  failed=1
}

${MAKE:-make} --no-print-directory -s install-files DESTDIR="$root" PREFIX=/usr/local PROGRAM_DIR="$bin" >/dev/null
mkdir -p "$root/usr/lib/systemd" "$root/usr/bin"
cp -r /usr/lib/systemd/system "$root/usr/lib/systemd/"
cp /bin/kill "$root/usr/bin/kill"
[ -e "$root/bin" ] || ln -s usr/bin "$root/bin"

# Every program installed, and each runs (the Swift runtime it links, the libraries it needs).
for program in "${programs[@]}"; do
  installed=$root/usr/local/bin/$program
  if [ ! -x "$installed" ]; then fail "$program was not installed in /usr/local/bin"; continue; fi
  "$installed" --help >/dev/null 2>&1 || fail "$program --help failed as installed"
done

units=(pagesync-broker.service pagesyncd.service)
output=$(systemd-analyze verify --root="$root" "${units[@]}" 2>&1) || fail "systemd-analyze verify failed"
[ -z "$output" ] || fail "systemd-analyze verify (system units) said:"$'\n'"$output"

mkdir -m 0700 "$work/run" "$work/user"
sed "s|^ExecStart=/usr/local/bin/|ExecStart=$root/usr/local/bin/|" \
  "$root/usr/local/lib/systemd/user/pagesyncd.service" > "$work/user/pagesyncd.service"
output=$(XDG_RUNTIME_DIR=$work/run systemd-analyze --user verify "$work/user/pagesyncd.service" 2>&1) \
  || fail "systemd-analyze --user verify failed"
[ -z "$output" ] || fail "systemd-analyze --user verify (user unit) said:"$'\n'"$output"

# Each system unit's --config names a file the install wrote (%E is /etc for the system manager).
for unit in "${units[@]}"; do
  config=$(sed -n 's|^ExecStart=.* --config %E/\([^ ]*\).*|/etc/\1|p' "$root/usr/local/lib/systemd/system/$unit")
  [ -n "$config" ] && [ -f "$root$config" ] || fail "$unit: its --config ${config:-(none)} was not installed"
done

# The sysusers.d file creates every User= and Group= the system units name (in the temporary root's copy of
# this machine's user database).
for file in passwd group shadow gshadow; do
  if [ -r "/etc/$file" ]; then cp "/etc/$file" "$root/etc/$file"; fi
done
output=$(systemd-sysusers --root="$root" "$root/usr/local/lib/sysusers.d/pagesync.conf" 2>&1) \
  || fail "systemd-sysusers: $output"
for unit in "${units[@]}"; do
  for name in $(sed -n 's/^User=//p' "$root/usr/local/lib/systemd/system/$unit"); do
    grep -q "^$name:" "$root/etc/passwd" || fail "$unit: User=$name is not created by pagesync.conf"
  done
  for name in $(sed -n 's/^Group=//p' "$root/usr/local/lib/systemd/system/$unit"); do
    grep -q "^$name:" "$root/etc/group" || fail "$unit: Group=$name is not created by pagesync.conf"
  done
done

# The configurations as installed: valid, and writing only where the units allow (StateDirectory, RuntimeDirectory).
check() {
  local program=$1 config=$2 expected=$3 summary
  summary=$("$root/usr/local/bin/$program" --config "$root/etc/pagesync/$config" --check-config 2>&1) \
    || { fail "$config: $summary"; return; }
  [[ "$summary" == *"$expected"* ]] || fail "$config: expected \"$expected\" in: $summary"
}
check pagesync-broker pagesync-broker.toml "store /var/lib/pagesync-broker/broker.sqlite"
check pagesyncd pagesyncd.toml "store /var/lib/pagesyncd/pagesyncd.sqlite, socket /run/pagesyncd/pagesyncd.sock"

if [ "$failed" -ne 0 ]; then exit 1; fi
version=$(systemd-analyze --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p')
echo "units verified: ${units[*]}, user/pagesyncd.service (systemd $version); programs installed: ${programs[*]}"
