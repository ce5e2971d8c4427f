import CLibPQ
import StoreInterface

/// A statement of one `PostgresConnection`: prepared on its first run in each session, run whole by the first
/// `step` after `bind` (`PQexecPrepared`: the rows come back at once), then stepped through in memory.
///
/// Threading: like its connection, one thread at a time.
public final class PostgresStatement: StoreStatement {
  private unowned let connection: PostgresConnection
  /// The SQL as the store wrote it (the connection's cache key).
  public let sql: String
  /// The SQL as PostgreSQL reads it.
  let translated: String
  let parameterCount: Int
  private var name: String?
  private var preparedSession = 0
  private var values: [SQLValue] = []
  private var result: OpaquePointer?
  private var rowCount = 0
  private var row = -1
  private var ran = false
  var isIterating = false

  init(connection: PostgresConnection, sql: String) {
    self.connection = connection
    self.sql = sql
    (translated, parameterCount) = PostgresSQL.translate(sql)
  }

  deinit {
    PQclear(result)
  }

  public func bind(_ values: [SQLValue]) throws {
    reset()
    guard values.count == parameterCount else {
      throw PostgresError(
        sqlState: "",
        message: "wrong number of bindings: \(values.count), the statement has \(parameterCount) parameters",
        sql: translated)
    }
    self.values = values
  }

  public func bind(text: String) throws { try bind([.text(text)]) }

  public func reset() {
    PQclear(result)
    result = nil
    rowCount = 0
    row = -1
    ran = false
  }

  public func step() throws -> Bool {
    if !ran { try run() }
    row += 1
    return row < rowCount
  }

  public func eachRow(_ body: (any StoreStatement) throws -> Void) throws {
    isIterating = true
    defer {
      isIterating = false
      reset()
    }
    while try step() { try body(self) }
  }

