/// The fewest splices that turn one text into another: how a whole-text replacement (`block edit --text`, or an
/// `edit_block` from a client that predates the CRDT) becomes CRDT edits, so that it merges with concurrent
/// ones instead of overwriting them.
public enum TextDiff {
  /// One splice, at a position in the text as the splices before it left it.
  public struct Splice: Hashable, Sendable {
    public var at: Int
    public var delete: Int
    public var insert: [Unicode.Scalar]

    public init(at: Int, delete: Int, insert: [Unicode.Scalar]) {
      self.at = at
      self.delete = delete
      self.insert = insert
    }
  }

  /// Edit distances beyond this fall back to one splice over everything between the common prefix and suffix:
  /// Myers's algorithm keeps O(D²) state, and a text rewritten that thoroughly has nothing left to merge with.
  public static let maxDistance = 1000

  /// The splices, left to right, that make `old` into `new`: common prefix and suffix kept, and between them a
  /// shortest edit script (Myers 1986), adjacent deletions and insertions joined into one splice each.
  public static func splices(from old: [Unicode.Scalar], to new: [Unicode.Scalar]) -> [Splice] {
    var prefix = 0
    while prefix < old.count && prefix < new.count && old[prefix] == new[prefix] { prefix += 1 }
    var suffix = 0
    while suffix < old.count - prefix && suffix < new.count - prefix
      && old[old.count - 1 - suffix] == new[new.count - 1 - suffix]
    {
      suffix += 1
    }
    let a = old[prefix..<(old.count - suffix)]
    let b = new[prefix..<(new.count - suffix)]
    if a.isEmpty && b.isEmpty { return [] }
    if a.isEmpty || b.isEmpty {
      return [Splice(at: prefix, delete: a.count, insert: Array(b))]
    }
    guard let script = shortestScript(Array(a), Array(b)) else {
      return [Splice(at: prefix, delete: a.count, insert: Array(b))]
    }
    // Walk the script: keep, delete from a, insert from b; each maximal stretch of changes is one splice.
    var splices: [Splice] = []
    var position = prefix  // in the text as edited so far
    var i = 0
    var j = 0
    var pending: Splice?
    func flush() {
      if let splice = pending {
        splices.append(splice)
        position = splice.at + splice.insert.count
        pending = nil
      }
    }
    for step in script {
      switch step {
      case .keep:
        flush()
        position += 1
        i += 1
        j += 1
      case .delete:
        if pending == nil { pending = Splice(at: position, delete: 0, insert: []) }
        pending!.delete += 1
        i += 1
      case .insert:
        if pending == nil { pending = Splice(at: position, delete: 0, insert: []) }
        pending!.insert.append(b[b.startIndex + j])
        j += 1
      }
    }
    flush()
    return splices
  }

  enum Step { case keep, delete, insert }

  /// Myers's greedy shortest edit script, or nil past `maxDistance`.
  static func shortestScript(_ a: [Unicode.Scalar], _ b: [Unicode.Scalar]) -> [Step]? {
    let n = a.count
    let m = b.count
    let limit = min(n + m, maxDistance)
    let offset = limit + 1
    var v = [Int32](repeating: 0, count: 2 * limit + 3)
    var trace: [[Int32]] = []
    var found = false
    outer: for d in 0...limit {
      trace.append(v)
      var k = -d
      while k <= d {
        var x: Int
        if k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1]) {
          x = Int(v[offset + k + 1])
        } else {
          x = Int(v[offset + k - 1]) + 1
        }
        var y = x - k
        while x < n && y < m && a[x] == b[y] {
          x += 1
          y += 1
        }
        v[offset + k] = Int32(x)
        if x >= n && y >= m {
          found = true
          break outer
        }
        k += 2
      }
    }
    guard found else { return nil }
    // Back through the trace, from the end.
    var steps: [Step] = []
    var x = n
    var y = m
    for d in stride(from: trace.count - 1, through: 0, by: -1) {
      let v = trace[d]
      let k = x - y
      let previousK: Int
      if k == -d || (k != d && v[offset + k - 1] < v[offset + k + 1]) {
        previousK = k + 1
      } else {
        previousK = k - 1
      }
      let previousX = d == 0 ? 0 : Int(v[offset + previousK])
      let previousY = previousX - previousK
      while x > previousX && y > previousY {
        steps.append(.keep)
        x -= 1
        y -= 1
      }
      if d > 0 {
        steps.append(x == previousX ? .insert : .delete)
        x = previousX
        y = previousY
      }
    }
    while x > 0 && y > 0 {
      steps.append(.keep)
      x -= 1
      y -= 1
    }
    return steps.reversed()
  }
}

extension TextDocument {
  /// Makes the text `new` by the fewest splices (`TextDiff`), as replica `client`; returns the update (empty
  /// when the text is already `new`).
  public mutating func replaceText(with new: String, client: String, seq: UInt64 = 0) -> TextUpdate {
    var update = TextUpdate()
    for splice in TextDiff.splices(from: scalars, to: Array(new.unicodeScalars)) {
      // Positions come from the text itself: in range by construction.
      let part = try! self.splice(
        at: splice.at, delete: splice.delete, insert: String(String.UnicodeScalarView(splice.insert)),
        client: client, seq: seq)
      update.runs.append(contentsOf: part.runs)
      update.deletes.append(contentsOf: part.deletes)
    }
    return update
  }
}
