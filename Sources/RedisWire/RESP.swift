/// One value of the Redis serialization protocol (RESP2): what a Redis server answers and pushes.
public indirect enum RESPValue: Equatable, Sendable {
  /// `+OK`
  case simple(String)
  /// `-ERR ...`
  case error(String)
  /// `:42`
  case integer(Int64)
  /// `$5\r\nhello`; nil is the null bulk string `$-1`.
  case bulk([UInt8]?)
  /// `*2\r\n...`; nil is the null array `*-1`.
  case array([RESPValue]?)
}

/// Why bytes from a Redis server could not be decoded.
public enum RESPError: Error, Equatable, Sendable, CustomStringConvertible {
  /// A type byte that is not one of `+ - : $ *`.
  case unknownType(UInt8)
  /// A length or integer that is not a number, or out of range.
  case badNumber(String)
  /// A bulk string not followed by CRLF.
  case missingTerminator

  public var description: String {
    switch self {
    case .unknownType(let byte): "RESP: unknown type byte \(byte)"
    case .badNumber(let text): "RESP: bad number \"\(text)\""
    case .missingTerminator: "RESP: bulk string without CRLF"
    }
  }
}

/// Encodes commands as RESP arrays of bulk strings, the form every Redis command takes.
public enum RESPEncoder {
  /// `command` (name first) as the bytes to send.
  public static func command(_ parts: [String]) -> [UInt8] {
    var bytes: [UInt8] = []
    append(parts, to: &bytes)
    return bytes
  }

  /// Appends `command` to `bytes` (for pipelining several into one write).
  public static func append(_ parts: [String], to bytes: inout [UInt8]) {
    bytes.append(UInt8(ascii: "*"))
    bytes.append(contentsOf: String(parts.count).utf8)
    bytes.append(contentsOf: [13, 10])
    for part in parts {
      bytes.append(UInt8(ascii: "$"))
      bytes.append(contentsOf: String(part.utf8.count).utf8)
      bytes.append(contentsOf: [13, 10])
      bytes.append(contentsOf: part.utf8)
      bytes.append(contentsOf: [13, 10])
    }
  }
}

/// An incremental RESP decoder: feed bytes as they arrive, take complete values out with `next()`.
///
/// A value split across reads at any byte is held until complete; nothing is consumed from a partial value.
public struct RESPDecoder: Sendable {
  private var buffer: [UInt8] = []
  private var head = 0
  /// The largest bulk string or array accepted (a bound on what a misbehaving peer can make us hold).
  public let maxLength: Int

  public init(maxLength: Int = 64 << 20) { self.maxLength = maxLength }

  /// Bytes received but not yet returned as values.
  public var bufferedBytes: Int { buffer.count - head }

  public mutating func feed(_ bytes: UnsafeRawBufferPointer) {
    compactIfNeeded()
    buffer.append(contentsOf: bytes)
  }

  public mutating func feed(_ bytes: [UInt8]) {
    compactIfNeeded()
    buffer.append(contentsOf: bytes)
  }

  /// The next complete value, nil if more bytes are needed.
  public mutating func next() throws(RESPError) -> RESPValue? {
    var index = head
    guard let value = try parse(at: &index) else { return nil }
    head = index
    return value
  }

  /// As `next()`, but a pub/sub message push (`*3 $7 message $N CHANNEL $M PAYLOAD`) is handed to `message` as
  /// its channel's and payload's bytes (valid during the call) instead of being returned as a value. A subscriber
  /// of a fan-out run reads hundreds of thousands of them a second, and building a value for each (an array of
  /// three byte arrays in indirect enums) cost the harness more than the rest of its work on the message.
  public mutating func next(
    message: (_ channel: UnsafeRawBufferPointer, _ payload: UnsafeRawBufferPointer) -> Void
  ) throws(RESPError) -> RESPValue? {
    while true {
      switch try scanMessage(at: head) {
      case .incomplete: return nil
      case .notMessage: return try next()
      case .message(let channel, let payload, let end):
        buffer.withUnsafeBytes { bytes in
          message(
            UnsafeRawBufferPointer(rebasing: bytes[channel]), UnsafeRawBufferPointer(rebasing: bytes[payload])
          )
        }
        head = end
      }
    }
  }

  private enum MessageScan {
    case notMessage, incomplete
    case message(channel: Range<Int>, payload: Range<Int>, end: Int)
  }

  private static let messagePrefix = Array("*3\r\n$7\r\nmessage\r\n".utf8)

