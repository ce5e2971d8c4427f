import RichText
import SeededRandom
import Testing

/// The interleaving cases of the Fugue paper (Weidner & Kleppmann, "The Art of the Fugue") and of Joseph Gentle's
/// reference-crdts tests, as our own tests: text typed concurrently at one place stays together, whichever way
/// it was typed, in whatever order replicas learn of it.
///
/// Expected texts are worked out from FugueMax's tree: a character whose left origin is the character before it
/// when it was typed is that character's right child; one typed with no left origin but a right origin (typed
/// just before a character, at the document's start) is the right origin's left child. A node's subtree reads
/// left children, the node, right children; right siblings read in reverse order of their right origins, then by
/// replica name; left siblings by replica name. A run typed forward is a chain of right children; a run typed
/// backward (each character at the same position) is a chain of left children: either way, one subtree.
@Suite struct InterleavingTests {
  // MARK: - Hand-made items (reference-crdts' test.ts), delivered in every order

  /// Applies `updates` to `base` one by one in every order (out-of-causal ones included: what cannot be placed
  /// yet waits), and checks each result.
  func expectEveryOrder(
    _ updates: [TextUpdate], on base: TextDocument = TextDocument(), give expected: String,
    sourceLocation: SourceLocation = #_sourceLocation
  ) {
    var outcomes: [String: Int] = [:]
    for order in permutations(of: updates.count) {
      let document = applying(updates, in: order, to: base)
      outcomes[document.text, default: 0] += 1
      #expect(!document.hasPendingOperations, "order \(order)", sourceLocation: sourceLocation)
    }
    #expect(outcomes == [expected: permutations(of: updates.count).count], sourceLocation: sourceLocation)
  }

  /// Two characters typed at once into an empty document by A and B: neither has an origin, so they are right
  /// siblings under the root with the same right origin, ordered by name.
  @Test func concurrentAVersusB() {
    expectEveryOrder(
      [typed("b", by: "B", after: nil, before: nil), typed("a", by: "A", after: nil, before: nil)], give: "ab"
    )
  }

  /// A types "abc" and B "xyz" forward, one character at a time, into an empty document at once. A's first
  /// character is the root's right child, the next its right child, and so on: A's text is one subtree, B's
  /// another, and the two roots are siblings ordered by name.
  @Test func interleavingForward() {
    let updates = [
      typed("a", by: "A", from: 0, after: nil, before: nil),
      typed("b", by: "A", from: 1, after: id("A", 0), before: nil),
      typed("c", by: "A", from: 2, after: id("A", 1), before: nil),
      typed("x", by: "B", from: 0, after: nil, before: nil),
      typed("y", by: "B", from: 1, after: id("B", 0), before: nil),
      typed("z", by: "B", from: 2, after: id("B", 1), before: nil),
    ]
    expectEveryOrder(updates, give: "abcxyz")
    // The same texts as one run each (what a replica sends when it typed them in one go).
    expectEveryOrder(
      [typed("xyz", by: "B", after: nil, before: nil), typed("abc", by: "A", after: nil, before: nil)],
      give: "abcxyz")
  }

  /// As `interleavingForward`, each character typed by a different replica (the order must not come from the
  /// ids): A's, X's and Y's chain stays together, as does B's, C's and D's; the chains' roots are A and B.
  @Test func interleavingForwardAcrossReplicas() {
    let updates = [
      typed("a", by: "A", after: nil, before: nil),
      typed("b", by: "X", after: id("A", 0), before: nil),
      typed("c", by: "Y", after: id("X", 0), before: nil),
      typed("x", by: "B", after: nil, before: nil),
      typed("y", by: "C", after: id("B", 0), before: nil),
      typed("z", by: "D", after: id("C", 0), before: nil),
    ]
    expectEveryOrder(updates, give: "abcxyz")
  }

