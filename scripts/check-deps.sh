#!/usr/bin/env bash
# Checks for the system and Python packages the build and tests need. As root it installs what is missing;
# otherwise it prints the exact commands to run and fails.
set -euo pipefail

# systemd: only for systemd-analyze (make verify-units); nothing here needs it running. redis-server: for
# pagesync-load compare and its smoke test, which start their own on a free loopback port. binutils: nm, for
# scripts/check-layering.sh (make test). libtomlplusplus-dev: toml++, the configuration files' parser
# (Sources/CTOML). chromium: headless, for the status page's browser test. libpq-dev: the broker's PostgreSQL store
# (Sources/CLibPQ); postgresql: the server the store's tests start for themselves (never the system's service).
apt_packages=(pkg-config libuv1-dev libsqlite3-dev libhttp-parser-dev libssl-dev zlib1g-dev libtomlplusplus-dev sqlite3 curl systemd redis-server python3 python3-pip binutils chromium libpq-dev postgresql)
# pip names; import_name maps those whose module is named otherwise.
python_packages=(websockets pyyaml jsonschema openapi-spec-validator)

import_name() {
  case "$1" in
    pyyaml) echo yaml ;;
    openapi-spec-validator) echo openapi_spec_validator ;;
    *) echo "$1" ;;
  esac
}

missing=()
for package in "${apt_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

# python3 may come from elsewhere than Debian (pyenv); what matters is that it runs.
if command -v python3 >/dev/null 2>&1; then
  filtered=()
  for package in "${missing[@]}"; do
    case "$package" in python3|python3-pip) ;; *) filtered+=("$package") ;; esac
  done
  missing=("${filtered[@]+"${filtered[@]}"}")
fi

if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "installing: ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "missing system packages; run:" >&2
    echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
    exit 1
  fi
fi

missing_python=()
for package in "${python_packages[@]}"; do
  python3 -c "import $(import_name "$package")" 2>/dev/null || missing_python+=("$package")
done
if [ ${#missing_python[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "installing Python packages: ${missing_python[*]}"
    python3 -m pip install --quiet --root-user-action=ignore "${missing_python[@]}" \
      || python3 -m pip install --quiet --break-system-packages "${missing_python[@]}"
  else
    echo "missing Python packages; run:" >&2
    echo "  python3 -m pip install --user ${missing_python[*]}" >&2
    exit 1
  fi
fi
