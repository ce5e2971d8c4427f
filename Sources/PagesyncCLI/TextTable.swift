import PagesyncClient

/// Columns of text aligned for a terminal: a header line and one line per row, columns two spaces apart, the
/// last one not padded (no trailing spaces). Cells are put on one line (control characters escaped) so a
/// newline in a block's text cannot break the layout. Widths count characters (grapheme clusters).
struct TextTable {
  var header: [String]
  var rows: [[String]] = []

  init(_ header: [String]) { self.header = header }

  mutating func append(_ row: [String]) {
    precondition(
      row.count == header.count, "a row of \(row.count) cells in a table of \(header.count) columns")
    rows.append(row.map { $0.replacingControlCharacters() })
  }

  /// The table, lines joined by `\n`, without a final newline.
  var text: String {
    var widths = header.map(\.count)
    for row in rows {
      for (column, cell) in row.enumerated() { widths[column] = max(widths[column], cell.count) }
    }
    return ([header] + rows).map { cells in
      var line = ""
      for (column, cell) in cells.enumerated() {
        if column == cells.count - 1 {
          line += cell
        } else {
          line += cell + String(repeating: " ", count: widths[column] - cell.count + 2)
        }
      }
      while line.last == " " { line.removeLast() }
      return line
    }.joined(separator: "\n")
  }
}

/// `key: value` lines with the values aligned, for `status` and the head of `show`.
struct KeyValueLines {
  private var pairs: [(key: String, value: String)] = []

  mutating func append(_ key: String, _ value: String) {
    pairs.append((key, value.replacingControlCharacters()))
  }

  var text: String {
    let width = pairs.map(\.key.count).max() ?? 0
    return pairs.map { pair in
      pair.key + ":" + String(repeating: " ", count: width - pair.key.count + 1) + pair.value
    }.joined(separator: "\n")
  }
}
