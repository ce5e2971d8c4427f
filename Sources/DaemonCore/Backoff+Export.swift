// The reconnect backoff moved to its own module so that the broker's bus can use it too (docs/architecture.md,
// "The bus"); the daemon's code and tests keep naming it through DaemonCore.
@_exported import Backoff
