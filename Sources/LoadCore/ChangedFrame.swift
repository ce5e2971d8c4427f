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
    var text = text
    return text.withUTF8 { time(of: page, inUTF8: UnsafeRawBufferPointer($0)) }
  }

  /// `time(of:in:)` over the message's UTF-8 bytes (a Redis push's payload as it sits in the read buffer).
  public static func time(of page: String, inUTF8 bytes: UnsafeRawBufferPointer) -> UInt64? {
    var page = page
    return page.withUTF8 { wanted in
      var newest: UInt64?
      let valid = forEachEntry(bytes) { id, time in
        if id.elementsEqual(wanted) { newest = max(newest ?? 0, time) }
      }
      return valid ? newest : nil
    }
  }

  /// Every `(id, time)` of a `changed` message, in order; nil for anything else.
  public static func parse(_ text: String) -> [(id: Substring, time: UInt64)]? {
    var text = text
    return text.withUTF8 { parse(utf8: UnsafeRawBufferPointer($0)) }
  }

  /// `parse(_:)` over the message's UTF-8 bytes.
  public static func parse(utf8 bytes: UnsafeRawBufferPointer) -> [(id: Substring, time: UInt64)]? {
    var result: [(id: Substring, time: UInt64)] = []
    let valid = forEachEntry(bytes) { id, time in
      result.append((id: Substring(String(decoding: id, as: UTF8.self)), time: time))
    }
    return valid ? result : nil
  }

  private static let prefix = Array(#"{"op":"changed","pages":{"#.utf8)

  /// Calls `body` with each entry's id bytes and time, in order, straight from the bytes (no String per message:
  /// the harness reads up to a million a second); false if the message is not a `changed` message in the
  /// broker's compact encoding (entries already passed to `body` then mean nothing).
  private static func forEachEntry(
    _ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer, UInt64) -> Void
  ) -> Bool {
    let end = bytes.count
    guard end >= prefix.count, prefix.indices.allSatisfy({ bytes[$0] == prefix[$0] }) else { return false }
    var index = prefix.count
    func byte(_ i: Int) -> UInt8? { i < end ? bytes[i] : nil }
    if byte(index) == UInt8(ascii: "}") { return true }
    while true {
      guard byte(index) == UInt8(ascii: "\"") else { return false }
      let idStart = index + 1
      var idEnd = idStart
      while let b = byte(idEnd), b != UInt8(ascii: "\"") {
        if b == UInt8(ascii: "\\") { return false }
        idEnd += 1
      }
      guard byte(idEnd) == UInt8(ascii: "\""), byte(idEnd + 1) == UInt8(ascii: ":") else { return false }
      index = idEnd + 2
      var time: UInt64 = 0
      var digits = 0
      while let b = byte(index), b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") {
        let (times10, o1) = time.multipliedReportingOverflow(by: 10)
        let (sum, o2) = times10.addingReportingOverflow(UInt64(b - UInt8(ascii: "0")))
        guard !o1, !o2 else { return false }
        time = sum
        digits += 1
        index += 1
      }
      guard digits > 0 else { return false }
      body(UnsafeRawBufferPointer(rebasing: bytes[idStart..<idEnd]), time)
      switch byte(index) {
      case UInt8(ascii: ","): index += 1
      case UInt8(ascii: "}"): return byte(index + 1) == UInt8(ascii: "}")
      default: return false
      }
    }
  }
}
