import StrictJSON

extension ReportValue: JSONReadable {
  /// Reads a saved report (`--json`'s output) back: objects keep their field order, whole numbers come back as
  /// `int`, others as `number`; a `null` member is left out (reports write none).
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    switch try reader.peek() {
    case .object:
      var members = try reader.beginObject()
      var fields: [(String, ReportValue)] = []
      while let key = try reader.nextKey(&members) {
        let name = key.string
        if try reader.readNull() { continue }
        fields.append((name, try ReportValue(reading: &reader)))
      }
      self = .object(fields)
    case .array:
      var elements = try reader.beginArray()
      var values: [ReportValue] = []
      while try reader.nextElement(&elements) { values.append(try ReportValue(reading: &reader)) }
      self = .array(values)
    case .string: self = .string(try reader.readString())
    case .bool: self = .bool(try reader.readBool())
    case .number:
      let value = try reader.readDouble()
      self = value == value.rounded() && abs(value) < 9e15 ? .int(Int(value)) : .number(value)
    case .null:
      _ = try reader.readNull()
      self = .string("")
    }
  }

  /// A report from its JSON text.
  public static func parse(json text: String) throws(JSONReadError) -> ReportValue {
    try JSONReader.decode(ReportValue.self, from: text)
  }
}