  /// A types "abc" and B "xyz" backward (each character at position 0) into an empty document at once: the
  /// first characters typed ("c", "z") are root siblings ordered by name, each later one the left child of the
  /// one typed before it.
  @Test func interleavingBackward() {
    let updates = [
      typed("c", by: "A", from: 0, after: nil, before: nil),
      typed("b", by: "A", from: 1, after: nil, before: id("A", 0)),
      typed("a", by: "A", from: 2, after: nil, before: id("A", 1)),
      typed("z", by: "B", from: 0, after: nil, before: nil),
      typed("y", by: "B", from: 1, after: nil, before: id("B", 0)),
      typed("x", by: "B", from: 2, after: nil, before: id("B", 1)),
    ]
    expectEveryOrder(updates, give: "abcxyz")
  }

  /// As `interleavingBackward` with two characters each, A's second one typed by another replica (X).
  @Test func interleavingBackwardAcrossReplicas() {
    let updates = [
      typed("b", by: "A", after: nil, before: nil),
      typed("a", by: "X", after: nil, before: id("A", 0)),
      typed("y", by: "B", after: nil, before: nil),
      typed("x", by: "B", from: 1, after: nil, before: id("B", 0)),
    ]
    expectEveryOrder(updates, give: "abxy")
  }

  /// A types "a", then "p" before it and "q" after it; B types "b", "r" before it, "s" after it. "p" is a's
  /// left child, "q" its right child: A's subtree reads "paq", B's "rbs", A's first.
  @Test func withTails() {
    let updates = [
      typed("a", by: "A", from: 0, after: nil, before: nil),
      typed("p", by: "A", from: 1, after: nil, before: id("A", 0)),
      typed("q", by: "A", from: 2, after: id("A", 0), before: nil),
      typed("b", by: "B", from: 0, after: nil, before: nil),
      typed("r", by: "B", from: 1, after: nil, before: id("B", 0)),
      typed("s", by: "B", from: 2, after: id("B", 0), before: nil),
    ]
    expectEveryOrder(updates, give: "paqrbs")
  }

  /// As `withTails`, B's left tail typed by a replica whose name sorts before every other ("1"): a left child
  /// stays with its parent whatever its name.
  @Test func withTails2() {
    let updates = [
      typed("a", by: "A", from: 0, after: nil, before: nil),
      typed("p", by: "A", from: 1, after: nil, before: id("A", 0)),
      typed("q", by: "A", from: 2, after: id("A", 0), before: nil),
      typed("b", by: "B", from: 0, after: nil, before: nil),
      typed("r", by: "1", from: 0, after: nil, before: id("B", 0)),
      typed("s", by: "B", from: 1, after: id("B", 0), before: nil),
    ]
    expectEveryOrder(updates, give: "paqrbs")
  }

  /// "a", "b" and "c" are typed at once into an empty document (root siblings: "abc"); "d" is typed between
  /// "a" and "c" by a replica that has those two but not "b". "d" is a's right child, so it stays right after
  /// "a": "adbc".
  @Test func localVersusConcurrent() {
    let updates = [
      typed("a", by: "A", after: nil, before: nil),
      typed("b", by: "B", after: nil, before: nil),
      typed("c", by: "C", after: nil, before: nil),
      typed("d", by: "D", after: id("A", 0), before: id("C", 0)),
    ]
    expectEveryOrder(updates, give: "adbc")
  }

  // MARK: - Real replicas typing and exchanging updates

  /// Every replica's updates, kept in the order it made them.
  struct Typing {
    var replicas: [TextDocument]
    var updates: [[TextUpdate]]

    init(base: TextDocument, replicas count: Int) {
      replicas = Array(repeating: base, count: count)
      updates = Array(repeating: [], count: count)
    }

    /// Replica `index` types `text` one character at a time, each at `position` (backward) or each after the
    /// one before it (forward).
    mutating func type(_ text: String, on index: Int, as client: String, at position: Int, backward: Bool)
      throws
    {
      var at = position
      for scalar in backward ? text.unicodeScalars.reversed() : Array(text.unicodeScalars) {
        updates[index].append(
          try replicas[index].splice(at: at, delete: 0, insert: String(scalar), client: client))
        if !backward { at += 1 }
      }
    }

