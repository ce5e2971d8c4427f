import BrokerCore

/// How a broker's commits reach devices on other brokers (docs/architecture.md, "The bus").
///
/// The server calls it on its loop: after each commit (`publish`), as device streams open and close (`hold`,
/// `release`: what the broker must hear about), and before answering a catch-up from its channel index
/// (`indexIsCurrent`). What the bus hears from other brokers comes back through the handlers given to `start`.
protocol BrokerBus: AnyObject {
  /// Starts the bus: `onChange` gets each `changed` message of another broker with this broker's epoch;
  /// `onCatchUp` is called whenever this broker's devices must catch up from the store (the bus was down, or
  /// another broker lost messages).
  func start(onChange: @escaping (BusChange) -> Void, onCatchUp: @escaping (String) -> Void)
  /// Whether commits leave the process (else the server skips building messages on every commit).
  var carriesCommits: Bool { get }
  /// Hands a committed batch's pages (one workspace's, each at its new time) to the other brokers, with this
  /// broker's clock after the batch.
  func publish(sequence: UInt64, clock: String, workspace: String, pages: [BusChange.Page])
  /// A device stream that may see `workspaces` opened (or its grant now names them).
  func hold(_ workspaces: Set<String>)
  /// A device stream that could see `workspaces` closed (or its grant no longer names them).
  func release(_ workspaces: Set<String>)
  /// Whether every commit published before now has reached this broker's channel index (else catch-ups are
  /// answered from the store).
  var indexIsCurrent: Bool { get }
  /// What `/metrics` and `/status` show.
  var figures: BusFigures { get }
  func close()
}

/// The bus's counters, read at scrape time.
struct BusFigures: Equatable {
  /// "in-process" or "redis".
  var kind = "in-process"
  /// "connecting", "subscribing", "live", "waiting" (in-process: always "live").
  var state = "live"
  var connected = true
  var published = 0
  var received = 0
  /// Messages from the bus that could not be read (another version, garbage): counted and logged.
  var refused = 0
  /// Messages of this broker not handed to the bus (not live, or over `[bus] buffer_bytes`).
  var dropped = 0
  var reconnects = 0
  /// Times this broker made all its devices catch up from the store because of the bus.
  var catchUps = 0
  /// Channels subscribed (workspaces + `resync`).
  var channels = 0
}

/// One broker, no bus: the broker's own fan-out is everything (what `make run` does).
final class InProcessBus: BrokerBus {
  func start(onChange: @escaping (BusChange) -> Void, onCatchUp: @escaping (String) -> Void) {}
  var carriesCommits: Bool { false }
  func publish(sequence: UInt64, clock: String, workspace: String, pages: [BusChange.Page]) {}
  func hold(_ workspaces: Set<String>) {}
  func release(_ workspaces: Set<String>) {}
  var indexIsCurrent: Bool { true }
  var figures: BusFigures { BusFigures() }
  func close() {}
}
