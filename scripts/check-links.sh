#!/usr/bin/env bash
# No program links full Foundation or ICU (docs/architecture.md, "What each program links"): they would map about
# 27 MB of libraries and ICU data into a daemon that formats no date and collates no string. Our modules import
# FoundationEssentials at most; a dependency that imports Foundation brings the rest back through its autolink
# entries, as TOMLKit did. Usage: check-links.sh BIN_DIR [--static]
#   BIN_DIR   a `swift build --show-bin-path` directory (debug or release)
#   --static  the programs were linked with --static-swift-stdlib (make install): then Foundation would be linked
#             in rather than NEEDED, so look for its symbols and ICU's instead.
set -euo pipefail
bin="$1"
static="${2:-}"
failed=0

for program in pagesyncd pagesync-broker pagesync; do
  file="$bin/$program"
  if [ ! -x "$file" ]; then
    echo "check-links: $file is missing (build first)" >&2
    exit 1
  fi
  needed=$(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  for library in libFoundation.so libFoundationInternationalization.so lib_FoundationICU.so; do
    if grep -qx "$library" <<<"$needed"; then
      echo "check-links: $program NEEDs $library: something it links imports Foundation (not FoundationEssentials)." >&2
      echo "  Find it: objdump -s -j .swift1_autolink_entries on the .o files of its modules and dependencies." >&2
      failed=1
    fi
  done
  if [ "$static" = "--static" ]; then
    if grep -qx libswiftCore.so <<<"$needed"; then
      echo "check-links: $program NEEDs libswiftCore.so: not a --static-swift-stdlib build" >&2
      failed=1
    fi
    # Swift symbols carry their module's name, length-prefixed; ICU's data is one symbol, icudtNN_dat (about
    # 30 MB), and its C API comes with it (swift_ucol_open...). Checked against a static `import Foundation`
    # program that formats a date: its icudt76_dat, swift_ucol_open and 30FoundationInternationalization symbols
    # all count.
    symbols=$(nm "$file" 2>/dev/null || true)
    for pattern in '10Foundation[0-9A-Z]' '30FoundationInternationalization' 'icudt[0-9]+_dat' \
      'swift_u(col|dat|cal)_open'; do
      count=$(grep -cE "$pattern" <<<"$symbols" || true)
      if [ "$count" -ne 0 ]; then
        echo "check-links: $program contains $count symbols matching '$pattern' (Foundation or ICU linked in)" >&2
        failed=1
      fi
    done
  fi
done
exit $failed