    /// Checks that applying the updates in every causal order (each replica's in its own order), and in
    /// `randomOrders` arbitrary ones, to `base` gives `expected`, as does merging the replicas' states in every
    /// order.
    func expectEveryOrder(
      on base: TextDocument, give expected: String, randomOrders: Int = 100,
      sourceLocation: SourceLocation = #_sourceLocation
    ) {
      let flat = updates.flatMap { $0 }
      var offsets: [Int] = []
      var total = 0
      for list in updates {
        offsets.append(total)
        total += list.count
      }
      var outcomes: [String: Int] = [:]
      for interleaving in interleavings(of: updates.map(\.count)) {
        let order = interleaving.map { offsets[$0.sequence] + $0.index }
        outcomes[applying(flat, in: order, to: base).text, default: 0] += 1
      }
      var random = SplitMix64(seed: 7)
      for _ in 0..<randomOrders {
        let document = applying(flat, in: Array(flat.indices).shuffled(using: &random), to: base)
        outcomes[document.text, default: 0] += 1
        #expect(!document.hasPendingOperations, sourceLocation: sourceLocation)
      }
      #expect(Array(outcomes.keys) == [expected], sourceLocation: sourceLocation)
      for order in permutations(of: replicas.count) {
        var merged = replicas[order[0]]
        for index in order.dropFirst() { merged.merge(replicas[index]) }
        #expect(merged.text == expected, "merged in order \(order)", sourceLocation: sourceLocation)
        var fresh = TextDocument()
        for index in order { fresh.merge(replicas[index]) }
        #expect(fresh.text == expected, "merged in order \(order)", sourceLocation: sourceLocation)
      }
    }
  }

  /// Two replicas type a word each, forward, at one place in a shared text: each word's first character has the
  /// same origins ("[" and "]"), the rest chain to it, so the words follow one another in name order.
  @Test func replicasTypingForwardAtOnePlace() throws {
    let base = TextDocument(text: "[]", client: "base")
    var typing = Typing(base: base, replicas: 2)
    try typing.type("milk", on: 0, as: "alice", at: 1, backward: false)
    try typing.type("eggs", on: 1, as: "bob", at: 1, backward: false)
    #expect(typing.replicas[0].text == "[milk]")
    typing.expectEveryOrder(on: base, give: "[milkeggs]")
  }

  /// Two replicas type a word each backward (each character at the same position) at one place.
  @Test func replicasTypingBackwardAtOnePlace() throws {
    let base = TextDocument(text: "[]", client: "base")
    var typing = Typing(base: base, replicas: 2)
    try typing.type("milk", on: 0, as: "bob", at: 1, backward: true)
    try typing.type("eggs", on: 1, as: "alice", at: 1, backward: true)
    #expect(typing.replicas[0].text == "[milk]")
    typing.expectEveryOrder(on: base, give: "[eggsmilk]")
  }

  /// Three replicas type a word each backward at one place at once: the case that makes Yjs interleave. The
  /// last character of each word is typed first, between "[" and "]"; those three are siblings ordered by name
  /// (carol, dave, erin); each word's other characters are left children of the one typed before, so the words
  /// stay whole, in that order, however the nine updates arrive.
  @Test func threeReplicasTypingBackwardDoNotInterleave() throws {
    let base = TextDocument(text: "[]", client: "base")
    var typing = Typing(base: base, replicas: 3)
    try typing.type("one", on: 0, as: "erin", at: 1, backward: true)
    try typing.type("two", on: 1, as: "carol", at: 1, backward: true)
    try typing.type("six", on: 2, as: "dave", at: 1, backward: true)
    #expect(typing.replicas.map(\.text) == ["[one]", "[two]", "[six]"])
    typing.expectEveryOrder(on: base, give: "[twosixone]", randomOrders: 300)
    // Pairwise exchanges in a chain, as devices syncing through one another would do.
    var (first, second, third) = (typing.replicas[0], typing.replicas[1], typing.replicas[2])
    first.merge(second)
    third.merge(first)
    second.merge(third)
    first.merge(third)
    #expect([first.text, second.text, third.text] == Array(repeating: "[twosixone]", count: 3))
  }

