import StoreInterface

/// The one place where the store's SQL (written in the dialect SQLite and PostgreSQL share) is made
/// PostgreSQL's, once per statement text when it is prepared:
/// - positional parameters: SQLite's `?` (the next number) and `?NNN` become `$n`;
/// - `CAST(column AS BLOB)`, which SQLite uses to count a text's UTF-8 bytes with `length`, becomes
///   `convert_to(column, 'UTF8')` (`length` of a `bytea` counts bytes).
/// String literals and quoted identifiers are copied as they are.
public enum PostgresSQL {
  /// `sql` in PostgreSQL's spelling, and how many parameters it has (the highest `$n`).
  public static func translate(_ sql: String) -> (sql: String, parameters: Int) {
    var out: [UInt8] = []
    out.reserveCapacity(sql.utf8.count + 16)
    let bytes = Array(sql.utf8)
    var index = 0
    var highest = 0
    while index < bytes.count {
      let byte = bytes[index]
      switch byte {
      case UInt8(ascii: "'"), UInt8(ascii: "\""):
        // Copy up to the closing quote; a doubled quote inside is part of the literal.
        out.append(byte)
        index += 1
        while index < bytes.count {
          out.append(bytes[index])
          if bytes[index] == byte {
            if index + 1 < bytes.count && bytes[index + 1] == byte {
              out.append(byte)
              index += 2
              continue
            }
            index += 1
            break
          }
          index += 1
        }
      case UInt8(ascii: "?"):
        index += 1
        var number = 0
        var digits = 0
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
          number = number * 10 + Int(bytes[index] - UInt8(ascii: "0"))
          digits += 1
          index += 1
        }
        if digits == 0 { number = highest + 1 }
        highest = max(highest, number)
        out.append(UInt8(ascii: "$"))
        out.append(contentsOf: String(number).utf8)
      case UInt8(ascii: "C"), UInt8(ascii: "c"):
        if let (column, end) = castAsBlob(bytes, at: index) {
          out.append(contentsOf: "convert_to(".utf8)
          out.append(contentsOf: column)
          out.append(contentsOf: ", 'UTF8')".utf8)
          index = end
        } else {
          out.append(byte)
          index += 1
        }
      default:
        out.append(byte)
        index += 1
      }
    }
    return (String(decoding: out, as: UTF8.self), highest)
  }

  /// At `start`, `CAST(name AS BLOB)` (a column name, perhaps qualified): the name and the index after it.
  private static func castAsBlob(_ bytes: [UInt8], at start: Int) -> ([UInt8], Int)? {
    let prefix = Array("CAST(".utf8)
    guard start + prefix.count < bytes.count else { return nil }
    // Not the tail of a longer word.
    if start > 0, isWord(bytes[start - 1]) { return nil }
    for (offset, expected) in prefix.enumerated() where upper(bytes[start + offset]) != expected {
      return nil
    }
    var index = start + prefix.count
    let nameStart = index
    while index < bytes.count, isWord(bytes[index]) || bytes[index] == UInt8(ascii: ".") { index += 1 }
    guard index > nameStart else { return nil }
    let name = Array(bytes[nameStart..<index])
    let suffix = Array(" AS BLOB)".utf8)
    guard index + suffix.count <= bytes.count else { return nil }
    for (offset, expected) in suffix.enumerated() where upper(bytes[index + offset]) != expected {
      return nil
    }
    return (name, index + suffix.count)
  }

  private static func isWord(_ byte: UInt8) -> Bool {
    (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
      || (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z"))
      || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
  }

  private static func upper(_ byte: UInt8) -> UInt8 {
    byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z") ? byte - 32 : byte
  }
}
