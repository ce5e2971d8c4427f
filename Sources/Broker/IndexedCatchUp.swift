import BrokerCore
import StrictJSON
import SyncModel
import SyncProtocol
import Web

/// A catch-up body read straight against the channel index: each page's key and the client's time, with no
/// string or dictionary made per page. A reconnecting device names every page it keeps (a thousand, ten
/// thousand), and decoding them into `[EntityID: UInt64]` and then looking each up again cost most of a catch-up
/// (B4, docs/benchmarks.md).
///
/// Only for bodies the index can answer outright: every page written without escapes, with a key and known facts
/// (`ChannelIndex.facts(of:)`). Anything else — a page nobody follows, an escaped or invalid id, any error — and
/// the caller decodes the body as before (which names the error, or reads the store).
struct IndexedCatchUp {
  var epoch: String?
  /// The pages named, each once (the first of duplicate keys wins, as in every decoder here), with the client's
  /// time.
  var entries: [(key: PageKey, time: UInt64)]
  /// `ChannelIndex.keyReleases` when read: while it is unchanged, the keys still stand for these pages.
  var keyReleases: Int

  /// Reads `request`'s body against `channels`; nil if the index cannot answer it as read (see above).
  static func read(_ request: HTTPRequest, _ channels: ChannelIndex) -> IndexedCatchUp? {
    request.body.withUnsafeReadableBytes { raw -> IndexedCatchUp? in
      let bytes = raw.assumingMemoryBound(to: UInt8.self)
      return try? JSONReader.read(bytes) { reader throws(JSONReadError) -> IndexedCatchUp? in
        var epoch: String?
        var entries: [(key: PageKey, time: UInt64)]?
        var epochSeen = false
        var members = try reader.beginObject()
        while let key = try reader.nextKey(&members) {
          if key.matches("pages") && entries == nil {
            guard let read = try readPages(&reader, channels) else { return nil }
            entries = read
          } else if key.matches("epoch") && !epochSeen {
            epochSeen = true
            epoch = try reader.readNull() ? nil : try reader.readString()
          } else {
            // A member the request does not use, or a later duplicate (its syntax is still checked).
            try reader.skipValue()
          }
        }
        guard let entries else { return nil }
        return IndexedCatchUp(epoch: epoch, entries: entries, keyReleases: channels.keyReleases)
      }
    }
  }

  /// The `pages` object's entries, or nil at the first page the index cannot answer for.
  private static func readPages(_ reader: inout JSONReader, _ channels: ChannelIndex) throws(JSONReadError)
    -> [(key: PageKey, time: UInt64)]?
  {
    var entries: [(key: PageKey, time: UInt64)] = []
    var seen = PageKeySet()
    var members = try reader.beginObject()
    while let name = try reader.nextKey(&members) {
      guard let id = name.plainBytes, let key = channels.existingKey(utf8: id), channels.facts(of: key) != nil
      else { return nil }
      // A later duplicate's value is not used; one that is not a time is left to the full decoder to judge.
      let time = try reader.readUInt64()
      if seen.insert(key) { entries.append((key, time)) }
    }
    return entries
  }
}
