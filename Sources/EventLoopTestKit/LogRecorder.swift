import EventLoop
import Logging

/// What a program under test logged, kept for the test to read: give its `Logger` a `LogRecorder.Handler`.
/// Threading: any thread (the lock guards the entries).
public final class LogRecorder: @unchecked Sendable {
  // @unchecked: `entries` is guarded by `lock`.
  public struct Entry: Sendable {
    public var level: Logger.Level
    public var message: String
    /// The logger's metadata and the call's, as text.
    public var metadata: [String: String]
  }

  private let lock = Lock()
  private var entries: [Entry] = []

  public init() {}

  /// The entries logged at `level` or above, in order.
  public func entries(atLeast level: Logger.Level) -> [Entry] {
    lock.withLock { entries.filter { $0.level >= level } }
  }

  /// The messages logged at `level` or above.
  public func messages(atLeast level: Logger.Level) -> [String] {
    entries(atLeast: level).map(\.message)
  }

  public struct Handler: LogHandler {
    let recorder: LogRecorder
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .trace

    public init(recorder: LogRecorder) { self.recorder = recorder }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
      get { metadata[key] }
      set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
      let all = metadata.merging(event.metadata ?? [:]) { _, call in call }
      let entry = Entry(
        level: event.level, message: event.message.description, metadata: all.mapValues(\.description))
      recorder.lock.withLock { recorder.entries.append(entry) }
    }
  }
}
