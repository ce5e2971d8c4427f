#!/usr/bin/env bash
# The module graph's rules that the compiler cannot see (docs/architecture.md, "Modules"): the device's programs
# carry none of the broker's store, and nothing below the stores imports them. Usage: check-layering.sh BIN_DIR
set -euo pipefail
bin="$1"
failed=0

# Swift symbols carry their module's name, length-prefixed (`11BrokerStore`, `6Broker`...).
for program in pagesyncd pagesync; do
  for module in 11BrokerStore 10BrokerCore 6Broker; do
    count=$(nm "$bin/$program" 2>/dev/null | grep -c "s${module}[0-9A-Z]" || true)
    if [ "$count" -ne 0 ]; then
      echo "check-layering: $program links the broker's module ${module//[0-9]/} ($count symbols)" >&2
      failed=1
    fi
  done
done

# The wire and model types live in SyncModel; the daemon and the protocol never import the broker's store.
if importers=$(grep -rlE '^(@testable )?import (BrokerStore|BrokerCore|Broker)$' \
    Sources/SyncModel Sources/SyncProtocol Sources/DaemonCore Sources/DaemonStore Sources/Daemon \
    Sources/PagesyncClient Sources/PagesyncCLI 2>/dev/null); then
  echo "check-layering: these import a broker module: $importers" >&2
  failed=1
fi
exit $failed
