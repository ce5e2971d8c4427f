import FoundationEssentials
import StrictJSON
import StrictJSONTestKit

/// A value read only to be skipped: the strict reader accepts exactly the strict JSON texts.
struct Skipped: JSONReadable {
  init(reading reader: inout JSONReader) throws(JSONReadError) {
    try reader.skipValue()
  }
}

/// Any JSON value, decoded both ways (numbers as doubles, objects as dictionaries): `JSONDecoder` tries the
/// types in turn, as `AnyJSONValue` in JSONBodies does.
indirect enum AnyValue: Codable, JSONReadable {
  case null
  case bool(Bool)
  case number(Double)
  case string(String)
  case array([AnyValue])
  case object([String: AnyValue])

  init(from decoder: any Decoder) throws {
    let container = try decoder.singleValueContainer()
    if container.decodeNil() {
      self = .null
    } else if let flag = try? container.decode(Bool.self) {
      self = .bool(flag)
    } else if let number = try? container.decode(Double.self) {
      self = .number(number)
    } else if let text = try? container.decode(String.self) {
      self = .string(text)
    } else if let items = try? container.decode([AnyValue].self) {
      self = .array(items)
    } else {
      self = .object(try container.decode([String: AnyValue].self))
    }
  }

  init(reading reader: inout JSONReader) throws(JSONReadError) {
    switch try reader.peek() {
    case .null:
      _ = try reader.readNull()
      self = .null
    case .bool: self = .bool(try reader.readBool())
    case .number: self = .number(try reader.readDouble())
    case .string: self = .string(try reader.readString())
    case .array: self = .array(try [AnyValue](reading: &reader))
    case .object: self = .object(try [String: AnyValue](reading: &reader))
    }
  }

  func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    switch self {
    case .null: try container.encodeNil()
    case .bool(let flag): try container.encode(flag)
    case .number(let number): try container.encode(number)
    case .string(let text): try container.encode(text)
    case .array(let items): try container.encode(items)
    case .object(let members): try container.encode(members)
    }
  }
}

/// `{"v": V}`, decoded both ways: a required member of one type, as synthesized `Codable` reads it.
struct Box<V: Codable & JSONReadable>: Codable, JSONReadable {
  var v: V

  init(reading reader: inout JSONReader) throws(JSONReadError) {
    let start = reader.offset
    var field = JSONField<V>.absent
    var members = try reader.beginObject()
    while let key = try reader.nextKey(&members) {
      if key.matches("v") {
        try reader.read(&field, "v", as: V.self)
      } else {
        try reader.skipValue(of: key)
      }
    }
    v = try field.required("v", objectOffset: start) { offset in
      switch V.self {
      case is Bool.Type: .typeMismatch(expected: "Bool", found: .null, at: offset)
      case is [String: UInt64].Type, is [String: String].Type: .nullContainer(keyed: true, at: offset)
      default: .nullValue(expected: "\(V.self)", at: offset)
      }
    }
  }
}

/// `{"v": V?}`: an optional member.
struct OptionalBox<V: Codable & JSONReadable>: Codable, JSONReadable {
  var v: V?

  init(reading reader: inout JSONReader) throws(JSONReadError) {
    var field = JSONField<V>.absent
    var members = try reader.beginObject()
    while let key = try reader.nextKey(&members) {
      if key.matches("v") {
        try reader.read(&field, "v", as: V.self)
      } else {
        try reader.skipValue(of: key)
      }
    }
    v = try field.optional()
  }
}

func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

/// The strict reader's error for `text` read as a `T`, or nil if it reads.
func strictError<T: JSONReadable>(_ type: T.Type, _ text: [UInt8]) -> JSONReadError? {
  do throws(JSONReadError) {
    _ = try JSONReader.decode(type, from: text)
    return nil
  } catch {
    return error
  }
}
