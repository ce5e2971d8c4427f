import StrictJSON

// The strict readers of a batch and what it holds (StrictJSON): the broker decodes every `POST /v1/batch` with
// them; `JSONDecoder` cost some 43,000 instructions a mutation. Each reads the same value as the type's
// `Decodable` code from every text that code decodes, refuses what it refuses, and says the same thing about a
// value that does not fit (a missing field, a type mismatch, an invalid id), with the same path: `Codable`
// stays for everything else, and MutationBatchStrictJSONTests (DecodingAgreement) holds the two together.
// Stricter than `JSONDecoder` where docs/protocol.md says ("Strict JSON").

extension EntityID: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    let offset = reader.offset
    self = try reader.readString { bytes throws(JSONReadError) in
      do throws(SyncModelError) {
        return try EntityID(validatingUTF8: bytes)
      } catch {
        throw .invalidValue(error.description, at: offset)
      }
    }
  }
}

extension EntityID: JSONKeyReadable {
  /// A dictionary keyed by ids validates its keys (`Could not convert key to type EntityID`).
  public init?(jsonKey: String) {
    guard let id = try? EntityID(validating: jsonKey) else { return nil }
    self = id
  }
}

extension HLCTimestamp: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    let offset = reader.offset
    self = try reader.readString { bytes throws(JSONReadError) in
      do throws(SyncModelError) {
        return try HLCTimestamp(parsingUTF8: bytes)
      } catch {
        throw .invalidValue(error.description, at: offset)
      }
    }
  }
}

extension PropertyValue: JSONReadable {
  /// As `init(from:)`: a boolean, a number, a string or a list of strings; anything else (`null`, an object, a
  /// list holding another value) is the one message that lists them. A number beyond a double's range is
  /// refused with its own message (JSONDecoder's is the list's).
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    let offset = reader.offset
    switch try reader.peek() {
    case .bool: self = .bool(try reader.readBool())
    case .number: self = .number(try reader.readDouble())
    case .string: self = .string(try reader.readString())
    case .array:
      do {
        self = .list(try [String](reading: &reader))
      } catch {
        if error.isSyntaxError { throw error }
        throw Self.notAValue(at: offset)
      }
    case .object, .null: throw Self.notAValue(at: offset)
    }
  }

  static func notAValue(at offset: Int) -> JSONReadError {
    .invalidValue("a property value is a string, a number, a boolean or a list of strings", at: offset)
  }
}

/// How `JSONDecoder` words `null` for a required member of each type (what `JSONField.required` throws).
enum NullFor {
  static func string(_ offset: Int) -> JSONReadError { .nullValue(expected: "String", at: offset) }
  static func uint64(_ offset: Int) -> JSONReadError { .nullValue(expected: "UInt64", at: offset) }
  static func bool(_ offset: Int) -> JSONReadError {
    .typeMismatch(expected: "Bool", found: .null, at: offset)
  }
  static func object(_ offset: Int) -> JSONReadError { .nullContainer(keyed: true, at: offset) }
  static func array(_ offset: Int) -> JSONReadError { .nullContainer(keyed: false, at: offset) }
  static func propertyValue(_ offset: Int) -> JSONReadError { PropertyValue.notAValue(at: offset) }
}

extension ViewFilter: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    let start = reader.offset
    var property = JSONField<String>.absent
    var value = JSONField<PropertyValue>.absent
    var members = try reader.beginObject()
    while let key = try reader.nextKey(&members) {
      if key.matches("property") {
        try reader.read(&property, "property", as: String.self)
      } else if key.matches("value") {
        try reader.read(&value, "value", as: PropertyValue.self)
      } else {
        try reader.skipValue(of: key)
      }
    }
    self.init(
      property: try property.required("property", objectOffset: start, ifNull: NullFor.string),
      value: try value.required("value", objectOffset: start, ifNull: NullFor.propertyValue))
  }
}

extension ViewSort: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    let start = reader.offset
    var property = JSONField<String>.absent
    var descending = JSONField<Bool>.absent
    var members = try reader.beginObject()
    while let key = try reader.nextKey(&members) {
      if key.matches("property") {
        try reader.read(&property, "property", as: String.self)
      } else if key.matches("descending") {
        try reader.read(&descending, "descending", as: Bool.self)
      } else {
        try reader.skipValue(of: key)
      }
    }
    self.init(
      property: try property.required("property", objectOffset: start, ifNull: NullFor.string),
      descending: try descending.required("descending", objectOffset: start, ifNull: NullFor.bool))
  }
}

