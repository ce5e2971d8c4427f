/// A value SQLite stores: one of its five storage classes.
///
/// Text is UTF-8 and may hold NUL characters; an empty blob is a blob, not NULL.
public enum SQLiteValue: Hashable, Sendable {
  /// SQL NULL.
  case null
  /// A 64-bit signed integer.
  case integer(Int64)
  /// An IEEE 754 double.
  case real(Double)
  /// UTF-8 text, bound and read with its length (embedded NULs survive).
  case text(String)
  /// Bytes.
  case blob([UInt8])
}

extension SQLiteValue: CustomStringConvertible {
  public var description: String {
    switch self {
    case .null: "NULL"
    case .integer(let value): "\(value)"
    case .real(let value): "\(value)"
    case .text(let value): "'\(value)'"
    case .blob(let bytes): "blob(\(bytes.count) bytes)"
    }
  }
}
