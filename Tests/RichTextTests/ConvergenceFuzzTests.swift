import RichText
import SeededRandom
import Testing

/// Replicas editing at once and hearing of one another late, out of order and more than once must all end on
/// the same text and marks once every update has reached every replica.
@Suite struct ConvergenceFuzzTests {
  /// 3 to 5 replicas, each with an inbox of updates it has not applied yet. A step is a local splice or mark
  /// (whose update goes into every other inbox, sometimes twice, sometimes through the binary form), or a
  /// delivery of some of an inbox's updates in random order (sometimes again one already applied), or a whole
  /// state merged from another replica. At the end every inbox is emptied in random order.
  struct Network {
    var random: SplitMix64
    var replicas: [TextDocument]
    let names: [String]
    var inboxes: [[TextUpdate]]
    /// Every update each replica has applied or made, to deliver again.
    var seen: [[TextUpdate]]
    var made: [TextUpdate] = []
    /// The last clock reading of each replica, and the wall clock they read (it advances now and then).
    var clocks: [MarkTime]
    var wallClock: UInt64 = 1
    /// A broker that stamps every update with its sequence as it arrives, and a replica that only ever catches
    /// up from it with what came after the last sequence it has.
    var broker: TextDocument
    var sequence: UInt64 = 0
    var follower: TextDocument
    var followerSequence: UInt64 = 0

    init(seed: UInt64) {
      random = SplitMix64(seed: seed)
      let count = random.int(3...5)
      names = Array(["ann", "bo", "zoë", "dee", "eve"].prefix(count))
      let base = random.chance(70) ? TextDocument(text: "shared ✓ text", client: "base") : TextDocument()
      replicas = Array(repeating: base, count: count)
      broker = base
      follower = base
      inboxes = Array(repeating: [], count: count)
      seen = Array(repeating: [], count: count)
      clocks = Array(repeating: MarkTime(millis: 0, counter: 0), count: count)
    }

    static let alphabet: [Unicode.Scalar] = ["a", "b", "c", "d", " ", "é", "中", "😀", "\u{301}", "𝄞"]

    mutating func randomText() -> String {
      var view = String.UnicodeScalarView()
      for _ in 0..<(random.chance(60) ? 1 : random.int(2...6)) {
        view.append(Self.alphabet[random.int(0...(Self.alphabet.count - 1))])
      }
      return String(view)
    }

    /// One local edit on replica `index`; its update goes to every other inbox.
    mutating func edit(_ index: Int) throws {
      let count = replicas[index].count
      var update: TextUpdate
      if count == 0 || random.chance(70) {
        let position = random.int(0...count)
        let delete = random.chance(35) ? min(count - position, random.int(1...4)) : 0
        let insert = delete == 0 || random.chance(50) ? randomText() : ""
        guard delete > 0 || !insert.isEmpty else { return }
        update = try replicas[index].splice(
          at: position, delete: delete, insert: insert, client: names[index])
      } else {
        let from = random.int(0...(count - 1))
        let to = random.int((from + 1)...min(count, from + 6))
        let type = MarkType.allCases[random.int(0...(MarkType.allCases.count - 1))]
        let remove = random.chance(25)
        let value = type.needsValue && !remove ? ["red", "blue", "https://x"][random.int(0...2)] : nil
        // A hybrid logical clock per replica over a coarse shared wall clock: each replica's readings
        // increase, and different replicas' readings tie often (their conflicts then go by name).
        let last = clocks[index]
        let time =
          wallClock > last.millis
          ? MarkTime(millis: wallClock, counter: 0) : MarkTime(millis: last.millis, counter: last.counter + 1)
        clocks[index] = time
        update = try replicas[index].mark(
          from: from, to: to, type: type, value: value, remove: remove, client: names[index], time: time)
      }
      if random.chance(30) { update = try TextCodec.decodeUpdate(TextCodec.encode(update)) }
      made.append(update)
      sequence += 1
      broker.apply(update, seq: sequence)
      seen[index].append(update)
      for other in replicas.indices where other != index {
        inboxes[other].append(update)
        if random.chance(15) { inboxes[other].append(update) }
      }
    }