/// A mutation's `type`, matched from its bytes (no string made for a known one).
private enum ActionName: JSONReadable {
  case createPage, createDatabase, createRow, setTitle, setProperty, addBlock, editBlock, moveBlock,
    deleteBlock
  case movePage, deletePage, setView, spliceText, markText
  case unknown(String)

  init(reading reader: inout JSONReader) throws(JSONReadError) {
    self = try reader.readString { bytes throws(JSONReadError) in
      ActionName.named(bytes) ?? .unknown(String(decoding: bytes, as: UTF8.self))
    }
  }

  /// The action `bytes` names (compared by length first: no two names of a length share many prefixes).
  private static func named(_ bytes: UnsafeBufferPointer<UInt8>) -> ActionName? {
    func matches(_ name: StaticString) -> Bool {
      UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount).elementsEqual(bytes)
    }
    switch bytes.count {
    case 8: return matches("set_view") ? .setView : nil
    case 9:
      if matches("set_title") { return .setTitle }
      if matches("add_block") { return .addBlock }
      if matches("mark_text") { return .markText }
      return matches("move_page") ? .movePage : nil
    case 10:
      if matches("edit_block") { return .editBlock }
      if matches("move_block") { return .moveBlock }
      return matches("create_row") ? .createRow : nil
    case 11:
      if matches("create_page") { return .createPage }
      if matches("splice_text") { return .spliceText }
      return matches("delete_page") ? .deletePage : nil
    case 12:
      if matches("set_property") { return .setProperty }
      return matches("delete_block") ? .deleteBlock : nil
    case 15: return matches("create_database") ? .createDatabase : nil
    default: return nil
    }
  }
}

/// Every member a mutation may have, read before its `type` is known (it may come last): then the action
/// takes those it uses, in the order of `init(from:)`, so the same first problem is reported. A member the
/// action does not use is not an error even when it does not fit its type, as with `JSONDecoder`.
private struct MutationMembers {
  var id = JSONField<UInt64>.absent
  var page = JSONField<EntityID>.absent
  var time = JSONField<HLCTimestamp>.absent
  var type = JSONField<ActionName>.absent
  var parent = JSONField<EntityID>.absent
  var title = JSONField<String>.absent
  var database = JSONField<EntityID>.absent
  var properties = JSONField<[String: PropertyValue]>.absent
  var name = JSONField<String>.absent
  var value = JSONField<PropertyValue>.absent
  var block = JSONField<EntityID>.absent
  var blockType = JSONField<String>.absent
  var text = JSONField<String>.absent
  var after = JSONField<EntityID>.absent
  var attributes = JSONField<[String: String]>.absent
  var filter = JSONField<ViewFilter>.absent
  var sort = JSONField<ViewSort>.absent
  var ops = JSONField<TextOps>.absent

  mutating func read(_ key: JSONKey, from reader: inout JSONReader) throws(JSONReadError) {
    // The common members first.
    if key.matches("id") {
      try reader.read(&id, "id", as: UInt64.self)
    } else if key.matches("page") {
      try reader.read(&page, "page", as: EntityID.self)
    } else if key.matches("time") {
      try reader.read(&time, "time", as: HLCTimestamp.self)
    } else if key.matches("type") {
      try reader.read(&type, "type", as: ActionName.self)
    } else if key.matches("title") {
      try reader.read(&title, "title", as: String.self)
    } else if key.matches("name") {
      try reader.read(&name, "name", as: String.self)
    } else if key.matches("value") {
      try reader.read(&value, "value", as: PropertyValue.self)
    } else if key.matches("block") {
      try reader.read(&block, "block", as: EntityID.self)
    } else if key.matches("text") {
      try reader.read(&text, "text", as: String.self)
    } else if key.matches("parent") {
      try reader.read(&parent, "parent", as: EntityID.self)
    } else if key.matches("after") {
      try reader.read(&after, "after", as: EntityID.self)
    } else if key.matches("blockType") {
      try reader.read(&blockType, "blockType", as: String.self)
    } else if key.matches("attributes") {
      try reader.read(&attributes, "attributes", as: [String: String].self)
    } else if key.matches("properties") {
      try reader.read(&properties, "properties", as: [String: PropertyValue].self)
    } else if key.matches("database") {
      try reader.read(&database, "database", as: EntityID.self)
    } else if key.matches("filter") {
      try reader.read(&filter, "filter", as: ViewFilter.self)
    } else if key.matches("sort") {
      try reader.read(&sort, "sort", as: ViewSort.self)
    } else if key.matches("ops") {
      try reader.read(&ops, "ops", as: TextOps.self)
    } else {
      try reader.skipValue(of: key)
    }
  }
}

