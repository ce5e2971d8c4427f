import CTOML

/// A parsed TOML value, read out of toml++ (through CTOML) into Swift values: nothing of toml++ outlives the
/// parse.
struct TOMLNode {
  enum Value {
    case table([String: TOMLNode])
    case array([TOMLNode])
    case string(String)
    case integer(Int64)
    case float(Double)
    case boolean(Bool)
    /// A date, a time or a date-time: no configuration key takes one, so the value is not kept.
    case dateTime
  }

  var value: Value
  /// Where the value starts in the text (1-based).
  var line: Int

  var string: String? {
    if case .string(let string) = value { return string }
    return nil
  }
  var int: Int? {
    if case .integer(let integer) = value { return Int(exactly: integer) }
    return nil
  }
  var bool: Bool? {
    if case .boolean(let bool) = value { return bool }
    return nil
  }
  var array: [TOMLNode]? {
    if case .array(let array) = value { return array }
    return nil
  }
  var table: [String: TOMLNode]? {
    if case .table(let table) = value { return table }
    return nil
  }
}

/// A TOML syntax error as toml++ reports it.
struct TOMLSyntaxError: Error {
  var line: Int?
  var message: String
}

extension TOMLNode {
  /// Parses a whole document (toml++ through CTOML); the root table, or toml++'s error with its line.
  static func parse(_ text: String) throws(TOMLSyntaxError) -> [String: TOMLNode] {
    var text = text
    var document = text.withUTF8 { bytes in
      bytes.withMemoryRebound(to: CChar.self) { ctoml_parse($0.baseAddress, $0.count) }
    }
    defer { ctoml_free(&document) }
    guard let nodes = document.nodes else {
      let message = document.error.map { String(cString: $0) } ?? "cannot parse"
      throw TOMLSyntaxError(line: document.error_line > 0 ? Int(document.error_line) : nil, message: message)
    }
    let flat = UnsafeBufferPointer(start: nodes, count: document.node_count)
    var index = 0
    let root = build(flat, &index)
    return root.table ?? [:]
  }

  /// The node at `index` and its subtree (pre-order); leaves `index` after it.
  private static func build(_ nodes: UnsafeBufferPointer<ctoml_node>, _ index: inout Int) -> TOMLNode {
    let node = nodes[index]
    index += 1
    let value: Value
    switch node.kind {
    case CTOML_TABLE:
      var table: [String: TOMLNode] = [:]
      table.reserveCapacity(node.child_count)
      for _ in 0..<node.child_count {
        let key = text(nodes[index].key, nodes[index].key_length)
        table[key] = build(nodes, &index)
      }
      value = .table(table)
    case CTOML_ARRAY:
      var array: [TOMLNode] = []
      array.reserveCapacity(node.child_count)
      for _ in 0..<node.child_count { array.append(build(nodes, &index)) }
      value = .array(array)
    case CTOML_STRING: value = .string(text(node.string, node.string_length))
    case CTOML_INTEGER: value = .integer(node.integer)
    case CTOML_FLOAT: value = .float(node.floating)
    case CTOML_BOOLEAN: value = .boolean(node.integer != 0)
    default: value = .dateTime
    }
    return TOMLNode(value: value, line: Int(node.line))
  }

  private static func text(_ bytes: UnsafePointer<CChar>?, _ count: Int) -> String {
    guard let bytes else { return "" }
    return bytes.withMemoryRebound(to: UInt8.self, capacity: count) {
      String(decoding: UnsafeBufferPointer(start: $0, count: count), as: UTF8.self)
    }
  }
}
