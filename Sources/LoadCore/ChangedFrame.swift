/// Reads the page times out of a device stream's `changed` message, `{"op":"changed","pages":{"ID":TIME,...}}`
/// (docs/protocol.md), without a JSON decoder: a subscriber of a fan-out run handles a million of them a second,
/// and the harness must not become the bottleneck it measures.
///
/// Only the broker's own compact encoding is accepted; anything else (another op, spaces, escapes in ids) returns
/// nil and the caller treats the frame as not a notification. Redis runs publish the same text so both sides pay
/// the same parse.
public enum ChangedFrame {
  /// The message for `pages`, as the harness publishes it to Redis (the broker's encoding).
  public static func encode(pages: [(id: String, time: UInt64)]) -> String {
    var text = #"{"op":"changed","pages":{"#
    for (index, page) in pages.enumerated() {
      if index > 0 { text += "," }
      text += "\"\(page.id)\":\(page.time)"
    }
    return text + "}}"
  }

  /// The newest time given for `page`, nil if the message is not a `changed` message naming it.
  public static func time(of page: String, in text: String) -> UInt64? {
    guard let pages = parse(text) else { return nil }
    var newest: UInt64?
    for entry in pages where entry.id == page { newest = max(newest ?? 0, entry.time) }
    return newest
  }

  /// Every `(id, time)` of a `changed` message, in order; nil for anything else.
  public static func parse(_ text: String) -> [(id: Substring, time: UInt64)]? {
    let prefix = #"{"op":"changed","pages":{"#
    guard text.hasPrefix(prefix) else { return nil }
    var result: [(id: Substring, time: UInt64)] = []
    let utf8 = text.utf8
    var index = utf8.index(utf8.startIndex, offsetBy: prefix.utf8.count)
    let end = utf8.endIndex
    func byte(_ i: String.UTF8View.Index) -> UInt8? { i < end ? utf8[i] : nil }
    if byte(index) == UInt8(ascii: "}") { return result }
    while true {
      guard byte(index) == UInt8(ascii: "\"") else { return nil }
      let idStart = utf8.index(after: index)
      var idEnd = idStart
      while let b = byte(idEnd), b != UInt8(ascii: "\"") {
        if b == UInt8(ascii: "\\") { return nil }
        idEnd = utf8.index(after: idEnd)
      }
      guard byte(idEnd) == UInt8(ascii: "\""), byte(utf8.index(after: idEnd)) == UInt8(ascii: ":") else {
        return nil
      }
      index = utf8.index(idEnd, offsetBy: 2)
      var time: UInt64 = 0
      var digits = 0
      while let b = byte(index), b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") {
        let (times10, o1) = time.multipliedReportingOverflow(by: 10)
        let (sum, o2) = times10.addingReportingOverflow(UInt64(b - UInt8(ascii: "0")))
        guard !o1, !o2 else { return nil }
        time = sum
        digits += 1
        index = utf8.index(after: index)
      }
      guard digits > 0 else { return nil }
      result.append((id: Substring(text[idStart..<idEnd]), time: time))
      switch byte(index) {
      case UInt8(ascii: ","): index = utf8.index(after: index)
      case UInt8(ascii: "}"):
        return byte(utf8.index(after: index)) == UInt8(ascii: "}") ? result : nil
      default: return nil
      }
    }
  }
}
