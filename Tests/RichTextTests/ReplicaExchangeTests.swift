import RichText
import SeededRandom
import Testing

/// Seeded histories of concurrent edits on three replicas, exchanged in random orders (out of causal order too,
/// through the binary forms, whole states): every replica's local text follows a plain array model, all
/// replicas converge, a replica that has nothing gets the same text from the update and from the state, and the
/// converged text is the one the first implementation (dcd5cea) gave for the seed (`golden`): the storage may
/// change, the merge's result may not.
@Suite struct ReplicaExchangeTests {
  /// FNV-1a of the converged text's UTF-8, per seed 1...20, as dcd5cea computed them (and 9286264, the same
  /// merge, for the typing ones).
  static let golden: [UInt64] = [
    15_399_514_294_674_218_617,
    769_069_401_018_518_450,
    14_041_784_627_843_159_178,
    1_106_892_553_240_956_173,
    8_738_369_530_730_545_668,
    18_237_201_885_804_541_917,
    15_939_880_800_787_949_545,
    13_693_316_388_782_068_014,
    13_073_087_243_043_459_343,
    17_770_294_366_023_325_191,
    356_133_378_114_501_357,
    7_670_333_587_428_997_096,
    18_381_991_663_464_006_271,
    4_104_677_840_309_999_867,
    5_752_513_251_194_809_120,
    6_111_793_141_892_800_401,
    15_212_267_873_080_089_597,
    15_711_740_643_198_281_730,
    3_820_428_669_628_010_325,
    6_400_275_424_220_939_664,
  ]

  /// The same with typing: most local edits continue where the replica's last one ended (a character typed,
  /// or one erased before it), as people type.
  static let goldenTyping: [UInt64] = [
    16_398_359_944_461_329_317,
    1_081_216_649_292_197_878,
    2_035_806_999_274_157_475,
    16_884_334_331_996_819_506,
    5_651_684_044_337_663_694,
    16_536_864_485_014_739_733,
    2_365_860_303_912_079_185,
    17_594_602_893_623_946_193,
    8_141_535_392_060_998_120,
    2_003_688_387_874_080_077,
    13_322_328_714_127_912_951,
    16_440_865_322_487_639_543,
    559_671_773_625_128_533,
    14_032_299_078_121_942_452,
    14_782_970_440_288_036_485,
    9_982_430_253_698_742_758,
    11_101_232_490_158_660_358,
    17_118_910_301_295_208_596,
    2_155_387_899_104_906_147,
    5_477_901_952_869_721_186,
  ]

  @Test func seededExchangesConvergeOnTheFirstImplementationsText() throws {
    var digests: [UInt64] = []
    for seed in 1...20 { digests.append(try Self.exchange(seed: UInt64(seed))) }
    #expect(digests == Self.golden, "digests: \(digests)")
  }

  @Test func seededTypingConvergesOnTheFirstImplementationsText() throws {
    var digests: [UInt64] = []
    for seed in 1...20 { digests.append(try Self.exchange(seed: UInt64(seed), typing: true)) }
    #expect(digests == Self.goldenTyping, "digests: \(digests)")
  }

  /// FNV-1a of one replica's runs and deletions (`update()`) after seeded local edits, per seed 1...10, as
  /// dcd5cea computed them: the local edits' fast paths must leave the runs (ids, origins, tombstones) exactly
  /// as the general path does.
  static let goldenLocal: [UInt64] = [
    15_323_957_697_981_214_520,
    5_515_234_449_662_298_789,
    13_622_709_848_496_538_884,
    1_661_616_583_088_651_113,
    5_702_358_819_453_395_982,
    1_576_133_921_074_394_671,
    14_110_374_424_410_219_694,
    10_432_624_458_740_141_632,
    15_990_512_702_522_544_891,
    2_147_497_904_366_278_010,
  ]

  @Test func seededLocalEditsLeaveTheFirstImplementationsRuns() throws {
    var digests: [UInt64] = []
    for seed in 1...10 { digests.append(try Self.localEdits(seed: UInt64(seed))) }
    #expect(digests == Self.goldenLocal, "digests: \(digests)")
  }

