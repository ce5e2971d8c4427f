import RichText
import SeededRandom
import Testing

// What the RichText tests share: hand-made ids and runs (as another replica's update would carry them), orders
// to deliver updates in, and the check that a document reads the same after an encoding round trip.

/// Character `counter` of replica `client`.
func id(_ client: String, _ counter: UInt32) -> CharacterID { CharacterID(client: client, counter: counter) }

/// An update holding one run typed by `client` from `counter` on, inserted after `left` and before `right`.
func typed(
  _ text: String, by client: String, from counter: UInt32 = 0, after left: CharacterID?,
  before right: CharacterID?
) -> TextUpdate {
  let scalars = Array(text.unicodeScalars)
  return TextUpdate(runs: [
    InsertRun(
      client: client, counter: counter, length: UInt32(scalars.count), left: left, right: right,
      text: scalars)
  ])
}

/// Every order of `0 ..< count` (count! of them: keep `count` small).
func permutations(of count: Int) -> [[Int]] {
  guard count > 0 else { return [[]] }
  var result: [[Int]] = []
  for shorter in permutations(of: count - 1) {
    for slot in 0...shorter.count {
      var order = shorter
      order.insert(count - 1, at: slot)
      result.append(order)
    }
  }
  return result
}

/// Every merge of the sequences `lengths` describes that keeps each sequence's own order (what causal delivery
/// allows): each result lists (sequence, index in it) pairs.
func interleavings(of lengths: [Int]) -> [[(sequence: Int, index: Int)]] {
  var result: [[(sequence: Int, index: Int)]] = []
  var next = [Int](repeating: 0, count: lengths.count)
  var path: [(sequence: Int, index: Int)] = []
  func extend() {
    var extended = false
    for sequence in lengths.indices where next[sequence] < lengths[sequence] {
      extended = true
      path.append((sequence, next[sequence]))
      next[sequence] += 1
      extend()
      next[sequence] -= 1
      path.removeLast()
    }
    if !extended { result.append(path) }
  }
  extend()
  return result
}

/// Applies `updates` one by one in `order` to a copy of `base`.
func applying(_ updates: [TextUpdate], in order: [Int], to base: TextDocument) -> TextDocument {
  var document = base
  for index in order { document.apply(updates[index]) }
  return document
}

/// Checks that `document` survives both transfer forms: its binary state read back, and its update applied to
/// an empty document, read the same text and marks.
func expectRoundTrips(_ document: TextDocument, sourceLocation: SourceLocation = #_sourceLocation) {
  do {
    let decoded = try TextDocument(encoded: document.encoded())
    #expect(decoded.scalars == document.scalars, "state round trip", sourceLocation: sourceLocation)
    #expect(decoded.marks == document.marks, "state round trip", sourceLocation: sourceLocation)
    #expect(decoded.hasPendingOperations == document.hasPendingOperations, sourceLocation: sourceLocation)
  } catch {
    Issue.record("a document's own state does not decode: \(error)", sourceLocation: sourceLocation)
  }
  var fresh = TextDocument()
  fresh.apply(document.update())
  #expect(fresh.scalars == document.scalars, "update into an empty document", sourceLocation: sourceLocation)
  #expect(fresh.marks == document.marks, "update into an empty document", sourceLocation: sourceLocation)
  do {
    let update = document.update()
    #expect(try TextCodec.decodeUpdate(TextCodec.encode(update)) == update, sourceLocation: sourceLocation)
  } catch {
    Issue.record("a document's own update does not decode: \(error)", sourceLocation: sourceLocation)
  }
}

extension SplitMix64 {
  /// A number in `range`.
  mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
  /// True `percent` times in a hundred.
  mutating func chance(_ percent: Int) -> Bool { int(0...99) < percent }
}
