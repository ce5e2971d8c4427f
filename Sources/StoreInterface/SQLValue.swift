/// A value a store binds or reads: SQLite's five storage classes, which PostgreSQL's types map onto (`bigint`,
/// `integer`, `smallint`, `boolean` → integer; `double precision` → real; `text` → text; `bytea` → blob).
///
/// Text is UTF-8 and may hold NUL characters (SQLite keeps them; PostgreSQL's `text` refuses them); an empty
/// blob is a blob, not NULL.
public enum SQLValue: Hashable, Sendable {
  /// SQL NULL.
  case null
  /// A 64-bit signed integer.
  case integer(Int64)
  /// An IEEE 754 double.
  case real(Double)
  /// UTF-8 text, bound and read with its length.
  case text(String)
  /// Bytes.
  case blob([UInt8])
}

extension SQLValue: CustomStringConvertible {
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
