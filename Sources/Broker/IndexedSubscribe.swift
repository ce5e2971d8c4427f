import BrokerCore
import StrictJSON

/// A `subscribe` frame read straight against the channel index: the keys of its pages, with no string made per
/// id, if the index knows every one of them with its workspace. A device that comes back subscribes again to a
/// thousand pages others follow (B3, B4 in docs/benchmarks.md), and decoding the ids first cost most of that.
///
/// Nil for anything else (another op, a page the index does not know, an escaped id, an error): the session then
/// decodes the frame as usual, which decides it or names the error.
enum IndexedSubscribe {
  /// The keys of `frame`'s pages, in order, valid until the loop turn ends; nil if the index cannot answer it.
  static func keys(of frame: String, _ channels: ChannelIndex) -> [PageKey]? {
    var frame = frame
    return frame.withUTF8 { bytes in
      try? JSONReader.read(bytes) { reader throws(JSONReadError) -> [PageKey]? in
        var isSubscribe: Bool?
        var keys: [PageKey]?
        var members = try reader.beginObject()
        while let key = try reader.nextKey(&members) {
          if key.matches("op") && isSubscribe == nil {
            isSubscribe = try reader.readString { $0.elementsEqual("subscribe".utf8) }
            guard isSubscribe == true else { return nil }
          } else if key.matches("pages") && keys == nil {
            guard try !reader.readNull() else { return nil }
            var read: [PageKey] = []
            var elements = try reader.beginArray()
            while try reader.nextElement(&elements) {
              let known = try reader.readString { id -> PageKey? in
                guard let key = channels.existingKey(utf8: id), channels.workspace(of: key) != nil else {
                  return nil
                }
                return key
              }
              guard let known else { return nil }
              read.append(known)
            }
            keys = read
          } else {
            try reader.skipValue()
          }
        }
        return isSubscribe == true ? keys : nil
      }
    }
  }
}
