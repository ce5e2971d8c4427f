import SyncModel

extension BrokerProtocol.Changed {
  /// The frame's text, byte for byte what `JSONEncoder` with `.sortedKeys` and `.withoutEscapingSlashes` writes
  /// (a test holds the two equal), written directly: the broker sends one per device stream per flush, and the
  /// general encoder cost some 35,000 instructions a frame (callgrind, B1).
  public var jsonText: String {
    var out: [UInt8] = []
    out.reserveCapacity(32 + pages.count * 40)
    out.append(contentsOf: #"{"op":"#.utf8)
    JSONText.appendString(op, to: &out)
    out.append(contentsOf: #","pages":{"#.utf8)
    for (index, page) in JSONText.sortedKeys(pages).enumerated() {
      if index > 0 { out.append(UInt8(ascii: ",")) }
      JSONText.appendString(page, to: &out)
      out.append(UInt8(ascii: ":"))
      JSONText.appendNumber(pages[page]!, to: &out)
    }
    out.append(contentsOf: "}}".utf8)
    return String(decoding: out, as: UTF8.self)
  }
}