  private func run() throws {
    let handle = try connection.handle(for: translated)
    if name == nil || preparedSession != connection.session {
      let name = connection.nextStatementName()
      let prepared = PQprepare(handle, name, translated, 0, nil)
      defer { PQclear(prepared) }
      guard PQresultStatus(prepared) == PGRES_COMMAND_OK else {
        throw connection.error(of: prepared, sql: translated)
      }
      self.name = name
      preparedSession = connection.session
    }
    // Every value's bytes in one buffer, each NUL-terminated (libpq reads text-format values up to the NUL).
    var buffer: [UInt8] = []
    var offsets: [Int] = []
    var lengths: [Int32] = []
    var formats: [Int32] = []
    var isNull: [Bool] = []
    for value in values {
      offsets.append(buffer.count)
      switch value {
      case .null:
        isNull.append(true)
        lengths.append(0)
        formats.append(0)
        continue
      case .integer(let number):
        buffer.append(contentsOf: String(number).utf8)
        formats.append(0)
      case .real(let number):
        buffer.append(contentsOf: Self.text(of: number).utf8)
        formats.append(0)
      case .text(let text):
        buffer.append(contentsOf: text.utf8)
        formats.append(1)
      case .blob(let bytes):
        buffer.append(contentsOf: bytes)
        formats.append(1)
      }
      isNull.append(false)
      lengths.append(Int32(buffer.count - offsets[offsets.count - 1]))
      buffer.append(0)
    }
    let result = buffer.withUnsafeBufferPointer { bytes -> OpaquePointer? in
      let base = bytes.baseAddress.map { UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self) }
      var pointers: [UnsafePointer<CChar>?] = offsets.indices.map { index in
        isNull[index] ? nil : base.map { $0 + offsets[index] }
      }
      return pointers.withUnsafeMutableBufferPointer { pointers in
        PQexecPrepared(handle, name, Int32(values.count), pointers.baseAddress, lengths, formats, 0)
      }
    }
    let status = PQresultStatus(result)
    guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else {
      defer { PQclear(result) }
      throw connection.error(of: result, sql: translated)
    }
    if let result { connection.count(result) }
    self.result = result
    rowCount = status == PGRES_TUPLES_OK ? Int(PQntuples(result)) : 0
    row = -1
    ran = true
  }

  /// A double as PostgreSQL's `float8in` reads it back exactly (Swift's shortest round-trip form).
  private static func text(of number: Double) -> String {
    if number.isNaN { return "NaN" }
    if number.isInfinite { return number < 0 ? "-Infinity" : "Infinity" }
    return "\(number)"
  }

  // MARK: Columns

  var columnCount: Int { result.map { Int(PQnfields($0)) } ?? 0 }

  private func bytes(_ index: Int) -> UnsafeBufferPointer<UInt8>? {
    guard let result, row >= 0, row < rowCount, PQgetisnull(result, Int32(row), Int32(index)) == 0 else {
      return nil
    }
    let pointer = PQgetvalue(result, Int32(row), Int32(index))
    let count = Int(PQgetlength(result, Int32(row), Int32(index)))
    return pointer.map {
      UnsafeBufferPointer(start: UnsafeRawPointer($0).assumingMemoryBound(to: UInt8.self), count: count)
    }
  }

  private func type(_ index: Int) -> UInt32 { result.map { UInt32(PQftype($0, Int32(index))) } ?? 0 }

  public func column(_ index: Int) -> SQLValue {
    guard let bytes = bytes(index) else { return .null }
    switch type(index) {
    case 16: return .integer(bytes.first == UInt8(ascii: "t") ? 1 : 0)  // boolean
    case 20, 21, 23, 26, 28, 5069: return .integer(Self.integer(bytes))  // int8, int2, int4, oid, xid, xid8
    case 700, 701: return .real(Double(String(decoding: bytes, as: UTF8.self)) ?? 0)
    case 1700:  // numeric: sums of bigints
      let text = String(decoding: bytes, as: UTF8.self)
      if let value = Int64(text) { return .integer(value) }
      return .real(Double(text) ?? 0)
    case 17: return .blob(Self.bytea(bytes))
    default: return .text(String(decoding: bytes, as: UTF8.self))
    }
  }

  public func int64(_ index: Int) -> Int64 {
    switch column(index) {
    case .integer(let value): value
    case .real(let value): Int64(value)
    case .text(let text): Int64(text) ?? 0
    default: 0
    }
  }

  public func double(_ index: Int) -> Double {
    switch column(index) {
    case .integer(let value): Double(value)
    case .real(let value): value
    case .text(let text): Double(text) ?? 0
    default: 0
    }
  }

  public func string(_ index: Int) -> String? {
    bytes(index).map { String(decoding: $0, as: UTF8.self) }
  }

  public func blob(_ index: Int) -> [UInt8]? {
    guard let bytes = bytes(index) else { return nil }
    return type(index) == 17 ? Self.bytea(bytes) : Array(bytes)
  }

  public func isNull(_ index: Int) -> Bool { bytes(index) == nil }

  public func withText<R>(_ index: Int, _ body: (UnsafeBufferPointer<UInt8>) throws -> R) rethrows -> R? {
    guard let bytes = bytes(index) else { return nil }
    return try body(bytes)
  }

  private static func integer(_ bytes: UnsafeBufferPointer<UInt8>) -> Int64 {
    var value: Int64 = 0
    var negative = false
    for byte in bytes {
      if byte == UInt8(ascii: "-") {
        negative = true
        continue
      }
      value = value &* 10 &+ Int64(byte &- UInt8(ascii: "0"))
    }
    return negative ? -value : value
  }

  /// `bytea`'s text output (hex: `\x` then two digits a byte) as bytes.
  private static func bytea(_ bytes: UnsafeBufferPointer<UInt8>) -> [UInt8] {
    guard bytes.count >= 2, bytes[0] == UInt8(ascii: "\\"), bytes[1] == UInt8(ascii: "x") else {
      return Array(bytes)
    }
    func nibble(_ byte: UInt8) -> UInt8 {
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
      case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
      case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
      default: 0
      }
    }
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count - 2) / 2)
    var index = 2
    while index + 1 < bytes.count {
      out.append(nibble(bytes[index]) << 4 | nibble(bytes[index + 1]))
      index += 2
    }
    return out
  }
}
