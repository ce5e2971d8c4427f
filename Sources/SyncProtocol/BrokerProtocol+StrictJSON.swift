import StrictJSON
import SyncModel

// The strict readers of the requests the broker reads most (StrictJSON): a device's stream messages (a
// subscribe may name thousands of pages) and its catch-up and fetch bodies (a map of 10,000 to 1,000,000 page
// times). Same values and errors as their synthesized `Decodable` code, stricter where docs/protocol.md says.

extension BrokerProtocol.ClientMessage: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    let start = reader.offset
    var op = JSONField<String>.absent
    var pages = JSONField<[String]>.absent
    var members = try reader.beginObject()
    while let key = try reader.nextKey(&members) {
      if key.matches("op") {
        try reader.read(&op, "op", as: String.self)
      } else if key.matches("pages") {
        try reader.read(&pages, "pages", as: [String].self)
      } else {
        try reader.skipValue(of: key)
      }
    }
    self.init(
      op: try op.required("op", objectOffset: start) { .nullValue(expected: "String", at: $0) },
      pages: try pages.optional())
  }
}

extension BrokerProtocol.CatchUpRequest: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    let start = reader.offset
    var epoch = JSONField<String>.absent
    var pages = JSONField<[EntityID: UInt64]>.absent
    var members = try reader.beginObject()
    while let key = try reader.nextKey(&members) {
      if key.matches("pages") {
        try reader.read(&pages, "pages", as: [EntityID: UInt64].self)
      } else if key.matches("epoch") {
        try reader.read(&epoch, "epoch", as: String.self)
      } else {
        try reader.skipValue(of: key)
      }
    }
    self.init(
      epoch: try epoch.optional(),
      pages: try pages.required("pages", objectOffset: start) { .nullContainer(keyed: true, at: $0) })
  }
}

extension BrokerProtocol.FetchRequest: JSONReadable {
  public init(reading reader: inout JSONReader) throws(JSONReadError) {
    let start = reader.offset
    var epoch = JSONField<String>.absent
    var pages = JSONField<[EntityID: UInt64]>.absent
    var limit = JSONField<Int>.absent
    var cursor = JSONField<EntityID>.absent
    var members = try reader.beginObject()
    while let key = try reader.nextKey(&members) {
      if key.matches("pages") {
        try reader.read(&pages, "pages", as: [EntityID: UInt64].self)
      } else if key.matches("epoch") {
        try reader.read(&epoch, "epoch", as: String.self)
      } else if key.matches("limit") {
        try reader.read(&limit, "limit", as: Int.self)
      } else if key.matches("cursor") {
        try reader.read(&cursor, "cursor", as: EntityID.self)
      } else {
        try reader.skipValue(of: key)
      }
    }
    self.init(
      epoch: try epoch.optional(),
      pages: try pages.required("pages", objectOffset: start) { .nullContainer(keyed: true, at: $0) },
      limit: try limit.optional(), cursor: try cursor.optional())
  }
}
