/// One event of a Server-Sent Events stream, as the HTML standard dispatches it.
public struct ServerSentEvent: Equatable, Sendable {
  /// The `event` field, or `message` when the event had none.
  public var type: String
  /// The `data` lines' values joined with `\n`.
  public var data: String
  /// The stream's last event ID when the event was dispatched (the standard's `lastEventId`): the latest `id`
  /// field, of this event or of an earlier one (even one without data). What a reconnect sends as
  /// `Last-Event-ID`.
  public var lastEventID: String
  /// The `id` field among this event's own lines; nil when it had none (a server may send some events
  /// unnumbered, such as a snapshot of its state).
  public var id: String?

  public init(type: String, data: String, lastEventID: String, id: String?) {
    self.type = type
    self.data = data
    self.lastEventID = lastEventID
    self.id = id
  }
}

/// A Server-Sent Events parser that follows the HTML standard's "Interpreting an event stream"
/// (https://html.spec.whatwg.org/multipage/server-sent-events.html#event-stream-interpretation), over bytes
/// split anywhere. I/O-free: bytes in, events out.
///
/// - One leading byte order mark (EF BB BF) is dropped; bytes are UTF-8, an invalid sequence reads as U+FFFD.
/// - Lines end with CRLF, LF or CR (a CR at the end of one piece and an LF at the start of the next are one line
///   end).
/// - A line starting with `:` is a comment. `name: value` sets a field (one space after the colon is dropped);
///   a line without a colon is a field with an empty value. Fields: `event` (the type), `data` (appended, lines
///   joined with `\n`), `id` (ignored if it holds NUL; an empty one resets the last event ID), `retry` (ASCII
///   digits only, else ignored: the reconnection time in ms); any other name is ignored.
/// - An event is dispatched only at a blank line. Without data nothing is dispatched, but its `id` still becomes
///   the last event ID. What follows the last blank line when the stream ends is dropped.
///
/// Bound: a line, or an event's data, over `maxEventBytes` throws `eventTooLarge` (the parser is then finished);
/// nothing else grows with the input.
public struct ServerSentEventParser: Sendable {
  /// Why a stream could not be parsed.
  public enum ParseError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A line or an event's data exceeds the limit.
    case eventTooLarge(limit: Int)

