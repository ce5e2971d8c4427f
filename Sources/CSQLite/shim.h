#pragma once
#include <sqlite3.h>

/// `sqlite3_config` is variadic, which Swift cannot call: its one use here, memory statistics on or off.
static inline int pagesync_sqlite3_config_memstatus(int on) {
  return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, on);
}