    /// Replica `index` applies some of its inbox, in random order, now and then one it has applied before.
    mutating func deliver(_ index: Int) throws {
      inboxes[index].shuffle(using: &random)
      for _ in 0..<min(inboxes[index].count, random.int(1...4)) {
        let update = inboxes[index].removeLast()
        if random.chance(20) {
          try replicas[index].apply(encoded: TextCodec.encode(update))
        } else {
          replicas[index].apply(update)
        }
        seen[index].append(update)
      }
      if random.chance(20), let again = seen[index].randomElement(using: &random) {
        replicas[index].apply(again)
      }
    }

    /// The follower catches up from the broker.
    mutating func catchUp() throws {
      try follower.apply(encoded: TextCodec.encode(broker.update(since: followerSequence)))
      followerSequence = sequence
    }

    /// Replica `index` merges another's whole state (as a replica that reconnects might).
    mutating func mergeState(into index: Int) throws {
      let other = random.int(0...(replicas.count - 1))
      if random.chance(50) {
        replicas[index].merge(replicas[other])
      } else {
        try replicas[index].apply(encoded: replicas[other].encoded())
      }
    }

    mutating func run(steps: Int) throws {
      for _ in 0..<steps {
        if random.chance(20) { wallClock += 1 }
        let index = random.int(0...(replicas.count - 1))
        switch random.int(0...99) {
        case 0..<55: try edit(index)
        case 55..<90: try deliver(index)
        case 90..<95: try catchUp()
        default: try mergeState(into: index)
        }
      }
      for index in replicas.indices {
        inboxes[index].shuffle(using: &random)
        for update in inboxes[index] { replicas[index].apply(update) }
        inboxes[index] = []
      }
    }
  }

  @Test(arguments: 0..<300)
  func replicasConverge(seed: UInt64) throws {
    var network = Network(seed: seed)
    let base = network.replicas[0]
    try network.run(steps: network.random.int(30...120))
    try expectConverged(&network, from: base, seed: seed)
  }

  /// Fewer, longer histories: documents of hundreds of runs over several chunks, so that remote runs land
  /// across chunk boundaries and chunks split under integration.
  @Test(arguments: 1_000..<1_004)
  func longHistoriesConverge(seed: UInt64) throws {
    var network = Network(seed: seed)
    let base = network.replicas[0]
    try network.run(steps: 1_500)
    #expect(network.replicas[0].runCount > 3 * 64, "seed \(seed): runs \(network.replicas[0].runCount)")
    try expectConverged(&network, from: base, seed: seed)
  }

  /// Every replica, the broker's follower, and everything made applied at once to the start, read the same;
  /// each replica's state survives both transfer forms.
  func expectConverged(_ network: inout Network, from base: TextDocument, seed: UInt64) throws {
    let first = network.replicas[0]
    for (index, replica) in network.replicas.enumerated() {
      #expect(!replica.hasPendingOperations, "seed \(seed): replica \(index) still waits")
      guard replica.scalars == first.scalars, replica.marks == first.marks else {
        Issue.record(
          """
          seed \(seed): replica \(index) has \(replica.text.debugDescription) \(replica.marks), replica 0 \
          \(first.text.debugDescription) \(first.marks)
          """)
        return
      }
    }
    // Everything made, as one update in a random order, onto the shared start.
    var everything = TextUpdate()
    for update in network.made.shuffled(using: &network.random) {
      everything.runs += update.runs
      everything.deletes += update.deletes
      everything.marks += update.marks
    }
    var observer = base
    observer.apply(everything)
    #expect(observer.scalars == first.scalars, "seed \(seed): everything at once")
    #expect(observer.marks == first.marks, "seed \(seed): everything at once")
    try network.catchUp()
    #expect(network.follower.scalars == first.scalars, "seed \(seed): caught up from the broker")
    #expect(network.follower.marks == first.marks, "seed \(seed): caught up from the broker")
    for replica in network.replicas { expectRoundTrips(replica) }
    // A converged replica merging another's state changes nothing.
    var merged = network.replicas[1]
    try merged.apply(encoded: network.replicas[2].encoded())
    merged.merge(network.replicas[0])
    #expect(merged.scalars == first.scalars && merged.marks == first.marks, "seed \(seed)")
  }
}