  /// Whether a complete message push starts at `start`; one that has not fully arrived is `incomplete`, and
  /// anything else (or too few bytes to tell) `notMessage`, for `parse`.
  private func scanMessage(at start: Int) throws(RESPError) -> MessageScan {
    let prefix = Self.messagePrefix
    guard buffer.count - start >= prefix.count else { return .notMessage }
    for offset in 0..<prefix.count where buffer[start + offset] != prefix[offset] { return .notMessage }
    var index = start + prefix.count
    guard let channel = try scanBulk(at: &index), let payload = try scanBulk(at: &index) else {
      return .incomplete
    }
    return .message(channel: channel, payload: payload, end: index)
  }

  /// The bytes of a non-null bulk string at `index`, advancing past it; nil while it has not fully arrived.
  private func scanBulk(at index: inout Int) throws(RESPError) -> Range<Int>? {
    guard index < buffer.count else { return nil }
    guard buffer[index] == UInt8(ascii: "$") else { throw .unknownType(buffer[index]) }
    index += 1
    guard let line = readLine(at: &index) else { return nil }
    let length = try number(line)
    guard length >= 0, length <= maxLength else { throw .badNumber(String(length)) }
    let count = Int(length)
    guard buffer.count - index >= count + 2 else { return nil }
    guard buffer[index + count] == 13, buffer[index + count + 1] == 10 else { throw .missingTerminator }
    defer { index += count + 2 }
    return index..<index + count
  }

  private mutating func compactIfNeeded() {
    if head > 0, head * 2 >= buffer.count {
      buffer.removeFirst(head)
      head = 0
    }
  }

  /// Parses one value at `index`, advancing it past the value; nil (index unspecified) when incomplete.
  private func parse(at index: inout Int) throws(RESPError) -> RESPValue? {
    guard index < buffer.count else { return nil }
    let type = buffer[index]
    index += 1
    guard let line = readLine(at: &index) else { return nil }
    switch type {
    case UInt8(ascii: "+"): return .simple(String(decoding: line, as: UTF8.self))
    case UInt8(ascii: "-"): return .error(String(decoding: line, as: UTF8.self))
    case UInt8(ascii: ":"): return .integer(try number(line))
    case UInt8(ascii: "$"):
      let length = try number(line)
      if length == -1 { return .bulk(nil) }
      guard length >= 0, length <= maxLength else { throw .badNumber(String(length)) }
      let count = Int(length)
      guard buffer.count - index >= count + 2 else { return nil }
      let bytes = Array(buffer[index..<index + count])
      guard buffer[index + count] == 13, buffer[index + count + 1] == 10 else { throw .missingTerminator }
      index += count + 2
      return .bulk(bytes)
    case UInt8(ascii: "*"):
      let length = try number(line)
      if length == -1 { return .array(nil) }
      guard length >= 0, length <= maxLength else { throw .badNumber(String(length)) }
      var elements: [RESPValue] = []
      elements.reserveCapacity(Int(length))
      for _ in 0..<length {
        guard let element = try parse(at: &index) else { return nil }
        elements.append(element)
      }
      return .array(elements)
    default: throw .unknownType(type)
    }
  }

  /// The bytes up to the next CRLF, advancing past it; nil when no CRLF has arrived yet.
  private func readLine(at index: inout Int) -> ArraySlice<UInt8>? {
    var scan = index
    while scan + 1 < buffer.count {
      if buffer[scan] == 13, buffer[scan + 1] == 10 {
        let line = buffer[index..<scan]
        index = scan + 2
        return line
      }
      scan += 1
    }
    return nil
  }

  /// A RESP integer (`-` and decimal digits), read from its bytes: a String per length line cost more than the
  /// rest of a message's decoding.
  private func number(_ line: ArraySlice<UInt8>) throws(RESPError) -> Int64 {
    var index = line.startIndex
    let negative = index < line.endIndex && line[index] == UInt8(ascii: "-")
    if negative { index += 1 }
    guard index < line.endIndex else { throw .badNumber(String(decoding: line, as: UTF8.self)) }
    var magnitude: UInt64 = 0
    while index < line.endIndex {
      let digit = line[index] &- UInt8(ascii: "0")
      let (times10, overflow) = magnitude.multipliedReportingOverflow(by: 10)
      let (sum, carry) = times10.addingReportingOverflow(UInt64(digit))
      guard digit < 10, !overflow, !carry, sum <= UInt64(Int64.max) + (negative ? 1 : 0) else {
        throw .badNumber(String(decoding: line, as: UTF8.self))
      }
      magnitude = sum
      index += 1
    }
    return negative ? Int64(truncatingIfNeeded: 0 &- magnitude) : Int64(magnitude)
  }
}
