/// What one broker tells the others through the bus (docs/protocol.md, "Between brokers"): one line of ASCII.
///
/// ```
/// pagesync-bus/1 changed ORIGIN EPOCH SEQUENCE CLOCK WORKSPACE PAGE=TIME [PAGE=TIME ...]
/// pagesync-bus/1 resync ORIGIN
/// ```
///
/// `changed`: a batch committed through broker ORIGIN (its instance id, new at each start) in the store of EPOCH,
/// as batch SEQUENCE, changed these pages of WORKSPACE, each now at TIME (its `lastUpdatedTime`); CLOCK is the
/// publishing broker's hybrid logical clock after the batch (`MILLIS:COUNTER`), which receivers merge so that the
/// `Pagesync-Clock` their devices get is as new on every broker. A batch that
/// changed pages of several workspaces is one message per workspace (each on its workspace's channel), and one
/// too large for `maxBytes` is split. `resync`: broker ORIGIN may have lost messages it meant to publish (its
/// buffer toward the bus overflowed, or its connection dropped with messages queued): every broker makes its own
/// devices catch up from the store.
///
/// Tokens are separated by one space; ids, the origin and the epoch are 1 to 64 of `A-Z a-z 0-9 - _ . :`, numbers
/// are decimal without sign or leading zeros beyond "0". Decoding checks all of it and the size bound first: a
/// message from another version or garbage is a `BusMessageError`, never a crash.
///
/// I/O-free; a value.
public enum BusMessage: Equatable, Sendable {
  case changed(BusChange)
  case resync(origin: String)

  /// The first token of every message of this version.
  public static let version = "pagesync-bus/1"
  /// The channel that carries `resync` messages (every broker subscribes to it).
  public static let resyncChannel = "pagesync:resync"

  /// The channel of a workspace's `changed` messages.
  public static func channel(ofWorkspace workspace: String) -> String { "pagesync:ws:" + workspace }

  /// The workspace a channel name names, nil for any other channel.
  public static func workspace(ofChannel channel: String) -> String? {
    channel.hasPrefix("pagesync:ws:") ? String(channel.dropFirst("pagesync:ws:".count)) : nil
  }

  /// The message's bytes.
  public var encoded: [UInt8] {
    var bytes: [UInt8] = Array(Self.version.utf8)
    switch self {
    case .resync(let origin):
      bytes.append(contentsOf: " resync ".utf8)
      bytes.append(contentsOf: origin.utf8)
    case .changed(let change):
      bytes.append(contentsOf: " changed ".utf8)
      change.appendHeader(to: &bytes)
      for page in change.pages { BusChange.append(page, to: &bytes) }
    }
    return bytes
  }

  /// Reads a message; throws what is wrong with it. `maxBytes` is checked before anything else is read.
  public static func decode(_ bytes: [UInt8], maxBytes: Int) throws(BusMessageError) -> BusMessage {
    guard bytes.count <= maxBytes else { throw .tooLarge(bytes.count, maxBytes) }
    var tokens = bytes.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)[...]
    guard let version = tokens.popFirst(), version.elementsEqual(Self.version.utf8) else {
      throw .otherVersion(String(decoding: bytes.prefix(32), as: UTF8.self))
    }
    guard let kind = tokens.popFirst() else { throw .missing("kind") }
    if kind.elementsEqual("resync".utf8) {
      let origin = try token(&tokens, "origin")
      guard tokens.isEmpty else { throw .trailing }
      return .resync(origin: origin)
    }
    guard kind.elementsEqual("changed".utf8) else {
      throw .unknownKind(String(decoding: kind.prefix(32), as: UTF8.self))
    }
    let origin = try token(&tokens, "origin")
    let epoch = try token(&tokens, "epoch")
    let sequence = try number(&tokens, "sequence")
    let clock = try token(&tokens, "clock")
    let workspace = try token(&tokens, "workspace")
    guard !tokens.isEmpty else { throw .missing("pages") }
    var pages: [BusChange.Page] = []
    pages.reserveCapacity(tokens.count)
    for entry in tokens {
      guard let equals = entry.firstIndex(of: UInt8(ascii: "=")) else { throw .badField("page") }
      let id = entry[..<equals]
      let time = entry[entry.index(after: equals)...]
      guard isToken(id) else { throw .badField("page") }
      guard let value = parseNumber(time) else { throw .badField("time") }
      pages.append(BusChange.Page(id: String(decoding: id, as: UTF8.self), lastUpdated: value))
    }
    return .changed(
      BusChange(
        origin: origin, epoch: epoch, sequence: sequence, clock: clock, workspace: workspace, pages: pages))
  }

  private static func token(_ tokens: inout ArraySlice<ArraySlice<UInt8>>, _ field: String)
    throws(BusMessageError) -> String
  {
    guard let token = tokens.popFirst() else { throw .missing(field) }
    guard isToken(token) else { throw .badField(field) }
    return String(decoding: token, as: UTF8.self)
  }

  private static func number(_ tokens: inout ArraySlice<ArraySlice<UInt8>>, _ field: String)
    throws(BusMessageError) -> UInt64
  {
    guard let token = tokens.popFirst() else { throw .missing(field) }
    guard let value = parseNumber(token) else { throw .badField(field) }
    return value
  }

  /// 1 to 64 of `A-Z a-z 0-9 - _ . :`.
  static func isToken(_ bytes: some Collection<UInt8>) -> Bool {
    guard (1...64).contains(bytes.count) else { return false }
    return bytes.allSatisfy { c in
      (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2D
        || c == 0x5F
        || c == 0x2E || c == 0x3A
    }
  }

  /// A decimal UInt64 without sign or leading zeros; nil for anything else (or an overflow).
  static func parseNumber(_ bytes: ArraySlice<UInt8>) -> UInt64? {
    guard !bytes.isEmpty, bytes.count <= 20 else { return nil }
    if bytes.count > 1, bytes.first == UInt8(ascii: "0") { return nil }
    var value: UInt64 = 0
    for c in bytes {
      guard c >= 0x30 && c <= 0x39 else { return nil }
      let (times10, o1) = value.multipliedReportingOverflow(by: 10)
      let (sum, o2) = times10.addingReportingOverflow(UInt64(c - 0x30))
      guard !o1, !o2 else { return nil }
      value = sum
    }
    return value
  }
}

