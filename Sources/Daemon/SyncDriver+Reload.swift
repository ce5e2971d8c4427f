import DaemonCore
import Logging
import TOMLConfig

/// Taking over a new configuration (SIGHUP). Loop thread only.
extension SyncDriver {
  /// Takes over a new configuration. The keys that need a restart keep their running values and are returned as
  /// such; the others apply without dropping anything: backoff, heartbeat and batch sizes from their next use,
  /// new offline limits at once (the offline set is reshaped and the machine told), and a new token by reopening
  /// the stream with it (the broker authorizes a stream once, when it opens); `token_file` and `token_command` are
  /// read again whether or not they changed.
  func reload(_ new: DaemonConfiguration) -> ReloadPlan {
    var plan = configuration.reloadPlan(to: new)
    let old = configuration
    var next = old.reloaded(from: new)
    if old.databaseRowLimit != next.databaseRowLimit || old.recentLimit != next.recentLimit {
      do {
        offlineSetChanged(
          try offlineSet.reshape(databaseRowLimit: next.databaseRowLimit, recentLimit: next.recentLimit))
      } catch {
        logger.error(
          "the new offline limits could not be applied; the old ones stay", metadata: ["error": "\(error)"])
        next.databaseRowLimit = old.databaseRowLimit
        next.recentLimit = old.recentLimit
        plan.applied.removeAll { $0.hasPrefix("offline.") }
      }
    }
    configuration = next
    changes.maxStreams = next.eventStreams
    store.clockBound = next.clockBound
    logger.logLevel = Logger.Level(rawValue: next.logLevel) ?? .info
    reconfigureMachine(next)
    link.update(token: linkToken, timeoutMillis: UInt64(next.requestTimeoutSeconds) * 1000)
    if old.token != next.token || old.workspace != next.workspace || old.pushBatch != next.pushBatch {
      // A batch the broker refused for its token, workspace or size may pass now.
      handle(.mutationsQueued)
    }
    // The token settings, re-read: the file is read (the command run) again now, and a token that differs from
    // the connection's replaces it (reconnecting, unless an app's token wins: SyncDriver+Token.swift).
    performToken(tokens.reconfigure(next.tokenSource))
    return plan
  }
}
