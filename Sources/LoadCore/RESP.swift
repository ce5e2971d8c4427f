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

  private func number(_ line: ArraySlice<UInt8>) throws(RESPError) -> Int64 {
    let text = String(decoding: line, as: UTF8.self)
    guard let value = Int64(text) else { throw .badNumber(text) }
    return value
  }
}