/// A `changed` bus message: a committed batch's pages of one workspace.
public struct BusChange: Equatable, Sendable {
  public struct Page: Equatable, Sendable {
    public var id: String
    public var lastUpdated: UInt64
    public init(id: String, lastUpdated: UInt64) {
      self.id = id
      self.lastUpdated = lastUpdated
    }
  }

  /// The publishing broker's instance id.
  public var origin: String
  /// The store's epoch (a receiver with another epoch ignores the message).
  public var epoch: String
  /// The batch's sequence.
  public var sequence: UInt64
  /// The publishing broker's hybrid logical clock after the batch, as text (`MILLIS:COUNTER`; read by the
  /// receiver, which checks it).
  public var clock: String
  public var workspace: String
  public var pages: [Page]

  public init(
    origin: String, epoch: String, sequence: UInt64, clock: String, workspace: String, pages: [Page]
  ) {
    self.origin = origin
    self.epoch = epoch
    self.sequence = sequence
    self.clock = clock
    self.workspace = workspace
    self.pages = pages
  }

  /// The messages of a batch's `pages` of one workspace, each at most `maxBytes` (a page whose entry alone does
  /// not fit is impossible with ids of at most 64 bytes and `maxBytes` >= 1024, the configuration's floor).
  public static func messages(
    origin: String, epoch: String, sequence: UInt64, clock: String, workspace: String, pages: [Page],
    maxBytes: Int
  ) -> [[UInt8]] {
    var header: [UInt8] = Array(BusMessage.version.utf8)
    header.append(contentsOf: " changed ".utf8)
    BusChange(origin: origin, epoch: epoch, sequence: sequence, clock: clock, workspace: workspace, pages: [])
      .appendHeader(to: &header)
    var messages: [[UInt8]] = []
    var current = header
    var entry: [UInt8] = []
    for page in pages {
      entry.removeAll(keepingCapacity: true)
      append(page, to: &entry)
      if current.count > header.count, current.count + entry.count > maxBytes {
        messages.append(current)
        current = header
      }
      current.append(contentsOf: entry)
    }
    if current.count > header.count { messages.append(current) }
    return messages
  }

  func appendHeader(to bytes: inout [UInt8]) {
    bytes.append(contentsOf: origin.utf8)
    bytes.append(UInt8(ascii: " "))
    bytes.append(contentsOf: epoch.utf8)
    bytes.append(UInt8(ascii: " "))
    bytes.append(contentsOf: String(sequence).utf8)
    bytes.append(UInt8(ascii: " "))
    bytes.append(contentsOf: clock.utf8)
    bytes.append(UInt8(ascii: " "))
    bytes.append(contentsOf: workspace.utf8)
  }

  static func append(_ page: Page, to bytes: inout [UInt8]) {
    bytes.append(UInt8(ascii: " "))
    bytes.append(contentsOf: page.id.utf8)
    bytes.append(UInt8(ascii: "="))
    bytes.append(contentsOf: String(page.lastUpdated).utf8)
  }
}

/// Why a bus message was refused (counted in `pagesync_bus_messages_refused_total` and logged; never a crash).
public enum BusMessageError: Error, Equatable, Sendable, CustomStringConvertible {
  /// Longer than `[bus] message_bytes`.
  case tooLarge(Int, Int)
  /// Not this version's first token (another version of pagesync, or not a pagesync message at all).
  case otherVersion(String)
  /// A kind other than `changed` or `resync`.
  case unknownKind(String)
  /// A field that is not there.
  case missing(String)
  /// A field that is not well formed.
  case badField(String)
  /// Tokens after a complete `resync`.
  case trailing

  public var description: String {
    switch self {
    case .tooLarge(let size, let limit):
      "bus message of \(size) bytes, more than [bus] message_bytes (\(limit))"
    case .otherVersion(let start): "not a \(BusMessage.version) message (starts \"\(start)\")"
    case .unknownKind(let kind): "unknown bus message kind \"\(kind)\""
    case .missing(let field): "bus message without its \(field)"
    case .badField(let field): "bus message with a malformed \(field)"
    case .trailing: "bus message with extra fields"
    }
  }
}
