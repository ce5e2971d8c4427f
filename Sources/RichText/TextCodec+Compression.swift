import CZlib

extension TextCodec {
  /// A state's text as a raw deflate stream (RFC 1951, no zlib or gzip wrapper: the state says the text's length
  /// and the decoder checks it), through the system's zlib: prose and markup repeat words and lines, and deflate
  /// takes automerge-paper's 104,852 bytes of LaTeX to 27,538 where the runs around them are already a few bytes
  /// each.
  enum Compression {
    /// zlib's default: level 9 saves 0.4% more on the editing traces' texts for a third more time.
    static let level: Int32 = 6
    /// The most bytes deflate can make of one byte of stream (a length-258 match in two bits); a count claimed
    /// beyond it cannot be backed by the stream, and is refused before memory is taken for it.
    static let maximumRatio = 1032

    /// `input` deflated, or nil if zlib could not (it then goes as it is).
    static func compress(_ input: [UInt8]) -> [UInt8]? {
      guard input.count < Int(UInt32.max) else { return nil }
      // A window no larger than the text (at least 2^9, zlib's least for raw deflate): the same stream, and a
      // block's short text does not make zlib set up 256 KiB.
      var windowBits: Int32 = 9
      while windowBits < 15 && (1 << windowBits) < input.count { windowBits += 1 }
      var stream = z_stream()
      guard
        deflateInit2_(
          &stream, level, Z_DEFLATED, -windowBits, 8, Z_DEFAULT_STRATEGY, ZLIB_VERSION,
          Int32(MemoryLayout<z_stream>.size)) == Z_OK
      else { return nil }
      defer { deflateEnd(&stream) }
      var output = [UInt8](repeating: 0, count: Int(deflateBound(&stream, uLong(input.count))))
      let produced = input.withUnsafeBufferPointer { from in
        output.withUnsafeMutableBufferPointer { to -> Int? in
          // zlib does not write its input (`next_in` is only not const in its header).
          stream.next_in = UnsafeMutablePointer(mutating: from.baseAddress)
          stream.avail_in = uInt(from.count)
          stream.next_out = to.baseAddress
          stream.avail_out = uInt(to.count)
          // deflateBound's room is enough for one call to finish.
          guard deflate(&stream, Z_FINISH) == Z_STREAM_END else { return nil }
          return Int(stream.total_out)
        }
      }
      guard let produced else { return nil }
      output.removeSubrange(produced...)
      return output
    }

    /// The `count` bytes `input` inflates to; throws unless `input` is exactly one raw deflate stream of exactly
    /// that many bytes.
    static func decompress(_ input: ArraySlice<UInt8>, count: Int) throws(TextError) -> [UInt8] {
      guard count / maximumRatio <= input.count, input.count < Int(UInt32.max) else {
        throw .malformed("compressed text: shorter than its length could come from")
      }
      var stream = z_stream()
      guard
        inflateInit2_(&stream, -15, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK
      else { throw .malformed("compressed text: zlib could not start") }
      defer { inflateEnd(&stream) }
      var output = [UInt8](repeating: 0, count: count)
      let (result, left) = input.withUnsafeBufferPointer { from in
        output.withUnsafeMutableBufferPointer { to -> (Int32, uInt) in
          stream.next_in = UnsafeMutablePointer(mutating: from.baseAddress)
          stream.avail_in = uInt(from.count)
          stream.next_out = to.baseAddress
          stream.avail_out = uInt(to.count)
          return (inflate(&stream, Z_FINISH), stream.avail_in)
        }
      }
      // Z_STREAM_END with room left: shorter than said; Z_BUF_ERROR: longer (or cut short).
      guard result == Z_STREAM_END, stream.avail_out == 0, left == 0 else {
        throw .malformed("compressed text: not a deflate stream of its length")
      }
      return output
    }
  }
}