  /// FNV-1a of what a broker's replica gives since several sequences (`update(since:)`), and of the same from
  /// its state reloaded, per seed 1...10, as dcd5cea computed them: the sequences stamped on runs and deletions
  /// must survive whatever the storage does with them.
  static let goldenSince: [UInt64] = [
    3_455_365_118_427_992_949,
    11_643_389_949_122_250_489,
    5_739_139_561_040_502_717,
    4_070_502_207_377_123_755,
    14_434_511_723_517_264_179,
    14_084_599_952_895_324_055,
    17_873_803_380_062_103_921,
    12_945_430_394_868_148_499,
    7_631_982_290_521_463_705,
    7_027_696_340_388_493_451,
  ]

  @Test func seededBrokerSequencesGiveTheFirstImplementationsUpdates() throws {
    var digests: [UInt64] = []
    for seed in 1...10 { digests.append(try Self.brokerSequences(seed: UInt64(seed))) }
    #expect(digests == Self.goldenSince, "digests: \(digests)")
  }

  static func brokerSequences(seed: UInt64) throws -> UInt64 {
    var random = SplitMix64(seed: seed)
    let names = ["ana", "bo", "cy"]
    var devices = [TextDocument](repeating: TextDocument(text: "seed text", client: "origin"), count: 3)
    var broker = devices[0]
    let alphabet = Array("abcdefgh xyz".unicodeScalars)
    var seq: UInt64 = 0
    for _ in 0..<400 {
      let who = random.below(3)
      let count = devices[who].count
      let position = random.below(count + 1)
      let delete = count > position && random.below(3) == 0 ? random.below(min(count - position, 6)) + 1 : 0
      let length = delete > 0 && random.below(2) == 0 ? 0 : random.below(4) + 1
      var text = ""
      text.unicodeScalars.append(contentsOf: (0..<length).map { _ in alphabet[random.below(alphabet.count)] })
      let update = try devices[who].splice(at: position, delete: delete, insert: text, client: names[who])
      seq += 1
      if random.below(4) == 0 {
        try broker.apply(encoded: TextCodec.encode(update), seq: seq)
      } else {
        broker.apply(update, seq: seq)
      }
      if random.below(5) == 0 {
        // The device catches up from the broker.
        devices[who].apply(broker.update(since: UInt64(random.below(Int(seq)))))
      }
    }
    let reloaded = try TextDocument(encoded: broker.encoded())
    var description = ""
    for since in [nil, 0, seq / 3, seq / 2, seq - 5, seq] as [UInt64?] {
      for document in [broker, reloaded] {
        let update = document.update(since: since)
        description += "since \(since.map(String.init) ?? "-"):"
        for run in update.runs {
          description += "\(run.client)@\(run.counter)+\(run.length) \(run.left?.description ?? "-") "
          description += "\(run.right?.description ?? "-") \(run.text == nil ? "x" : "v") \(run.seq);"
        }
        for range in update.deletes {
          description += "\(range.client)@\(range.counter)+\(range.length) \(range.seq);"
        }
      }
    }
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in description.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
    return hash
  }

  static func localEdits(seed: UInt64) throws -> UInt64 {
    var random = SplitMix64(seed: seed)
    var document = TextDocument(text: "seed text", client: "origin")
    var model = Array(document.text.unicodeScalars)
    var cursor = 0
    let alphabet = Array("abcdefgh xyz\né€".unicodeScalars)
    for _ in 0..<2000 {
      var position = cursor
      if random.below(10) == 0 { position = random.below(model.count + 1) }
      var delete = 0
      var insert: [Unicode.Scalar] = []
      switch random.below(10) {
      case 0..<6: insert = (0...random.below(2)).map { _ in alphabet[random.below(alphabet.count)] }
      case 6..<8:  // backspace
        guard position > 0 else { continue }
        delete = min(random.below(3) + 1, position)
        position -= delete
      default:  // delete
        guard position < model.count else { continue }
        delete = min(random.below(3) + 1, model.count - position)
      }
      var text = ""
      text.unicodeScalars.append(contentsOf: insert)
      _ = try document.splice(at: position, delete: delete, insert: text, client: "me")
      model.replaceSubrange(position..<(position + delete), with: insert)
      cursor = position + insert.count
      #expect(Array(document.text.unicodeScalars) == model, "seed \(seed)")
    }
    var description = ""
    let update = document.update()
    for run in update.runs {
      description += "\(run.client)@\(run.counter)+\(run.length) \(run.left?.description ?? "-") "
      description += "\(run.right?.description ?? "-") \(run.text == nil ? "x" : "v");"
    }
    for range in update.deletes { description += "\(range.client)@\(range.counter)+\(range.length);" }
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in description.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
    return hash
  }