  /// The Fugue paper's Appendix A.1.9: replica 3 types "b"; replica 1, having it, types "a" before it; replica
  /// 2, having nothing, types "x" at once. Yjs gives "axb". Here "a" is b's left child and "x" b's right
  /// sibling (both have no origin), so "ab" stays whole and x goes before or after it by name.
  @Test func fuguePaperBackwardExample() throws {
    for (xClient, expected) in [("r2", "xab"), ("r4", "abx")] {
      var replica3 = TextDocument()
      let b = try replica3.splice(at: 0, delete: 0, insert: "b", client: "r3")
      var replica1 = TextDocument()
      replica1.apply(b)
      let a = try replica1.splice(at: 0, delete: 0, insert: "a", client: "r1")
      var replica2 = TextDocument()
      let x = try replica2.splice(at: 0, delete: 0, insert: "x", client: xClient)
      expectEveryOrder([b, a, x], give: expected)
      replica1.apply(x)
      replica2.apply(a)
      replica2.apply(b)
      #expect(replica1.text == expected)
      #expect(replica2.text == expected)
    }
  }

  /// `withTails` typed by real replicas: A types "a", then "p" at 0 and "q" at the end; B likewise.
  @Test func withTailsTypedByReplicas() throws {
    var typing = Typing(base: TextDocument(), replicas: 2)
    for (index, letters) in [(0, ["a", "p", "q"]), (1, ["b", "r", "s"])] {
      let client = index == 0 ? "A" : "B"
      typing.updates[index].append(
        try typing.replicas[index].splice(at: 0, delete: 0, insert: letters[0], client: client))
      typing.updates[index].append(
        try typing.replicas[index].splice(at: 0, delete: 0, insert: letters[1], client: client))
      typing.updates[index].append(
        try typing.replicas[index].splice(at: 2, delete: 0, insert: letters[2], client: client))
    }
    #expect(typing.replicas.map(\.text) == ["paq", "rbs"])
    typing.expectEveryOrder(on: TextDocument(), give: "paqrbs")
  }

  /// `localVersusConcurrent` typed by real replicas.
  @Test func localVersusConcurrentTypedByReplicas() throws {
    var a = TextDocument()
    var b = TextDocument()
    var c = TextDocument()
    let fromA = try a.splice(at: 0, delete: 0, insert: "a", client: "A")
    let fromB = try b.splice(at: 0, delete: 0, insert: "b", client: "B")
    let fromC = try c.splice(at: 0, delete: 0, insert: "c", client: "C")
    var d = TextDocument()
    d.apply(fromC)
    d.apply(fromA)
    #expect(d.text == "ac")
    let fromD = try d.splice(at: 1, delete: 0, insert: "d", client: "D")
    expectEveryOrder([fromA, fromB, fromC, fromD], give: "adbc")
    d.apply(fromB)
    b.merge(d)
    #expect(d.text == "adbc")
    #expect(b.text == "adbc")
  }

  /// Concurrent runs at one place where one of them is later partly deleted: deletion does not move the
  /// characters that remain, and the runs still do not interleave.
  @Test func deletionInsideConcurrentRunsKeepsThemWhole() throws {
    let base = TextDocument(text: "<>", client: "base")
    var a = base
    var b = base
    let typedA = try a.splice(at: 1, delete: 0, insert: "abcd", client: "A")
    let typedB = try b.splice(at: 1, delete: 0, insert: "wxyz", client: "B")
    let deletedA = try a.splice(at: 2, delete: 2, insert: "", client: "A")
    let deletedB = try b.splice(at: 3, delete: 1, insert: "Q", client: "B")
    #expect(a.text == "<ad>")
    #expect(b.text == "<wxQz>")
    expectEveryOrder([typedA, typedB, deletedA, deletedB], on: base, give: "<adwxQz>")
  }
}
