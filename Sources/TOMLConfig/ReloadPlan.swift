import Logging

/// What a configuration reload (SIGHUP) does with each key that changed: applied at once, or kept at its running
/// value until a restart. Keys are named as in the file (`limits.connections`).
public struct ReloadPlan: Sendable, Equatable {
  /// Changed keys the running process takes over.
  public var applied: [String] = []
  /// Changed keys the running process cannot take over (what it listens on, the store it has open); their old
  /// values stay in force until the next restart.
  public var needsRestart: [String] = []

  public init(applied: [String] = [], needsRestart: [String] = []) {
    self.applied = applied
    self.needsRestart = needsRestart
  }

  /// Records `key` as applied when `old` and `new` differ.
  public mutating func live<T: Equatable>(_ key: String, _ old: T, _ new: T) {
    if old != new { applied.append(key) }
  }

  /// Records `key` as needing a restart when `old` and `new` differ.
  public mutating func restart<T: Equatable>(_ key: String, _ old: T, _ new: T) {
    if old != new { needsRestart.append(key) }
  }

  /// Whether nothing changed.
  public var isEmpty: Bool { applied.isEmpty && needsRestart.isEmpty }

  /// One line for the log and the service manager's status.
  public var summary: String {
    if isEmpty { return "nothing changed" }
    var parts: [String] = []
    if !applied.isEmpty { parts.append("applied \(applied.joined(separator: ", "))") }
    if !needsRestart.isEmpty { parts.append("restart needed for \(needsRestart.joined(separator: ", "))") }
    return parts.joined(separator: "; ")
  }
}

extension ReloadPlan {
  /// What SIGHUP does in both programs: reads and validates the file at `path` whole (`load`), and only if it is
  /// valid hands it to `apply`; on any error the running configuration stays. Logs the outcome with `logger()`
  /// (asked after `apply`, so a new log level already counts) and returns it in a few words for the service
  /// manager's `STATUS=`.
  public static func reload<Configuration>(
    from path: String?, logger: () -> Logger, load: (String) throws -> Configuration,
    apply: (Configuration) -> ReloadPlan
  ) -> String {
    guard let path else {
      logger().warning("SIGHUP: no configuration file was given (--config); nothing to reload")
      return "reload: no configuration file"
    }
    let next: Configuration
    do {
      next = try load(path)
    } catch {
      logger().error(
        "reload refused: the running configuration stays", metadata: ["file": "\(path)", "error": "\(error)"])
      return "reload failed, running configuration kept"
    }
    let plan = apply(next)
    let log = logger()
    log.info(
      "configuration reloaded",
      metadata: ["file": "\(path)", "applied": "\(plan.applied.joined(separator: ","))"])
    if !plan.needsRestart.isEmpty {
      log.warning(
        "configuration keys changed that need a restart; their running values stay",
        metadata: ["keys": "\(plan.needsRestart.joined(separator: ","))"])
    }
    return "reloaded: \(plan.summary)"
  }
}