  static func exchange(seed: UInt64, typing: Bool = false) throws -> UInt64 {
    var random = SplitMix64(seed: seed)
    let names = ["ana", "bo", "cy"]
    var replicas = [TextDocument](repeating: TextDocument(text: "seed text", client: "origin"), count: 3)
    var models = replicas.map { Array($0.text.unicodeScalars) }
    // Per replica, the updates it has not applied yet.
    var inbox: [[TextUpdate]] = [[], [], []]
    let alphabet = Array("abcdefgh xyz\né€😀".unicodeScalars)
    // Per replica, where its last local edit ended.
    var cursors = [0, 0, 0]
    for _ in 0..<(typing ? 1000 : 300) {
      let who = random.below(3)
      switch random.below(10) {
      case 0..<6 where typing && cursors[who] <= models[who].count && random.below(8) != 0:
        // Typing on at the cursor: a character, or erasing the one before it.
        let position = cursors[who]
        let erase = position > 0 && random.below(5) == 0
        let insert = erase ? [] : [alphabet[random.below(alphabet.count)]]
        var text = ""
        text.unicodeScalars.append(contentsOf: insert)
        let at = erase ? position - 1 : position
        let update = try replicas[who].splice(at: at, delete: erase ? 1 : 0, insert: text, client: names[who])
        models[who].replaceSubrange(at..<(at + (erase ? 1 : 0)), with: insert)
        cursors[who] = at + insert.count
        #expect(Array(replicas[who].text.unicodeScalars) == models[who], "seed \(seed)")
        for other in 0..<3 where other != who { inbox[other].append(update) }
      case 0..<6:
        // A local edit.
        let count = models[who].count
        let position = random.below(count + 1)
        let delete =
          count > position && random.below(3) == 0
          ? random.below(min(count - position, 8)) + 1 : 0
        let length = delete > 0 && random.below(2) == 0 ? 0 : random.below(6) + 1
        let insert = (0..<length).map { _ in alphabet[random.below(alphabet.count)] }
        var text = ""
        text.unicodeScalars.append(contentsOf: insert)
        let update = try replicas[who].splice(at: position, delete: delete, insert: text, client: names[who])
        models[who].replaceSubrange(position..<(position + delete), with: insert)
        cursors[who] = position + insert.count
        #expect(Array(replicas[who].text.unicodeScalars) == models[who], "seed \(seed)")
        for other in 0..<3 where other != who { inbox[other].append(update) }
      case 6..<9:
        // Some of the waiting updates, in a random order, some through the binary form.
        var waiting = inbox[who]
        inbox[who] = []
        while !waiting.isEmpty {
          let update = waiting.remove(at: random.below(waiting.count))
          if random.below(4) == 0 {
            try replicas[who].apply(encoded: TextCodec.encode(update))
          } else if random.below(5) == 0 {
            inbox[who].append(update)  // later
          } else {
            replicas[who].apply(update)
          }
        }
        models[who] = Array(replicas[who].text.unicodeScalars)
      default:
        // Another replica's whole state.
        let from = (who + 1 + random.below(2)) % 3
        if random.below(2) == 0 {
          replicas[who].merge(replicas[from])
        } else {
          try replicas[who].apply(encoded: replicas[from].encoded())
        }
        models[who] = Array(replicas[who].text.unicodeScalars)
      }
    }
    for who in 0..<3 {
      for update in inbox[who] { replicas[who].apply(update) }
      for other in 0..<3 where other != who { replicas[who].merge(replicas[other]) }
    }
    let text = replicas[0].text
    for replica in replicas {
      #expect(replica.text == text, "seed \(seed)")
      #expect(!replica.hasPendingOperations, "seed \(seed)")
    }
    var fresh = TextDocument()
    fresh.apply(replicas[1].update())
    #expect(fresh.text == text, "seed \(seed)")
    #expect(try TextDocument(encoded: replicas[2].encoded()).text == text, "seed \(seed)")
    var hash: UInt64 = 0xcbf2_9ce4_8422_2325
    for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
    return hash
  }
}

extension SplitMix64 {
  fileprivate mutating func below(_ bound: Int) -> Int { Int(next(upperBound: UInt64(bound))) }
}