extension Mutation: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    let start = reader.offset
    var m = MutationMembers()
    var members = try reader.beginObject()
    while let key = try reader.nextKey(&members) {
      try m.read(key, from: &reader)
    }
    id = try m.id.required("id", objectOffset: start, ifNull: NullFor.uint64)
    page = try m.page.required("page", objectOffset: start, ifNull: NullFor.string)
    time = try m.time.required("time", objectOffset: start, ifNull: NullFor.string)
    let type = try m.type.required("type", objectOffset: start, ifNull: NullFor.string)
    switch type {
    case .createPage:
      action = .createPage(parent: try m.parent.optional(), title: try m.title.optional() ?? "")
    case .createDatabase:
      action = .createDatabase(parent: try m.parent.optional(), title: try m.title.optional() ?? "")
    case .createRow:
      action = .createRow(
        database: try m.database.required("database", objectOffset: start, ifNull: NullFor.string),
        title: try m.title.optional() ?? "", properties: try m.properties.optional() ?? [:])
    case .setTitle:
      action = .setTitle(try m.title.required("title", objectOffset: start, ifNull: NullFor.string))
    case .setProperty:
      action = .setProperty(
        name: try m.name.required("name", objectOffset: start, ifNull: NullFor.string),
        value: try m.value.optional())
    case .addBlock:
      action = .addBlock(
        block: try m.block.required("block", objectOffset: start, ifNull: NullFor.string),
        type: try m.blockType.optional() ?? BlockType.text, text: try m.text.optional() ?? "",
        after: try m.after.optional(), attributes: try m.attributes.optional() ?? [:])
    case .editBlock:
      action = .editBlock(
        block: try m.block.required("block", objectOffset: start, ifNull: NullFor.string),
        text: try m.text.optional(), attributes: try m.attributes.optional())
    case .spliceText:
      action = .spliceText(
        block: try m.block.required("block", objectOffset: start, ifNull: NullFor.string),
        ops: try m.ops.required("ops", objectOffset: start, ifNull: NullFor.string))
    case .markText:
      action = .markText(
        block: try m.block.required("block", objectOffset: start, ifNull: NullFor.string),
        ops: try m.ops.required("ops", objectOffset: start, ifNull: NullFor.string))
    case .moveBlock:
      action = .moveBlock(
        block: try m.block.required("block", objectOffset: start, ifNull: NullFor.string),
        after: try m.after.optional())
    case .deleteBlock:
      action = .deleteBlock(block: try m.block.required("block", objectOffset: start, ifNull: NullFor.string))
    case .movePage:
      action = .movePage(parent: try m.parent.optional())
    case .deletePage:
      action = .deletePage
    case .setView:
      action = .setView(filter: try m.filter.optional(), sort: try m.sort.optional())
    case .unknown(let type):
      throw JSONReadError.invalidValue("unknown mutation type \"\(type.prefix(40))\"", at: start).inside(
        .key("type"))
    }
  }
}

extension MutationBatch: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    let start = reader.offset
    var client = JSONField<EntityID>.absent
    var workspace = JSONField<EntityID>.absent
    var mutations = JSONField<[Mutation]>.absent
    var members = try reader.beginObject()
    while let key = try reader.nextKey(&members) {
      if key.matches("client") {
        try reader.read(&client, "client", as: EntityID.self)
      } else if key.matches("workspace") {
        try reader.read(&workspace, "workspace", as: EntityID.self)
      } else if key.matches("mutations") {
        try reader.read(&mutations, "mutations", as: [Mutation].self)
      } else {
        try reader.skipValue(of: key)
      }
    }
    self.init(
      client: try client.required("client", objectOffset: start, ifNull: NullFor.string),
      workspace: try workspace.required("workspace", objectOffset: start, ifNull: NullFor.string),
      mutations: try mutations.required("mutations", objectOffset: start, ifNull: NullFor.array))
  }
}
