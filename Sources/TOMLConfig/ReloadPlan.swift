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