    public var description: String {
      switch self {
      case .eventTooLarge(let limit): "an event of the stream exceeds \(limit) bytes"
      }
    }
  }

  /// The most bytes a line or an event's data may hold.
  public let maxEventBytes: Int
  /// The last event ID: set at each dispatch from the latest `id` field. Starts as given (a reconnecting client
  /// keeps it from the stream before).
  public private(set) var lastEventID: String
  /// The reconnection time the latest valid `retry` field gave, in milliseconds; nil before any.
  public private(set) var reconnectionTime: UInt64?

  /// The current line, without its end.
  private var line: [UInt8] = []
  /// The previous piece ended with CR: an LF that starts this one ends no line of its own.
  private var afterCR = false
  /// The first bytes of the stream while they may still be a byte order mark.
  private var start: [UInt8]? = []
  private var data: [UInt8] = []
  private var eventType: [UInt8] = []
  /// The standard's last event ID buffer (becomes `lastEventID` at the next dispatch).
  private var idBuffer: String
  /// The `id` field of the event being read, if it had one.
  private var ownID: String?
  private var failure: ParseError?

  public init(lastEventID: String = "", maxEventBytes: Int = 1 << 20) {
    precondition(maxEventBytes > 0, "maxEventBytes must be positive")
    self.lastEventID = lastEventID
    idBuffer = lastEventID
    self.maxEventBytes = maxEventBytes
  }

  /// Parses the next piece of the stream; returns the events it completed, in order.
  public mutating func parse(_ bytes: UnsafeRawBufferPointer) throws(ParseError) -> [ServerSentEvent] {
    var events: [ServerSentEvent] = []
    try parse(bytes, into: &events)
    return events
  }

  /// Parses the next piece of the stream, appending the events it completes to `events`: those completed
  /// before a line that is too large are there when it throws.
  public mutating func parse(_ bytes: UnsafeRawBufferPointer, into events: inout [ServerSentEvent])
    throws(ParseError)
  {
    if let failure { throw failure }
    var rest = bytes[...]
    if var held = start {
      // Up to three bytes are held until they are known to be, or not to be, a byte order mark.
      let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
      while held.count < 3, let byte = rest.first, byte == bom[held.count] {
        held.append(byte)
        rest = rest.dropFirst()
      }
      if held.count == 3 {
        start = nil
      } else if rest.isEmpty {
        start = held
        return
      } else {
        // Not a byte order mark: what was held is the stream's first bytes.
        start = nil
        try feed(held[...], into: &events)
      }
    }
    try feed(rest, into: &events)
  }

  /// Parses the next piece of the stream (see `parse(_:)` over raw bytes).
  public mutating func parse(_ bytes: some Collection<UInt8>) throws(ParseError) -> [ServerSentEvent] {
    let copy = Array(bytes)
    var result: Result<[ServerSentEvent], ParseError> = .success([])
    copy.withUnsafeBytes { raw in
      result = Result { () throws(ParseError) in try parse(raw) }
    }
    return try result.get()
  }

  /// The stream ended: what is left of an event without its blank line is dropped, as the standard says. The
  /// parser can take a new stream afterwards (a reconnection), keeping `lastEventID` and `reconnectionTime`.
  public mutating func reset() {
    line = []
    afterCR = false
    start = []
    data = []
    eventType = []
    idBuffer = lastEventID
    ownID = nil
    failure = nil
  }

  // MARK: Lines

  private mutating func feed<C: Collection<UInt8>>(_ bytes: C, into events: inout [ServerSentEvent])
    throws(ParseError)
  {
    var index = bytes.startIndex
    if afterCR, index < bytes.endIndex {
      afterCR = false
      if bytes[index] == 0x0A { index = bytes.index(after: index) }
    }
    while index < bytes.endIndex {
      guard let end = bytes[index...].firstIndex(where: { $0 == 0x0A || $0 == 0x0D }) else {
        try take(bytes[index...])
        return
      }
      try take(bytes[index..<end])
      if let event = try endLine() { events.append(event) }
      index = bytes.index(after: end)
      if bytes[end] == 0x0D {
        if index == bytes.endIndex {
          afterCR = true
        } else if bytes[index] == 0x0A {
          index = bytes.index(after: index)
        }
      }
    }
  }

  private mutating func take<C: Collection<UInt8>>(_ piece: C) throws(ParseError) {
    guard !piece.isEmpty else { return }
    guard line.count + piece.count <= maxEventBytes else { throw fail() }
    line.append(contentsOf: piece)
  }

  private mutating func fail() -> ParseError {
    let error = ParseError.eventTooLarge(limit: maxEventBytes)
    failure = error
    return error
  }

  /// Processes the complete line in `line`; returns the event a blank line dispatched.
  private mutating func endLine() throws(ParseError) -> ServerSentEvent? {
    defer { line.removeAll(keepingCapacity: true) }
    if line.isEmpty { return dispatch() }
    if line[0] == UInt8(ascii: ":") { return nil }
    let name: ArraySlice<UInt8>
    var value: ArraySlice<UInt8>
    if let colon = line.firstIndex(of: UInt8(ascii: ":")) {
      name = line[..<colon]
      value = line[(colon + 1)...]
      if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
    } else {
      name = line[...]
      value = []
    }
    switch String(decoding: name, as: UTF8.self) {
    case "event":
      eventType = Array(value)
    case "data":
      guard data.count + value.count + 1 <= maxEventBytes else { throw fail() }
      data.append(contentsOf: value)
      data.append(0x0A)
    case "id":
      if !value.contains(0) {
        idBuffer = String(decoding: value, as: UTF8.self)
        ownID = idBuffer
      }
    case "retry":
      if !value.isEmpty, value.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
        // Base ten, however long; a number past UInt64 is as good as forever.
        var milliseconds: UInt64 = 0
        for digit in value {
          let (times10, overflow1) = milliseconds.multipliedReportingOverflow(by: 10)
          let (sum, overflow2) = times10.addingReportingOverflow(UInt64(digit - UInt8(ascii: "0")))
          if overflow1 || overflow2 {
            milliseconds = .max
            break
          }
          milliseconds = sum
        }
        reconnectionTime = milliseconds
      }
    default:
      break
    }
    return nil
  }

  private mutating func dispatch() -> ServerSentEvent? {
    lastEventID = idBuffer
    defer {
      data.removeAll(keepingCapacity: true)
      eventType.removeAll(keepingCapacity: true)
      ownID = nil
    }
    guard !data.isEmpty else { return nil }
    data.removeLast()  // the LF after the last data line
    return ServerSentEvent(
      type: eventType.isEmpty ? "message" : String(decoding: eventType, as: UTF8.self),
      data: String(decoding: data, as: UTF8.self), lastEventID: lastEventID, id: ownID)
  }
}
