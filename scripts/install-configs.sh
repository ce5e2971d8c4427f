#!/usr/bin/env bash
# Part of `make install`: the configurations in /etc/pagesync, set up for the system units — each store (and the
# daemon's socket) where systemd lets that service write. A file that exists is kept: it is the administrator's.
# Installing into / as root also creates the services' users (systemd-sysusers) and gives each service's group
# read access to its configuration, which may hold bearer tokens (0640 root:GROUP).
#
#   scripts/install-configs.sh DESTDIR CONFDIR SYSUSERS_FILE
set -euo pipefail
cd "$(dirname "$0")/.."
destdir=$1
confdir=$2
sysusers=$3

new_files=()
# install_config NAME GROUP EXPECTED_CHANGED_LINES SED_ARGUMENTS...: the sample with the sed edits applied.
# The count catches a sample whose lines changed under the edits (they would silently not apply).
install_config() {
  local name=$1 group=$2 expected=$3
  shift 3
  local target="$destdir$confdir/$name"
  if [ -e "$target" ]; then
    echo "kept $target (it exists; the new sample is in the share directory)"
    return
  fi
  local staged="$target.new"
  sed "$@" "config/$name" > "$staged"
  local changed
  changed=$(diff "config/$name" "$staged" | grep -c '^>' || true)
  if [ "$changed" -ne "$expected" ]; then
    rm -f "$staged"
    echo "install: config/$name: $changed lines rewritten, $expected expected; update scripts/install-configs.sh" >&2
    exit 1
  fi
  chmod 0640 "$staged"
  mv "$staged" "$target"
  echo "installed $target"
  new_files+=("$group:$target")
}

install_config pagesync-broker.toml pagesync-broker 2 \
  -e '1a # Installed for pagesync-broker.service: [store] path is in its StateDirectory (/var/lib/pagesync-broker).' \
  -e 's|^# path = "var/broker.sqlite"$|path = "/var/lib/pagesync-broker/broker.sqlite"|'

install_config pagesyncd.toml pagesyncd 4 \
  -e '1a # Installed for pagesyncd.service: store in /var/lib/pagesyncd, API socket in /run/pagesyncd (group pagesyncd).' \
  -e 's|^# path = "var/pagesyncd.sqlite"$|path = "/var/lib/pagesyncd/pagesyncd.sqlite"|' \
  -e 's|^# socket = "var/pagesyncd.sock"$|socket = "/run/pagesyncd/pagesyncd.sock"|' \
  -e 's|^# socket_mode = "0600"$|socket_mode = "0660"|'

if [ -z "$destdir" ] && [ "$(id -u)" -eq 0 ] && command -v systemd-sysusers >/dev/null 2>&1; then
  systemd-sysusers "$sysusers"
  for entry in "${new_files[@]+"${new_files[@]}"}"; do
    chgrp "${entry%%:*}" "${entry#*:}"
  done
  echo "users pagesync-broker and pagesyncd are ready; next: systemctl daemon-reload"
else
  echo "not installing into / as root: create the users with systemd-sysusers $sysusers, then give each"
  echo "configuration its service's group (chgrp pagesync-broker $confdir/pagesync-broker.toml;"
  echo "chgrp pagesyncd $confdir/pagesyncd.toml) — a package does this after unpacking"
fi
