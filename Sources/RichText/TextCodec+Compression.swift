extension TextCodec {
  /// A small LZ77 for a state's text: prose and markup repeat words and lines, and this halves them (automerge-
  /// paper's 104,852 bytes of LaTeX: 45 KB) where the runs around them are already a few bytes each. The stream
  /// is sequences of (varint literal count, the literals, varint match length − 3, varint distance back); a
  /// match length of 0 (written as 0 with no distance) ends it. Matches are at least 4 bytes, within 64 KiB,
  /// found through a hash of 4 bytes chained to the previous positions with the same hash (16 tried).
  enum Compression {
    static let minimumMatch = 4
    static let window = 1 << 16
    static let chainDepth = 16

    static func compress(_ input: [UInt8]) -> [UInt8] {
      var output: [UInt8] = []
      output.reserveCapacity(input.count / 2 + 16)
      let count = input.count
      guard count >= minimumMatch else {
        put(count, &output)
        output.append(contentsOf: input)
        put(0, &output)
        return output
      }
      let hashBits = 15
      var head = [Int32](repeating: -1, count: 1 << hashBits)
      var previous = [Int32](repeating: -1, count: count)
      input.withUnsafeBufferPointer { data in
        @inline(__always) func hash(_ at: Int) -> Int {
          let word =
            UInt32(data[at]) | UInt32(data[at + 1]) << 8 | UInt32(data[at + 2]) << 16 | UInt32(data[at + 3])
            << 24
          return Int((word &* 2_654_435_761) >> UInt32(32 - hashBits))
        }
        @inline(__always) func insert(_ at: Int) {
          let h = hash(at)
          previous[at] = head[h]
          head[h] = Int32(at)
        }
        var literalStart = 0
        var at = 0
        while at + minimumMatch <= count {
          var bestLength = 0
          var bestDistance = 0
          var candidate = Int(head[hash(at)])
          var tried = 0
          while candidate >= 0 && at - candidate <= window && tried < chainDepth {
            // Only a candidate that could beat the best so far is compared in full.
            if bestLength == 0
              || (at + bestLength < count && data[candidate + bestLength] == data[at + bestLength])
            {
              var length = 0
              while at + length < count && data[candidate + length] == data[at + length] { length += 1 }
              if length > bestLength {
                bestLength = length
                bestDistance = at - candidate
              }
            }
            candidate = Int(previous[candidate])
            tried += 1
          }
          if bestLength >= minimumMatch {
            put(at - literalStart, &output)
            output.append(contentsOf: data[literalStart..<at])
            put(bestLength - minimumMatch + 1, &output)
            put(bestDistance, &output)
            let end = at + bestLength
            while at < end {
              if at + minimumMatch <= count { insert(at) }
              at += 1
            }
            literalStart = at
          } else {
            insert(at)
            at += 1
          }
        }
        put(count - literalStart, &output)
        output.append(contentsOf: data[literalStart..<count])
        put(0, &output)
      }
      return output
    }

    /// The bytes `compress` was given, which were `count` long; throws on anything `compress` does not write.
    static func decompress(_ input: ArraySlice<UInt8>, count: Int) throws(TextError) -> [UInt8] {
      var output: [UInt8] = []
      output.reserveCapacity(count)
      var at = input.startIndex
      func varint() throws(TextError) -> Int {
        var value = 0
        var shift = 0
        while true {
          guard at < input.endIndex, shift < 35 else { throw .malformed("compressed text: bad length") }
          let byte = input[at]
          at += 1
          value |= Int(byte & 0x7F) << shift
          if byte & 0x80 == 0 { return value }
          shift += 7
        }
      }
      while true {
        let literals = try varint()
        guard literals <= input.endIndex - at, literals <= count - output.count else {
          throw .malformed("compressed text: literals overrun")
        }
        output.append(contentsOf: input[at..<(at + literals)])
        at += literals
        let match = try varint()
        if match == 0 { break }
        let length = match + minimumMatch - 1
        let distance = try varint()
        guard distance >= 1, distance <= output.count, length <= count - output.count else {
          throw .malformed("compressed text: match out of range")
        }
        let from = output.count - distance
        for offset in 0..<length { output.append(output[from + offset]) }
      }
      guard at == input.endIndex, output.count == count else {
        throw .malformed("compressed text: length disagrees")
      }
      return output
    }

    static func put(_ value: Int, _ output: inout [UInt8]) {
      var value = UInt(value)
      while value >= 0x80 {
        output.append(UInt8(truncatingIfNeeded: value) | 0x80)
        value >>= 7
      }
      output.append(UInt8(value))
    }
  }
}
