/// JSON of a mutation: its fields and its action's, flat, with `type` naming the action:
///
///     {"id": 7, "page": "p1", "time": "1732244000123:0", "type": "set_title", "title": "Plans"}
///     {"id": 8, "page": "p1", "time": "1732244000123:1", "type": "set_property", "name": "Status", "value": "Done"}
///
/// Unknown `type` values and missing fields are decoding errors that name them. Every action is listed with its
/// fields in docs/protocol.md.
extension Mutation: Codable {
  private enum Key: String, CodingKey {
    case id, page, time, type
    case parent, title, database, properties, name, value
    case block, blockType, text, after, attributes, filter, sort, ops
  }

  public init(from decoder: any Decoder) throws {
    let c = try decoder.container(keyedBy: Key.self)
    id = try c.decode(UInt64.self, forKey: .id)
    page = try c.decode(EntityID.self, forKey: .page)
    time = try c.decode(HLCTimestamp.self, forKey: .time)
    let type = try c.decode(String.self, forKey: .type)
    switch type {
    case "create_page":
      action = .createPage(
        parent: try c.decodeIfPresent(EntityID.self, forKey: .parent),
        title: try c.decodeIfPresent(String.self, forKey: .title) ?? "")
    case "create_database":
      action = .createDatabase(
        parent: try c.decodeIfPresent(EntityID.self, forKey: .parent),
        title: try c.decodeIfPresent(String.self, forKey: .title) ?? "")
    case "create_row":
      action = .createRow(
        database: try c.decode(EntityID.self, forKey: .database),
        title: try c.decodeIfPresent(String.self, forKey: .title) ?? "",
        properties: try c.decodeIfPresent([String: PropertyValue].self, forKey: .properties) ?? [:])
    case "set_title":
      action = .setTitle(try c.decode(String.self, forKey: .title))
    case "set_property":
      action = .setProperty(
        name: try c.decode(String.self, forKey: .name),
        value: try c.decodeIfPresent(PropertyValue.self, forKey: .value))
    case "add_block":
      action = .addBlock(
        block: try c.decode(EntityID.self, forKey: .block),
        type: try c.decodeIfPresent(String.self, forKey: .blockType) ?? BlockType.text,
        text: try c.decodeIfPresent(String.self, forKey: .text) ?? "",
        after: try c.decodeIfPresent(EntityID.self, forKey: .after),
        attributes: try c.decodeIfPresent([String: String].self, forKey: .attributes) ?? [:])
    case "edit_block":
      action = .editBlock(
        block: try c.decode(EntityID.self, forKey: .block),
        text: try c.decodeIfPresent(String.self, forKey: .text),
        attributes: try c.decodeIfPresent([String: String].self, forKey: .attributes))
    case "splice_text":
      action = .spliceText(
        block: try c.decode(EntityID.self, forKey: .block), ops: try c.decode(TextOps.self, forKey: .ops))
    case "mark_text":
      action = .markText(
        block: try c.decode(EntityID.self, forKey: .block), ops: try c.decode(TextOps.self, forKey: .ops))
    case "move_block":
      action = .moveBlock(
        block: try c.decode(EntityID.self, forKey: .block),
        after: try c.decodeIfPresent(EntityID.self, forKey: .after))
    case "delete_block":
      action = .deleteBlock(block: try c.decode(EntityID.self, forKey: .block))
    case "move_page":
      action = .movePage(parent: try c.decodeIfPresent(EntityID.self, forKey: .parent))
    case "delete_page":
      action = .deletePage
    case "set_view":
      action = .setView(
        filter: try c.decodeIfPresent(ViewFilter.self, forKey: .filter),
        sort: try c.decodeIfPresent(ViewSort.self, forKey: .sort))
    default:
      throw DecodingError.dataCorruptedError(
        forKey: .type, in: c, debugDescription: "unknown mutation type \"\(type.prefix(40))\"")
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var c = encoder.container(keyedBy: Key.self)
    try c.encode(id, forKey: .id)
    try c.encode(page, forKey: .page)
    try c.encode(time, forKey: .time)
    try c.encode(action.typeName, forKey: .type)
    switch action {
    case .createPage(let parent, let title), .createDatabase(let parent, let title):
      try c.encode(parent, forKey: .parent)
      try c.encode(title, forKey: .title)
    case .createRow(let database, let title, let properties):
      try c.encode(database, forKey: .database)
      try c.encode(title, forKey: .title)
      try c.encode(properties, forKey: .properties)
    case .setTitle(let title):
      try c.encode(title, forKey: .title)
    case .setProperty(let name, let value):
      try c.encode(name, forKey: .name)
      try c.encode(value, forKey: .value)
    case .addBlock(let block, let type, let text, let after, let attributes):
      try c.encode(block, forKey: .block)
      try c.encode(type, forKey: .blockType)
      try c.encode(text, forKey: .text)
      try c.encode(after, forKey: .after)
      try c.encode(attributes, forKey: .attributes)
    case .editBlock(let block, let text, let attributes):
      try c.encode(block, forKey: .block)
      try c.encodeIfPresent(text, forKey: .text)
      try c.encodeIfPresent(attributes, forKey: .attributes)
    case .spliceText(let block, let ops), .markText(let block, let ops):
      try c.encode(block, forKey: .block)
      try c.encode(ops, forKey: .ops)
    case .moveBlock(let block, let after):
      try c.encode(block, forKey: .block)
      try c.encode(after, forKey: .after)
    case .deleteBlock(let block):
      try c.encode(block, forKey: .block)
    case .movePage(let parent):
      try c.encode(parent, forKey: .parent)
    case .deletePage:
      break
    case .setView(let filter, let sort):
      try c.encode(filter, forKey: .filter)
      try c.encode(sort, forKey: .sort)
    }
  }
}
